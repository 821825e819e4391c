"""Deterministic test systems for validating Ewald/PME solvers.

Every generator returns a :class:`System` whose ``box`` rows are the lattice
vectors (the convention of :func:`pmewald.reference.ewald`).  Atom ids are
``0..n-1`` in storage order, so ids double as indices; ``exclusions`` lists
pairs of ids.  Random systems are reproducible from their ``seed``.

Crystals carry ``nearest_neighbor_distance`` (``r0``, the nearest
cation-anion distance) and ``madelung_reference`` (the literature Madelung
constant ``M``), defined by ``E = -M k z^2 N_pairs / r0`` with ``N_pairs`` the
number of cation-anion pairs (half the number of ions) and ``z`` the ionic
charge.

Longer than 600 lines because it is a catalogue of independent builders (crystals with
their Madelung constants, random charges, the water box, displacements and supercells),
one import for every test and benchmark that needs a system.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from ..geometry.cell import minimum_image

__all__ = [
    "System",
    "MADELUNG_CONSTANTS",
    "rock_salt",
    "caesium_chloride",
    "zinc_blende",
    "wurtzite",
    "water_box",
    "random_charges",
    "triclinic_box",
    "displace",
]

#: Literature Madelung constants (referred to the nearest-neighbour distance).
#: Rock salt: OEIS A085469; CsCl: OEIS A181152; zinc blende and ideal
#: wurtzite: 12-digit literature values (e.g. Zucker 1975; Glasser 2012).
MADELUNG_CONSTANTS = {
    "rock_salt": 1.7475645946331821906,
    "caesium_chloride": 1.7626747730709883979,
    "zinc_blende": 1.638055053388,
    "wurtzite": 1.641321627371,
}

# SPC/E-like water model
_Q_O = -0.8476
_Q_H = 0.4238
_R_OH = 1.0
_THETA_HOH = math.radians(109.47)


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


def _as_box_rows(box):
    b = np.asarray(box, dtype=float)
    if b.ndim == 0:
        b = np.eye(3) * float(b)
    elif b.shape == (3,):
        b = np.diag(b)
    if b.shape != (3, 3):
        raise ValueError("box must be a scalar, a length-3 array or a 3x3 array")
    return b


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


def _random_rotations(rng, count):
    """``count`` uniform random rotation matrices from random unit quaternions."""
    q = rng.normal(size=(count, 4))
    q /= np.sqrt(np.einsum("ij,ij->i", q, q))[:, None]
    w, x, y, z = q.T
    rot = np.empty((count, 3, 3))
    rot[:, 0, 0] = 1 - 2 * (y * y + z * z)
    rot[:, 0, 1] = 2 * (x * y - z * w)
    rot[:, 0, 2] = 2 * (x * z + y * w)
    rot[:, 1, 0] = 2 * (x * y + z * w)
    rot[:, 1, 1] = 1 - 2 * (x * x + z * z)
    rot[:, 1, 2] = 2 * (y * z - x * w)
    rot[:, 2, 0] = 2 * (x * z - y * w)
    rot[:, 2, 1] = 2 * (y * z + x * w)
    rot[:, 2, 2] = 1 - 2 * (x * x + y * y)
    return rot


def _grid_shape(n):
    """Smallest nx*ny*nz >= n with aspect ratio <= 2 (ties: most cubic)."""
    best = None
    top = int(math.ceil(n ** (1.0 / 3.0))) + 2
    for nx in range(1, top + 1):
        for ny in range(nx, top + 1):
            nz = max(ny, -(-n // (nx * ny)))
            if nz > 2 * nx:
                continue
            key = (nx * ny * nz, nz - nx)
            if best is None or key < best[0]:
                best = (key, (nx, ny, nz))
    return best[1]


def _axis_colours(n, p):
    """Colours of ``n`` cyclic indices; indices at cyclic distance ``< p`` differ.

    ``i mod p`` on the largest multiple of ``p``, a fresh colour for each of
    the remaining ``n mod p`` indices.
    """
    full = (n // p) * p
    c = np.arange(n) % p
    c[full:] = p + np.arange(n - full)
    return c


def _lattice_offsets(shape, spacing, reach):
    """Neighbour offsets of a periodic cubic lattice within ``reach``.

    Returns ``(residues, vectors)``: the index offsets (mod ``shape``, each
    distinct site once, the site itself excluded) and their minimum-image
    Cartesian vectors, for every site closer than ``reach``.
    """
    per_axis = []
    for n in shape:
        r = np.arange(n)
        m = r - n * np.round(r / n)
        per_axis.append((r, m))
    rr = np.stack(np.meshgrid(*[a[0] for a in per_axis], indexing="ij"), -1).reshape(-1, 3)
    mm = np.stack(np.meshgrid(*[a[1] for a in per_axis], indexing="ij"), -1).reshape(-1, 3)
    keep = (np.einsum("ij,ij->i", mm, mm) * spacing * spacing < reach * reach) & np.any(rr != 0, 1)
    return rr[keep], mm[keep] * spacing


def _place_waters(n_mol, density, min_distance, rng, fcc, max_sweeps):
    """One attempt of :func:`water_box`: ``(box, positions)``, or None on failure."""
    # fcc: face-centred cubic lattice (the densest sphere packing, so the most
    # room per molecule), as the even-parity points of a simple cubic grid of
    # step ``h = a / 2`` with an even number of points along each axis;
    # sc: simple cubic (a fallback for tiny boxes)
    if fcc:
        cells = _grid_shape(-(-n_mol // 4))
        shape = tuple(2 * c for c in cells)
    else:
        cells = _grid_shape(n_mol)
        shape = cells
    nx, ny, nz = shape
    a_cell = (n_mol / density / (cells[0] * cells[1] * cells[2])) ** (1.0 / 3.0)
    spacing = 0.5 * a_cell if fcc else a_cell
    lengths = a_cell * np.array(cells, dtype=float)
    box = np.diag(lengths)

    # occupied lattice sites (molecule order = site order); vacancy sentinel n_mol
    grid = np.stack(np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij"),
                    axis=-1).reshape(-1, 3)
    lattice = np.flatnonzero(grid.sum(axis=1) % 2 == 0) if fcc else np.arange(grid.shape[0])
    n_sites = lattice.size
    if n_sites > n_mol:
        occupied = lattice[np.sort(rng.choice(n_sites, size=n_mol, replace=False))]
    else:
        occupied = lattice
    site_mol = np.full(grid.shape[0], n_mol, dtype=np.intp)
    site_mol[occupied] = np.arange(n_mol)
    gidx = grid[occupied]
    sites = (gidx + 0.5) * spacing

    half = 0.5 * _THETA_HOH
    body = np.array([[0.0, 0.0, 0.0],
                     [math.sin(half), math.cos(half), 0.0],
                     [-math.sin(half), math.cos(half), 0.0]]) * _R_OH
    body -= body.mean(axis=0)
    jitter_max = 0.05 * spacing * (math.sqrt(2.0) if fcc else 1.0)   # 5% of nearest-neighbour
    md2 = min_distance * min_distance

    # neighbour molecules: sites close enough for any atom pair to clash
    reach = min_distance + 2.0 * (float(np.max(np.linalg.norm(body, axis=1)))
                                  + math.sqrt(3.0) * jitter_max) + 1e-9
    residues, off_vec = _lattice_offsets(shape, spacing, reach)
    if fcc:
        keep = residues.sum(axis=1) % 2 == 0      # lattice points only (all dims even)
        residues, off_vec = residues[keep], off_vec[keep]
    n_off = residues.shape[0]
    nbr_g = (gidx[:, None, :] + residues[None, :, :]) % np.array(shape)
    nbr = site_mol[(nbr_g[..., 0] * ny + nbr_g[..., 1]) * nz + nbr_g[..., 2]]  # (n_mol, K)

    # In a box wider than 2 * reach the lattice-offset image of a neighbour is
    # its only image within reach (and a molecule cannot touch its own images),
    # so atom-pair vectors need no minimum-image wrapping.
    small = bool(lengths.min() <= 2.0 * reach)
    own_shifts = np.array([[i, j, k] for i in (-1, 0, 1) for j in (-1, 0, 1)
                           for k in (-1, 0, 1) if (i, j, k) != (0, 0, 0)],
                          dtype=float) * lengths
    far = 1e6 * (1.0 + lengths.max())

    # Positions relative to each molecule's own site, (n_mol + 1, 3 atoms, 3); the
    # last row is the vacancy sentinel, far away (masked in small boxes).  A
    # molecule that is not placed is a "ghost": all three atoms at its site.
    # Candidate placements are ranked by their smallest squared distance to
    # placed neighbours ("real") and, among those that clear min_distance, by
    # the smallest squared distance to ghost sites, which leaves room for the
    # molecules still to come.
    rel = np.zeros((n_mol + 1, 3, 3))
    rel[n_mol] = far
    placed = np.zeros(n_mol + 1, dtype=bool)

    def candidates(count):
        """``count`` random placements (jitter + orientation) relative to a site."""
        rot = _random_rotations(rng, count)
        jitter = rng.uniform(-jitter_max, jitter_max, (count, 1, 3))
        return jitter + np.einsum("aj,tij->tai", body, rot)

    def objective(idx, cand):
        """Rank of placements ``cand`` (m, T, 3, 3) of molecules ``idx`` (m,).

        Returns ``(obj, real)``, both (m, T): ``real`` is the smallest squared
        distance to placed neighbours and own periodic images; ``obj`` is
        ``min(real, ghost)`` when ``real`` clears ``min_distance`` and
        negative (increasing with ``real``) otherwise.
        """
        m, t = cand.shape[:2]
        real = np.full((m, t), np.inf)
        ghost = np.full((m, t), np.inf)
        chunk = max(1, 1_000_000 // max(1, t * n_off * 9))
        for s in range(0, m, chunk):
            ii = idx[s:s + chunk]
            c = cand[s:s + chunk]
            if n_off:
                nb = nbr[ii]
                other = rel[nb] + off_vec[None, :, None, :]            # (c, K, 3, 3)
                d2 = None
                for k in range(3):
                    d = other[:, None, :, None, :, k] - c[:, :, None, :, None, k]
                    if small:
                        d -= lengths[k] * np.round(d / lengths[k])
                    d2 = d * d if d2 is None else d2 + d * d          # (c, T, K, 3, 3)
                if small:
                    d2[np.broadcast_to((nb == n_mol)[:, None, :, None, None], d2.shape)] = np.inf
                g = ~placed[nb] & (nb < n_mol)
                if g.any():
                    gm = np.broadcast_to(g[:, None, :, None, None], d2.shape)
                    ghost[s:s + chunk] = np.where(gm, d2, np.inf).reshape(len(ii), t, -1).min(2)
                    d2 = np.where(gm, np.inf, d2)
                real[s:s + chunk] = d2.reshape(len(ii), t, -1).min(axis=2)
            if small:
                dd = (c[:, :, :, None, None, :] - c[:, :, None, :, None, :]
                      + own_shifts[None, None, None, None, :, :])
                own = np.einsum("...i,...i->...", dd, dd).reshape(len(ii), t, -1).min(axis=2)
                np.minimum(real[s:s + chunk], own, out=real[s:s + chunk])
        obj = np.where(real >= md2, np.minimum(real, ghost), -1.0 / (1.0 + real))
        return obj, real

    def place(idx, n_trials):
        """Re-place molecules ``idx`` (no two neighbours) by the best of ``n_trials``.

        A molecule moves only when the best candidate beats its current
        placement (any candidate beats no placement).  Returns the moved ones.
        """
        if idx.size == 0:
            return idx
        now = np.where(placed[idx], objective(idx, rel[idx, None])[0][:, 0], -np.inf)
        trial = candidates(idx.size * n_trials).reshape(idx.size, n_trials, 3, 3)
        obj = objective(idx, trial)[0]
        t = np.argmax(obj, axis=1)
        take = obj[np.arange(idx.size), t] > now
        rel[idx[take]] = trial[take, t[take]]
        placed[idx] = True
        return idx[take]

    def clashing(idx):
        return idx[objective(idx, rel[idx, None])[1][:, 0] < md2]

    # colour classes: molecules of one colour are never neighbours
    kmax = int(np.abs(np.round(off_vec / spacing)).max()) if n_off else 0
    colour = np.zeros(n_mol, dtype=np.int64)
    for a in range(3):
        ca = _axis_colours(shape[a], kmax + 1)
        colour = colour * (2 * kmax + 2) + ca[gidx[:, a]]
    colour = np.unique(colour, return_inverse=True)[1].reshape(-1)

    def by_colour(idx):
        c = colour[idx]
        o = np.argsort(c, kind="stable")
        return np.split(idx[o], np.flatnonzero(np.diff(c[o])) + 1)

    def neighbours(idx):
        nb = np.unique(nbr[idx])
        return nb[nb < n_mol]

    # greedy pass, colour by colour, against the molecules already placed;
    # a second, larger batch for the molecules that still clash
    t_first = 8
    t_second = 64
    for cls in by_colour(np.arange(n_mol)):
        place(cls, t_first)
        place(clashing(cls), t_second)

    # repair: turn clashing molecules into ghosts, let their neighbours make
    # room (never creating a clash), then re-place the clashing molecules
    bad = clashing(np.arange(n_mol))
    t_room = 32
    t_bad = 64
    for sweep in range(max_sweeps):
        if bad.size == 0:
            break
        saved = rel[bad].copy()
        rel[bad] = 0.0
        placed[bad] = False
        around = np.setdiff1d(neighbours(bad), bad)
        moved = [place(cls, t_room) for cls in by_colour(around)]
        rel[bad] = saved
        placed[bad] = True
        moved += [place(cls, t_bad) for cls in by_colour(bad)]
        moved = np.concatenate(moved)
        check = np.union1d(np.union1d(moved, neighbours(moved)), bad)
        bad = clashing(check)
    if bad.size:
        return None
    return box, (sites[:, None, :] + rel[:n_mol]).reshape(-1, 3)


# Up to this many molecules the simple (quadratic, robust) placement is used.
_SMALL_WATER_BOX = 400


def _place_waters_small(n_mol, density, min_distance, rng):
    """Small boxes (a few hundred molecules): a jittered simple cubic lattice, then
    re-place every clashing molecule (best of 64 random draws, kept only if better)
    until none clash. Quadratic in the number of molecules, robust when the lattice
    is nearly full. Returns (box, positions)."""
    nx, ny, nz = _grid_shape(n_mol)
    n_sites = nx * ny * nz
    spacing = (n_mol / density / n_sites) ** (1.0 / 3.0)
    lengths = spacing * np.array([nx, ny, nz], dtype=float)
    box = np.diag(lengths)

    sites = np.stack(np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij"),
                     axis=-1).reshape(-1, 3).astype(float)
    sites = (sites + 0.5) * spacing
    if n_sites > n_mol:
        sites = sites[np.sort(rng.choice(n_sites, size=n_mol, replace=False))]

    half = 0.5 * _THETA_HOH
    body = np.array([[0.0, 0.0, 0.0],
                     [math.sin(half), math.cos(half), 0.0],
                     [-math.sin(half), math.cos(half), 0.0]]) * _R_OH
    body -= body.mean(axis=0)
    jitter_max = 0.05 * spacing
    own_shifts = np.array([[i, j, k] for i in (-1, 0, 1) for j in (-1, 0, 1)
                           for k in (-1, 0, 1) if (i, j, k) != (0, 0, 0)],
                          dtype=float) * lengths
    md2 = min_distance * min_distance

    # neighbour molecules: sites close enough for any atom pair to clash
    reach = min_distance + 2.0 * (float(np.max(np.linalg.norm(body, axis=1)))
                                  + math.sqrt(3.0) * jitter_max) + 1e-9
    nbr_lists = []
    for m in range(n_mol):
        d = sites - sites[m]
        d -= lengths * np.round(d / lengths)
        close = np.nonzero(np.einsum("ij,ij->i", d, d) < reach * reach)[0]
        nbr_lists.append(close[close != m])
    width = max(1, max(len(v) for v in nbr_lists))
    nbr = np.full((n_mol, width), -1, dtype=np.intp)
    for m, v in enumerate(nbr_lists):
        nbr[m, :len(v)] = v
    nbr_ok = nbr >= 0
    nbr_safe = np.where(nbr_ok, nbr, 0)

    def candidates(m, count):
        """``count`` random placements (jitter + orientation) of molecule m."""
        rot = _random_rotations(rng, count)
        jitter = rng.uniform(-jitter_max, jitter_max, (count, 1, 3))
        return sites[m] + jitter + np.einsum("aj,tij->tai", body, rot)

    def own_image_d2(mols):
        """Smallest squared distance between molecules and their own images."""
        dd = (mols[:, :, None, None, :] - mols[:, None, :, None, :]
              + own_shifts[None, None, None, :, :])
        return np.min(np.einsum("...i,...i->...", dd, dd).reshape(mols.shape[0], -1), axis=1)

    def min_dist2(mols, nb, nb_ok, mols_all):
        """Smallest squared intermolecular distance; mols (t,3,3), nb (t,w)."""
        other = mols_all[nb]                                   # (t, w, 3, 3)
        d = other[:, None, :, :, :] - mols[:, :, None, None, :]  # (t, 3, w, 3, 3)
        d -= lengths * np.round(d / lengths)
        d2 = np.einsum("...i,...i->...", d, d)
        d2 = np.where(nb_ok[:, None, :, None], d2, np.inf)
        return np.minimum(own_image_d2(mols), np.min(d2.reshape(mols.shape[0], -1), axis=1))

    # random placement, then re-place clashing molecules until none clash
    mols = np.stack([candidates(m, 1)[0] for m in range(n_mol)])
    n_trials = 64
    for sweep in range(1000):
        current = min_dist2(mols, nbr_safe, nbr_ok, mols)
        clashing = np.nonzero(current < md2)[0]
        if clashing.size == 0:
            break
        for m in rng.permutation(clashing):
            trial = candidates(m, n_trials)
            nb = np.broadcast_to(nbr_safe[m], (n_trials, width))
            ok = np.broadcast_to(nbr_ok[m], (n_trials, width))
            score = min_dist2(trial, nb, ok, mols)
            now = min_dist2(mols[m][None], nbr_safe[m][None], nbr_ok[m][None], mols)[0]
            t = int(np.argmax(score))
            if score[t] > now:
                mols[m] = trial[t]
    else:
        return None
    return box, mols.reshape(-1, 3)


def water_box(n_molecules=None, *, target_atoms=None, density=0.0334, seed=0,
              min_distance=2.2):
    """A box of rigid SPC/E-like water molecules with random orientations.

    Molecules (``q_O = -0.8476``, ``q_H = +0.4238``, O-H 1.0 Angstrom, HOH
    109.47 degrees) sit on a jittered face-centred cubic lattice (with random
    vacancies when ``n_molecules`` does not fill it) in an orthorhombic box,
    each with a random orientation chosen so that no intermolecular atom pair
    (minimum image, including a molecule's own periodic images) is closer
    than ``min_distance``.  Atoms are stored O, H, H per molecule; exclusions
    are the three intramolecular pairs of every molecule, by id.

    Molecules are placed in vectorised rounds: the lattice is coloured so that
    molecules of one colour can never touch, and a whole colour is placed at
    once, each molecule taking the best of a batch of random orientations and
    jitters (the one farthest from placed neighbours, and, among those that
    clear ``min_distance``, from the sites still to be filled).  Rare leftover
    clashes are repaired by letting the neighbours make room.  The cost is
    linear in the number of molecules (about a second per 10^4 molecules).

    Parameters
    ----------
    n_molecules : int, optional
        Number of molecules.
    target_atoms : int, optional
        Alternative to ``n_molecules``: ``round(target_atoms / 3)`` molecules.
    density : float
        Molecules per cubic Angstrom (0.0334 is liquid water).
    seed : int
        Seed for :func:`numpy.random.default_rng`.
    min_distance : float
        Minimum intermolecular distance in Angstrom.

    Returns
    -------
    System
        Orthorhombic box (diagonal rows), in Angstrom and elementary charges.
    """
    if (n_molecules is None) == (target_atoms is None):
        raise ValueError("give exactly one of n_molecules and target_atoms")
    if n_molecules is None:
        n_molecules = max(1, int(round(target_atoms / 3.0)))
    n_mol = int(n_molecules)
    if n_mol < 1:
        raise ValueError("need at least one molecule")
    rng = np.random.default_rng(seed)
    # Start with the lattice (fcc or simple cubic, vacancies included) whose
    # nearest-neighbour distance is larger.  Large boxes succeed at the first
    # attempt; small ones may need fresh draws or the other lattice.
    c_fcc, c_sc = _grid_shape(-(-n_mol // 4)), _grid_shape(n_mol)
    nn_fcc = (1.0 / (c_fcc[0] * c_fcc[1] * c_fcc[2])) ** (1.0 / 3.0) / math.sqrt(2.0)
    nn_sc = (1.0 / (c_sc[0] * c_sc[1] * c_sc[2])) ** (1.0 / 3.0)
    first_fcc = nn_fcc >= nn_sc
    for attempt in range(8):
        if n_mol <= _SMALL_WATER_BOX:
            placed = _place_waters_small(n_mol, float(density), float(min_distance), rng)
            if placed is not None:
                break
            continue
        placed = _place_waters(n_mol, float(density), float(min_distance), rng,
                               fcc=(attempt % 2 == 0) == first_fcc, max_sweeps=100)
        if placed is not None:
            break
    else:
        raise RuntimeError("could not place water molecules; lower density or min_distance")
    box, pos = placed
    charges = np.tile([_Q_O, _Q_H, _Q_H], n_mol)
    ids = np.arange(3 * n_mol, dtype=np.int64)
    o = 3 * np.arange(n_mol, dtype=np.int64)
    exclusions = np.stack([np.stack([o, o + 1], axis=1), np.stack([o, o + 2], axis=1),
                           np.stack([o + 1, o + 2], axis=1)], axis=1).reshape(-1, 2)
    return System(box=box, positions=pos, charges=charges, ids=ids, exclusions=exclusions,
                  name=f"water_box n_molecules={n_mol}")


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


# Peptide-like backbone unit (CHARMM-style partial charges, each unit neutral): the atoms of
# one residue in storage order, their charges, and the backbone atom each side atom is
# bonded to (index within the unit, -1 for backbone atoms).
_UNIT_NAMES = ("N", "H", "CA", "HA", "C", "O")
_UNIT_CHARGES = (-0.47, 0.31, 0.07, 0.09, 0.51, -0.51)
_UNIT_PARENT = (-1, 0, -1, 2, -1, 4)
_SIDE_BOND = {1: 1.0, 3: 1.09, 5: 1.23}   # N-H, CA-HA, C=O
_BACKBONE_BOND = 1.45
_BACKBONE_ANGLE = math.radians(111.0)


def _chain_backbone(n_atoms, rng, max_tries=200):
    """A random backbone of `n_atoms` atoms, fixed bond length and angle, random dihedrals,
    no two atoms more than three bonds apart closer than 2.5."""
    pts = [np.zeros(3), np.array([_BACKBONE_BOND, 0.0, 0.0])]
    while len(pts) < n_atoms:
        for _ in range(max_tries):
            a, b = pts[-2], pts[-1]
            u = (b - a) / np.linalg.norm(b - a)
            v = rng.normal(size=3)
            v -= v.dot(u) * u
            v /= np.linalg.norm(v)
            d = -math.cos(_BACKBONE_ANGLE) * u + math.sin(_BACKBONE_ANGLE) * v
            c = b + _BACKBONE_BOND * d
            if len(pts) < 4 or np.min(np.linalg.norm(np.asarray(pts[:-3]) - c, axis=1)) > 2.5:
                pts.append(c)
                break
        else:
            raise RuntimeError("could not grow the chain")
    return np.asarray(pts)


def _bond_exclusions(n_atoms, bonds, depth=3):
    """Pairs (i < j) at most `depth` bonds apart in the graph `bonds` (1-2, 1-3, 1-4 for 3)."""
    nbr = [[] for _ in range(n_atoms)]
    for i, j in bonds:
        nbr[int(i)].append(int(j))
        nbr[int(j)].append(int(i))
    pairs = set()
    for s in range(n_atoms):
        frontier, seen = {s}, {s}
        for _ in range(depth):
            frontier = {t for f in frontier for t in nbr[f]} - seen
            seen |= frontier
        pairs.update((s, t) for t in seen if t > s)
    out = np.array(sorted(pairs), dtype=np.int64)
    return out.reshape(-1, 2)


def solvated_chains(n_chains=2, residues=12, *, n_water=300, density=0.0334, seed=0,
                    min_distance=2.0):
    """Peptide-like chains with partial charges in a box of water, with the bond-graph exclusions.

    A stand-in for a solvated protein (like LAMMPS's ``peptide`` example with CHARMM charges):
    each chain is ``residues`` neutral units ``N(-0.47) H(0.31) CA(0.07) HA(0.09) C(0.51)
    O(-0.51)`` on a random backbone (bond 1.45, angle 111 degrees, random dihedrals) with the
    H, HA and O atoms bonded to N, CA and C; the chains sit at random positions and
    orientations in a :func:`water_box` of ``n_water`` molecules from which every water with
    an atom closer than ``min_distance`` to a chain atom (minimum image) is removed.
    Exclusions: every pair at most three bonds apart on a chain (1-2, 1-3 and 1-4, i.e.
    CHARMM's ``special_bonds 0 0 0``) and the three intramolecular pairs of every water.
    Atoms are stored chains first, then waters (O, H, H). The system is neutral.
    """
    rng = np.random.default_rng(seed)
    water = water_box(n_water, density=density, seed=seed)
    box = water.box
    unit = len(_UNIT_NAMES)
    chain_pos, chain_q, bonds = [], [], []
    for c in range(n_chains):
        for attempt in range(100):
            chain_bonds = []
            back = _chain_backbone(3 * residues, rng)
            back -= back.mean(axis=0)
            rot = _random_rotations(rng, 1)[0]
            back = back @ rot.T + rng.random(3) @ box
            pos = np.zeros((unit * residues, 3))
            base = unit * residues * c
            for r in range(residues):
                for k in range(unit):
                    i = unit * r + k
                    parent = _UNIT_PARENT[k]
                    if parent < 0:
                        pos[i] = back[3 * r + (0 if k == 0 else 1 if k == 2 else 2)]
                        continue
                    b = 3 * r + (0 if parent == 0 else 1 if parent == 2 else 2)
                    prev = back[b - 1] if b > 0 else back[b] - (back[b + 1] - back[b])
                    nxt = back[b + 1] if b + 1 < len(back) else back[b] + (back[b] - back[b - 1])
                    out = 2 * back[b] - prev - nxt   # away from both backbone neighbours
                    if np.linalg.norm(out) < 1e-6 * _BACKBONE_BOND:  # chain end (collinear): any perpendicular
                        t = nxt - prev
                        out = np.cross(t, [1.0, 0.0, 0.0] if abs(t[0]) < 0.9 * np.linalg.norm(t) else [0.0, 1.0, 0.0])
                    out /= np.linalg.norm(out)
                    pos[i] = back[b] + _SIDE_BOND[k] * out
                    chain_bonds.append((base + unit * r + parent, base + i))
                if r > 0:  # N(r) - C(r-1)
                    chain_bonds.append((base + unit * r, base + unit * (r - 1) + 4))
                chain_bonds.append((base + unit * r, base + unit * r + 2))       # N - CA
                chain_bonds.append((base + unit * r + 2, base + unit * r + 4))   # CA - C
            # no two atoms more than three bonds apart closer than 1.8
            local = _bond_exclusions(unit * residues, [(i - base, j - base) for i, j in chain_bonds])
            ii, jj = np.triu_indices(unit * residues, 1)
            r2 = np.einsum("ij,ij->i", pos[ii] - pos[jj], pos[ii] - pos[jj])
            near = set(zip(ii[r2 < 1.8 ** 2].tolist(), jj[r2 < 1.8 ** 2].tolist()))
            if near <= set(map(tuple, local.tolist())):
                break
        else:
            raise RuntimeError("could not build a chain without clashes")
        bonds += chain_bonds
        chain_pos.append(pos)
        chain_q.append(np.tile(_UNIT_CHARGES, residues))
    cpos = np.concatenate(chain_pos)
    n_chain_atoms = len(cpos)
    wpos = water.positions.reshape(-1, 3, 3)
    keep = np.ones(len(wpos), dtype=bool)
    flat = wpos.reshape(-1, 3)
    # Each chain is contiguous (unwrapped), so in an orthorhombic box (per-axis minimum image,
    # a metric) only water atoms within its radius + min_distance of its centre can clash with
    # it: the same distances are tested on those, so the same waters go, in O(n_water) per
    # chain instead of O(n_water x chain atoms) (250k atoms: seconds instead of tens of minutes).
    orthorhombic = not np.any(box - np.diag(np.diagonal(box)))
    per = unit * residues
    for c in range(n_chains):
        chain = cpos[c * per:(c + 1) * per]
        if orthorhombic:
            centre = chain.mean(axis=0)
            reach = math.sqrt(float(((chain - centre) ** 2).sum(axis=1).max())) + min_distance
            dc = minimum_image(box, flat - centre)
            near = np.nonzero(np.einsum("ij,ij->i", dc, dc) < (reach * (1 + 1e-9)) ** 2)[0]
        else:
            near = np.arange(len(flat))
        cand = flat[near]
        for start in range(0, per, 16):
            part = chain[start:start + 16]
            d = minimum_image(box, (cand[:, None, :] - part[None, :, :]).reshape(-1, 3))
            close = (np.einsum("ij,ij->i", d, d) < min_distance ** 2).reshape(len(near), len(part)).any(axis=1)
            keep[near[close] // 3] = False
    wpos = wpos[keep].reshape(-1, 3)
    n_w = int(keep.sum())
    pos = np.concatenate([cpos, wpos])
    q = np.concatenate(chain_q + [np.tile([_Q_O, _Q_H, _Q_H], n_w)])
    ex_chain = _bond_exclusions(n_chain_atoms, bonds)
    o = n_chain_atoms + 3 * np.arange(n_w, dtype=np.int64)
    ex_w = np.stack([np.stack([o, o + 1], 1), np.stack([o, o + 2], 1), np.stack([o + 1, o + 2], 1)],
                    axis=1).reshape(-1, 2)
    return System(box=box.copy(), positions=pos, charges=q, ids=np.arange(len(q), dtype=np.int64),
                  exclusions=np.concatenate([ex_chain, ex_w]).astype(np.int64),
                  name=f"solvated_chains n_chains={n_chains} residues={residues} n_water={n_w}")


def read_lammps_data(path, special_depth=3):
    """A :class:`System` from a LAMMPS data file with ``atom_style full`` (e.g. the
    ``peptide`` and ``HEAT/data.spce`` examples of Debian's ``lammps-examples``).

    Orthorhombic or triclinic (``xy xz yz``) boxes; positions are taken as written (the
    solver wraps them); ids are renumbered ``0..n-1`` in the file's id order. Exclusions:
    every pair at most ``special_depth`` bonds apart (3: 1-2, 1-3 and 1-4, LAMMPS's
    ``special_bonds lj/coul 0 0 0``; 0: none).
    """
    lines = open(path).read().splitlines()
    bounds, tilt = {}, (0.0, 0.0, 0.0)
    sections, current = {None: []}, None
    for line in lines[1:]:
        text = line.split("#")[0].strip()
        if not text:
            continue
        words = text.split()
        if len(words) >= 4 and words[-2] in ("xlo", "ylo", "zlo"):
            bounds[words[-2][0]] = (float(words[0]), float(words[1]))
        elif len(words) == 6 and words[3:] == ["xy", "xz", "yz"]:
            tilt = tuple(float(w) for w in words[:3])
        elif words[0][0].isalpha():
            current = text.split()[0] if words[0] != "Pair" else None
            sections[current] = []
        elif current is not None:
            sections[current].append(words)
    if "Atoms" not in sections or set(bounds) != {"x", "y", "z"}:
        raise ValueError(f"{path}: not a LAMMPS data file with an Atoms section and a box")
    lx, ly, lz = (bounds[c][1] - bounds[c][0] for c in "xyz")
    xy, xz, yz = tilt
    box = np.array([[lx, 0, 0], [xy, ly, 0], [xz, yz, lz]], dtype=np.float64)
    atoms = sorted(sections["Atoms"], key=lambda w: int(w[0]))
    index = {int(w[0]): i for i, w in enumerate(atoms)}
    q = np.array([float(w[3]) for w in atoms])
    pos = np.array([[float(v) for v in w[4:7]] for w in atoms])
    bonds = [(index[int(w[2])], index[int(w[3])]) for w in sections.get("Bonds", [])]
    ex = _bond_exclusions(len(q), bonds, special_depth) if special_depth > 0 else _no_exclusions()
    return System(box=box, positions=pos, charges=q, ids=np.arange(len(q), dtype=np.int64), exclusions=ex,
                  name=f"lammps data {path}")
