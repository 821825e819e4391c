"""Running a script under its own ``mpirun`` with a hard time limit (shared by the tests that
need their own processes: threads across ranks, signals, MPI_Finalize; tests/reliability)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from conftest import _mpi_env


def mpirun(nranks, script, timeout, env=None, cwd=None, args=()):
    """Run `script` (source text, written to `cwd`/script.py, or the path of a file) under its
    own ``mpirun -n nranks`` with a hard time limit; returns (return code, output). Every rank
    of a text script dumps its Python stack 10 s before the limit. Idle ranks yield the CPU:
    such scripts run more threads than this machine has cores. A run past the limit is killed
    and fails the test with its output (a hang)."""
    e = _mpi_env()
    e.update({"OMPI_MCA_mpi_yield_when_idle": "1"}, **(env or {}))
    if os.path.isfile(script):
        path = script
    else:
        path = os.path.join(cwd, "script.py")
        with open(path, "w") as f:
            f.write(f"import faulthandler\nfaulthandler.dump_traceback_later({max(1, timeout - 10)}, exit=True)\n")
            f.write(textwrap.dedent(script))
    cmd = ["mpirun", "-n", str(nranks), sys.executable, path, *map(str, args)]
    p = subprocess.Popen(cmd, cwd=cwd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, _ = p.communicate()
        pytest.fail(f"mpirun -n {nranks} did not finish within {timeout} s (a hang):\n{out}")
    return p.returncode, out
