"""Cost of per-atom potentials and of one QEq solve: ``[mpirun -n N] python benchmarks/potentials.py``.

1. A water box (default about 30,000 atoms, 9 A cutoff, tolerance 1e-5, kcal/mol/A): one PME
   object, calls without and with ``potentials=True`` interleaved round by round after
   warm-up (so the ratio shares the machine's state); a call's time is the slowest rank's.
   Prints the median times, the median of the round-by-round ratios and the per-phase
   seconds of each kind of call (rank 0).
2. One QEq solve on the same water (O and H electronegativity and hardness of the classic
   QEq parameters, in kcal/mol/e and kcal/mol/e^2, the hardness doubled: see
   --hardness-scale): PME evaluations, iterations and seconds of a cold start, then of a
   warm start after moving every atom by a small random step.

Not a test: numbers depend on the machine and its load (say ``uptime`` next to them).
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
from mpi4py import MPI

import pmewald
from pmewald import systems, units
from pmewald.qeq import QEq, per_atom

# Rappe and Goddard (1991): chi (eV) and J (eV), converted to kcal/mol per e and e^2.
_EV = 23.060548
_CHI = {"O": 8.741 * _EV, "H": 4.528 * _EV}
_J = {"O": 13.364 * _EV, "H": 13.890 * _EV}


def _timed(comm, fn):
    comm.Barrier()
    t0 = MPI.Wtime()
    out = fn()
    return comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX), out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--atoms", type=int, default=30000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cutoff", type=float, default=9.0)
    ap.add_argument("--tolerance", type=float, default=1e-5)
    ap.add_argument("--qeq-tolerance", type=float, default=1e-3, help="kcal/mol/e")
    ap.add_argument("--hardness-scale", type=float, default=2.0,
                    help="J x this: with unscreened point charges the classic J leaves diag(J) + A "
                         "indefinite for water (O-H 1.8 A apart); QEq proper screens short range")
    args = ap.parse_args(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    w = systems.water_box(target_atoms=args.atoms)
    mine = np.arange(rank, w.n_atoms, size)
    ex = w.exclusions[rank::size]
    pos, q, ids = w.positions[mine], w.charges[mine], w.ids[mine]
    pme = pmewald.PME(w.box, args.cutoff, tolerance=args.tolerance, coulomb_constant=units.KCAL_MOL_ANGSTROM,
                      comm=comm)
    for want in (False, True, False, True):  # warm-up: tuning, plans, caches
        pme.compute(pos, q, ids=ids, exclusions=ex, potentials=want)
    t_off, t_on, ratios = [], [], []
    phases = {False: {}, True: {}}
    for _ in range(args.rounds):
        row = {}
        for want in (False, True):
            pme.reset_timings()
            row[want], _ = _timed(comm, lambda: pme.compute(pos, q, ids=ids, exclusions=ex, potentials=want))
            for k, v in pme.timings().items():
                phases[want][k] = phases[want].get(k, 0.0) + v / args.rounds
        t_off.append(row[False])
        t_on.append(row[True])
        ratios.append(row[True] / row[False])
    if rank == 0:
        p = pme.parameters
        print(f"water {w.n_atoms} atoms, {size} ranks, cutoff {args.cutoff}, tolerance {args.tolerance:g}: "
              f"mesh {p['mesh']}, order {p['order']}, {p['differentiation']}, alpha {p['alpha']:.4f}")
        print(f"potentials off: {statistics.median(t_off) * 1e3:.1f} ms   on: {statistics.median(t_on) * 1e3:.1f} ms"
              f"   ratio on/off (median of rounds): {statistics.median(ratios):.3f}")
        keys = ("real_space", "spread", "fft", "solve", "ghost", "gather", "migrate", "ghost_atoms")
        print("phase seconds per call (rank 0), off / on: " +
              ", ".join(f"{k} {phases[False].get(k, 0) * 1e3:.1f}/{phases[True].get(k, 0) * 1e3:.1f} ms"
                        for k in keys))

    symbols = np.where(w.charges < 0, "O", "H")[mine]
    chi, J = per_atom(symbols, _CHI), args.hardness_scale * per_atom(symbols, _J)
    qeq = QEq(pme, tolerance=args.qeq_tolerance)
    t_cold, cold = _timed(comm, lambda: qeq.solve(pos, chi, J, ids=ids, exclusions=ex))
    moved = pos + np.random.default_rng(rank).normal(0, 0.01, pos.shape)
    t_warm, warm = _timed(comm, lambda: qeq.solve(moved, chi, J, ids=ids, exclusions=ex))
    if rank == 0:
        for name, t, r in (("cold", t_cold, cold), ("warm (atoms moved 0.01 A rms)", t_warm, warm)):
            print(f"QEq {name}: {r.evaluations} PME evaluations, {r.iterations} iterations, {t:.2f} s "
                  f"({t / r.evaluations * 1e3:.0f} ms per evaluation), residual {r.residual:.2g} kcal/mol/e, "
                  f"q_O mean {r.charges[symbols == 'O'].mean():.3f}")


if __name__ == "__main__":
    main()
