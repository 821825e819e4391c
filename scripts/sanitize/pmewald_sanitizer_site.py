"""Start-up hook of the sanitizer test run's interpreter (``bash scripts/dev.sh sanitize``).

``build/sanitize/venv`` imports this module from a ``.pth`` file, so it runs at the start
of every Python process of that run: pytest, each MPI rank that ``mpirun`` starts, and
any subprocess a test starts with ``sys.executable``. It does two things.

1. Preload the AddressSanitizer runtime. Python is not instrumented, so the runtime
   must be in the process before anything else (``LD_PRELOAD``). The driver passes the
   libraries in ``PMEWALD_SANITIZE_PRELOAD``; a process that does not have them yet
   re-executes itself with ``LD_PRELOAD`` set, and once they are in, ``LD_PRELOAD`` is
   taken out of the environment again. So only these Python processes run with the
   sanitizers: ``mpirun``, ``orted`` and other programs the tests start do not (some
   hang with the runtime preloaded), and the ranks get it through this same hook.

2. Check for leaks at exit. ``ASAN_OPTIONS`` has ``leak_check_at_exit=0``; the check
   runs from ``atexit`` instead: after the tests, but before the interpreter tears its
   objects down and before mpi4py calls ``MPI_Finalize`` (a ``Py_AtExit`` hook, which
   runs later). At that point everything still in use - live Python objects, the
   extension's caches, MPI's state - is reachable, so what LeakSanitizer reports is
   memory that nothing points to any more: a real leak, not the shutdown of the
   interpreter or of Open MPI. Reports go to the ``log_path`` of ``ASAN_OPTIONS``, and
   the driver fails the run when there is any.

Without ``PMEWALD_SANITIZE_PRELOAD`` in the environment this module does nothing.
"""

import os
import sys


def _runtime_loaded():
    import ctypes

    return hasattr(ctypes.CDLL(None), "__asan_init")


def _leak_check():
    import ctypes

    check = getattr(ctypes.CDLL(None), "__lsan_do_recoverable_leak_check", None)
    if check is not None:
        check()


def _start():
    preload = os.environ.get("PMEWALD_SANITIZE_PRELOAD")
    if not preload:
        return
    if not _runtime_loaded():
        if not hasattr(sys, "orig_argv"):
            raise SystemExit("pmewald sanitizer hook: needs Python 3.10 or later (sys.orig_argv)")
        if os.environ.get("LD_PRELOAD") == preload:
            raise SystemExit(f"pmewald sanitizer hook: LD_PRELOAD={preload} did not load the ASan runtime")
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, sys.orig_argv, dict(os.environ, LD_PRELOAD=preload))
    os.environ.pop("LD_PRELOAD", None)
    import atexit

    atexit.register(_leak_check)


_start()
