"""The PME solver (:class:`PME`) and its result (:class:`PMEResult`), ``pmewald.PME``.

Only ``PME`` and ``PMEResult`` are public; the modules are the solver's parts:

- ``solver``       the :class:`PME` class: options, the call path, rollback of a failed call;
- ``tuning``       the automatic choice of differentiation, order, alpha and mesh, and its
                   state (what a failed call restores);
- ``charge_sets``  compute with m sets of charges at once (charges of shape (n, m));
- ``potentials``   per-atom potentials and fields, and probes (points without charge);
- ``slab``         2-D periodic slabs: the vacuum gap and the Yeh-Berkowitz correction;
- ``result``       :class:`PMEResult`, the energy terms, the estimate report.

The numerical work is in the C++ core (``pmewald._core.PMESolver``).
"""

from .result import PMEResult
from .solver import PME

__all__ = ["PME", "PMEResult"]
