"""The :class:`System` every generator returns (box rows are lattice vectors, ids
``0..n-1`` in storage order, exclusions as id pairs), and what applies to any system:
:func:`displace`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import numpy as np


@dataclass
class System:
    """A periodic system of point charges.

    Attributes
    ----------
    box : numpy.ndarray, shape (3, 3)
        Lattice vectors as rows.
    positions : numpy.ndarray, shape (n, 3)
        Cartesian positions.
    charges : numpy.ndarray, shape (n,)
        Charges (elementary-charge units).
    ids : numpy.ndarray of int64, shape (n,)
        Atom ids (``0..n-1`` for generated systems).
    exclusions : numpy.ndarray of int64, shape (m, 2)
        Excluded pairs by id; ``(0, 2)`` when there are none.
    name : str
        Short description.
    nearest_neighbor_distance : float or None
        Nearest cation-anion distance ``r0`` (crystals only).
    madelung_reference : float or None
        Literature Madelung constant (crystals only).
    """

    box: np.ndarray
    positions: np.ndarray
    charges: np.ndarray
    ids: np.ndarray
    exclusions: np.ndarray
    name: str
    nearest_neighbor_distance: Optional[float] = None
    madelung_reference: Optional[float] = None

    @property
    def n_atoms(self) -> int:
        """Number of atoms."""
        return int(self.positions.shape[0])

    @property
    def volume(self) -> float:
        """Cell volume."""
        return abs(float(np.linalg.det(self.box)))


def _no_exclusions():
    return np.zeros((0, 2), dtype=np.int64)


def _as_box_rows(box):
    b = np.asarray(box, dtype=float)
    if b.ndim == 0:
        b = np.eye(3) * float(b)
    elif b.shape == (3,):
        b = np.diag(b)
    if b.shape != (3, 3):
        raise ValueError("box must be a scalar, a length-3 array or a 3x3 array")
    return b


def displace(system, sigma, seed=0):
    """Copy of ``system`` with Gaussian random displacements of width ``sigma``.

    The displaced copy no longer is an ideal crystal, so its
    ``nearest_neighbor_distance`` and ``madelung_reference`` are ``None``.

    Parameters
    ----------
    system : System
        System to perturb (not modified).
    sigma : float
        Standard deviation of each Cartesian displacement component.
    seed : int
        Seed for :func:`numpy.random.default_rng`.

    Returns
    -------
    System
    """
    rng = np.random.default_rng(seed)
    pos = system.positions + rng.normal(scale=float(sigma), size=system.positions.shape)
    return replace(system, box=system.box.copy(), positions=pos,
                   charges=system.charges.copy(), ids=system.ids.copy(),
                   exclusions=system.exclusions.copy(),
                   name=f"{system.name} displaced(sigma={sigma}, seed={seed})",
                   nearest_neighbor_distance=None, madelung_reference=None)
