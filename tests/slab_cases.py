"""What the slab tests share (tests/reference/test_reference2d.py, tests/pme/test_slab.py): small
2-D periodic test slabs (orthorhombic and xy-tilted cells; neutral, dipolar and charged) and
their 2-D Ewald references (cached), and the EW3DC sum of the 3-D direct Ewald reference."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from pmewald import reference
from pmewald.reference import slab as reference2d

# kind -> (in-plane rows a, b (xy), slab height Lz, atoms, charges)
_KINDS = {
    "neutral-ortho": ([[8.0, 0.0], [0.0, 9.0]], 6.0, 24, "random"),
    "dipolar-ortho": ([[8.0, 0.0], [0.0, 9.0]], 6.0, 24, "dipolar"),
    "neutral-tilted": ([[8.0, 0.0], [2.5, 8.5]], 6.0, 24, "random"),
    "dipolar-tilted": ([[8.0, 0.0], [2.5, 8.5]], 6.0, 24, "dipolar"),
    "charged-tilted": ([[8.0, 0.0], [-2.0, 8.5]], 6.0, 24, "charged"),
}


@dataclass
class Slab:
    box: np.ndarray        # 3x3, third row (0, 0, Lz)
    positions: np.ndarray  # z in [0, Lz)
    charges: np.ndarray

    @property
    def n_atoms(self):
        return len(self.charges)


def make_slab(kind, seed=0):
    """A slab of atoms at least 1.2 apart (minimum image in xy), z in [0.3, Lz - 0.3)."""
    cell, lz, n, how = _KINDS[kind]
    box = np.zeros((3, 3))
    box[:2, :2] = cell
    box[2, 2] = lz
    rng = np.random.default_rng(seed)
    inv = np.linalg.inv(box[:2, :2])
    pos = []
    while len(pos) < n:
        p = np.concatenate((rng.uniform(0, 1, 2) @ box[:2, :2], rng.uniform(0.3, lz - 0.3, 1)))
        ok = True
        for o in pos:
            d = p - o
            f = d[:2] @ inv
            d[:2] = (f - np.round(f)) @ box[:2, :2]
            ok &= float(np.linalg.norm(d)) > 1.2
        if ok:
            pos.append(p)
    pos = np.array(pos)
    q = rng.choice([-1.0, 1.0], n) * rng.uniform(0.5, 1.0, n)
    if how == "dipolar":  # positive on top, negative below: a net dipole along z
        q = np.where(pos[:, 2] > lz / 2, 1.0, -1.0) * rng.uniform(0.5, 1.0, n)
    if how in ("random", "dipolar"):
        q -= q.mean()
    else:  # net charge +1.5
        q += (1.5 - q.sum()) / n
    return Slab(box, pos, q)


@functools.lru_cache(maxsize=None)
def slab_reference(kind, seed=0):
    """(slab, 2-D Ewald reference result)."""
    s = make_slab(kind, seed)
    return s, reference2d.ewald2d(s.box, s.positions, s.charges)


def ew3dc(box, positions, charges, gap):
    """The 3-D direct Ewald sum on the box extended by ``gap`` in z with the Yeh-Berkowitz
    correction and the charged-slab terms: (energy, forces)."""
    ext = np.array(box, dtype=float)
    length = ext[2, 2] + gap
    ext[2, 2] = length
    vol = abs(np.linalg.det(ext))
    r = reference.ewald(ext, positions, charges, accuracy=1e-13)
    z, q = positions[:, 2], charges
    m, s, qt = float((q * z).sum()), float((q * z * z).sum()), float(q.sum())
    energy = r.energy + 2 * math.pi / vol * (m * m - qt * s - qt * qt * length ** 2 / 12)
    forces = r.forces.copy()
    forces[:, 2] += -4 * math.pi / vol * q * (m - qt * z)
    return energy, forces
