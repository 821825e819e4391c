"""The abort policy: an uncaught exception on one rank ends the whole MPI job.

Without it, a rank that dies of an uncaught exception (or of Ctrl-C, a
``KeyboardInterrupt``) goes into interpreter shutdown and ``MPI_Finalize`` while the
other ranks wait forever in their next collective call: the classic MPI hang.
``python -m mpi4py script.py`` avoids it by calling ``MPI_Abort`` on such an
exception; pmewald does the same for any script that imports it under ``mpirun`` with
more than one rank, so a user of mpi4py gets the behaviour ``python -m mpi4py``
documents, whether or not they launched through it.

How: at import, pmewald wraps ``sys.excepthook`` (Python calls it only for an
exception that nothing caught, just before the interpreter exits) and ``threading.excepthook``
(the same for an exception that ends a thread: a worker thread that dies leaves the other
ranks' matching threads waiting just the same, e.g. the "already running a call in another
thread" error of an object called from two threads, which may come on some ranks only). The
wrapper first runs the previous hook, so the traceback is printed as usual, then says why and
calls ``MPI_Abort(MPI_COMM_WORLD, 1)``. Exceptions that are caught (``try``/``except``,
pytest's per-test handling) never reach it; ``SystemExit`` (``sys.exit``) does not
either. It is not installed on one rank, in an interactive session, or when MPI is
not running.

Opt out with the environment variable ``PMEWALD_ABORT_ON_EXCEPTION=0`` (read at
import) or :func:`abort_on_uncaught_exception` ``(False)``.
"""

from __future__ import annotations

import os
import sys
import threading

ENV = "PMEWALD_ABORT_ON_EXCEPTION"
_enabled = False
_previous = None
_previous_thread = None


def abort_on_uncaught_exception(enable: bool = True) -> bool:
    """Turn the abort policy on or off for this process; returns the previous setting.

    With it on (the default when pmewald is imported under MPI with more than one rank),
    an exception that nothing catches prints its traceback and then calls
    ``MPI_Abort(MPI_COMM_WORLD, 1)``, so the other ranks do not wait forever in their
    next collective, as ``python -m mpi4py`` does. Off restores the previous
    ``sys.excepthook``. See docs/reliability.md.
    """
    global _enabled, _previous, _previous_thread
    was = _enabled
    if enable and not _enabled:
        _previous, _previous_thread = sys.excepthook, threading.excepthook
        sys.excepthook, threading.excepthook = _hook, _thread_hook
        _enabled = True
    elif not enable and _enabled:
        if sys.excepthook is _hook:
            sys.excepthook = _previous
        if threading.excepthook is _thread_hook:
            threading.excepthook = _previous_thread
        _enabled = False
    return was


def _hook(exc_type, exc, tb):
    previous = _previous or sys.__excepthook__
    try:
        previous(exc_type, exc, tb)
    finally:
        if _enabled:
            _abort(exc_type)


def _thread_hook(args):
    previous = _previous_thread or threading.__excepthook__
    try:
        previous(args)
    finally:
        if _enabled and args.exc_type is not SystemExit:  # a thread's SystemExit ends only the thread
            _abort(args.exc_type, f" in thread {args.thread.name if args.thread else '?'}")


def _abort(exc_type, where=""):
    from mpi4py import MPI

    if not MPI.Is_initialized() or MPI.Is_finalized():
        return
    world = MPI.COMM_WORLD
    if world.Get_size() < 2:
        return
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001 - a closed stdout must not stop the abort
        pass
    sys.stderr.write(f"pmewald: uncaught {exc_type.__name__}{where} on rank {world.Get_rank()} of {world.Get_size()}: "
                     f"calling MPI_Abort so that the other ranks do not wait forever (as python -m mpi4py "
                     f"does; {ENV}=0 turns this off)\n")
    sys.stderr.flush()
    world.Abort(1)


def install_at_import():
    """Turn the policy on when this process is one rank of several, not interactive,
    and the environment does not opt out."""
    if os.environ.get(ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return
    if hasattr(sys, "ps1") or sys.flags.interactive:
        return
    from mpi4py import MPI

    if MPI.Is_initialized() and not MPI.Is_finalized() and MPI.COMM_WORLD.Get_size() > 1:
        abort_on_uncaught_exception(True)
