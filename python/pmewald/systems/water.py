"""The SPC/E-like water box: molecules on a jittered lattice, placed in colour rounds with
clash repair (:func:`water_box`), reproducible from its seed."""

from __future__ import annotations

import math

import numpy as np

from .system import System


# SPC/E-like water model
_Q_O = -0.8476


_Q_H = 0.4238


_R_OH = 1.0


_THETA_HOH = math.radians(109.47)


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
    """One attempt of :func:`water_box`: ``(box, positions)``, or None on failure.

    A greedy pass, colour by colour, against the molecules already placed, with a second,
    larger batch for the molecules that still clash; then repair sweeps: clashing molecules
    become ghosts, their neighbours make room (never creating a clash), and the clashing
    ones are placed again."""
    w = _WaterLattice(n_mol, density, min_distance, rng, fcc)
    t_first, t_second = 8, 64
    for cls in w.by_colour(np.arange(n_mol)):
        w.place(cls, t_first)
        w.place(w.clashing(cls), t_second)
    bad = w.clashing(np.arange(n_mol))
    t_room, t_bad = 32, 64
    for _ in range(max_sweeps):
        if bad.size == 0:
            break
        saved = w.rel[bad].copy()
        w.rel[bad] = 0.0
        w.placed[bad] = False
        around = np.setdiff1d(w.neighbours(bad), bad)
        moved = [w.place(cls, t_room) for cls in w.by_colour(around)]
        w.rel[bad] = saved
        w.placed[bad] = True
        moved += [w.place(cls, t_bad) for cls in w.by_colour(bad)]
        moved = np.concatenate(moved)
        check = np.union1d(np.union1d(moved, w.neighbours(moved)), bad)
        bad = w.clashing(check)
    if bad.size:
        return None
    return w.box, (w.sites[:, None, :] + w.rel[:n_mol]).reshape(-1, 3)


class _WaterLattice:
    """The lattice of one :func:`_place_waters` attempt and its molecules' placements.

    fcc: face-centred cubic lattice (the densest sphere packing, so the most room per
    molecule), as the even-parity points of a simple cubic grid of step ``h = a / 2`` with
    an even number of points along each axis; sc: simple cubic (a fallback for tiny boxes).

    ``rel`` holds the positions relative to each molecule's own site, (n_mol + 1, 3 atoms,
    3); the last row is the vacancy sentinel, far away (masked in small boxes). A molecule
    that is not placed (``placed`` False) is a "ghost": all three atoms at its site.
    Candidate placements are ranked by their smallest squared distance to placed neighbours
    ("real") and, among those that clear min_distance, by the smallest squared distance to
    ghost sites, which leaves room for the molecules still to come."""

    def __init__(self, n_mol, density, min_distance, rng, fcc):
        self.n_mol, self.rng = n_mol, rng
        if fcc:
            cells = _grid_shape(-(-n_mol // 4))
            shape = tuple(2 * c for c in cells)
        else:
            cells = _grid_shape(n_mol)
            shape = cells
        nx, ny, nz = shape
        a_cell = (n_mol / density / (cells[0] * cells[1] * cells[2])) ** (1.0 / 3.0)
        spacing = 0.5 * a_cell if fcc else a_cell
        self.lengths = lengths = a_cell * np.array(cells, dtype=float)
        self.box = np.diag(lengths)

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
        self.sites = (gidx + 0.5) * spacing

        half = 0.5 * _THETA_HOH
        body = np.array([[0.0, 0.0, 0.0],
                         [math.sin(half), math.cos(half), 0.0],
                         [-math.sin(half), math.cos(half), 0.0]]) * _R_OH
        body -= body.mean(axis=0)
        self.body = body
        self.jitter_max = 0.05 * spacing * (math.sqrt(2.0) if fcc else 1.0)   # 5% of nearest-neighbour
        self.md2 = min_distance * min_distance

        # neighbour molecules: sites close enough for any atom pair to clash
        reach = min_distance + 2.0 * (float(np.max(np.linalg.norm(body, axis=1)))
                                      + math.sqrt(3.0) * self.jitter_max) + 1e-9
        residues, off_vec = _lattice_offsets(shape, spacing, reach)
        if fcc:
            keep = residues.sum(axis=1) % 2 == 0      # lattice points only (all dims even)
            residues, off_vec = residues[keep], off_vec[keep]
        self.off_vec, self.n_off = off_vec, residues.shape[0]
        nbr_g = (gidx[:, None, :] + residues[None, :, :]) % np.array(shape)
        self.nbr = site_mol[(nbr_g[..., 0] * ny + nbr_g[..., 1]) * nz + nbr_g[..., 2]]  # (n_mol, K)

        # In a box wider than 2 * reach the lattice-offset image of a neighbour is
        # its only image within reach (and a molecule cannot touch its own images),
        # so atom-pair vectors need no minimum-image wrapping.
        self.small = bool(lengths.min() <= 2.0 * reach)
        self.own_shifts = np.array([[i, j, k] for i in (-1, 0, 1) for j in (-1, 0, 1)
                                    for k in (-1, 0, 1) if (i, j, k) != (0, 0, 0)],
                                   dtype=float) * lengths
        far = 1e6 * (1.0 + lengths.max())
        self.rel = np.zeros((n_mol + 1, 3, 3))
        self.rel[n_mol] = far
        self.placed = np.zeros(n_mol + 1, dtype=bool)

        # colour classes: molecules of one colour are never neighbours
        kmax = int(np.abs(np.round(off_vec / spacing)).max()) if self.n_off else 0
        colour = np.zeros(n_mol, dtype=np.int64)
        for a in range(3):
            ca = _axis_colours(shape[a], kmax + 1)
            colour = colour * (2 * kmax + 2) + ca[gidx[:, a]]
        self.colour = np.unique(colour, return_inverse=True)[1].reshape(-1)

    def candidates(self, count):
        """``count`` random placements (jitter + orientation) relative to a site."""
        rot = _random_rotations(self.rng, count)
        jitter = self.rng.uniform(-self.jitter_max, self.jitter_max, (count, 1, 3))
        return jitter + np.einsum("aj,tij->tai", self.body, rot)

    def objective(self, idx, cand):
        """Rank of placements ``cand`` (m, T, 3, 3) of molecules ``idx`` (m,).

        Returns ``(obj, real)``, both (m, T): ``real`` is the smallest squared
        distance to placed neighbours and own periodic images; ``obj`` is
        ``min(real, ghost)`` when ``real`` clears ``min_distance`` and
        negative (increasing with ``real``) otherwise.
        """
        n_mol, n_off, lengths, small = self.n_mol, self.n_off, self.lengths, self.small
        m, t = cand.shape[:2]
        real = np.full((m, t), np.inf)
        ghost = np.full((m, t), np.inf)
        chunk = max(1, 1_000_000 // max(1, t * n_off * 9))
        for s in range(0, m, chunk):
            ii = idx[s:s + chunk]
            c = cand[s:s + chunk]
            if n_off:
                nb = self.nbr[ii]
                other = self.rel[nb] + self.off_vec[None, :, None, :]            # (c, K, 3, 3)
                d2 = None
                for k in range(3):
                    d = other[:, None, :, None, :, k] - c[:, :, None, :, None, k]
                    if small:
                        d -= lengths[k] * np.round(d / lengths[k])
                    d2 = d * d if d2 is None else d2 + d * d          # (c, T, K, 3, 3)
                if small:
                    d2[np.broadcast_to((nb == n_mol)[:, None, :, None, None], d2.shape)] = np.inf
                g = ~self.placed[nb] & (nb < n_mol)
                if g.any():
                    gm = np.broadcast_to(g[:, None, :, None, None], d2.shape)
                    ghost[s:s + chunk] = np.where(gm, d2, np.inf).reshape(len(ii), t, -1).min(2)
                    d2 = np.where(gm, np.inf, d2)
                real[s:s + chunk] = d2.reshape(len(ii), t, -1).min(axis=2)
            if small:
                dd = (c[:, :, :, None, None, :] - c[:, :, None, :, None, :]
                      + self.own_shifts[None, None, None, None, :, :])
                own = np.einsum("...i,...i->...", dd, dd).reshape(len(ii), t, -1).min(axis=2)
                np.minimum(real[s:s + chunk], own, out=real[s:s + chunk])
        obj = np.where(real >= self.md2, np.minimum(real, ghost), -1.0 / (1.0 + real))
        return obj, real

    def place(self, idx, n_trials):
        """Re-place molecules ``idx`` (no two neighbours) by the best of ``n_trials``.

        A molecule moves only when the best candidate beats its current
        placement (any candidate beats no placement).  Returns the moved ones.
        """
        if idx.size == 0:
            return idx
        now = np.where(self.placed[idx], self.objective(idx, self.rel[idx, None])[0][:, 0], -np.inf)
        trial = self.candidates(idx.size * n_trials).reshape(idx.size, n_trials, 3, 3)
        obj = self.objective(idx, trial)[0]
        t = np.argmax(obj, axis=1)
        take = obj[np.arange(idx.size), t] > now
        self.rel[idx[take]] = trial[take, t[take]]
        self.placed[idx] = True
        return idx[take]

    def clashing(self, idx):
        return idx[self.objective(idx, self.rel[idx, None])[1][:, 0] < self.md2]

    def by_colour(self, idx):
        c = self.colour[idx]
        o = np.argsort(c, kind="stable")
        return np.split(idx[o], np.flatnonzero(np.diff(c[o])) + 1)

    def neighbours(self, idx):
        nb = np.unique(self.nbr[idx])
        return nb[nb < self.n_mol]


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
