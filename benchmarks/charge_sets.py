"""Cost of m charge sets in one call against m separate calls:
``[mpirun -n N] python benchmarks/charge_sets.py [--sets 1 4 16] [--skin auto|0] [--potentials]``.

A water box (default about 30,000 atoms, 9 A cutoff, tolerance 1e-5, kcal/mol/A) with m charge
sets: the water's charges times 1 + 0.05 c for set c (so the sets differ; the tuning sees the
largest). One PME object; per round and per m: one call with charges of shape (n, m), then m
calls with one set each (the pair list of ``--skin auto`` in use for those, as a user's loop
would have it: the sets call searches afresh). Times are the slowest rank's, medians over the
rounds after warm-up; the ratio is separate / batched, taken round by round. Prints the
per-phase seconds of both kinds of call (rank 0) too.

Not a test: numbers depend on the machine and its load (say ``uptime`` next to them).
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
from mpi4py import MPI

import pmewald
from pmewald import systems, units

_PHASES = ("real_space", "spread", "fft", "solve", "ghost", "gather", "migrate", "ghost_atoms")


def _timed(comm, fn):
    comm.Barrier()
    t0 = MPI.Wtime()
    fn()
    return comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--atoms", type=int, default=30000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sets", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--cutoff", type=float, default=9.0)
    ap.add_argument("--tolerance", type=float, default=1e-5)
    ap.add_argument("--skin", default="auto", help="the PME's skin: 'auto' (default) or a length (0: no list)")
    ap.add_argument("--potentials", action="store_true", help="potentials=True in both kinds of call")
    args = ap.parse_args(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    w = systems.water_box(target_atoms=args.atoms)
    mine = np.arange(rank, w.n_atoms, size)
    ex = w.exclusions[rank::size]
    pos, ids = w.positions[mine], w.ids[mine]
    top = max(args.sets)
    q_all = np.ascontiguousarray(w.charges[mine, None] * (1.0 + 0.05 * np.arange(top)))
    skin = args.skin if args.skin == "auto" else float(args.skin)
    pme = pmewald.PME(w.box, args.cutoff, tolerance=args.tolerance, coulomb_constant=units.KCAL_MOL_ANGSTROM,
                      comm=comm, skin=skin)
    kw = dict(ids=ids, exclusions=ex, potentials=args.potentials)
    # warm-up: tuning, plans, the pair list, the sets' buffers
    for _ in range(2):
        pme.compute(pos, q_all[:, 0], **kw)
    for m in args.sets:
        pme.compute(pos, q_all[:, :m], **kw)
    rows = []
    for m in args.sets:
        q = np.ascontiguousarray(q_all[:, :m])
        cols = [np.ascontiguousarray(q[:, c]) for c in range(m)]
        t_b, t_s, ratios = [], [], []
        phases = {"batched": {}, "separate": {}}

        def separate():
            for c in range(m):
                pme.compute(pos, cols[c], **kw)

        for _ in range(args.rounds):
            pme.reset_timings()
            tb = _timed(comm, lambda: pme.compute(pos, q, **kw))
            for k, v in pme.timings().items():
                phases["batched"][k] = phases["batched"].get(k, 0.0) + v / args.rounds
            pme.reset_timings()
            ts = _timed(comm, separate)
            for k, v in pme.timings().items():
                phases["separate"][k] = phases["separate"].get(k, 0.0) + v / args.rounds
            t_b.append(tb)
            t_s.append(ts)
            ratios.append(ts / tb)
        rows.append((m, statistics.median(t_b), statistics.median(t_s), statistics.median(ratios), phases))
    if rank == 0:
        p = pme.parameters
        print(f"water {w.n_atoms} atoms, {size} ranks, cutoff {args.cutoff}, tolerance {args.tolerance:g}: "
              f"mesh {p['mesh']}, order {p['order']}, {p['differentiation']}, alpha {p['alpha']:.4f}, "
              f"skin {p['skin_used']}, potentials {args.potentials}")
        print("| m | one call with m sets | m separate calls | per set (batched) | separate / batched |")
        print("|---|---|---|---|---|")
        for m, tb, ts, r, _ in rows:
            print(f"| {m} | {tb * 1e3:.0f} ms | {ts * 1e3:.0f} ms | {tb / m * 1e3:.0f} ms | {r:.2f} |")
        for m, _, _, _, ph in rows:
            print(f"m={m} phase ms per round (rank 0), batched / separate: " +
                  ", ".join(f"{k} {ph['batched'].get(k, 0) * 1e3:.0f}/{ph['separate'].get(k, 0) * 1e3:.0f}"
                            for k in _PHASES))


if __name__ == "__main__":
    main()
