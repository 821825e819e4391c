"""Solvated peptide-like chains (:func:`solvated_chains`): a molecular system with bonded
exclusions to 1-4, in the water of :mod:`pmewald.systems.water`."""

from __future__ import annotations

import math

import numpy as np

from ..geometry.cell import minimum_image
from .system import System
from .water import _Q_H, _Q_O, _random_rotations, water_box


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
