"""The PME energy as a differentiable function of positions, charges and cell, for automatic
differentiation frameworks (:mod:`pmewald.interfaces.torch`, :mod:`pmewald.interfaces.jax`)
and for NumPy callers; under MPI each rank differentiates its own atoms.

pmewald computes, in one call, what the first derivatives need: the forces ``F = -dE/dr``,
the potentials ``phi = dE/dq`` and the virial ``W = -dE/d(eps)``. From them:

- ``dE/dr_i = -F_i``;
- ``dE/dq_i = phi_i`` (every term: real, reciprocal, self, background, exclusions);
- ``dE/dh = h^-T (-W^T + sum_i r_i (x) F_i)`` for the cell ``h`` (rows the lattice vectors) at
  fixed Cartesian positions ``r_i`` (the positions as passed: the derivative depends on which
  periodic image is passed, as it must).

The function is made smooth by fixing its parameters: ``differentiation="ad"`` (its forces are
the exact gradient of its energy; ``"ik"`` forces are not), double precision, and alpha, mesh and
order fixed: given, or chosen for ``tolerance`` at the first call and then kept for every later
call and cell (a re-chosen mesh would make the energy jump). The real-space cutoff makes the
energy jump by ``erfc(alpha rc)``-small amounts where pairs cross it.

MPI: the energy is the total of all ranks' atoms, the same on every rank. Each rank passes its
own atoms (any split) and gets the gradients of that energy with respect to them, with no
communication in the backward pass. The cell is an input every rank holds: its gradient is
split, each rank getting ``h^-T sum_{its atoms} r_i (x) F_i`` and rank 0 also
``-h^-T W^T``, so that the sum over the ranks is ``dE/dh`` (sum it, ``MPI.Allreduce``, for the
stress; on one rank it is whole). This is the convention that makes the gradients of anything
replicated over the ranks come out right when summed, e.g. shared model parameters: every rank
must backpropagate the same cotangent of the energy (the same loss of it), and the parameters'
gradients are summed over the ranks, not averaged.

Charge sets: charges of shape (n, m) give m energies (m,) from one call (shared migration,
pair search, stencils; docs/potentials.md); their gradients are the cotangent-weighted sums.

Forces with respect to charges, exactly and cheaply in a few directions: the forces are a
quadratic form of the charges, ``F(q) = B(q, q)``, so the derivative along a charge direction
``t`` is ``dF[t] = 2 B(q, t) = (F(q + t) - F(q - t)) / 2``, exact, and one call with 2S + 1
charge sets gives it for S directions (:meth:`DifferentiableEnergy.forces_along_charges`). That
is forward-mode differentiation, a call per few parameters: what fitting per-species charges to
reference forces needs (:class:`pmewald.interfaces.jax.PMEForces`, ``examples/autograd_fit_charges.py``).

Not supported: other second derivatives (the Hessian in positions, forces differentiated in
reverse mode with respect to the charges or positions: they would need the derivatives of the
forces, which pmewald does not compute); the adapters raise ``NotImplementedError`` when asked
for them. Slab geometry.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._mpi.collective import check_comm
from ..pme import PME

__all__ = ["DifferentiableEnergy", "Evaluation", "SECOND_ORDER_MESSAGE"]

SECOND_ORDER_MESSAGE = ("pmewald's differentiable energy has first derivatives only (forces, potentials, the cell "
                        "gradient): second derivatives (a Hessian, or a loss on forces differentiated with respect "
                        "to charges, positions or the cell) are not supported")


@dataclass
class Evaluation:
    """One call's energy and what its gradients need (this rank's atoms). With m charge sets
    every array gains a leading set axis: ``energy`` (m,), ``forces`` (m, n, 3),
    ``potentials`` (m, n), ``cell_gradient`` (m, 3, 3)."""

    energy: np.ndarray
    forces: np.ndarray
    potentials: np.ndarray | None
    cell_gradient: np.ndarray
    virial: np.ndarray
    sets: bool

    def vjp(self, cotangent):
        """``(dE/dr, dE/dq, dE/dh)`` weighted by the energy's cotangent (a number, or (m,) for
        charge sets): this rank's atoms and its share of the cell gradient."""
        g = np.asarray(cotangent, dtype=np.float64)
        if self.sets:
            d_pos = -np.einsum("c,cij->ij", g, self.forces)
            d_q = None if self.potentials is None else (g[:, None] * self.potentials).T
            d_cell = np.einsum("c,cij->ij", g, self.cell_gradient)
        else:
            g = float(g)
            d_pos = -g * self.forces
            d_q = None if self.potentials is None else g * self.potentials
            d_cell = g * self.cell_gradient
        return d_pos, d_q, d_cell


class DifferentiableEnergy:
    """The PME energy ``E(r, q, h)`` with its first derivatives (see the module docstring).

    Parameters
    ----------
    cutoff : float
        Real-space cutoff.
    tolerance : float
        The target of the parameter choice made at the first call (:class:`pmewald.PME`),
        unless ``alpha``, ``mesh`` and ``order`` are all given.
    alpha, mesh, order : optional
        Fixed parameters (all three: nothing is chosen).
    comm : mpi4py intracommunicator, optional
        Default ``MPI.COMM_WORLD``.
    coulomb_constant : float
        Default 1 (Gaussian units); :mod:`pmewald.units`.
    **pme_options
        Passed to :class:`pmewald.PME` (``comm_mode``, ``skin``, ``overlap``, ``error_model``);
        ``differentiation`` may only be ``"ad"`` and ``precision`` only ``"double"``.

    Notes
    -----
    Collective: every call, on every rank of ``comm``.
    """

    def __init__(self, cutoff, *, tolerance=1e-5, alpha=None, mesh=None, order=None, comm=None,
                 coulomb_constant=1.0, **pme_options):
        if pme_options.get("differentiation", "ad") != "ad":
            raise ValueError("the differentiable energy needs differentiation='ad': ik forces are not the gradient "
                             "of the energy")
        if pme_options.get("precision", "double") != "double":
            raise ValueError("the differentiable energy needs precision='double' (mixed-precision forces are not the "
                             "gradient of the energy to rounding)")
        if pme_options.get("slab"):
            raise NotImplementedError("slab geometry is not supported by the differentiable energy")
        self.comm = check_comm(comm)
        self.cutoff = float(cutoff)
        self.tolerance = float(tolerance)
        self.coulomb_constant = float(coulomb_constant)
        self._options = dict(pme_options, differentiation="ad", precision="double")
        self._fixed = dict(alpha=alpha, mesh=mesh, order=order)
        self.pme = None
        self._cell = None

    @property
    def parameters(self):
        """The solver's :attr:`pmewald.PME.parameters` (None before the first call)."""
        return None if self.pme is None else self.pme.parameters

    def _solver(self, cell, positions, charges, ids, exclusions):
        """The PME with fixed parameters for `cell` (collective): made at the first call (after
        a choice for the tolerance on this call's atoms where the parameters are not all given),
        moved to a new cell with set_box afterwards."""
        if self.pme is None:
            fixed = self._fixed
            opts = dict(self._options, coulomb_constant=self.coulomb_constant, comm=self.comm)
            if any(v is None for v in fixed.values()):
                tuner = PME(cell, self.cutoff, tolerance=self.tolerance, **{k: v for k, v in fixed.items() if v},
                            **opts)
                q = charges if charges.ndim == 1 else charges[:, int(np.argmax((charges ** 2).sum(axis=0)))]
                tuner.compute(positions, q, ids=ids, exclusions=exclusions)
                p = tuner.parameters
                fixed = dict(alpha=p["alpha"], mesh=p["mesh"], order=p["order"])
                del tuner
            self.pme = PME(cell, self.cutoff, tolerance=self.tolerance, **fixed, **opts)
            self._cell = cell.copy()
        elif not np.array_equal(cell, self._cell):
            self.pme.set_box(cell)
            self._cell = cell.copy()
        return self.pme

    def evaluate(self, positions, charges, cell, ids=None, exclusions=None, potentials=True) -> Evaluation:
        """Collective: the energy of all ranks' atoms and this rank's share of its gradients.

        ``positions`` (n, 3), ``charges`` (n,) or (n, m), ``cell`` (3, 3) rows (the same on
        every rank), ``ids`` and ``exclusions`` as in :meth:`pmewald.PME.compute`;
        ``potentials=False`` skips ``dE/dq`` (cheaper: no potential pass)."""
        pos = np.ascontiguousarray(positions, dtype=np.float64)
        q = np.ascontiguousarray(charges, dtype=np.float64)
        cell = np.ascontiguousarray(cell, dtype=np.float64).reshape(3, 3)
        pme = self._solver(cell, pos, q, ids, exclusions)
        # No error estimate per call: it is evaluated anew for every new sum of squared charges
        # (a fit changes them every call); the first call's choice made one for the tolerance.
        res = pme.compute(pos, q, ids=ids, exclusions=exclusions, potentials=potentials, estimate=False)
        sets = q.ndim == 2
        forces, virial = np.asarray(res.forces), np.asarray(res.virial)
        inverse_t = np.linalg.inv(cell).T
        local = np.einsum("ia,...ib->...ab", pos, forces)  # sum_i r_i (x) F_i over this rank's atoms
        if self.comm.Get_rank() == 0:
            local = local - np.swapaxes(virial, -1, -2)
        return Evaluation(energy=np.asarray(res.energy, dtype=np.float64), forces=forces,
                          potentials=np.asarray(res.potentials) if potentials else None,
                          cell_gradient=inverse_t @ local, virial=virial, sets=sets)

    def forces_along_charges(self, positions, charges, cell, directions, ids=None, exclusions=None):
        """Collective: ``(E, F, dE, dF)``, the energy and this rank's forces at ``charges`` (n,) and
        their exact derivatives along the charge ``directions`` (n, S): ``dE`` (S,), ``dF`` (S, n,
        3). One call with the 2S + 1 charge sets ``q, q + t_s, q - t_s`` (the energy and forces
        are quadratic in the charges: see the module docstring)."""
        q = np.ascontiguousarray(charges, dtype=np.float64).reshape(-1)
        t = np.asarray(directions, dtype=np.float64).reshape(len(q), -1)
        stacked = np.concatenate([q[:, None], q[:, None] + t, q[:, None] - t], axis=1)
        ev = self.evaluate(positions, stacked, cell, ids, exclusions, potentials=False)
        n_dir = t.shape[1]
        plus, minus = slice(1, 1 + n_dir), slice(1 + n_dir, 1 + 2 * n_dir)
        return (float(ev.energy[0]), ev.forces[0], 0.5 * (ev.energy[plus] - ev.energy[minus]),
                0.5 * (ev.forces[plus] - ev.forces[minus]))
