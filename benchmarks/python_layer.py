"""Cost of ``PME.compute``'s Python layer per call: argument conversion and checks, their
agreement over the ranks, the result object (issue 11).

The C++ solver is replaced by a stub that returns a precomputed result, so only the Python
layer and its MPI calls are timed (the solver's own time would hide them in its noise).
Prints the median over 5 blocks of the per-block median of 200 calls (microseconds), with
ids and exclusions given, and without ids (default ids: one more exclusive scan)::

    python benchmarks/python_layer.py
    mpirun -n 2 python benchmarks/python_layer.py

To compare two versions, run each install's python alternately in the same session.
"""
import time

import numpy as np
from mpi4py import MPI

import pmewald
from pmewald import systems


class _Stub:
    """Stands in for the C++ solver: returns one precomputed raw result."""

    def __init__(self, raw):
        self.raw = raw

    def compute(self, *args):
        return self.raw


def main():
    comm = MPI.COMM_WORLD
    s = systems.water_box(target_atoms=30000)
    lo, hi = comm.rank * s.n_atoms // comm.size, (comm.rank + 1) * s.n_atoms // comm.size
    pos, q, ids = s.positions[lo:hi], s.charges[lo:hi], s.ids[lo:hi]
    ex = s.exclusions if comm.rank == 0 else np.zeros((0, 2), np.int64)
    pme = pmewald.PME(s.box, 10.0, alpha=0.3, mesh=(80, 90, 120), order=5, differentiation="ik",
                      coulomb_constant=332.06371, comm=comm)
    raw = pme._tuner.state.solver.compute(pos, q, ids, ex)
    pme.compute(pos, q, ids=ids, exclusions=ex)
    pme._tuner.state.solver = _Stub(raw)
    results = {}
    for label, kw in (("ids+exclusions", dict(ids=ids, exclusions=ex)), ("no ids", {})):
        blocks = []
        for _ in range(5):
            ts = []
            for _ in range(200):
                comm.Barrier()
                t = time.perf_counter()
                pme.compute(pos, q, **kw)
                ts.append(time.perf_counter() - t)
            blocks.append(np.median(ts))
        results[label] = 1e6 * float(np.median(blocks))
        results[label + " (best block)"] = 1e6 * float(min(blocks))
    if comm.rank == 0:
        print(f"{s.n_atoms} atoms, {comm.size} rank(s): " + ", ".join(f"{k} {v:.0f} us" for k, v in results.items()))


if __name__ == "__main__":
    main()
