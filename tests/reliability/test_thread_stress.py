"""Two threads on two communicators building and using objects at once, every pattern the
threading contract allows (tests/reliability/thread_stress.py has the list), in its own
``mpirun -n 2``: any collective that blocks with a process-wide lock held, or any communicator
creation that races another, hangs it (issue 26). Before the fix the script hung in 5 of 10
runs on this machine (docs/reliability.md, "Threads"); the rule for tests like this one is 20
passes in a row before it lands (``bash scripts/repeat.sh 20 tests/reliability/test_thread_stress.py``).
"""
from __future__ import annotations

import os

import pytest

from mpi_scripts import mpirun

# exclusive (docs/testing.md): two threads in each of two ranks, under a time limit.
pytestmark = pytest.mark.exclusive

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "thread_stress.py")


@pytest.mark.timeout(300)
def test_two_threads_build_and_use_objects_on_their_own_communicators(tmp_path):
    rc, out = mpirun(2, SCRIPT, timeout=280, cwd=str(tmp_path), args=(2, 0),
                     env={"PMEWALD_STRESS_DUMP_AFTER": "260", "PMEWALD_FFTW_PLANNER": "measure"})
    assert rc == 0 and out.count("STRESS OK") == 2, out
