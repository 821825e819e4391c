"""cutoff="auto" against fixed cutoffs in an MD-like loop: ``mpirun -n 2 python benchmarks/cutoff_auto.py``.

A water box (``pmewald.systems.water_box(target_atoms=...)``, exclusions included, contiguous
blocks of molecules per rank), positions perturbed by a random walk of ``--step`` Angstrom per
component and step. Per tolerance: ``PME(box, rc, tolerance)`` for each fixed cutoff
(``--fixed``, default ``--cutoff``) and ``PME(box, "auto", tolerance)`` (``--lower``: the
cutoff's lower bound), all with automatic alpha, order and mesh, ``--precision`` and the default
skin. The auto object walks its cutoffs over its first calls (pme/cutoff_search.py) beside the
first fixed one; then every object is called at every step, alternately, so their ratio shares
the machine's state. Reported: the cutoff chosen, the walk's measurements and final comparison,
the calls and seconds the walk took (with the call after it; and what the first fixed object took
over the same calls), each fixed cutoff's median per-call time over ``--steps`` calls after the
walk, auto's, and the median of the step-by-step ratios auto / the fixed object of the lowest
median. A call's time is the slowest rank's (pmewald.bench.mpi_timing.timed_compute).

Not a test: numbers depend on the machine and its load (say ``uptime`` next to them).
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
from mpi4py import MPI

import pmewald
from pmewald.bench import water_walk
from pmewald.bench.mpi_timing import timed_compute


def run(comm, args):
    s, start, q, ids, ex = water_walk.local_water(comm, args.atoms)
    size = comm.Get_size()
    rows = []
    fixed_cutoffs = args.fixed or [args.cutoff]
    for tol in args.tolerance:
        rng = np.random.default_rng(100 + comm.Get_rank())
        pos = start.copy()
        kw = dict(tolerance=tol, comm=comm, precision=args.precision)
        fixed = {rc: pmewald.PME(s.box, rc, **kw) for rc in fixed_cutoffs}
        auto = pmewald.PME(s.box, ("auto", args.lower) if args.lower else "auto", **kw)
        walk = {"fixed": 0.0, "auto": 0.0, "calls": 0}
        after = 0  # the walk's end, and one call after it
        while after < 2 and walk["calls"] < 200:
            after += auto.parameters["cutoff_search"] == "done"
            walk["fixed"] += timed_compute(comm, fixed[fixed_cutoffs[0]], pos, q, ids, ex)
            walk["auto"] += timed_compute(comm, auto, pos, q, ids, ex)
            walk["calls"] += 1
            pos += rng.normal(scale=args.step, size=pos.shape)
        for obj in list(fixed.values())[1:]:  # the other fixed cutoffs' choices and plans, untimed
            for _ in range(2):
                timed_compute(comm, obj, pos, q, ids, ex)
        t = {rc: [] for rc in fixed}
        t_auto = []
        for _ in range(args.steps):  # every object at every step, alternately
            for rc, obj in fixed.items():
                t[rc].append(timed_compute(comm, obj, pos, q, ids, ex))
            t_auto.append(timed_compute(comm, auto, pos, q, ids, ex))
            pos += rng.normal(scale=args.step, size=pos.shape)
        p = auto.parameters
        ms_fixed = {rc: 1e3 * statistics.median(v) for rc, v in t.items()}
        best = min(ms_fixed, key=ms_fixed.get)
        ratio = [a / b for a, b in zip(t_auto, t[best])]
        rows.append(dict(atoms=s.n_atoms, ranks=size, tolerance=tol, precision=args.precision,
                         cutoff_fixed=best, mesh_fixed=fixed[best].parameters["mesh"],
                         order_fixed=fixed[best].parameters["order"], ms_fixed_each=ms_fixed,
                         cutoff_auto=p["cutoff"], mesh_auto=p["mesh"], order_auto=p["order"],
                         seconds={str(k): round(v * 1e3, 2) for k, v in p["cutoff_seconds"].items()},
                         duel=p["cutoff_duel"],
                         walk_calls=walk["calls"], walk_seconds_auto=walk["auto"], walk_seconds_fixed=walk["fixed"],
                         ms_fixed=ms_fixed[best], ms_auto=1e3 * statistics.median(t_auto),
                         ratio=statistics.median(ratio)))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    water_walk.add_arguments(ap, cutoff_help="the fixed object's cutoff (A)")  # --steps: calls after the walk
    ap.add_argument("--fixed", type=float, nargs="+", help="fixed cutoffs (A) to compare with, each its own object "
                    "(default: --cutoff); the rows name the fastest (lowest median), the ratio is auto over it, step by step")
    ap.add_argument("--precision", default="double", choices=("double", "mixed", "auto"))
    ap.add_argument("--lower", type=float, help="cutoff=('auto', LOWER)")
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    rows = run(comm, args)
    if comm.Get_rank() == 0:
        print(f"{'atoms':>6} {'ranks':>5} {'tol':>6} {'rc':>5} {'mesh':>14} {'auto rc':>7} {'mesh':>14} "
              f"{'walk calls':>10} {'walk s auto/fixed':>17} {'fixed ms':>8} {'auto ms':>8} {'ratio':>6}")
        for r in rows:
            print(f"{r['atoms']:>6} {r['ranks']:>5} {r['tolerance']:>6.0e} {r['cutoff_fixed']:>5.3g} "
                  f"{str(tuple(r['mesh_fixed'])):>14} {r['cutoff_auto']:>7.4g} {str(tuple(r['mesh_auto'])):>14} "
                  f"{r['walk_calls']:>10} {r['walk_seconds_auto']:>8.2f}/{r['walk_seconds_fixed']:<8.2f} "
                  f"{r['ms_fixed']:>8.1f} {r['ms_auto']:>8.1f} {r['ratio']:>6.2f}")
            print(f"{'':>14} measured ms per cutoff: {r['seconds']}, final comparison {r['duel']}")
            print(f"{'':>14} fixed cutoffs, ms: " + ", ".join(f"{rc:g}: {v:.1f}" for rc, v in r["ms_fixed_each"].items()))
        water_walk.write_json(args.json, rows)


if __name__ == "__main__":
    main()
