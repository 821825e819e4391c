"""Automatic parameters, before and after issue 6: what each version chooses, the measured
error and the time per compute.

Two steps, because the two versions are two installs:

1. ``choose`` (run with each install's python): for every system and tolerance, the
   automatic choice of ``pmewald.PME(box, 10.0, tolerance=tol, coulomb_constant=332.06371)``
   (alpha, mesh, order, differentiation) and the seconds the first compute (the tuning)
   took, into a JSON file::

       /path/to/old/.venv/bin/python benchmarks/auto_params.py choose --out old.json
       .venv/bin/python benchmarks/auto_params.py choose --out new.json

2. ``measure`` (one python, any version with the same kernels): every choice run with its
   parameters given explicitly, so old and new are timed in the same process, interleaved
   round by round; forces against a tight reference (tolerance 1e-8, order 8, ad, cutoff
   12 A, as ``python -m pmewald.bench peers`` uses), cached in ``--cache``::

       .venv/bin/python benchmarks/auto_params.py measure old.json new.json

``candidates`` times every candidate the cost model compared (reciprocal part alone), to
check that the model ranks them as the machine does::

       .venv/bin/python benchmarks/auto_params.py candidates --tolerances 1e-4 1e-5

Systems: ``nacl`` = ``systems.displace(systems.rock_salt(16), 0.1, seed=1)`` (32768 ions),
``water`` = ``systems.water_box(target_atoms=30000)`` with its exclusions; cutoff 10 A,
kcal/mol/A. One rank.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

K_REAL = 332.06371
CUTOFF = 10.0
TOLERANCES = (3e-4, 1e-4, 3e-5, 1e-5)


def make(name):
    from pmewald import systems

    if name == "nacl":
        s = systems.displace(systems.rock_salt(16), 0.1, seed=1)
        return s, None
    if name == "water":
        s = systems.water_box(target_atoms=30000)
        return s, s.exclusions
    raise ValueError(name)


def choose(args):
    import pmewald

    out = []
    for name in args.systems:
        s, ex = make(name)
        for tol in args.tolerances:
            pme = pmewald.PME(s.box, CUTOFF, tolerance=tol, coulomb_constant=K_REAL)
            t0 = time.perf_counter()
            res = pme.compute(s.positions, s.charges, exclusions=ex)
            t_tune = time.perf_counter() - t0
            p = pme.parameters
            row = dict(system=name, tolerance=tol, alpha=p["alpha"], mesh=list(p["mesh"]), order=p["order"],
                       differentiation=p["differentiation"], estimated_error=res.estimated_error, tune_s=t_tune,
                       version=getattr(pmewald, "__version__", "?"), modelled_cost=p.get("modelled_cost"))
            print(json.dumps(row), flush=True)
            out.append(row)
    Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


def reference(name, s, ex, cache):
    import pmewald

    path = Path(cache) / f"ref_{name}.npy"
    if path.exists():
        return np.load(path)
    rc = min(12.0, 0.5 * float(np.min(np.diag(s.box))) * 0.999)
    pme = pmewald.PME(s.box, rc, tolerance=1e-8, order=8, differentiation="ad", coulomb_constant=K_REAL)
    f = pme.compute(s.positions, s.charges, exclusions=ex).forces
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, f)
    return f


def measure(args):
    import pmewald

    runs = {Path(f).stem: json.loads(Path(f).read_text()) for f in args.choices}
    labels = list(runs)
    rows = []
    for name in args.systems:
        s, ex = make(name)
        fref = reference(name, s, ex, args.cache)
        for tol in args.tolerances:
            solvers = {}
            for lab in labels:
                c = next((r for r in runs[lab] if r["system"] == name and r["tolerance"] == tol), None)
                if c is None:
                    continue
                pme = pmewald.PME(s.box, CUTOFF, alpha=c["alpha"], mesh=tuple(c["mesh"]), order=c["order"],
                                  differentiation=c["differentiation"], coulomb_constant=K_REAL)
                res = pme.compute(s.positions, s.charges, exclusions=ex)
                err = math.sqrt(float(np.sum((res.forces - fref) ** 2)) / float(np.sum(fref ** 2)))
                solvers[lab] = (pme, c, err, [], {})
            for _ in range(args.rounds):  # interleaved: every version sees the same stretch of machine time
                for lab, (pme, c, err, walls, phases) in solvers.items():
                    pme.reset_timings()
                    t0 = time.perf_counter()
                    pme.compute(s.positions, s.charges, exclusions=ex)
                    walls.append(time.perf_counter() - t0)
                    for k, v in pme.timings().items():
                        phases.setdefault(k, []).append(v)
            for lab, (pme, c, err, walls, phases) in solvers.items():
                recip = sum(statistics.median(phases.get(k, [0.0])) for k in ("spread", "ghost", "fft", "solve",
                                                                                 "gather"))
                row = dict(c, label=lab, measured_error=err, compute_s=statistics.median(walls),
                           recip_s=recip, real_s=statistics.median(phases.get("real_space", [0.0])))
                rows.append(row)
                print(f"{name:5s} {tol:7.0e} {lab:6s} {c['differentiation']} p{c['order']} "
                      f"alpha {c['alpha']:.4f} mesh {'x'.join(map(str, c['mesh'])):12s} "
                      f"err {err:.2e} ({err / tol:.2f} tol) compute {row['compute_s'] * 1e3:6.1f} ms "
                      f"(recip {recip * 1e3:6.1f}) tune {c['tune_s']:.1f} s", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    print("\n| system | tolerance | version | choice | alpha (1/A) | mesh | measured error | error / tol | "
          "compute ms | reciprocal ms | first call (tuning) s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['system']} | {r['tolerance']:g} | {r['label']} | {r['differentiation']} p{r['order']} | "
              f"{r['alpha']:.4f} | {'x'.join(map(str, r['mesh']))} | {r['measured_error']:.2e} | "
              f"{r['measured_error'] / r['tolerance']:.2f} | {r['compute_s'] * 1e3:.0f} | {r['recip_s'] * 1e3:.0f} | "
              f"{r['tune_s']:.1f} |")
    return 0


def candidates(args):
    """The cost model against measurement: for each system and tolerance, every candidate the
    automatic choice considered (the best of each differentiation and order, within 3x of the
    chosen one's modelled cost), its reciprocal part timed alone (real_space=False, one rank,
    fastest of --rounds rounds over all candidates). The chosen candidate should be the
    fastest measured, or within the noise of it."""
    from mpi4py import MPI

    import pmewald
    from pmewald._core import tuning

    for name in args.systems:
        s, ex = make(name)
        q = s.charges
        rms = float(np.sqrt(np.mean(np.sum(reference(name, s, ex, args.cache) ** 2, axis=1))))
        for tol in args.tolerances:
            r = tuning.choose_cheapest(s.box, CUTOFF, 0.8 * tol * rms, float(q @ q), len(q), coulomb_constant=K_REAL)
            print(f"\n{name} tolerance {tol:g} (target 0.8 x tol x RMS force {rms:.3g}): chosen "
                  f"{r['differentiation']} p{r['order']} mesh {'x'.join(map(str, r['mesh']))}")
            print("| choice | alpha | mesh | modelled ms | measured ms | estimate exact |")
            print("|---|---|---|---|---|---|")
            solvers = []
            for c in r["candidates"]:
                if c["cost"] > 3 * r["cost"]:
                    continue
                pme = pmewald.PME(s.box, CUTOFF, alpha=c["alpha"], mesh=tuple(c["mesh"]), order=c["order"],
                                  differentiation=c["differentiation"], coulomb_constant=K_REAL, real_space=False,
                                  comm=MPI.COMM_SELF)
                pme.compute(s.positions, s.charges, exclusions=ex)
                solvers.append((pme, c, []))
            for _ in range(args.rounds):  # interleaved, fastest round: a shared machine's load spoils single calls
                for pme, c, ts in solvers:
                    pme.reset_timings()
                    pme.compute(s.positions, s.charges, exclusions=ex)
                    t = pme.timings()
                    ts.append(sum(t.get(k, 0.0) for k in ("spread", "ghost", "fft", "solve", "gather")))
            timed = []
            for pme, c, ts in solvers:
                timed.append((min(ts), c))
                print(f"| {c['differentiation']} p{c['order']} | {c['alpha']:.4f} | {'x'.join(map(str, c['mesh']))} | "
                      f"{c['cost'] * 1e3:.1f} | {min(ts) * 1e3:.1f} | {'yes' if c['exact'] else 'no (table)'} |",
                      flush=True)
            del solvers
            f = min(timed, key=lambda x: x[0])[1]
            print(f"fastest measured: {f['differentiation']} p{f['order']} mesh {'x'.join(map(str, f['mesh']))}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    c = sub.add_parser("choose")
    c.add_argument("--out", required=True)
    m = sub.add_parser("measure")
    m.add_argument("choices", nargs="+", help="JSON files written by 'choose' (labelled by file name)")
    m.add_argument("--rounds", type=int, default=5)
    m.add_argument("--cache", default="bench-out/auto_params")
    m.add_argument("--out")
    v = sub.add_parser("candidates", help="time the candidates the cost model compared")
    v.add_argument("--rounds", type=int, default=7)
    v.add_argument("--cache", default="bench-out/auto_params")
    for p in (c, m, v):
        p.add_argument("--systems", nargs="+", default=["nacl", "water"], choices=["nacl", "water"])
        p.add_argument("--tolerances", type=float, nargs="+", default=list(TOLERANCES))
    args = ap.parse_args(argv)
    return {"choose": choose, "measure": measure, "candidates": candidates}[args.what](args)


if __name__ == "__main__":
    sys.exit(main())
