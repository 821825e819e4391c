"""pmewald: particle-mesh Ewald electrostatics for periodic systems, over MPI.

The numerical core is C++ (Kokkos kernels, FFTW3, MPI) in :mod:`pmewald._core`;
this package is its Python face. Every entry point that takes ``comm=`` accepts
any mpi4py intracommunicator and defaults to ``MPI.COMM_WORLD``.

Imported under MPI with more than one rank, pmewald makes an exception that nothing
catches call ``MPI_Abort`` (as ``python -m mpi4py`` does), so one failing rank ends the
job instead of leaving the others waiting; ``PMEWALD_ABORT_ON_EXCEPTION=0`` or
:func:`abort_on_uncaught_exception` turns that off. See docs/reliability.md.
"""

from mpi4py import MPI as _MPI  # noqa: F401  (initialises MPI before the core loads)

from . import _core
from ._abort import abort_on_uncaught_exception, install_at_import as _install_abort_policy
from ._config import check_mpi_match, config, show_config
from ._version import __version__
from . import units
from .fft import DistributedFFT, DistributedRealFFT
from .pme import PME, PMEResult

_install_abort_policy()  # several ranks: an uncaught exception aborts the job (docs/reliability.md)

__all__ = [
    "__version__",
    "abort_on_uncaught_exception",
    "DistributedFFT",
    "DistributedRealFFT",
    "PME",
    "PMEResult",
    "check_mpi_match",
    "config",
    "show_config",
    "units",
]
