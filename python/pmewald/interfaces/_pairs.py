"""Plain Coulomb terms of listed pairs, ``k c_ij / r_ij`` (no cutoff, no screening), with forces
and virial: the scaled 1-4 terms that engines add back for pairs they exclude from the Ewald sum
(OpenMM's exceptions with a non-zero ``chargeProd``, LAMMPS's special pairs with
``0 < special_coul < 1``). Shared by :mod:`pmewald.interfaces.openmm_force` and
:mod:`pmewald.interfaces.lammps`.

Distances are minimum images in the given cell (a 1-4 pair is far shorter than half a cell
height), so the positions may be wrapped, as engines pass them.
"""

from __future__ import annotations

import numpy as np

from ..geometry.cell import minimum_image


class CoulombPairs:
    """The pairs ``(i, j)`` (indices into the positions passed to :meth:`evaluate`) and their
    charge products ``c_ij`` (e^2, already scaled), with the Coulomb constant ``k``."""

    def __init__(self, pairs, charge_products, coulomb_constant):
        self.pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        self.products = np.asarray(charge_products, dtype=np.float64).reshape(-1)
        if len(self.products) != len(self.pairs):
            raise ValueError(f"{len(self.pairs)} pairs but {len(self.products)} charge products")
        self.k = float(coulomb_constant)

    def __len__(self):
        return len(self.pairs)

    def evaluate(self, positions, box, n_atoms=None):
        """``(energy, forces (n, 3), virial (3, 3))`` of ``sum k c_ij / r_ij``; ``n`` is
        ``n_atoms`` or ``len(positions)``. The virial is ``sum r_ij (x) F_ij`` (pmewald's
        ``W = -dE/d(eps)``). A pair at zero distance raises ``ValueError``."""
        pos = np.asarray(positions, dtype=np.float64)
        n = len(pos) if n_atoms is None else int(n_atoms)
        forces = np.zeros((n, 3))
        if len(self.pairs) == 0:
            return 0.0, forces, np.zeros((3, 3))
        i, j = self.pairs[:, 0], self.pairs[:, 1]
        d = minimum_image(box, pos[i] - pos[j])
        r2 = np.einsum("ij,ij->i", d, d)
        if np.any(r2 == 0.0):
            bad = int(np.flatnonzero(r2 == 0.0)[0])
            raise ValueError(f"the scaled pair ({i[bad]}, {j[bad]}) has its two atoms at the same place")
        e = self.k * self.products / np.sqrt(r2)
        f = (e / r2)[:, None] * d  # force on i; -f on j
        for axis in range(3):
            forces[:, axis] += np.bincount(i, f[:, axis], minlength=n) - np.bincount(j, f[:, axis], minlength=n)
        return float(e.sum()), forces, d.T @ f
