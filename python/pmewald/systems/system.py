"""The :class:`System` every generator returns (box rows are lattice vectors, ids
``0..n-1`` in storage order, exclusions as id pairs), and what applies to any system:
:func:`displace`, :func:`replicate`."""

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
    bonds : numpy.ndarray of int64, shape (b, 2), or None
        Bonded pairs by id, where the system has a bond graph (:func:`read_lammps_data`):
        what a peer that derives exclusions from bonds (LAMMPS's ``special_bonds``) needs.
        ``None`` where the exclusions are all there is.
    """

    box: np.ndarray
    positions: np.ndarray
    charges: np.ndarray
    ids: np.ndarray
    exclusions: np.ndarray
    name: str
    nearest_neighbor_distance: Optional[float] = None
    madelung_reference: Optional[float] = None
    bonds: Optional[np.ndarray] = None

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
                   bonds=None if system.bonds is None else system.bonds.copy(),
                   name=f"{system.name} displaced(sigma={sigma}, seed={seed})",
                   nearest_neighbor_distance=None, madelung_reference=None)


def replicate(system, n_cells):
    """The system repeated ``n_cells = (n_a, n_b, n_c)`` times along its lattice vectors: a
    larger cell with the same periodic physics (its energy is ``n_a n_b n_c`` times the
    original's). How the LAMMPS peptide (``/usr/share/lammps/examples/peptide/data.peptide``,
    2,004 atoms) becomes the 54,108-atom system of the scaling benchmarks.

    Molecules are made whole first: atoms joined by excluded pairs (bonded neighbours) are
    placed at the minimum image of the partner they are reached from, so a molecule that
    crossed a face of the small cell is not torn apart by the larger one. Copy ``c`` (in C
    order over the cells) holds atoms ``c n .. c n + n - 1`` with ids ``c n + i`` (``i`` the
    atom's index), and its own copy of every exclusion and bond. Crystal data (``r0``, the Madelung
    constant) carry over.

    Parameters
    ----------
    system : System
        The cell to repeat (not modified). Its exclusions must join atoms closer than half
        the smallest cell height (a bonded pair always is).
    n_cells : int or tuple of three ints
        Repetitions along each lattice vector (an int: the same along all three).

    Returns
    -------
    System
    """
    reps = (int(n_cells),) * 3 if np.ndim(n_cells) == 0 else tuple(int(v) for v in n_cells)
    if len(reps) != 3 or min(reps) < 1:
        raise ValueError(f"n_cells must be a positive int or three of them, got {n_cells!r}")
    n, box = system.n_atoms, np.asarray(system.box, dtype=float)
    index = index_pairs(system.ids, system.exclusions)
    whole = _whole_molecules(system.positions, box, index)
    shifts = np.array([(a, b, c) for a in range(reps[0]) for b in range(reps[1]) for c in range(reps[2])], float)
    copies = len(shifts)
    positions = (whole[None, :, :] + (shifts @ box)[:, None, :]).reshape(-1, 3)
    offsets = (np.arange(copies, dtype=np.int64) * n)[:, None, None]
    bonds = None if system.bonds is None else \
        (index_pairs(system.ids, system.bonds)[None, :, :] + offsets).reshape(-1, 2)
    return replace(system, box=box * np.array(reps, dtype=float)[:, None], positions=positions,
                   charges=np.tile(system.charges, copies), ids=np.arange(copies * n, dtype=np.int64),
                   exclusions=(index[None, :, :] + offsets).reshape(-1, 2), bonds=bonds,
                   name=f"{system.name} x {reps[0]}x{reps[1]}x{reps[2]}")


def index_pairs(ids, pairs):
    """Pairs of atom ids (exclusions, bonds) as pairs of storage indices into ``ids``."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if len(pairs) == 0:
        return pairs
    order = np.argsort(ids, kind="stable")
    return order[np.searchsorted(ids, pairs, sorter=order)]


def _whole_molecules(positions, box, pairs):
    """Positions with every group of atoms joined by ``pairs`` (index pairs) made whole:
    a breadth-first walk over the pairs places each atom at the minimum image of the
    atom it was reached from; unpaired atoms stay where they are."""
    pos = np.array(positions, dtype=float)
    n = len(pos)
    if len(pairs) == 0:
        return pos
    inv = np.linalg.inv(box)
    both = np.concatenate([pairs, pairs[:, ::-1]])
    both = both[np.argsort(both[:, 0], kind="stable")]
    start = np.searchsorted(both[:, 0], np.arange(n + 1))
    seen = np.zeros(n, dtype=bool)
    for root in range(n):
        if seen[root] or start[root] == start[root + 1]:
            continue
        seen[root] = True
        frontier = np.array([root])
        while len(frontier):
            nxt = []
            for a in frontier:
                partners = both[start[a]:start[a + 1], 1]
                new = partners[~seen[partners]]
                if len(new) == 0:
                    continue
                d = (pos[new] - pos[a]) @ inv
                pos[new] = pos[a] + (d - np.round(d)) @ box
                seen[new] = True
                nxt.append(new)
            frontier = np.concatenate(nxt) if nxt else np.zeros(0, dtype=np.int64)
    return pos
