"""What the PME solver tests share (tests/pme/test_pme.py, tests/tuning/test_automatic_choice.py):
the test systems with their direct-Ewald references (cached), the accuracy criteria of
issue 4 and cost-model overrides that make one differentiation cheaper.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from pmewald import reference, systems

STRONG = "strong"


def rel_rms(f, fref):
    """Relative RMS force error sqrt(sum |F - F_ref|^2 / sum |F_ref|^2) (issue 4's measure)."""
    f = np.asarray(f, dtype=float)
    fref = np.asarray(fref, dtype=float)
    return math.sqrt(float(np.sum((f - fref) ** 2)) / float(np.sum(fref ** 2)))


@functools.lru_cache(maxsize=None)
def _reference_cached(key):
    s = _SYSTEMS[key]()
    return s, reference.ewald(s.box, s.positions, s.charges, exclusions=s.exclusions)


def _random_exclusions(s, m, seed, within=None):
    """m distinct random pairs of ids, each pair once, drawn from the pairs closer than
    `within` (default 0.9 x the tests' cutoff: excluded pairs must lie within the cutoff)."""
    within = 0.9 * half_height_cutoff(s.box) if within is None else within
    i, j = np.triu_indices(s.n_atoms, 1)
    d = reference.minimum_image(s.box, s.positions[i] - s.positions[j])
    near = np.nonzero(np.einsum("ij,ij->i", d, d) < within ** 2)[0]
    assert len(near) >= m
    pick = np.random.default_rng(seed).choice(near, m, replace=False)
    return np.stack([i[pick], j[pick]], axis=1).astype(np.int64)


def _with_exclusions(s, m, seed):
    s.exclusions = _random_exclusions(s, m, seed)
    return s


_SYSTEMS = {
    "ortho-neutral": lambda: systems.random_charges(150, [10.0, 11.0, 12.0], neutral=True, seed=11),
    "ortho-charged": lambda: systems.random_charges(120, [10.0, 11.0, 12.0], neutral=False, seed=12),
    "triclinic-neutral": lambda: systems.random_charges(
        150, systems.triclinic_box(12.0, STRONG), neutral=True, seed=13),
    "triclinic-charged": lambda: systems.random_charges(
        120, systems.triclinic_box(12.0, STRONG), neutral=False, seed=14),
    "water40": lambda: systems.water_box(40, seed=5),
    "water100": lambda: systems.water_box(100, seed=3),
    "triclinic-charged-excl": lambda: _with_exclusions(systems.random_charges(
        90, systems.triclinic_box(9.0, STRONG), neutral=False, seed=31), 25, seed=32),
}


def half_height_cutoff(box, fraction=0.45):
    return fraction * float(np.min(reference.cell_heights(box)))


def _check_accuracy(s, ref, pme, res, forces, tol, label):
    """Return a list of failure strings (empty when all criteria hold)."""
    bad = []
    err = rel_rms(forces, ref.forces)
    est = float(res.estimated_error)
    if not err <= tol:
        bad.append(f"{label}: measured force error {err:.3e} > tolerance {tol:g}")
    if not (err / 3.0 <= est <= 3.0 * err):
        bad.append(f"{label}: estimate {est:.3e} not within 3x of measured {err:.3e}")
    de = abs(res.energy - ref.energy)
    if not de <= tol * abs(ref.energy):
        bad.append(f"{label}: energy error {de:.3e} > tol*|E| = {tol * abs(ref.energy):.3e}")
    wscale = max(abs(ref.energy), float(np.max(np.abs(ref.virial))))
    dw = float(np.max(np.abs(np.asarray(res.virial) - ref.virial)))
    if not dw <= 10.0 * tol * wscale:
        bad.append(f"{label}: virial error {dw:.3e} > 10 tol scale {10 * tol * wscale:.3e}")
    return bad


# Cost models (entries of tuning.cost_model()) under which one differentiation is always
# the cheaper: ik costing what ad does per transform and point but needing fewer
# transforms, and the reverse.
IK_CHEAP = {"transforms_ad": 2, "transforms_ik": 1, "mesh_ik": 0.0, "atom_ik": 0.0, "point_ik": 0.0}
AD_CHEAP = {"transforms_ad": 1, "transforms_ik": 8, "mesh_ad": 0.0, "atom_ad": 0.0, "point_ad": 0.0}
