"""Random point charges in a (possibly triclinic) cell, reproducible from their seed."""

from __future__ import annotations

import numpy as np

from ..geometry.cell import cell_heights, minimum_image
from .system import System, _as_box_rows, _no_exclusions


def random_charges(n, box, neutral=True, seed=0, min_distance=None):
    """Random point charges placed uniformly in a (possibly triclinic) cell.

    Positions are drawn uniformly in the cell and rejected when closer than
    ``min_distance`` (minimum image) to an already placed atom.  Charges are
    uniform in ``[-1, 1]``; with ``neutral=True`` the mean is subtracted so
    the total charge is zero (to rounding).

    Parameters
    ----------
    n : int
        Number of charges.
    box : float or array_like
        Cube side, orthorhombic lengths, or 3x3 rows.
    neutral : bool
        Make the system neutral.
    seed : int
        Seed for :func:`numpy.random.default_rng`.
    min_distance : float, optional
        Minimum pair distance; default ``0.3 * (V / n) ** (1/3)``.

    Returns
    -------
    System
    """
    n = int(n)
    if n < 1:
        raise ValueError("n must be positive")
    b = _as_box_rows(box)
    vol = abs(float(np.linalg.det(b)))
    if min_distance is None:
        min_distance = 0.3 * (vol / n) ** (1.0 / 3.0)
    rng = np.random.default_rng(seed)
    pos = np.empty((n, 3))
    grid = _PlacedCells(b, min_distance)
    placed = 0
    attempts = 0
    while placed < n:
        attempts += 1
        if attempts > 1000 * n + 1000:
            raise RuntimeError("could not place charges; reduce min_distance")
        x = rng.random(3) @ b
        if placed > 0 and min_distance > 0 and grid.too_close(pos, x):
            continue
        pos[placed] = x
        grid.add(placed, x)
        placed += 1
    q = rng.uniform(-1.0, 1.0, n)
    if neutral:
        q -= q.mean()
    return System(box=b, positions=pos, charges=q, ids=np.arange(n, dtype=np.int64),
                  exclusions=_no_exclusions(), name=f"random_charges n={n}")


class _PlacedCells:
    """The placed atoms by cell of a grid whose cells are at least ``min_distance`` high, so
    every atom within ``min_distance`` of a point (any image) is in the 27 cells around it:
    the rejection test looks at those instead of every atom placed (the same decisions; it was
    quadratic, 28 s for 6,000 atoms)."""

    def __init__(self, box, min_distance):
        self.box, self.inv, self.md2 = box, np.linalg.inv(box), min_distance ** 2
        self.ortho = not np.any(box - np.diag(np.diag(box)))
        nc = np.maximum(1, np.floor(cell_heights(box) / min_distance)) if min_distance > 0 else np.ones(3)
        self.nc = [int(v) for v in nc]
        self.cells = {}
        # The cells around a cell, as (i, j, k) offsets (wrapped per axis when used).
        self.offsets = [(i, j, k) for i in (-1, 0, 1) for j in (-1, 0, 1) for k in (-1, 0, 1)]

    def too_close(self, pos, x):
        """Whether an atom of pos lies closer than min_distance to x (minimum image)."""
        near = self.near(x)
        if not near.size:
            return False
        # Rounded fractional displacements first: the minimum image is no longer, so a hit
        # there is one; in an orthorhombic cell they are the minimum images.
        frac = (pos[near] - x) @ self.inv
        d0 = (frac - np.round(frac)) @ self.box
        if np.min(np.einsum("ij,ij->i", d0, d0)) < self.md2:
            return True
        if self.ortho:
            return False
        d = minimum_image(self.box, pos[near] - x)
        return bool(np.min(np.einsum("ij,ij->i", d, d)) < self.md2)

    def _cell(self, x):
        s = x @ self.inv
        return [int((v - np.floor(v)) * m) % m for v, m in zip(s.tolist(), self.nc)]

    def add(self, i, x):
        c = self._cell(x)
        self.cells.setdefault((c[0] * self.nc[1] + c[1]) * self.nc[2] + c[2], []).append(i)

    def near(self, x):
        c = self._cell(x)
        n0, n1, n2 = self.nc
        keys = {(((c[0] + a) % n0) * n1 + (c[1] + b) % n1) * n2 + (c[2] + d) % n2 for a, b, d in self.offsets}
        return np.array([i for k in keys for i in self.cells.get(k, ())], dtype=np.int64)
