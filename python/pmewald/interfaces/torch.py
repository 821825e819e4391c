"""The PME energy as a PyTorch module with autograd in positions, charges and cell, on one or
many MPI ranks.

    import torch
    from pmewald.interfaces.torch import PMEEnergy

    energy = PMEEnergy(cutoff=8.0, tolerance=1e-5, coulomb_constant=units.EV_ANGSTROM)
    e = energy(positions, charges, cell)                 # tensors; any of them may require grad
    e.backward()                                         # positions.grad = -forces, charges.grad = phi

What is computed, the fixed parameters, the MPI convention (each rank its own atoms; the cell
gradient split over the ranks, to be summed) and the charge sets are those of
:mod:`pmewald.interfaces.autograd`. The potentials (``dE/dq``) are computed only when the charges
require grad. Tensors may be float32 or float64 and on any device: pmewald computes in double
precision on the CPU and returns the inputs' dtype and device. A second derivative (a
``create_graph=True`` gradient differentiated again: ``gradgradcheck``, a loss on forces
differentiated with respect to the charges) raises ``NotImplementedError``
(:data:`pmewald.interfaces.autograd.SECOND_ORDER_MESSAGE`).

PyTorch is an optional dependency: ``pip install pmewald[torch]``; the development set-up
installs it with ``PMEWALD_EXTRAS=torch`` (docs/engines.md says why not by default).
"""

from __future__ import annotations

import numpy as np
import torch

from .autograd import SECOND_ORDER_MESSAGE, DifferentiableEnergy

__all__ = ["PMEEnergy"]


def _numpy(t):
    return t.detach().to("cpu", torch.float64).numpy()


class _FirstOrderOnly(torch.autograd.Function):
    """The identity on a gradient, tied to the inputs it is a gradient for: differentiating it
    again raises pmewald's message instead of treating the forces as constants."""

    @staticmethod
    def forward(ctx, value, *inputs):
        return value.clone()

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError(SECOND_ORDER_MESSAGE)


class _Energy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, positions, charges, cell, function, ids, exclusions, owner):
        ev = function.evaluate(_numpy(positions), _numpy(charges), _numpy(cell), ids, exclusions,
                               potentials=bool(ctx.needs_input_grad[1]))
        owner.last = ev
        ctx.evaluation = ev
        ctx.save_for_backward(positions, charges, cell)
        return torch.as_tensor(ev.energy, dtype=positions.dtype, device=positions.device)

    @staticmethod
    def backward(ctx, cotangent):
        positions, charges, cell = ctx.saved_tensors
        d_pos, d_q, d_cell = ctx.evaluation.vjp(_numpy(cotangent))
        out = []
        for value, like, needed in ((d_pos, positions, ctx.needs_input_grad[0]),
                                    (d_q, charges, ctx.needs_input_grad[1]), (d_cell, cell, ctx.needs_input_grad[2])):
            if not needed:
                out.append(None)
                continue
            t = torch.as_tensor(np.asarray(value), dtype=like.dtype, device=like.device)
            out.append(_FirstOrderOnly.apply(t, positions, charges, cell) if torch.is_grad_enabled() else t)
        return (*out, None, None, None, None)


class PMEEnergy(torch.nn.Module):
    """A differentiable PME energy: ``forward(positions, charges, cell, ids=None, exclusions=None)``.

    Parameters are those of :class:`pmewald.interfaces.autograd.DifferentiableEnergy`
    (``cutoff``, ``tolerance`` or ``alpha``/``mesh``/``order``, ``comm``,
    ``coulomb_constant``, ...). ``positions`` (n, 3), ``charges`` (n,) or (n, m) (m charge
    sets: m energies), ``cell`` (3, 3) tensors; ``ids`` and ``exclusions`` integer arrays (as
    :meth:`pmewald.PME.compute`). Returns the energy, a 0-d tensor (or (m,)), the same on every
    rank. ``last`` holds the last :class:`pmewald.interfaces.autograd.Evaluation` (forces,
    potentials, virial as NumPy arrays).
    """

    def __init__(self, cutoff, **options):
        super().__init__()
        self.function = DifferentiableEnergy(cutoff, **options)
        self.last = None

    @property
    def pme_parameters(self):
        """The solver's :attr:`pmewald.PME.parameters` (None before the first call)."""
        return self.function.parameters

    def forward(self, positions, charges, cell, ids=None, exclusions=None):
        ids = None if ids is None else np.asarray(ids, dtype=np.int64)
        exclusions = None if exclusions is None else np.asarray(exclusions, dtype=np.int64)
        return _Energy.apply(positions, charges, cell, self.function, ids, exclusions, self)
