"""pmewald.geometry.cell: the cell algebra that the solver's input checks and the references share
(heights, lattice shifts within a radius, minimum image), against definitions and brute force."""

from __future__ import annotations

import numpy as np
import pytest

from pmewald import systems
from pmewald.geometry import cell as _cell

STRONG = systems.triclinic_box(1.0, "strong")


def _lattice(box, m):
    return np.stack(np.meshgrid(*[np.arange(-m, m + 1)] * 3, indexing="ij"), -1).reshape(-1, 3) @ box


@pytest.mark.parametrize("box", [np.diag([3.0, 4.0, 5.0]), STRONG])
def test_heights_are_volume_over_face_area(box):
    vol = abs(np.linalg.det(box))
    want = [vol / np.linalg.norm(np.cross(box[(k + 1) % 3], box[(k + 2) % 3])) for k in range(3)]
    np.testing.assert_allclose(_cell.cell_heights(box), want, rtol=1e-14)
    np.testing.assert_allclose(_cell.cell_heights([3.0, 4.0, 5.0]), [3.0, 4.0, 5.0])  # length 3: orthorhombic


def test_image_shifts_hold_every_image_within_the_radius():
    """Every lattice vector that brings some displacement of fractional coordinates in
    [-1/2, 1/2] within the radius is among the shifts (brute force over random displacements)."""
    rng = np.random.default_rng(5)
    frac = rng.uniform(-0.5, 0.5, (300, 3))
    for radius in (0.7, 1.9):
        shifts = {tuple(s) for s in _cell.image_shifts(STRONG, radius).astype(int)}
        n = np.stack(np.meshgrid(*[np.arange(-6, 7)] * 3, indexing="ij"), -1).reshape(-1, 3)
        r = np.linalg.norm((frac[:, None, :] + n[None]) @ STRONG, axis=2)
        needed = {tuple(v) for v in n[(r < radius).any(axis=0)]}
        assert needed <= shifts, needed - shifts


def test_minimum_image_strongly_triclinic_beats_rounding():
    box = STRONG
    rng = np.random.default_rng(13)
    d = rng.uniform(-3, 3, (400, 3))
    got = _cell.minimum_image(box, d)
    f = d @ np.linalg.inv(box)
    d0 = (f - np.round(f)) @ box       # brute force below searches around this
    brute = np.min(np.linalg.norm(d0[:, None, :] + _lattice(box, 5)[None], axis=2), axis=1)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), brute, rtol=1e-14)
    frac = (got - d) @ np.linalg.inv(box)  # got is lattice-equivalent to d
    np.testing.assert_allclose(frac, np.round(frac), atol=1e-10)
    assert np.any(np.linalg.norm(d0, axis=1) > brute + 1e-6)  # plain rounding is not enough here
    np.testing.assert_allclose(_cell.minimum_image(box, d[0]), got[0])  # one vector: same shape back


def test_bad_boxes_are_refused():
    for bad, match in (([1.0, 2.0], "length-3 or 3x3"), ([1.0, np.inf, 1.0], "finite"),
                       ([[1, 0, 0], [2, 0, 0], [0, 0, 1]], "degenerate")):
        with pytest.raises(ValueError, match=match):
            _cell.cell_heights(bad)
    with pytest.raises(ValueError, match="too many periodic images"):
        _cell.image_shifts(np.eye(3) * 1e-3, 10.0)
