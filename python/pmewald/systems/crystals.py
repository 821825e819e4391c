"""Ionic crystals with their literature Madelung constants (rock salt, caesium chloride,
zinc blende, wurtzite) and the triclinic test cells of :func:`triclinic_box`.

Crystals carry ``nearest_neighbor_distance`` (``r0``, the nearest cation-anion distance) and
``madelung_reference`` (the literature Madelung constant ``M``), defined by
``E = -M k z^2 N_pairs / r0`` with ``N_pairs`` the number of cation-anion pairs (half the
number of ions) and ``z`` the ionic charge."""

from __future__ import annotations

import math

import numpy as np

from .system import System, _no_exclusions


#: Literature Madelung constants (referred to the nearest-neighbour distance).
#: Rock salt: OEIS A085469; CsCl: OEIS A181152; zinc blende and ideal
#: wurtzite: 12-digit literature values (e.g. Zucker 1975; Glasser 2012).
MADELUNG_CONSTANTS = {
    "rock_salt": 1.7475645946331821906,
    "caesium_chloride": 1.7626747730709883979,
    "zinc_blende": 1.638055053388,
    "wurtzite": 1.641321627371,
}


def _cells(n_cells):
    if np.isscalar(n_cells):
        n_cells = (int(n_cells),) * 3
    n = tuple(int(v) for v in n_cells)
    if len(n) != 3 or min(n) < 1:
        raise ValueError("n_cells must be a positive int or three positive ints")
    return n


def _crystal(name, cell, frac_basis, basis_charges, n_cells, r0):
    """Replicate a unit cell (rows ``cell``) ``n_cells`` times."""
    n = _cells(n_cells)
    cell = np.asarray(cell, dtype=float)
    frac_basis = np.asarray(frac_basis, dtype=float)
    grid = np.stack(np.meshgrid(*[np.arange(m) for m in n], indexing="ij"),
                    axis=-1).reshape(-1, 3).astype(float)
    frac = (grid[:, None, :] + frac_basis[None, :, :]).reshape(-1, 3)
    positions = frac @ cell
    charges = np.tile(np.asarray(basis_charges, dtype=float), grid.shape[0])
    box = cell * np.array(n, dtype=float)[:, None]
    natoms = positions.shape[0]
    return System(box=box, positions=positions, charges=charges,
                  ids=np.arange(natoms, dtype=np.int64), exclusions=_no_exclusions(),
                  name=f"{name} {n[0]}x{n[1]}x{n[2]}", nearest_neighbor_distance=float(r0),
                  madelung_reference=MADELUNG_CONSTANTS[name])


def rock_salt(n_cells=(2, 2, 2), a=5.64, charge=1.0):
    """Rock-salt (NaCl, B1) crystal built from the 8-ion conventional cube.

    Parameters
    ----------
    n_cells : int or tuple of 3 ints
        Number of conventional cells along each axis.
    a : float
        Cubic lattice constant; ``r0 = a / 2``.
    charge : float
        Ionic charge ``z`` (cations ``+z``, anions ``-z``).

    Returns
    -------
    System
    """
    fcc = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
    basis = np.concatenate([fcc, fcc + [0.5, 0.0, 0.0]])
    q = [charge] * 4 + [-charge] * 4
    return _crystal("rock_salt", a * np.eye(3), basis, q, n_cells, a / 2.0)


def caesium_chloride(n_cells=(2, 2, 2), a=4.12, charge=1.0):
    """Caesium-chloride (B2) crystal: two interpenetrating simple cubic lattices.

    Parameters
    ----------
    n_cells : int or tuple of 3 ints
        Number of cubic cells along each axis.
    a : float
        Cubic lattice constant; ``r0 = a sqrt(3) / 2``.
    charge : float
        Ionic charge ``z``.

    Returns
    -------
    System
    """
    basis = np.array([[0, 0, 0], [0.5, 0.5, 0.5]])
    return _crystal("caesium_chloride", a * np.eye(3), basis, [charge, -charge], n_cells,
                    a * math.sqrt(3.0) / 2.0)


def zinc_blende(n_cells=(2, 2, 2), a=5.41, charge=1.0):
    """Zinc-blende (sphalerite, B3) crystal from the 8-ion conventional cube.

    Parameters
    ----------
    n_cells : int or tuple of 3 ints
        Number of conventional cells along each axis.
    a : float
        Cubic lattice constant; ``r0 = a sqrt(3) / 4``.
    charge : float
        Ionic charge ``z``.

    Returns
    -------
    System
    """
    fcc = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
    basis = np.concatenate([fcc, fcc + 0.25])
    q = [charge] * 4 + [-charge] * 4
    return _crystal("zinc_blende", a * np.eye(3), basis, q, n_cells,
                    a * math.sqrt(3.0) / 4.0)


def wurtzite(n_cells=(2, 2, 2), a=3.82, charge=1.0):
    """Ideal wurtzite (B4) crystal: ``c/a = sqrt(8/3)``, ``u = 3/8``.

    The hexagonal cell is given as triclinic rows ``a1 = (a, 0, 0)``,
    ``a2 = (-a/2, a sqrt(3)/2, 0)``, ``a3 = (0, 0, c)``.

    Parameters
    ----------
    n_cells : int or tuple of 3 ints
        Number of hexagonal cells (4 ions each) along each axis.
    a : float
        Hexagonal lattice constant; ``r0 = u c = a sqrt(3/8)``.
    charge : float
        Ionic charge ``z``.

    Returns
    -------
    System
    """
    c = a * math.sqrt(8.0 / 3.0)
    u = 3.0 / 8.0
    cell = np.array([[a, 0.0, 0.0], [-0.5 * a, 0.5 * math.sqrt(3.0) * a, 0.0], [0.0, 0.0, c]])
    basis = np.array([[1 / 3, 2 / 3, 0.0], [2 / 3, 1 / 3, 0.5],
                      [1 / 3, 2 / 3, u], [2 / 3, 1 / 3, 0.5 + u]])
    q = [charge, charge, -charge, -charge]
    return _crystal("wurtzite", cell, basis, q, n_cells, u * c)


def triclinic_box(L, kind="strong"):
    """A 3x3 box (rows = lattice vectors) of characteristic length ``L``.

    Parameters
    ----------
    L : float
        Length scale.
    kind : str
        ``"cubic"``: ``L * I``.
        ``"strong"``: a general, strongly skewed cell that is *not* in
        LAMMPS restricted form: ``a = (L, 0, 0)``, ``b = (0.6, 0.9, 0) L``,
        ``c = (0.4, -0.3, 0.8) L``.
        ``"restricted"``: a LAMMPS-style lower-triangular cell with tilts
        within half the box lengths: ``a = (L, 0, 0)``,
        ``b = (0.3, 0.95, 0) L``, ``c = (-0.2, 0.25, 0.9) L``.
        ``"hexagonal"``: ``a = (L, 0, 0)``, ``b = (-L/2, L sqrt(3)/2, 0)``,
        ``c = (0, 0, L)``.

    Returns
    -------
    numpy.ndarray, shape (3, 3)
    """
    L = float(L)
    if kind == "cubic":
        rows = np.eye(3)
    elif kind == "strong":
        rows = np.array([[1.0, 0.0, 0.0], [0.6, 0.9, 0.0], [0.4, -0.3, 0.8]])
    elif kind == "restricted":
        rows = np.array([[1.0, 0.0, 0.0], [0.3, 0.95, 0.0], [-0.2, 0.25, 0.9]])
    elif kind == "hexagonal":
        rows = np.array([[1.0, 0.0, 0.0], [-0.5, 0.5 * math.sqrt(3.0), 0.0], [0.0, 0.0, 1.0]])
    else:
        raise ValueError(f"unknown box kind {kind!r}")
    return rows * L
