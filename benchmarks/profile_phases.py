"""Per-phase time of one pmewald configuration (1 rank, or under mpirun).

    python benchmarks/profile_phases.py nacl ik 90,90,90 5 0.3
    python benchmarks/profile_phases.py water ad 64,72,120 6 0.3231 --repeat 10
    mpirun -n 2 python benchmarks/profile_phases.py water auto - - - --tolerance 1e-4
    python benchmarks/profile_phases.py water auto - - - --cutoff 7 --precision auto --walk 0.01 --repeat 20

Systems: ``nacl`` (32,768 ions, 0.1 A displacements) or ``water`` (30,000 atoms, intramolecular
pairs excluded); cutoff ``--cutoff`` (10 A), kcal/mol/A. Pass ``-`` for mesh/order/alpha (and ``auto``
for the differentiation) to let pmewald choose them for ``--tolerance``. ``--walk S``: each call at
the next frame of a Gaussian random walk of S A per coordinate per call (an MD loop: the pair list
is kept between calls), else every call at the same positions. Prints the median wall time of
``compute()`` and ``pme.timings()`` per phase (ms per call, this rank; rank 0 prints).
"""
import argparse
import time

import numpy as np
from mpi4py import MPI

import pmewald
from pmewald import systems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("system", choices=["nacl", "water"])
    ap.add_argument("differentiation", choices=["ad", "ik", "auto"])
    ap.add_argument("mesh", help="K1,K2,K3 or -")
    ap.add_argument("order", help="B-spline order or -")
    ap.add_argument("alpha", help="1/A or -")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cutoff", type=float, default=10.0)
    ap.add_argument("--precision", choices=("double", "mixed", "auto"), default=None)
    ap.add_argument("--walk", type=float, default=None, metavar="S")
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    s = systems.displace(systems.rock_salt(16), 0.1, seed=1) if a.system == "nacl" else systems.water_box(
        target_atoms=30000)
    n = len(s.charges)
    lo, hi = comm.rank * n // comm.size, (comm.rank + 1) * n // comm.size
    kw = dict(tolerance=a.tolerance, differentiation=a.differentiation, coulomb_constant=332.06371)
    if a.mesh != "-":
        kw["mesh"] = [int(v) for v in a.mesh.split(",")]
    if a.order != "-":
        kw["order"] = int(a.order)
    if a.alpha != "-":
        kw["alpha"] = float(a.alpha)
    if a.precision:
        kw["precision"] = a.precision
    pme = pmewald.PME(s.box, a.cutoff, **kw)
    rest = (s.charges[lo:hi], s.ids[lo:hi], s.exclusions if comm.rank == 0 else None)
    steps = np.random.default_rng(0).normal(scale=a.walk or 0.0, size=(a.repeat + 1, n, 3))
    frames = s.positions + np.cumsum(steps, axis=0)         # frame k: k + 1 steps of the walk
    pme.compute(s.positions[lo:hi], *rest)
    pme.reset_timings()
    times = []
    for k in range(a.repeat):
        x = np.ascontiguousarray(frames[k][lo:hi]) if a.walk else s.positions[lo:hi]
        comm.Barrier()
        t = time.perf_counter()
        pme.compute(x, *rest)
        times.append(time.perf_counter() - t)
    if comm.rank == 0:
        p = pme.parameters
        print(f"{a.system} {comm.size} rank(s): cutoff {a.cutoff:g} {p['differentiation']} order {p['order']} "
              f"mesh {p['mesh']} alpha {p['alpha']:.4f} precision {p.get('precision')}: compute() median "
              f"{1e3 * np.median(times):.1f} ms")
        for k, v in sorted(pme.timings().items(), key=lambda kv: -kv[1]):
            # (seconds only: counts and ratios have names of their own)
            if k in ("calls",) or k.endswith(("bytes", "messages", "exchanges", "polls", "candidates",
                                              "imbalance", "imbalance_last", "evaluated", "builds", "rebuilds")):
                continue
            print(f"  {k:<18s} {1e3 * v / a.repeat:8.2f} ms")


if __name__ == "__main__":
    main()
