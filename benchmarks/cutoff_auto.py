"""cutoff="auto" against a fixed cutoff in an MD-like loop: ``mpirun -n 2 python benchmarks/cutoff_auto.py``.

A water box (``pmewald.systems.water_box(target_atoms=...)``, exclusions included, contiguous
blocks of molecules per rank), positions perturbed by a random walk of ``--step`` Angstrom per
component and step. Per tolerance two objects: ``PME(box, --cutoff, tolerance)`` and
``PME(box, "auto", tolerance)``, both with automatic alpha, order and mesh and the default skin.
The auto object walks its cutoffs over its first calls (pme/cutoff_search.py); both are called
at every step, alternately, so their ratio shares the machine's state. Reported: the cutoff
chosen and the walk's measurements, the calls and seconds the walk took (with the two calls
after it, where a winner that ran on a seed gets its full choice and plans; and what the fixed
object took over the same calls), then the median per-call time of each over ``--steps`` calls
after the walk and the median of the step-by-step ratios auto / fixed. A call's time is the
slowest rank's (pmewald.bench.mpi_timing.timed_compute).

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
    for tol in args.tolerance:
        rng = np.random.default_rng(100 + comm.Get_rank())
        pos = start.copy()
        fixed = pmewald.PME(s.box, args.cutoff, tolerance=tol, comm=comm)
        auto = pmewald.PME(s.box, "auto", tolerance=tol, comm=comm)
        walk = {"fixed": 0.0, "auto": 0.0, "calls": 0}
        after = 0  # the walk's end: the winner's full choice (when it ran on a seed) and its plans
        while after < 2 and walk["calls"] < 200:
            after += auto.parameters["cutoff_search"] == "done"
            walk["fixed"] += timed_compute(comm, fixed, pos, q, ids, ex)
            walk["auto"] += timed_compute(comm, auto, pos, q, ids, ex)
            walk["calls"] += 1
            pos += rng.normal(scale=args.step, size=pos.shape)
        t_fixed, t_auto, ratio = [], [], []
        for _ in range(args.steps):
            a = timed_compute(comm, fixed, pos, q, ids, ex)
            b = timed_compute(comm, auto, pos, q, ids, ex)
            t_fixed.append(a)
            t_auto.append(b)
            ratio.append(b / a)
            pos += rng.normal(scale=args.step, size=pos.shape)
        p, pf = auto.parameters, fixed.parameters
        rows.append(dict(atoms=s.n_atoms, ranks=size, tolerance=tol, cutoff_fixed=args.cutoff,
                         mesh_fixed=pf["mesh"], order_fixed=pf["order"], cutoff_auto=p["cutoff"],
                         mesh_auto=p["mesh"], order_auto=p["order"],
                         seconds={str(k): round(v * 1e3, 2) for k, v in p["cutoff_seconds"].items()},
                         walk_calls=walk["calls"], walk_seconds_auto=walk["auto"], walk_seconds_fixed=walk["fixed"],
                         ms_fixed=1e3 * statistics.median(t_fixed), ms_auto=1e3 * statistics.median(t_auto),
                         ratio=statistics.median(ratio)))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    water_walk.add_arguments(ap, cutoff_help="the fixed object's cutoff (A)")  # --steps: calls after the walk
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
            print(f"{'':>14} measured ms per cutoff: {r['seconds']}")
        water_walk.write_json(args.json, rows)


if __name__ == "__main__":
    main()
