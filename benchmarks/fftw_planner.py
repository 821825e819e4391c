"""What reproducible runs cost: ``python benchmarks/fftw_planner.py [--atoms N] [--repeats R]``.

The solver's FFT phase (``timings()["fft"]`` per call) with ``PMEWALD_FFTW_PLANNER=measure``
(the default: FFTW times its algorithms and keeps the fastest) against ``estimate`` (the same
plan every run, results the same bit for bit; docs/reliability.md, Reproducible runs). Each
planner runs in its own process (the variable is read when a ``PME`` is built), alternating,
``--repeats`` times; a water box of ``--atoms`` atoms on 1 rank, parameters tuned for 1e-5.

Not a test: numbers depend on the machine and its load (say ``uptime`` next to them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

RUN = r"""
import json, sys, pmewald
from pmewald.systems import water_box
s = water_box(target_atoms=int(sys.argv[1]), seed=1)
pme = pmewald.PME(s.box, 9.0, tolerance=1e-5, skin=0)
pme.compute(s.positions, s.charges, s.ids, s.exclusions)
pme.reset_timings()
calls = 10
for _ in range(calls):
    pme.compute(s.positions, s.charges, s.ids, s.exclusions)
t = pme.timings()
print(json.dumps({"fft": t["fft"] / calls, "mesh": pme.parameters["mesh"]}))
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--atoms", type=int, default=6000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    seconds = {"measure": [], "estimate": []}
    mesh = None
    for _ in range(args.repeats):
        for planner in seconds:
            env = dict(os.environ, PMEWALD_FFTW_PLANNER=planner)
            out = subprocess.run([sys.executable, "-c", RUN, str(args.atoms)], env=env, capture_output=True,
                                 text=True, check=True)
            got = json.loads(out.stdout)
            seconds[planner].append(got["fft"])
            mesh = got["mesh"]
    print(f"water box, {args.atoms} atoms, mesh {'x'.join(map(str, mesh))}, 1 rank, {args.repeats} runs each")
    for planner, s in seconds.items():
        print(f"  {planner:9s} FFT phase {statistics.median(s) * 1e3:.2f} ms a call "
              f"(runs: {', '.join(f'{x * 1e3:.2f}' for x in s)})")
    ratio = statistics.median(seconds["estimate"]) / statistics.median(seconds["measure"])
    print(f"  estimate / measure: {ratio:.2f}")


if __name__ == "__main__":
    main()
