"""The reused pair list in an MD-like loop: ``mpirun -n 2 python benchmarks/pair_list.py``.

A water box (``pmewald.systems.water_box(target_atoms=...)``, exclusions included, the
caller's split contiguous blocks of molecules), positions perturbed by a random walk of
``--step`` Angstrom per component and step. For each tolerance the automatic parameters are
chosen once (a base object's first call) and one PME object per skin is made with them; the
objects' calls are interleaved step by step (so their ratios share the machine's state), the
first call of each (the first list build) timed apart. A call's time is the slowest rank's.
Per skin: median per-call time over the steps after the first, its ratio to skin 0 (median of
the step-by-step ratios), the first call, the rebuilds and the list's build / refresh /
evaluate seconds per call (slowest rank).

A skin may name the list's layout and kernel precision too, ``skin/layout/precision``:
``--skins 0 auto auto/clusters auto/atoms/mixed auto/clusters/mixed`` compares the cluster-pair
layout (``PME(pair_layout="clusters")``) and the mixed kernels with the default.

Not a test: numbers depend on the machine and its load (say ``uptime`` next to them).
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
from mpi4py import MPI

import pmewald
from pmewald.bench import water_walk
from pmewald.bench.mpi_timing import slowest, timed_compute


def _variant(text):
    """PME keywords of a ``--skins`` entry: skin[/layout[/precision]]."""
    parts = text.split("/")
    skin, layout, precision = parts + ["atoms", "double"][len(parts) - 1:]
    return dict(skin=skin if skin == "auto" else float(skin), pair_layout=layout, precision=precision)


def run(comm, args):
    s, start, q, ids, ex = water_walk.local_water(comm, args.atoms)
    size = comm.Get_size()
    rng = np.random.default_rng(100 + comm.Get_rank())
    rows = []
    for tol in args.tolerance:
        base = pmewald.PME(s.box, args.cutoff, tolerance=tol, comm=comm, skin=0)
        pos = start.copy()
        base.compute(pos, q, ids=ids, exclusions=ex)
        p = base.parameters
        fixed = dict(alpha=p["alpha"], mesh=p["mesh"], order=p["order"], differentiation=p["differentiation"])
        objs = {sk: pmewald.PME(s.box, args.cutoff, comm=comm, **_variant(sk), **fixed) for sk in args.skins}
        first = {sk: timed_compute(comm, o, pos, q, ids, ex) for sk, o in objs.items()}
        times = {sk: [] for sk in objs}
        for _ in range(args.steps - 1):
            pos += rng.normal(scale=args.step, size=pos.shape)
            for sk, o in objs.items():
                times[sk].append(timed_compute(comm, o, pos, q, ids, ex))
        ref = times[args.skins[0]]
        for sk, o in objs.items():
            t = o.timings()
            per = {k: slowest(comm, t.get(k, 0.0)) / args.steps
                   for k in ("pair_list_build", "pair_list_refresh", "pair_list_evaluate", "real_space")}
            rows.append(dict(atoms=s.n_atoms, ranks=size, tolerance=tol, mesh=list(p["mesh"]), skin=sk,
                             skin_used=o.parameters["skin_used"], first=first[sk],
                             median=statistics.median(times[sk]),
                             ratio=statistics.median([y / x for x, y in zip(ref, times[sk])]),
                             builds=t.get("pair_list_builds", float(args.steps)), **per))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    water_walk.add_arguments(ap)
    ap.add_argument("--skins", nargs="+", default=["0", "auto"], help="first one is the reference")
    args = ap.parse_args(argv)
    comm = MPI.COMM_WORLD
    rows = run(comm, args)
    if comm.Get_rank() == 0:
        print(f"{'atoms':>6} {'ranks':>5} {'tol':>6} {'skin':>19} {'used':>5} {'first ms':>8} {'ms/call':>8} "
              f"{'ratio':>6} {'builds':>6} {'build':>6} {'refresh':>7} {'eval':>6} {'real':>6}")
        for r in rows:
            print(f"{r['atoms']:>6} {r['ranks']:>5} {r['tolerance']:>6.0e} {str(r['skin']):>19} "
                  f"{(r['skin_used'] or 0):>5.2f} {1e3 * r['first']:>8.1f} {1e3 * r['median']:>8.1f} "
                  f"{r['ratio']:>6.2f} {r['builds']:>6.0f} {1e3 * r['pair_list_build']:>6.1f} "
                  f"{1e3 * r['pair_list_refresh']:>7.1f} {1e3 * r['pair_list_evaluate']:>6.1f} "
                  f"{1e3 * r['real_space']:>6.1f}")
        water_walk.write_json(args.json, rows)


if __name__ == "__main__":
    main()
