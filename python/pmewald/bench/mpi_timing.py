"""Timing helpers shared by the MPI benchmark scripts (benchmarks/overlap.py, pair_list.py)."""
from __future__ import annotations

from mpi4py import MPI


def slowest(comm, x: float) -> float:
    """The largest value of x over the ranks of comm (a step is as slow as its slowest rank)."""
    return comm.allreduce(x, op=MPI.MAX)


def timed_compute(comm, pme, pos, q, ids, ex) -> float:
    """Wall time of one pme.compute after a barrier, the slowest rank's."""
    comm.Barrier()
    t0 = MPI.Wtime()
    pme.compute(pos, q, ids=ids, exclusions=ex)
    return slowest(comm, MPI.Wtime() - t0)
