"""pmewald: particle-mesh Ewald electrostatics for periodic systems, over MPI.

The numerical core is C++ (Kokkos kernels, FFTW3, MPI) in :mod:`pmewald._core`;
this package is its Python face. Every entry point that takes ``comm=`` accepts
any mpi4py intracommunicator and defaults to ``MPI.COMM_WORLD``.
"""

from mpi4py import MPI as _MPI  # noqa: F401  (initialises MPI before the core loads)

from . import _core
from ._config import check_mpi_match, config, show_config
from ._version import __version__
from . import units
from .fft import DistributedFFT, DistributedRealFFT
from .pme import PME, PMEResult

__all__ = [
    "__version__",
    "DistributedFFT",
    "DistributedRealFFT",
    "PME",
    "PMEResult",
    "check_mpi_match",
    "config",
    "show_config",
    "units",
]
