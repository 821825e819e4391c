"""Configuration report, MPI library agreement and communicator handling."""

import io
import subprocess
import sys

import pytest
from mpi4py import MPI

import pmewald
from pmewald import _core


def test_show_config_reports_every_component():
    buf = io.StringIO()
    c = pmewald.show_config(file=buf)
    text = buf.getvalue()
    assert f"pmewald {pmewald.__version__}" in text
    for key in ("mpi_vendor", "mpi_version", "mpi4py_mpi_version", "fftw_version", "kokkos_version",
                "kokkos_execution_space", "pair_kernel_isa", "compiler", "cxx_flags"):
        assert c[key], key
    assert c["fftw_version"].startswith("fftw-3")
    assert c["kokkos_execution_space"] in text
    assert c["pair_kernel_isa"] in text
    assert c["mpi_version"] in text and c["mpi4py_mpi_version"] in text
    assert "-O" in c["cxx_flags"] or c["build_type"] in ("Release", "RelWithDebInfo")


def test_extension_and_mpi4py_use_the_same_mpi():
    c = pmewald.config()
    assert (c["mpi_vendor"], c["mpi_version"]) == (c["mpi4py_mpi_vendor"], c["mpi4py_mpi_version"])
    pmewald.check_mpi_match()  # must not raise


def test_mpi_mismatch_is_an_explicit_error():
    ext = dict(_core.build_config())
    side = {"mpi4py_mpi_vendor": "MPICH", "mpi4py_mpi_version": "4.1.2"}
    with pytest.raises(RuntimeError, match="MPI mismatch.*MPICH 4.1.2"):
        pmewald.check_mpi_match(ext, side)
    side = {"mpi4py_mpi_vendor": ext["mpi_vendor"], "mpi4py_mpi_version": "0.0.1"}
    with pytest.raises(RuntimeError, match="MPI mismatch"):
        pmewald.check_mpi_match(ext, side)


@pytest.mark.parametrize("bad", [0, "COMM_WORLD", object(), 3.5, [MPI.COMM_WORLD]])
def test_non_communicator_raises_type_error(bad):
    with pytest.raises(TypeError, match="mpi4py intracommunicator"):
        _core.comm_info(bad)


def test_comm_null_raises_type_error():
    with pytest.raises(TypeError, match="COMM_NULL"):
        _core.comm_info(MPI.COMM_NULL)


def test_none_means_comm_world():
    assert _core.comm_info(None) == (MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size())


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
def test_communicators_world_dup_and_split(comm):
    assert _core.comm_info(comm) == (comm.Get_rank(), comm.Get_size())
    dup = comm.Dup()
    assert _core.comm_info(dup) == (comm.Get_rank(), comm.Get_size())
    dup.Free()
    # A sub-communicator: even and odd ranks. Collective work inside one half
    # must not involve the other half (it would hang if it did, since the two
    # halves run different numbers of collectives).
    color = comm.Get_rank() % 2
    sub = comm.Split(color, comm.Get_rank())
    rank, size = _core.comm_info(sub)
    assert (rank, size) == (sub.Get_rank(), sub.Get_size())
    repeats = 3 if color == 0 else 1
    for _ in range(repeats):
        with pytest.raises(ValueError, match="problem on sub-rank 0"):
            _core.agree_or_throw(sub, "problem on sub-rank 0" if rank == 0 else "")
    _core.agree_or_throw(sub, "")
    sub.Free()
    comm.Barrier()


@pytest.mark.mpi(ranks=[2, 3, 4])
def test_error_on_one_rank_is_raised_on_every_rank(comm):
    last = comm.Get_size() - 1
    msg = "bad input on the last rank" if comm.Get_rank() == last else ""
    with pytest.raises(ValueError, match=f"bad input on the last rank.*rank {last}"):
        _core.agree_or_throw(comm, msg)
    # The communicator is still usable afterwards.
    assert comm.allreduce(1) == comm.Get_size()


def test_command_line_version_and_info():
    out = subprocess.run([sys.executable, "-m", "pmewald", "--version"], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == f"pmewald {pmewald.__version__}"
    out = subprocess.run([sys.executable, "-m", "pmewald", "info"], capture_output=True, text=True,
                         check=True).stdout
    assert "FFTW" in out and "Kokkos" in out and "MPI" in out
