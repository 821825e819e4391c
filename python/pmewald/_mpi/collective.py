"""Collective agreement on errors, the MPI-state check and communicator handling.

Every check that can fail on one rank only is agreed over the communicator before
the next collective call, so that every rank raises the same exception (type and
message) and none is left waiting. :func:`agree` does that in one small
``MPI_Allreduce`` that can also carry the sums a call needs anyway (the compute
path folds its atom count and charge sums into it); only when some rank failed
does a second round find the lowest failing rank and broadcast its error.

Every collective here, and every one the package makes, is a buffer-based call on NumPy
arrays (``Allreduce``, ``Exscan``, ``Bcast``...) or a pickling ``bcast``/``allgather``,
which release the GIL while they wait. Never the lowercase *reductions* (``allreduce``,
``reduce``, ``scan``, ``exscan``): mpi4py runs those on a private duplicate of the
communicator that it creates, on the first such call, with ``MPI_Comm_dup`` while holding
the GIL, and two threads on two ranks then deadlock across ranks (issue 26: rank 0's thread
A holds its GIL in that dup waiting for rank 1's A, whose GIL rank 1's thread B holds the same
way). :func:`allsum`, :func:`allmax` and :func:`exscan_sum` are the replacements. Every
communicator the package creates comes from the core (``_core.duplicate_communicator``,
``_core.ranks_on_node``), which creates it while every member rank holds its process's
creation lock (Open MPI 4.1 deadlocks when two threads of a process create communicators at
once: ``cpp/comm/communicators.hpp``). ``tests/structure/test_collectives.py`` checks both
rules on the package's source.

The error types that keep their type on every rank are those below; anything else
(an exception raised by a user's array-like, say) becomes a ``RuntimeError`` naming
the original type. ``KeyboardInterrupt`` and ``SystemExit`` are not agreed (they are
not ``Exception``): see the abort policy in :mod:`pmewald._mpi.abort`.
"""

from __future__ import annotations

import atexit
import re
import weakref

import numpy as np
from mpi4py import MPI

from .. import _core

_AGREED_TYPES = (ValueError, TypeError, MemoryError, OverflowError, IndexError, ZeroDivisionError,
                 NotImplementedError, RuntimeError)
_BY_NAME = {t.__name__: t for t in _AGREED_TYPES}
_REPORTED = re.compile(r" \(reported by rank \d+\)$")


def require_mpi():
    """RuntimeError unless MPI is running (an MPI call after ``MPI.Finalize()`` aborts)."""
    if MPI.Is_finalized():
        raise RuntimeError("MPI has been finalized (MPI.Finalize() was called): pmewald needs MPI running; "
                           "make every pmewald call before MPI.Finalize()")
    if not MPI.Is_initialized():
        raise RuntimeError("MPI is not initialized (mpi4py.rc.initialize = False?): call MPI.Init() first")


def check_comm(comm):
    """The mpi4py intracommunicator to use (``None``: ``MPI.COMM_WORLD``); TypeError otherwise.

    This is the one check that is local: a rank without a valid communicator has no
    collective to take part in (joining ``COMM_WORLD`` instead would hang whenever the
    others use a sub-communicator). Uncaught, the abort policy ends the job.
    """
    if comm is None:
        return MPI.COMM_WORLD
    if not isinstance(comm, MPI.Comm):
        raise TypeError("comm must be an mpi4py intracommunicator (for example MPI.COMM_WORLD or a "
                        f"communicator from Split()), not an object of type '{type(comm).__qualname__}'")
    if comm == MPI.COMM_NULL:
        raise TypeError("comm is MPI.COMM_NULL; pass a valid intracommunicator")
    if comm.Is_inter():
        raise TypeError("comm is an intercommunicator; pmewald needs an intracommunicator")
    return comm


def _describe(error):
    """(agreed type name, message) of a local exception."""
    for t in type(error).__mro__:
        if t in _AGREED_TYPES:
            msg = str(error) or type(error).__name__
            if t is not type(error):
                msg = f"{type(error).__name__}: {msg}"
            return t.__name__, msg
    return "RuntimeError", f"{type(error).__name__}: {error}"


def raise_agreed(comm, error):
    """Collective (only after some rank failed): raise on every rank the error of the
    lowest failing rank, its type kept for the types above. `error`: this rank's
    exception or None."""
    rank, size = comm.Get_rank(), comm.Get_size()
    first = int(allmin(comm, [size if error is None else rank])[0])
    info = comm.bcast(_describe(error) if rank == first else None, root=first)
    name, msg = info
    if size > 1 and not _REPORTED.search(msg):
        msg += f" (reported by rank {first})"
    exc = _BY_NAME[name](msg)
    if error is not None:
        raise exc from error
    raise exc


def agree(comm, error=None, values=()):
    """Collective: one ``MPI_Allreduce`` that sums `values` over the ranks and tells every
    rank whether any rank has an `error` (a local exception, or None); if one has, every
    rank raises the same exception (:func:`raise_agreed`). Returns the sums (float64)."""
    buf = np.zeros(1 + len(values))
    if error is None:
        buf[1:] = values
    else:
        buf[0] = 1.0
    comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
    if buf[0] != 0:
        raise_agreed(comm, error)
    return buf[1:]


def _reduced(comm, values, op, dtype):
    buf = np.array(values, dtype=dtype).reshape(-1)
    comm.Allreduce(MPI.IN_PLACE, buf, op=op)
    return buf


def allsum(comm, values, dtype=np.float64):
    """Collective: the element-wise sums of `values` (a number or a sequence) over the ranks, as
    an array (float64 by default; np.int64 for exact counts)."""
    return _reduced(comm, values, MPI.SUM, dtype)


def allmax(comm, values, dtype=np.float64):
    """Collective: the element-wise maxima of `values` over the ranks, as an array."""
    return _reduced(comm, values, MPI.MAX, dtype)


def allmin(comm, values, dtype=np.float64):
    """Collective: the element-wise minima of `values` over the ranks, as an array."""
    return _reduced(comm, values, MPI.MIN, dtype)


def exscan_sum(comm, count):
    """Collective: the sum of the integer `count` over the ranks before this one (0 on rank 0)."""
    send = np.array([count], dtype=np.int64)
    out = np.zeros(1, dtype=np.int64)
    comm.Exscan(send, out, op=MPI.SUM)
    return int(out[0]) if comm.Get_rank() > 0 else 0


def agreed(comm, fn):
    """Run the local check `fn`; if it raises on any rank, every rank raises the same error."""
    try:
        value, error = fn(), None
    except Exception as e:  # noqa: BLE001 - every failure must be agreed, whatever its type
        value, error = None, e
    agree(comm, error)
    return value


def same_everywhere(comm, value, what):
    """Collective: ValueError on every rank unless `value` (picklable) is the same on all ranks."""
    root = comm.bcast(value, root=0)
    agree(comm, None if root == value else ValueError(what))


def duplicate(comm, owner):
    """Collective: a duplicate of `comm` for `owner`'s own collectives.

    An object's Python-level collectives run on its own communicator, never the caller's:
    two objects used from two threads would otherwise interleave their collectives on one
    communicator (erroneous in MPI).

    When `owner` dies the duplicate is only queued, never freed there: an owner that dies
    in a reference cycle is collected by Python's cyclic garbage collector, which can run
    inside mpi4py's communicator-lock registry (any allocation starts it; mpi4py takes that
    lock for every pickled collective such as ``bcast``). Freeing a communicator that
    carries mpi4py's lock calls back into that registry: the rank waits on a lock its own
    thread holds, and the others wait in their next collective (seen in CI as a hang of
    ``PME.__init__``'s ``bcast``; tests/reliability, "garbage collection"). The collection
    also happens at a moment that differs between ranks, and ``MPI_Comm_free`` is collective
    in MPI's terms. Queued duplicates are freed at exit (before mpi4py finalizes MPI), where
    every rank is at the same point, or by :func:`free_released_communicators`.

    Python never runs a collective on a communicator the C++ core owns (the core frees
    those in its destructors): that is what this duplicate is for."""
    dup = _core.duplicate_communicator(comm)  # safe while other threads create theirs
    weakref.finalize(owner, _RELEASED.append, dup)
    return dup


# Duplicates whose owners died, waiting for a point where every rank frees them.
_RELEASED = []


def free_released_communicators():
    """Free the communicators of dead pmewald objects (collective in MPI's terms: call it
    on every rank at the same point of the program, after the same objects have died,
    e.g. after ``gc.collect()`` on every rank). Also run at exit."""
    while _RELEASED:
        comm = _RELEASED.pop()
        if MPI.Is_initialized() and not MPI.Is_finalized():
            comm.Free()


# atexit runs handlers last-registered first: this module imports mpi4py.MPI (which
# registers MPI_Finalize at exit) before registering, so the frees come first.
atexit.register(free_released_communicators)
