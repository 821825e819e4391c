"""Charge equilibration (QEq) on PME potentials, over MPI with any split of the atoms.

The charges minimise

    E(q) = sum_i chi_i q_i + 1/2 sum_i J_i q_i^2 + E_coul(q) - sum_i q_i E_ext . r_i

subject to ``sum_i q_i = Q`` (Rappe and Goddard 1991, with the periodic Ewald ``E_coul`` of a
:class:`pmewald.PME`): ``chi`` the electronegativities, ``J`` the hardnesses (both per atom;
map elements to them with :func:`per_atom`), ``E_ext`` an optional uniform external field. At
the minimum every atom has the same electronegativity ``mu``:
``chi_i + J_i q_i + phi_i(q) - E_ext . r_i = mu``. ``E_coul`` is quadratic in the charges, so
this is one linear system ``H q = mu 1 - (chi - E_ext . r)``, ``H = diag(J) + A``, ``A q`` the
potentials ``phi(q)`` of :meth:`PME.compute` with ``potentials=True`` (one PME evaluation per
product; the PME's mesh, alpha and order stay fixed after its first call, so ``A`` is one
fixed symmetric matrix).

It is solved by conjugate gradients projected on the constraint (a constraint
preconditioner): with the Jacobi preconditioner ``M = diag(J)`` (each ``J_i`` at least 0.1 of
the largest: PRECONDITIONER_FLOOR, so a tiny hardness costs no digits), each residual ``g`` is mapped
to ``z = M^-1 g - M^-1 1 (1' M^-1 g) / (1' M^-1 1)``, which sums to zero, so every step keeps
``sum q = Q`` (with the residual update of Gould, Hribar and Nocedal 2001, which keeps ``g``
free of its ``mu 1`` part so the projection loses no digits), and one solve (one PME evaluation per iteration, plus one for the start) gives
both the charges and ``mu``. It stops when the RMS of ``g - mu 1`` (the spread of the atoms'
electronegativities, energy per charge) is at most ``tolerance``. The previous solution is the
next call's starting point when a rank passes the same ids in the same order (a time step
later), else the charges passed as ``guess``, else ``Q / N``.

Every rank passes its own atoms (any split, none on some ranks) and gets their charges back in
its order; bad input raises the same ``ValueError`` on every rank.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from ._mpi.collective import agree, allmax, allsum, require_mpi
from ._checks.validate import float_array, int_array

__all__ = ["QEq", "QEqResult", "per_atom"]

# The solver's preconditioner is M = diag(max(J_i, PRECONDITIONER_FLOOR x max J)): the hardness,
# bounded below relative to the largest (physical sets span a factor of 2-5, so it is J itself).
# With M = J a tiny hardness made the projections lose digits as cond(M) (measured, 10 atoms,
# one J = 1e-12 of the others': the total charge off by 8e-5 and the charges by 4e-4 from the
# dense solve; J = 1e-200 overflowed the iterate, reported as "charges are too large"). Any
# positive diagonal M gives the same solution; with this floor the total charge holds to 6e-16
# and the charges match the dense solve to 9e-10 (tolerance 1e-11) for J = 1e-12 to 1e-320,
# in 8 iterations as at J = 5.
PRECONDITIONER_FLOOR = 0.1


def per_atom(symbols, table):
    """Per-atom values from a per-element table: ``per_atom(["O", "H", "H"], {"O": 8.7, "H": 4.5})``."""
    try:
        return np.array([float(table[s]) for s in symbols], dtype=np.float64)
    except KeyError as e:
        raise ValueError(f"no value for element {e.args[0]!r} in the table") from None


@dataclass
class QEqResult:
    """Result of :meth:`QEq.solve`.

    Attributes
    ----------
    charges : ndarray (n_local,)
        The equilibrated charges of this rank's atoms, in the order passed; they sum (over
        all ranks) to ``total_charge``.
    chemical_potential : float
        ``mu``, the equalised electronegativity (energy per charge).
    energy : float
        ``E(q)`` at the solution (global): the electronegativity, hardness, Coulomb and field
        terms, the Coulomb term ``q . phi / 2`` from the solver's last potentials.
    coulomb_energy : float
        The Coulomb part ``E_coul`` (the PME energy of the charges).
    residual : float
        RMS of ``chi_i + J_i q_i + phi_i - E_ext . r_i - mu`` at the end.
    iterations : int
        Conjugate-gradient iterations.
    evaluations : int
        PME evaluations (``potentials=True`` calls) of this solve: ``iterations + 1``.
    converged : bool
        ``residual <= tolerance``.
    warm_start : bool
        Whether this rank started from its previous solution.
    """

    charges: np.ndarray
    chemical_potential: float
    energy: float
    coulomb_energy: float
    residual: float
    iterations: int
    evaluations: int
    converged: bool
    warm_start: bool


class QEq:
    """Charge equilibration with a :class:`pmewald.PME` for the Coulomb term.

    Parameters
    ----------
    pme : pmewald.PME
        The Coulomb solver (its box, cutoff, tolerance, units and communicator). For charges
        accurate to ``tolerance`` its own tolerance must be tight enough: the potentials'
        error enters the charges through ``H^-1``.
    tolerance : float
        Stop when the RMS spread of the atoms' electronegativities is at most this (energy
        per charge, in the units of the PME's ``coulomb_constant``).
    max_iterations : int
        Raise ``RuntimeError`` (on every rank) beyond this many iterations.
    """

    def __init__(self, pme, *, tolerance=1e-6, max_iterations=200):
        require_mpi()
        tol = float(tolerance)
        if not (math.isfinite(tol) and tol > 0):
            raise ValueError(f"tolerance must be a positive finite number, got {tolerance!r}")
        if int(max_iterations) < 1:
            raise ValueError(f"max_iterations must be at least 1, got {max_iterations!r}")
        self.pme = pme
        self.tolerance = tol
        self.max_iterations = int(max_iterations)
        self._comm = pme._comm
        self._last = None  # (ids, charges) of the previous solution on this rank

    def _dot(self, a, b):
        return float(allsum(self._comm, float(np.dot(a, b)))[0])

    def _sums(self, *vectors):
        buf = np.array([float(v.sum()) for v in vectors])
        self._comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        return buf

    def _phi(self, pos, q, ids, exclusions):
        return self.pme._potentials_of(pos, q, ids, exclusions)

    def solve(self, positions, electronegativity, hardness, *, total_charge=0.0, ids=None, exclusions=None,
              external_field=None, guess=None) -> QEqResult:
        """Equilibrate the charges of the atoms passed by all ranks together (collective).

        Parameters
        ----------
        positions : array (n_local, 3)
        electronegativity, hardness : arrays (n_local,)
            ``chi_i`` (energy per charge) and ``J_i > 0`` (energy per charge squared) of
            this rank's atoms, in the PME's units (``per_atom`` maps elements to them).
        total_charge : float
            ``Q``, the same on every rank.
        ids, exclusions : optional
            As for :meth:`PME.compute` (an excluded pair has no Coulomb interaction);
            ``ids`` also key the warm start.
        external_field : array (3,), optional
            A uniform field ``E_ext``, the same on every rank: adds ``-q_i E_ext . r_i``
            (positions as passed, not wrapped).
        guess : array (n_local,), optional
            Starting charges (scaled to the total charge); default the previous solution or
            ``Q / N``.
        """
        require_mpi()
        comm = self._comm
        error, local = None, (0.0, 0.0)
        try:
            pos = float_array(positions, "positions", "(n, 3)")
            if pos.size == 0:
                pos = pos.reshape(0, 3)
            if pos.ndim != 2 or pos.shape[1] != 3:
                raise ValueError(f"positions must have shape (n, 3), got {pos.shape}")
            n = len(pos)
            chi = float_array(electronegativity, "electronegativity", "(n,)").reshape(-1)
            J = float_array(hardness, "hardness", "(n,)").reshape(-1)
            for name, v in (("electronegativity", chi), ("hardness", J)):
                if len(v) != n:
                    raise ValueError(f"{name} has {len(v)} values for {n} atoms")
                if not np.isfinite(v).all():
                    raise ValueError(f"{name} contains NaN or inf")
            if n and not (J > 0).all():
                raise ValueError("hardness must be positive")
            Q = float(total_charge)
            if not math.isfinite(Q):
                raise ValueError("total_charge must be finite")
            field = np.zeros(3) if external_field is None else float_array(external_field, "external_field", "(3,)")
            if field.shape != (3,) or not np.isfinite(field).all():
                raise ValueError("external_field must be 3 finite numbers")
            q0 = None
            if guess is not None:
                q0 = float_array(guess, "guess", "(n,)").reshape(-1)
                if len(q0) != n or not np.isfinite(q0).all():
                    raise ValueError(f"guess must be {n} finite charges")
            idv = None
            if ids is not None:
                idv = int_array(ids, "ids")
                if idv.ndim > 1 or idv.size != n:
                    raise ValueError(f"ids must have shape ({n},), got {idv.shape}")
                idv = idv.reshape(-1)
            local = (n, 0.0)
        except Exception as e:  # noqa: BLE001 - agreed: every rank raises it
            error = e
        n_total = int(agree(comm, error, local)[0])
        if n_total == 0:
            raise ValueError("no atoms were passed on any rank")
        shared = comm.allgather((Q, field.tobytes()))
        if any(v != shared[0] for v in shared):
            raise ValueError("total_charge and external_field must be the same on every rank")

        b = field @ pos.T - chi if n else np.zeros(0)  # H q = b + mu 1
        inv_m = 1.0 / np.maximum(J, PRECONDITIONER_FLOOR * float(allmax(comm, J.max() if n else 0.0)[0]))
        warm = q0 is None and self._last is not None and idv is not None and np.array_equal(self._last[0], idv)
        if q0 is None:
            q0 = self._last[1].copy() if warm else np.full(n, Q / n_total)
        # The start on the constraint: shift along M^-1 1 (the direction the projection keeps).
        s_q, s_m = self._sums(q0, inv_m)
        q = q0 + (Q - s_q) * inv_m / s_m

        def shift(g):
            # The residual update of Gould, Hribar and Nocedal (2001): g minus its multiplier
            # part mu 1 (M^-1-weighted), which the projection removes anyway. Kept whole, g
            # tends to mu 1 and its projection M^-1 g - M^-1 1 (1' M^-1 g)/(1' M^-1 1) loses
            # its digits to cancellation: measured, plain projected CG stalls at ~1e-9 x the
            # first residual and then diverges; with the shift it goes on to ~1e-15.
            mu = self._dot(inv_m, g) / s_m
            return g - mu, mu

        def rms(g):
            return math.sqrt(self._dot(g, g) / n_total)

        phi = self._phi(pos, q, idv, exclusions)
        evaluations = 1
        g, mu = shift(J * q + phi - b)  # the gradient is mu 1 at the solution
        res = rms(g)
        z = inv_m * g  # = the projection of g (1' z = 0)
        p = -z
        gz = self._dot(g, z)
        it = 0
        while res > self.tolerance:
            if it >= self.max_iterations:
                raise RuntimeError(f"QEq did not converge in {self.max_iterations} iterations (residual {res:.3g}, "
                                   f"tolerance {self.tolerance:.3g})")
            ap = self._phi(pos, p, idv, exclusions)
            evaluations += 1
            hp = J * p + ap
            php = self._dot(p, hp)
            if not math.isfinite(php):  # the same on every rank (reduced)
                raise RuntimeError(f"QEq: the iteration overflowed (p'Hp = {php}) after {it} iterations")
            if not php > 0:
                raise RuntimeError("QEq: the hardness and Coulomb matrix is not positive definite on the "
                                   "constraint (hardness too small for these distances?)")
            step = gz / php
            q = q + step * p
            phi = phi + step * ap
            g, dmu = shift(g + step * hp)
            mu += dmu
            z = inv_m * g
            gz_new = self._dot(g, z)
            p = -z + (gz_new / gz) * p
            # Rounding leaves sum p ~ 1e-17 each step: keep p on the constraint (along M^-1 1).
            p -= inv_m * (self._sums(p)[0] / s_m)
            gz = gz_new
            res = rms(g)
            it += 1
        e_coul = 0.5 * self._dot(q, phi)
        energy = self._dot(chi - (field @ pos.T if n else 0.0), q) + 0.5 * self._dot(J * q, q) + e_coul
        if idv is not None:
            self._last = (idv.copy(), q.copy())
        return QEqResult(charges=q, chemical_potential=mu, energy=energy, coulomb_energy=e_coul, residual=res,
                         iterations=it, evaluations=evaluations, converged=res <= self.tolerance,
                         warm_start=bool(warm))
