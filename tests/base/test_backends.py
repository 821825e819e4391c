"""The OpenMP build against the Serial build (issue 18).

``scripts/dev.sh test-openmp`` writes the Serial build's results of
``tests/backend_cases.py`` on one rank to ``$PMEWALD_BACKEND_REFERENCE`` and
then runs this file with the OpenMP build on 1 rank x 2 threads and on
2 ranks x 1 thread: every PME energy, force, virial and FFT output must equal
the Serial build's to 1e-12 of its largest magnitude. Without that variable
(the ordinary suite, the Serial build) the comparison is skipped, and only
the Serial build's own thread facts are checked.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

import pmewald
from pmewald import _core

sys.path.insert(0, str(Path(__file__).resolve().parent))
import backend_cases  # noqa: E402

REFERENCE = os.environ.get("PMEWALD_BACKEND_REFERENCE")


@pytest.mark.mpi(ranks=[1, 2])
@pytest.mark.timeout(300)
@pytest.mark.skipif(not REFERENCE, reason="needs the Serial build's results: run by scripts/dev.sh test-openmp")
def test_equal_to_serial_build(comm):
    ref = dict(np.load(REFERENCE))
    got = backend_cases.cases(comm)
    c = _core.build_config()
    bad = backend_cases.compare(got, ref, tol=1e-12)
    assert not bad, f"{c['kokkos_execution_space']} x {c['kokkos_threads']} threads on {comm.Get_size()} ranks: {bad}"
    # the comparison meant something: this build really is another one, threaded as asked
    threads = int(os.environ.get("OMP_NUM_THREADS", "0") or 0)
    if threads:
        assert int(c["kokkos_threads"]) == threads
        assert int(c["fftw_threads"]) == threads


@pytest.mark.mpi(ranks=[1, 2])
def test_thread_facts(comm):
    """show_config's thread facts: the kernels' threads, FFTW's, the job's placement."""
    c = _core.build_config()
    threads = int(c["kokkos_threads"])
    assert threads >= 1 and int(c["fftw_threads"]) in (1, threads)
    if c["kokkos_execution_space"] == "Serial":
        assert threads == 1 and int(c["fftw_threads"]) == 1
    p = _core.thread_placement(comm)
    assert p["threads_per_rank"] == threads
    assert 1 <= p["ranks_on_node"] <= comm.Get_size()
    assert p["threads_on_node"] >= p["ranks_on_node"]
    assert p["cores_on_node"] >= 1 and p["min_rank_cores"] >= 1
    assert p["oversubscribed"] == (p["threads_on_node"] > p["cores_on_node"]
                                   or p["max_rank_threads"] > p["min_rank_cores"])
    # the same answer on every rank (the busiest node)
    assert comm.allgather(p["description"]) == [p["description"]] * comm.Get_size()
    shown = pmewald.config()
    assert shown["kokkos_threads"] == c["kokkos_threads"]


@pytest.mark.mpi(ranks=[1])
@pytest.mark.timeout(120)
@pytest.mark.exclusive  # threads and its own mpirun
def test_python_threads_run_kernels_on_the_kernel_threads(comm):
    """Kokkos 3.x's OpenMP backend runs kernels only from the thread that initialised it;
    pmewald gives every other thread its own instance of the same size
    (cpp/base/kokkos_runtime.hpp). On the OpenMP build (1 rank x 2 threads in
    ``dev.sh test-openmp``) a Python thread sees the same kernel threads as the main thread,
    and a PME built there, and one built on the main thread but computed there, give the
    main thread's energy and forces (before: RuntimeError "Kokkos::OpenMP parallel_for
    ERROR: in parallel or not initialized" in the thread). On Serial the same holds trivially."""
    import threading

    from pmewald import systems

    s = systems.random_charges(120, [11.0, 12.0, 13.0], neutral=True, seed=4, min_distance=1.2)

    def make():
        return pmewald.PME(s.box, 5.0, alpha=0.6, mesh=(24, 24, 24), order=6, comm=comm)

    main_obj = make()
    want = main_obj.compute(s.positions, s.charges)
    got, errors = {}, []

    def in_thread():
        try:
            got["config"] = _core.build_config()
            got["built_here"] = make().compute(s.positions, s.charges)
            got["built_on_main"] = main_obj.compute(s.positions, s.charges)
        except Exception as e:  # reported on the main thread
            errors.append(repr(e))

    t = threading.Thread(target=in_thread)
    t.start()
    t.join()
    assert not errors, errors
    assert got["config"]["kokkos_threads"] == _core.build_config()["kokkos_threads"]
    for key in ("built_here", "built_on_main"):
        r = got[key]
        assert abs(r.energy - want.energy) <= 1e-12 * abs(want.energy), key
        np.testing.assert_allclose(r.forces, want.forces, rtol=0, atol=1e-12 * np.abs(want.forces).max())


_FFT_SCRIPT = """
import pmewald.fft as F
from mpi4py import MPI
fft = F.DistributedFFT((12, 10, 8))
rfft = F.DistributedRealFFT((12, 10, 8))
p = pmewald_core.thread_placement(None)
if MPI.COMM_WORLD.Get_rank() == 0:
    print("PLACEMENT", p["threads_on_node"], p["cores_on_node"], p["oversubscribed"], flush=True)
"""


def _run_on_one_core(ranks, threads):
    """A tiny FFT under ``taskset -c <one core>``: (stdout, stderr)."""
    import shutil
    import subprocess

    from conftest import _mpi_env

    core = sorted(os.sched_getaffinity(0))[0]
    env = _mpi_env()
    env["OMP_NUM_THREADS"] = str(threads)
    env.pop("PMEWALD_QUIET_OVERSUBSCRIPTION", None)
    script = "from pmewald import _core as pmewald_core\n" + _FFT_SCRIPT
    cmd = [shutil.which("taskset") or "taskset", "-c", str(core)]
    if ranks > 1:
        cmd += [shutil.which("mpirun") or "mpirun", "-n", str(ranks), "--bind-to", "none"]
    cmd += [sys.executable, "-c", script]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout, r.stderr


@pytest.mark.exclusive  # its own mpirun
def test_oversubscription_warns_once_on_rank_0():
    """Two ranks held on one core: rank 0 prints one warning (not one per rank or per
    object); one rank on one core prints none."""
    out, err = _run_on_one_core(ranks=2, threads=1)
    assert "PLACEMENT 2 1 True" in out
    assert err.count("pmewald warning:") == 1, err
    assert "2 rank(s) x 1 thread(s) = 2 threads on a node where they may use 1 core(s)" in err
    assert "OMP_PROC_BIND" in err and "--bind-to" in err
    out, err = _run_on_one_core(ranks=1, threads=1)
    assert "PLACEMENT 1 1 False" in out and "pmewald warning" not in err, err


@pytest.mark.skipif(_core.build_config()["kokkos_execution_space"] == "Serial",
                    reason="a threaded build's case (scripts/dev.sh test-openmp runs it)")
@pytest.mark.exclusive  # its own mpirun
def test_threads_beyond_the_rank_cores_warn():
    """One rank with 2 threads on one core: warned, naming the binding."""
    out, err = _run_on_one_core(ranks=1, threads=2)
    assert "PLACEMENT 2 1 True" in out
    assert err.count("pmewald warning:") == 1 and "bound to 1 core(s)" in err, err
