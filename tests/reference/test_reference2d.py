"""Tests of the 2-D periodic Ewald reference (pmewald.reference.slab): independent of alpha,
forces the gradient of the energy, and equal to the 3-D direct Ewald sum of the box extended
by a large vacuum gap with the Yeh-Berkowitz correction (the two share no code but erfc)."""

import numpy as np
import pytest

from pmewald.reference import slab as reference2d
from slab_cases import ew3dc, make_slab, slab_reference


@pytest.mark.parametrize("kind", ["neutral-ortho", "dipolar-tilted", "charged-tilted"])
def test_independent_of_alpha(kind):
    """Energy and forces at three alphas agree to 1e-10 relative (each term changes by far
    more)."""
    s, ref = slab_reference(kind)
    fscale = np.abs(ref.forces).max()
    for alpha in (0.3, 0.65):
        r = reference2d.ewald2d(s.box, s.positions, s.charges, alpha=alpha)
        assert abs(r.terms["real"] - ref.terms["real"]) > 1e-3 * abs(ref.energy)
        assert abs(r.energy - ref.energy) <= 1e-10 * abs(ref.energy), (alpha, r.energy, ref.energy)
        assert np.abs(r.forces - ref.forces).max() <= 1e-10 * fscale


def test_forces_are_the_gradient():
    """forces = -dE/dr by central differences, in x, y and z."""
    s, ref = slab_reference("charged-tilted")
    h = 1e-5
    for i in (0, 7):
        for d in range(3):
            e = []
            for sign in (1, -1):
                p = s.positions.copy()
                p[i, d] += sign * h
                e.append(reference2d.ewald2d(s.box, p, s.charges, alpha=ref.alpha).energy)
            fd = -(e[0] - e[1]) / (2 * h)
            assert abs(fd - ref.forces[i, d]) <= 1e-7 * np.abs(ref.forces).max(), (i, d, fd)


def test_lateral_periodicity_and_translation():
    """Moving an atom by an in-plane lattice vector, or every atom by the same z, changes
    nothing (the sum is 2-D periodic and open in z)."""
    s, ref = slab_reference("dipolar-tilted")
    p = s.positions.copy()
    p[3] += s.box[1] - 2 * s.box[0]
    p[:, 2] += 4.2
    r = reference2d.ewald2d(s.box, p, s.charges, alpha=ref.alpha)
    assert abs(r.energy - ref.energy) <= 1e-12 * abs(ref.energy)
    assert np.abs(r.forces - ref.forces).max() <= 1e-11 * np.abs(ref.forces).max()


@pytest.mark.parametrize("kind", ["neutral-tilted", "charged-tilted"])
def test_equals_3d_ewald_with_dipole_correction(kind):
    """The 3-D Ewald sum with a gap of 4 in-plane lengths plus the dipole (and charged-slab)
    correction equals the 2-D sum to 1e-10: what remains is exp(-2 pi gap / L) ~ 1e-11.
    With a gap of half the in-plane length it does not (the images' interaction)."""
    s = make_slab(kind, seed=3)
    s = type(s)(s.box, s.positions[:12], s.charges[:12] - s.charges[:12].mean() + (s.charges.sum() / 2))
    ref = reference2d.ewald2d(s.box, s.positions, s.charges)
    fscale = np.abs(ref.forces).max()
    e, f = ew3dc(s.box, s.positions, s.charges, gap=36.0)
    assert abs(e - ref.energy) <= 1e-10 * abs(ref.energy), (e, ref.energy)
    assert np.abs(f - ref.forces).max() <= 1e-10 * fscale
    e, f = ew3dc(s.box, s.positions, s.charges, gap=4.0)
    assert np.abs(f - ref.forces).max() > 1e-4 * fscale
