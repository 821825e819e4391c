"""Timing helpers shared by the MPI benchmark scripts (benchmarks/overlap.py, pair_list.py)."""
from __future__ import annotations

import numpy as np
from mpi4py import MPI

from .._mpi.collective import allmax, allsum


def slowest(comm, x: float) -> float:
    """The largest value of x over the ranks of comm (a step is as slow as its slowest rank)."""
    return float(allmax(comm, x)[0])


def total(comm, x):
    """The sum of the number x over the ranks of comm (an int for ints)."""
    if isinstance(x, (int, bool)) or (hasattr(x, "dtype") and x.dtype.kind in "iub"):
        return int(allsum(comm, int(x), np.int64)[0])
    return float(allsum(comm, x)[0])


def timed_compute(comm, pme, pos, q, ids, ex) -> float:
    """Wall time of one pme.compute after a barrier, the slowest rank's."""
    comm.Barrier()
    t0 = MPI.Wtime()
    pme.compute(pos, q, ids=ids, exclusions=ex)
    return slowest(comm, MPI.Wtime() - t0)
