"""Build and runtime configuration: what pmewald was built with and runs on."""

from __future__ import annotations

import sys

from . import _core
from ._version import __version__


def _mpi4py_mpi() -> dict:
    import mpi4py
    from mpi4py import MPI

    vendor, version = MPI.get_vendor()
    return {
        "mpi4py_version": mpi4py.__version__,
        "mpi4py_mpi_vendor": vendor,
        "mpi4py_mpi_version": ".".join(str(v) for v in version),
        "mpi4py_mpi_library": MPI.Get_library_version().strip().rstrip("\x00"),
    }


def check_mpi_match(extension: dict | None = None, mpi4py_side: dict | None = None) -> None:
    """Raise ``RuntimeError`` if mpi4py and the extension use different MPI libraries.

    The extension records the MPI vendor and version it was compiled against;
    mpi4py records its own. Passing communicators between them is only sound
    when both are the same library. The two dictionaries default to the live
    values (``_core.build_config()`` and mpi4py's); tests pass their own.
    """
    ext = extension if extension is not None else _core.build_config()
    side = mpi4py_side if mpi4py_side is not None else _mpi4py_mpi()
    ours = (ext["mpi_vendor"], ext["mpi_version"])
    theirs = (side["mpi4py_mpi_vendor"], side["mpi4py_mpi_version"])
    if ours != theirs:
        raise RuntimeError(
            "MPI mismatch: the pmewald extension was built against "
            f"{ours[0]} {ours[1]} but mpi4py uses {theirs[0]} {theirs[1]}. "
            "Rebuild mpi4py against the same MPI (pip install --no-binary mpi4py "
            "mpi4py with MPICC pointing at that MPI's mpicc) or rebuild pmewald."
        )


def config() -> dict:
    """All configuration facts as a dictionary of strings."""
    c = {"pmewald_version": __version__, "python": sys.version.split()[0]}
    ext = _core.build_config()
    c.update({
        "core_version": ext["version"],
        "mpi_vendor": ext["mpi_vendor"],
        "mpi_version": ext["mpi_version"],
        "mpi_standard": ext["mpi_standard"],
        "mpi_library": ext["mpi_library"],
        "fftw_version": ext["fftw_version"],
        "kokkos_version": ext["kokkos_version"],
        "kokkos_execution_space": ext["kokkos_execution_space"],
        "kokkos_threads": ext["kokkos_threads"],
        "fftw_threads": ext["fftw_threads"],
        "affinity_cores": ext["affinity_cores"],
        "pair_kernel_isa": ext["pair_kernel_isa"],
        "compiler": ext["compiler"],
        "cxx_flags": ext["cxx_flags"],
        "build_type": ext["build_type"],
    })
    c.update(_mpi4py_mpi())
    import numpy

    c["numpy_version"] = numpy.__version__
    return c


def show_config(file=None, comm=None) -> dict:
    """Print pmewald's configuration (on rank 0 of ``comm``) and return it.

    Shows the pmewald version, the MPI library the extension was built with and
    the one mpi4py uses, FFTW, Kokkos (version, execution space and threads per
    rank), the job's threads against the cores they may use (collective over
    ``comm``: the busiest node; flagged when oversubscribed), the
    compiler and flags, and the instruction set the real-space pair kernel
    chose for this CPU. Raises ``RuntimeError`` on every rank if the extension
    and mpi4py use different MPI libraries.
    """
    rank, size = _core.comm_info(comm)
    c = config()
    placement = _core.thread_placement(comm)
    c.update({f"placement_{k}": str(v) for k, v in placement.items()})
    if rank == 0:
        out = file if file is not None else sys.stdout
        lines = [
            f"pmewald {c['pmewald_version']} (Python {c['python']}, NumPy {c['numpy_version']})",
            f"  MPI (extension built with): {c['mpi_vendor']} {c['mpi_version']}, MPI standard {c['mpi_standard']}",
            f"  MPI (mpi4py {c['mpi4py_version']} uses):  {c['mpi4py_mpi_vendor']} {c['mpi4py_mpi_version']}",
            f"  MPI library at run time:    {c['mpi_library'].splitlines()[0] if c['mpi_library'] else '?'}",
            f"  ranks in communicator:      {size}",
            f"  FFTW:                       {c['fftw_version']}",
            f"  Kokkos:                     {c['kokkos_version']} ({c['kokkos_execution_space']} execution space, "
            f"{c['kokkos_threads']} thread(s) per rank; FFTW: {c['fftw_threads']})",
            f"  threads and cores:          {placement['description']}"
            + (" -- OVERSUBSCRIBED (docs/install.md, Threads and ranks)" if placement["oversubscribed"] else ""),
            f"  vectorised kernels:         {c['pair_kernel_isa']} (pair kernel, spread, gather)",
            f"  compiler:                   {c['compiler']}",
            f"  flags:                      {c['cxx_flags']} [{c['build_type']}]",
        ]
        print("\n".join(lines), file=out, flush=True)
    check_mpi_match()
    return c
