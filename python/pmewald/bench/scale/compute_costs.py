"""Modelled computation for the SimGrid simulations (docs/scaling.md "Modelled computation").

SMPI normally times every computation burst of a simulated rank by the thread's CPU time
and adds it to the simulated clock, so on a loaded machine the same work is simulated as
taking different times. With modelled computation the core reports each burst's work
(``pmewald::charge``: candidate pairs, atoms x order^3, FFT points per 1-D pass, k points,
bytes packed, atoms) and the driver (``--compute-costs FILE``) turns it into simulated time,
units x seconds per unit, while SimGrid runs with ``smpi/simulate-computation:no``: the
step times become deterministic and independent of the machine's load.

The seconds per unit come from :func:`calibrate`: the same driver built natively (Open MPI,
``build-native/``) runs the same system and parameters on one rank several times; per kind
the minimum over the repeats of phase time / units (the minimum is the load-robust
estimate: load only ever adds time). Each kind is calibrated from the ``timings()`` phase it
belongs to (:data:`PHASE_OF`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from .build import ROOT, build_scale_driver
from .simulate import driver_args
from .study import System

# kind -> the timings() phases whose time it is (at one rank).
PHASE_OF = {
    "pairs": ("real_space",),
    "spread": ("spread",),
    "gather": ("gather",),
    "fft": ("fft_1d",),
    "solve": ("solve",),
    "pack": ("ghost", "fft_pack_unpack"),
    "migrate": ("migrate",),
    "ghost_atoms": ("ghost_atoms",),
    "exclusions": ("exclusions",),
    "reduce": ("reduce",),
}
KINDS = tuple(PHASE_OF)


def build_native_driver(build_dir: Path | None = None, quiet: bool = True) -> Path:
    """scale/driver built with the system MPI (mpicxx) into build-native/, once per change."""
    if shutil.which("mpicxx") is None:
        raise RuntimeError("mpicxx not found (Debian: libopenmpi-dev; bash scripts/dev.sh setup installs it)")
    return build_scale_driver(Path(build_dir or ROOT / "build-native"), ".pmewald-native-build",
                                 ["-DPMEWALD_SCALE_DRIVER=ON", "-DCMAKE_CXX_COMPILER=mpicxx"], quiet)


def _mpi_env() -> dict:
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    return env


def native_run(exe: Path, system: System, params: dict, out: Path, steps: int = 1, timeout=None) -> dict:
    """The native driver on one rank (nonblocking, one warm-up call, ``steps`` timed calls)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    args = driver_args(system, params, ("nonblocking",), 1, steps, out)
    cmd = (["mpirun", "-n", "1"] if shutil.which("mpirun") else []) + [str(exe), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_mpi_env())
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"native run failed ({' '.join(cmd)}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return json.loads(out.read_text())


def costs_from_runs(runs: list[dict]) -> dict:
    """Seconds per unit per kind: min over the runs of (sum of the kind's phases) / units."""
    per_unit, phases, units = {}, {}, {}
    for kind, names in PHASE_OF.items():
        best = None
        for res in runs:
            run = res["runs"][0]
            u = run["work"][kind]["max"]
            t = sum(run["phases"].get(n, {"max": 0.0})["max"] for n in names)
            if u > 0:
                best = t / u if best is None else min(best, t / u)
        per_unit[kind] = best if best is not None else 0.0
        units[kind] = runs[0]["runs"][0]["work"][kind]["max"]
    for name in {n for names in PHASE_OF.values() for n in names} | {"fft", "step"}:
        vals = [r["runs"][0]["step_s"] if name == "step" else r["runs"][0]["phases"].get(name, {"max": 0.0})["max"]
                for r in runs]
        phases[name] = min(vals)
    return {"seconds_per_unit": per_unit, "units_per_call": units, "phase_min_s": phases}


def costs_path(system: System) -> Path:
    return ROOT / "build-smpi" / f"compute-costs-{system.name}.json"


def calibrate(system: System, params: dict, repeats: int = 5, force: bool = False, steps: int = 1) -> Path:
    """Writes (once; ``force`` redoes it) build-smpi/compute-costs-<system>.json from ``repeats``
    native one-rank runs, and returns its path."""
    path = costs_path(system)
    if path.exists() and not force:
        return path
    exe = build_native_driver()
    work = ROOT / "build-native" / "calibration"
    runs, loads = [], []
    t0 = time.time()
    for k in range(repeats):
        loads.append(os.getloadavg()[0])
        runs.append(native_run(exe, system, params, work / f"{system.name}_{k}.json", steps=steps))
    doc = costs_from_runs(runs)
    doc.update(system=system.name, atoms=system.atoms, parameters=params, repeats=repeats,
               load_average=loads, wall_s=time.time() - t0,
               note="seconds per unit: min over the repeats of phase time / units, native one-rank runs "
                    "(pmewald.bench.scale.compute_costs.PHASE_OF names each kind's phases)")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1))
    return path
