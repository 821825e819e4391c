"""Thread rules of pmewald's objects (docs/reliability.md, "Threads").

- The C++ core releases the GIL around every long or blocking call (compute, FFT
  execution, plan construction, MPI waits), so other Python threads run meanwhile;
  FFTW's planner and Kokkos's Serial reductions are serialised process-wide inside.
- One object runs one call at a time: a second thread calling into an object that is
  busy gets a ``RuntimeError`` at once (:class:`Busy`), instead of two calls mixing its
  buffers and collectives.
- MPI's thread level decides the rest: with ``MPI_THREAD_MULTIPLE`` (what mpi4py asks
  for by default) different objects may run in different threads at the same time;
  with ``MPI_THREAD_SERIALIZED`` only one pmewald call may run at a time in the
  process (a second one raises); with ``MPI_THREAD_FUNNELED`` or ``SINGLE`` only the
  main thread may call pmewald.
"""

from __future__ import annotations

import threading

_level = None
_serial = threading.Lock()  # held by the running call under MPI_THREAD_SERIALIZED


def thread_level():
    """MPI's provided thread level (cached: it cannot change once MPI is initialised)."""
    global _level
    if _level is None:
        from mpi4py import MPI

        _level = MPI.Query_thread()
    return _level


def _level_name(level):
    from mpi4py import MPI

    names = {MPI.THREAD_SINGLE: "MPI_THREAD_SINGLE", MPI.THREAD_FUNNELED: "MPI_THREAD_FUNNELED",
             MPI.THREAD_SERIALIZED: "MPI_THREAD_SERIALIZED", MPI.THREAD_MULTIPLE: "MPI_THREAD_MULTIPLE"}
    return names.get(level, str(level))


def enter_call():
    """Check MPI's thread level for a call from this thread; returns whether the
    process-wide serial lock was taken (release with :func:`leave_call`)."""
    from mpi4py import MPI

    level = thread_level()
    if level >= MPI.THREAD_MULTIPLE:
        return False
    if level <= MPI.THREAD_FUNNELED:
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError(f"MPI provides only {_level_name(level)}: pmewald may be called from the main "
                               "thread only (initialise MPI with MPI_THREAD_MULTIPLE to use threads)")
        return False
    if not _serial.acquire(blocking=False):
        raise RuntimeError("MPI provides only MPI_THREAD_SERIALIZED and another thread is in a pmewald call: "
                           "make one pmewald call at a time (or initialise MPI with MPI_THREAD_MULTIPLE)")
    return True


def leave_call(took_serial):
    if took_serial:
        _serial.release()


class Busy:
    """Per-object guard: one call at a time; another thread gets a RuntimeError."""

    __slots__ = ("_lock", "_what", "_serial")

    def __init__(self, what):
        self._lock = threading.Lock()
        self._what = what
        self._serial = False

    def __enter__(self):
        if not self._lock.acquire(blocking=False):
            raise RuntimeError(f"this {self._what} object is already running a call in another thread; an object "
                               "runs one call at a time (give each thread its own object, or serialise the calls)")
        try:
            self._serial = enter_call()
        except BaseException:
            self._lock.release()
            raise
        return self

    def __exit__(self, *exc):
        leave_call(self._serial)
        self._serial = False
        self._lock.release()
        return False


class Rules:
    """The thread-level checks of :func:`enter_call` for a call without an object yet
    (constructors: collective on the caller's communicator, so never concurrent with
    another construction on the same communicator)."""

    __slots__ = ("_serial",)

    def __enter__(self):
        self._serial = enter_call()
        return self

    def __exit__(self, *exc):
        leave_call(self._serial)
        return False
