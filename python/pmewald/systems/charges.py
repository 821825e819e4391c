"""Random point charges in a (possibly triclinic) cell, reproducible from their seed."""

from __future__ import annotations

import numpy as np

from ..geometry.cell import minimum_image
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
    placed = 0
    attempts = 0
    while placed < n:
        attempts += 1
        if attempts > 1000 * n + 1000:
            raise RuntimeError("could not place charges; reduce min_distance")
        x = rng.random(3) @ b
        if placed > 0 and min_distance > 0:
            d = minimum_image(b, pos[:placed] - x)
            if np.min(np.einsum("ij,ij->i", d, d)) < min_distance ** 2:
                continue
        pos[placed] = x
        placed += 1
    q = rng.uniform(-1.0, 1.0, n)
    if neutral:
        q -= q.mean()
    return System(box=b, positions=pos, charges=q, ids=np.arange(n, dtype=np.int64),
                  exclusions=_no_exclusions(), name=f"random_charges n={n}")
