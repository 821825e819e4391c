"""pmewald: particle-mesh Ewald electrostatics for periodic systems, over MPI.

The numerical core is C++ (Kokkos kernels, FFTW3, MPI) in :mod:`pmewald._core`;
this package is its Python face. Every entry point that takes ``comm=`` accepts
any mpi4py intracommunicator and defaults to ``MPI.COMM_WORLD``.

Imported under MPI with more than one rank, pmewald makes an exception that nothing
catches call ``MPI_Abort`` (as ``python -m mpi4py`` does), so one failing rank ends the
job instead of leaving the others waiting; ``PMEWALD_ABORT_ON_EXCEPTION=0`` or
:func:`abort_on_uncaught_exception` turns that off. See docs/reliability.md.
"""

import importlib as _importlib
import importlib.abc as _importlib_abc
import importlib.util as _importlib_util
import sys as _sys

from mpi4py import MPI as _MPI  # noqa: F401  (initialises MPI before the core loads)

from . import _core
from ._mpi.abort import abort_on_uncaught_exception, install_at_import as _install_abort_policy
from ._config import check_mpi_match, config, show_config
from ._version import __version__
from . import units
from .fft import DistributedFFT, DistributedRealFFT
from .pme import PME, PMEResult

#: Documented module paths of modules that now live in the package's folders (the layout:
#: docs/architecture.md), and the engines' short names (``pmewald.lammps``, issue 29).
#: ``import pmewald.ase`` gives the module ``pmewald.interfaces.ase`` itself (one module object
#: under two names), imported only when asked for.
MOVED_MODULES = {
    "pmewald.ase": "pmewald.interfaces.ase",
    "pmewald.openmm": "pmewald.interfaces.openmm",
    "pmewald.lammps": "pmewald.interfaces.lammps",
    "pmewald.reference2d": "pmewald.reference.slab",
    "pmewald.comm_model": "pmewald.bench.scale.comm_model",
}


class _MovedModuleFinder(_importlib_abc.MetaPathFinder, _importlib_abc.Loader):
    """Finds the short names of MOVED_MODULES and loads them as their modules."""

    def find_spec(self, name, path=None, target=None):
        if name in MOVED_MODULES:
            return _importlib_util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        return _importlib.import_module(MOVED_MODULES[spec.name])

    def exec_module(self, module):
        pass  # already executed under its own name


if not any(isinstance(f, _MovedModuleFinder) for f in _sys.meta_path):
    _sys.meta_path.insert(0, _MovedModuleFinder())

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
