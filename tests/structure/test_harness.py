"""The MPI test harness itself: failures on one rank and hangs must fail the run."""

import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

# exclusive (docs/testing.md): nested pytest runs under mpirun whose hangs are timed out.
pytestmark = pytest.mark.exclusive

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
def test_runs_on_the_requested_rank_count(comm, mpi_ranks):
    assert comm.Get_size() == mpi_ranks
    assert comm.allreduce(comm.Get_rank()) == mpi_ranks * (mpi_ranks - 1) // 2


def test_failures_and_hangs_on_any_rank_are_reported(tmp_path):
    from conftest import _CLEAN_ENV

    shutil.copy(os.path.join(os.path.dirname(HERE), "conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_probe.py").write_text(textwrap.dedent("""
        import time
        import pytest

        @pytest.mark.mpi(ranks=[2])
        def test_fails_on_rank_one_only(comm):
            assert comm.Get_rank() != 1, "rank one disagrees"

        @pytest.mark.mpi(ranks=[2])
        def test_passes(comm):
            assert comm.allreduce(1) == 2

        @pytest.mark.mpi(ranks=[3])
        @pytest.mark.timeout(3)
        def test_hangs_on_rank_zero(comm):
            if comm.Get_rank() == 0:
                time.sleep(60)
            comm.Barrier()

        @pytest.mark.mpi(ranks=[3])
        def test_after_the_hang(comm):
            pass
    """))
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nmarkers =\n    mpi(ranks): mpi\n    timeout(s): timeout\n")
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=240, env=dict(_CLEAN_ENV))
    elapsed = time.time() - t0
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "failed on rank(s) 1 of 2" in out and "rank one disagrees" in out, out
    assert "test_passes[mpi2] PASSED" in out or "3 failed, 1 passed" in out, out
    assert "test_hangs_on_rank_zero[mpi3]" in out and "it was running when the MPI run died" in out, out
    # every rank's stack at the timeout: rank 0 in its sleep, the others in the barrier
    assert "stacks of the ranks at the timeout" in out and "--- rank 2 ---" in out, out
    assert "in test_hangs_on_rank_zero" in out, out
    assert "test_after_the_hang[mpi3]" in out and "an earlier test aborted the MPI run" in out, out
    assert "3 failed, 1 passed" in out, out
    assert elapsed < 120, elapsed
