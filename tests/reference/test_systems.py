"""Tests of the deterministic test-system generators (pmewald.systems)."""

import math

import numpy as np
import pytest

from pmewald import systems
from pmewald.reference import minimum_image

CRYSTALS = {
    # factory, atoms per cell, coordination number, r0 / a
    "rock_salt": (systems.rock_salt, 8, 6, 0.5),
    "caesium_chloride": (systems.caesium_chloride, 2, 8, math.sqrt(3) / 2),
    "zinc_blende": (systems.zinc_blende, 8, 4, math.sqrt(3) / 4),
    "wurtzite": (systems.wurtzite, 4, 4, math.sqrt(3.0 / 8.0)),
}


def _check_common(s):
    n = s.positions.shape[0]
    assert s.box.shape == (3, 3) and s.box.dtype == np.float64
    assert s.positions.shape == (n, 3) and s.positions.dtype == np.float64
    assert s.charges.shape == (n,) and s.charges.dtype == np.float64
    assert s.ids.shape == (n,) and s.ids.dtype == np.int64
    np.testing.assert_array_equal(s.ids, np.arange(n))
    assert s.exclusions.dtype == np.int64
    assert s.exclusions.ndim == 2 and s.exclusions.shape[1] == 2
    assert s.n_atoms == n
    assert s.volume > 0
    assert isinstance(s.name, str) and s.name


def _all_distances(s):
    i, j = np.triu_indices(s.n_atoms, 1)
    d = minimum_image(s.box, s.positions[i] - s.positions[j])
    return i, j, np.linalg.norm(d, axis=1)


@pytest.mark.parametrize("name", sorted(CRYSTALS))
def test_crystal_geometry(name):
    factory, per_cell, coordination, r0_over_a = CRYSTALS[name]
    a = 4.3
    s = factory((2, 2, 3), a=a, charge=1.5)   # >= 2 cells: images are distinct atoms
    _check_common(s)
    assert s.n_atoms == per_cell * 12
    assert s.exclusions.shape == (0, 2)
    assert abs(s.charges.sum()) < 1e-12
    assert set(np.round(s.charges, 12)) == {1.5, -1.5}
    assert s.nearest_neighbor_distance == pytest.approx(r0_over_a * a, rel=1e-14)
    assert s.madelung_reference == systems.MADELUNG_CONSTANTS[name]
    i, j, r = _all_distances(s)
    r0 = s.nearest_neighbor_distance
    assert r.min() == pytest.approx(r0, rel=1e-12)
    # nearest neighbours are oppositely charged, with the right coordination number
    near = np.abs(r - r0) < 1e-9 * r0
    assert np.all(s.charges[i[near]] * s.charges[j[near]] < 0)
    counts = np.bincount(np.concatenate([i[near], j[near]]), minlength=s.n_atoms)
    np.testing.assert_array_equal(counts, coordination)


def test_crystal_cell_counts_and_scalar_n_cells():
    assert systems.rock_salt(3).n_atoms == 8 * 27
    assert systems.caesium_chloride((1, 2, 3)).n_atoms == 12
    np.testing.assert_allclose(np.diag(systems.rock_salt((1, 2, 3), a=2.0).box), [2, 4, 6])
    with pytest.raises(ValueError):
        systems.rock_salt((0, 1, 1))


def test_wurtzite_is_ideal_hexagonal():
    a = 3.0
    s = systems.wurtzite(1, a=a)
    b = s.box
    assert np.linalg.norm(b[0]) == pytest.approx(a)
    assert np.linalg.norm(b[1]) == pytest.approx(a)
    assert np.linalg.norm(b[2]) == pytest.approx(a * math.sqrt(8.0 / 3.0))
    cosg = b[0] @ b[1] / (np.linalg.norm(b[0]) * np.linalg.norm(b[1]))
    assert cosg == pytest.approx(-0.5)
    # anions sit u*c = 3/8 c above the cations
    dz = s.positions[2:, 2] - s.positions[:2, 2]
    np.testing.assert_allclose(dz, 0.375 * b[2, 2])


@pytest.mark.parametrize("n", [1, 2, 7, 64])
def test_water_box(n):
    w = systems.water_box(n, seed=3)
    _check_common(w)
    assert w.n_atoms == 3 * n
    assert abs(w.charges.sum()) < 1e-12
    np.testing.assert_array_equal(w.charges[:3], [-0.8476, 0.4238, 0.4238])
    assert w.volume == pytest.approx(n / 0.0334, rel=1e-12)
    # box is orthorhombic
    assert np.count_nonzero(w.box - np.diag(np.diag(w.box))) == 0
    # exclusions: exactly the three intramolecular pairs per molecule, by id
    assert w.exclusions.shape == (3 * n, 2)
    mol = w.ids // 3
    assert np.all(mol[w.exclusions[:, 0]] == mol[w.exclusions[:, 1]])
    assert np.unique(np.sort(w.exclusions, axis=1), axis=0).shape[0] == 3 * n
    # rigid SPC/E geometry
    o, h1, h2 = w.positions[0::3], w.positions[1::3], w.positions[2::3]
    np.testing.assert_allclose(np.linalg.norm(h1 - o, axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(h2 - o, axis=1), 1.0, rtol=1e-12)
    cos_t = np.einsum("ij,ij->i", h1 - o, h2 - o)
    np.testing.assert_allclose(np.degrees(np.arccos(cos_t)), 109.47, rtol=1e-10)
    # no close intermolecular contacts, including a molecule's own images
    if n > 1:
        i, j, r = _all_distances(w)
        inter = mol[i] != mol[j]
        assert r[inter].min() >= 2.2 - 1e-12
    lengths = np.diag(w.box)
    assert lengths.min() >= 2.2


def test_water_box_target_atoms_and_determinism():
    w1 = systems.water_box(target_atoms=100, seed=5)
    assert w1.n_atoms == 99
    w2 = systems.water_box(33, seed=5)
    np.testing.assert_array_equal(w1.positions, w2.positions)
    w3 = systems.water_box(33, seed=6)
    assert not np.allclose(w1.positions, w3.positions)
    w4 = systems.water_box(33, seed=5, density=0.02)
    assert w4.volume == pytest.approx(33 / 0.02)
    with pytest.raises(ValueError):
        systems.water_box()
    with pytest.raises(ValueError):
        systems.water_box(3, target_atoms=9)


def _water_min_intermolecular(w):
    """Smallest intermolecular distance of an orthorhombic water box, brute force.

    Minimum image over all atom pairs of different molecules, plus every atom
    against the periodic images of its own molecule.
    """
    lengths = np.diag(w.box)
    p = w.positions
    mol = np.arange(w.n_atoms) // 3
    best = np.inf
    for s in range(0, w.n_atoms, 256):
        d = p[None, :, :] - p[s:s + 256, None, :]
        d -= lengths * np.round(d / lengths)
        r2 = np.einsum("ijk,ijk->ij", d, d)
        r2[mol[s:s + 256, None] == mol[None, :]] = np.inf
        best = min(best, r2.min())
    shifts = np.array([[i, j, k] for i in (-1, 0, 1) for j in (-1, 0, 1) for k in (-1, 0, 1)
                       if (i, j, k) != (0, 0, 0)]) * lengths
    m = p.reshape(-1, 3, 3)
    d = m[:, :, None, None, :] - m[:, None, :, None, :] + shifts
    best = min(best, np.einsum("...k,...k->...", d, d).min())
    return math.sqrt(best)


def _water_min_intermolecular_cells(w, cutoff):
    """Smallest intermolecular distance below ``cutoff`` via a cell list (inf if none).

    Needs at least three cells of side ``>= cutoff`` per axis, so that a
    molecule's own images lie beyond the cutoff.
    """
    lengths = np.diag(w.box)
    nc = np.floor(lengths / cutoff).astype(int)
    assert nc.min() >= 3
    p = w.positions
    mol = np.arange(w.n_atoms) // 3
    cell = np.floor(p / lengths * nc).astype(int) % nc
    cid = (cell[:, 0] * nc[1] + cell[:, 1]) * nc[2] + cell[:, 2]
    order = np.argsort(cid, kind="stable")
    start = np.searchsorted(cid[order], np.arange(nc.prod() + 1))
    best = np.inf
    for shift in np.ndindex(3, 3, 3):
        nb = (cell + np.array(shift) - 1) % nc
        nid = (nb[:, 0] * nc[1] + nb[:, 1]) * nc[2] + nb[:, 2]
        count = start[nid + 1] - start[nid]
        for k in range(int(count.max())):
            i = np.flatnonzero(count > k)
            j = order[start[nid[i]] + k]
            d = p[j] - p[i]
            d -= lengths * np.round(d / lengths)
            r2 = np.einsum("ij,ij->i", d, d)[mol[i] != mol[j]]
            if r2.size:
                best = min(best, r2.min())
    return math.sqrt(best)


@pytest.mark.parametrize("seed,density,min_distance", [(0, 0.0334, 2.2), (7, 0.0334, 2.2),
                                                       (1, 0.025, 2.4)])
def test_water_box_no_clash_brute_force(seed, density, min_distance):
    w = systems.water_box(target_atoms=3000, seed=seed, density=density,
                          min_distance=min_distance)
    assert w.n_atoms == 3000
    assert w.volume == pytest.approx(1000 / density, rel=1e-12)
    assert _water_min_intermolecular(w) >= min_distance
    # the cell list agrees with brute force
    cut = 3.0
    brute = _water_min_intermolecular(w)
    cells = _water_min_intermolecular_cells(w, cut)
    assert cells == pytest.approx(brute, rel=1e-12) if brute < cut else cells == np.inf


def test_water_box_20k_properties():
    w = systems.water_box(target_atoms=20000, seed=11)
    _check_common(w)
    n = 6667
    assert w.n_atoms == 3 * n
    assert w.volume == pytest.approx(n / 0.0334, rel=1e-12)
    assert np.count_nonzero(w.box - np.diag(np.diag(w.box))) == 0
    assert abs(w.charges.sum()) < 1e-9
    np.testing.assert_array_equal(w.charges.reshape(-1, 3),
                                  np.tile([-0.8476, 0.4238, 0.4238], (n, 1)))
    o = 3 * np.arange(n)
    np.testing.assert_array_equal(
        w.exclusions, np.stack([o, o + 1, o, o + 2, o + 1, o + 2], 1).reshape(-1, 2))
    oxy, h1, h2 = w.positions[0::3], w.positions[1::3], w.positions[2::3]
    np.testing.assert_allclose(np.linalg.norm(h1 - oxy, axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(h2 - oxy, axis=1), 1.0, rtol=1e-12)
    cos_t = np.einsum("ij,ij->i", h1 - oxy, h2 - oxy)
    np.testing.assert_allclose(np.degrees(np.arccos(cos_t)), 109.47, rtol=1e-10)
    assert _water_min_intermolecular_cells(w, 2.2) >= 2.2
    # molecules stay near the box (positions are not wrapped) and fill it evenly
    lengths = np.diag(w.box)
    assert np.all(oxy > -2.0) and np.all(oxy < lengths + 2.0)
    counts = np.histogram(oxy[:, 0] % lengths[0], bins=8, range=(0, lengths[0]))[0]
    assert counts.min() > 0.8 * n / 8
    # orientations are random: dipole directions have no preferred axis
    dip = 0.5 * (h1 + h2) - oxy
    dip /= np.linalg.norm(dip, axis=1)[:, None]
    assert np.all(np.abs(dip.mean(axis=0)) < 0.05)
    np.testing.assert_allclose(np.mean(dip ** 2, axis=0), 1.0 / 3.0, atol=0.05)
    # deterministic
    np.testing.assert_array_equal(systems.water_box(target_atoms=20000, seed=11).positions,
                                  w.positions)


@pytest.mark.parametrize("kind", ["cubic", "strong", "restricted", "hexagonal"])
def test_random_charges(kind):
    box = systems.triclinic_box(6.0, kind)
    s = systems.random_charges(40, box, seed=1, min_distance=1.0)
    _check_common(s)
    assert s.exclusions.shape == (0, 2)
    np.testing.assert_array_equal(s.box, box)
    assert abs(s.charges.sum()) < 1e-13
    assert np.all(np.abs(s.charges) <= 2.0)
    _, _, r = _all_distances(s)
    assert r.min() >= 1.0
    # inside the cell
    frac = s.positions @ np.linalg.inv(box)
    assert np.all(frac >= 0) and np.all(frac < 1)
    again = systems.random_charges(40, box, seed=1, min_distance=1.0)
    np.testing.assert_array_equal(s.positions, again.positions)
    np.testing.assert_array_equal(s.charges, again.charges)


def test_random_charges_non_neutral_and_box_forms():
    s = systems.random_charges(10, 5.0, neutral=False, seed=2)
    assert abs(s.charges.sum()) > 1e-6
    np.testing.assert_array_equal(s.box, 5.0 * np.eye(3))
    s = systems.random_charges(10, [3.0, 4.0, 5.0], seed=2)
    np.testing.assert_array_equal(s.box, np.diag([3.0, 4.0, 5.0]))


def test_triclinic_box():
    L = 2.0
    strong = systems.triclinic_box(L)
    np.testing.assert_allclose(strong, L * np.array([[1, 0, 0], [0.6, 0.9, 0],
                                                     [0.4, -0.3, 0.8]]))
    # not LAMMPS-restricted: the xy tilt exceeds half of a
    assert strong[1, 0] > 0.5 * strong[0, 0]
    np.testing.assert_array_equal(systems.triclinic_box(L, "cubic"), L * np.eye(3))
    hexa = systems.triclinic_box(L, "hexagonal")
    assert abs(np.linalg.det(hexa)) == pytest.approx(L ** 3 * math.sqrt(3) / 2)
    r = systems.triclinic_box(L, "restricted")
    assert np.allclose(np.triu(r, 1), 0)
    assert abs(r[1, 0]) <= 0.5 * r[0, 0] and abs(r[2, 0]) <= 0.5 * r[0, 0]
    assert abs(r[2, 1]) <= 0.5 * r[1, 1]
    with pytest.raises(ValueError):
        systems.triclinic_box(L, "nonsense")


def test_displace():
    s = systems.rock_salt(2)
    before = s.positions.copy()
    d = systems.displace(s, 0.05, seed=4)
    np.testing.assert_array_equal(s.positions, before)      # original untouched
    _check_common(d)
    step = d.positions - s.positions
    assert 0.035 < np.sqrt(np.mean(step ** 2)) < 0.065
    assert d.madelung_reference is None and d.nearest_neighbor_distance is None
    np.testing.assert_array_equal(d.charges, s.charges)
    d.charges[0] = 99.0
    assert s.charges[0] != 99.0                               # arrays are copies
    d2 = systems.displace(s, 0.05, seed=4)
    np.testing.assert_array_equal(systems.displace(s, 0.05, seed=4).positions, d2.positions)
    assert not np.allclose(systems.displace(s, 0.05, seed=5).positions, d2.positions)


def test_replicate_is_the_same_periodic_system_larger():
    """replicate: a water box cut so that molecules cross its faces, repeated 2x1x1 and in a
    triclinic cell 1x2x1, has twice the energy and the same forces on each copy (the direct
    Ewald sum with the exclusions: an exclusion mapped to the wrong atom, or a molecule torn
    apart by the larger cell, changes both); its molecules are whole and its ids and
    exclusions are the documented ones; rock salt repeated is the larger crystal."""
    from pmewald import reference

    w = systems.water_box(40, seed=2)
    # shift by half a cell and wrap: molecules straddle the faces of the small box
    frac = (w.positions + 0.5 * w.box.sum(axis=0)) @ np.linalg.inv(w.box)
    w.positions = (frac - np.floor(frac)) @ w.box
    torn = np.linalg.norm(w.positions[w.exclusions[:, 0]] - w.positions[w.exclusions[:, 1]], axis=1).max()
    assert torn > 5.0  # the test has teeth: some molecule is cut by a face
    tri = systems.random_charges(30, systems.triclinic_box(9.0, "strong"), seed=4)
    tri.exclusions = np.array([[0, 1], [2, 3], [1, 5]], dtype=np.int64)
    for s, reps in ((w, (2, 1, 1)), (tri, (1, 2, 1))):
        r = systems.replicate(s, reps)
        _check_common(r)
        n = s.n_atoms
        assert r.n_atoms == 2 * n and len(r.exclusions) == 2 * len(s.exclusions)
        np.testing.assert_allclose(r.box, s.box * np.array(reps)[:, None])
        np.testing.assert_array_equal(r.exclusions[len(s.exclusions):], s.exclusions + n)
        if s is w:
            whole = np.linalg.norm(r.positions[r.exclusions[:, 0]] - r.positions[r.exclusions[:, 1]], axis=1)
            assert whole.max() < 2.0  # O-H 1 A, H-H 1.63 A
        small = reference.ewald(s.box, s.positions, s.charges, exclusions=s.exclusions)
        large = reference.ewald(r.box, r.positions, r.charges, exclusions=r.exclusions)
        assert large.energy == pytest.approx(2.0 * small.energy, rel=1e-10)
        np.testing.assert_allclose(large.forces[:n], small.forces, rtol=0, atol=1e-9 * np.abs(small.forces).max())
        np.testing.assert_allclose(large.forces[n:], small.forces, rtol=0, atol=1e-9 * np.abs(small.forces).max())
    big, rep = systems.rock_salt((2, 2, 2)), systems.replicate(systems.rock_salt((1, 1, 1)), 2)
    np.testing.assert_allclose(rep.box, big.box)
    assert rep.madelung_reference == big.madelung_reference
    key = lambda p: np.round(np.sort(p @ np.array([1.0, 1e3, 1e6])), 6)  # noqa: E731
    np.testing.assert_array_equal(key(rep.positions), key(big.positions))
    with pytest.raises(ValueError, match="n_cells"):
        systems.replicate(w, (2, 0, 1))


@pytest.mark.parametrize("box", [np.diag([14.0, 15.0, 16.0]), np.array([[13.0, 0, 0], [-6.0, 12.0, 0], [4.0, -5.0, 11.0]])],
                         ids=["orthorhombic", "triclinic"])
def test_random_charges_keep_min_distance_and_their_seed(box):
    """random_charges with min_distance: every pair (minimum image, checked against all atoms)
    at least that far apart, and the same positions for the same seed as the brute-force
    placement (each candidate against every atom placed, in order) the cell grid replaced."""
    from pmewald.geometry.cell import minimum_image

    n, md = 400, 1.2
    s = systems.random_charges(n, box, seed=4, min_distance=md)
    d = minimum_image(box, (s.positions[:, None, :] - s.positions[None, :, :]).reshape(-1, 3)).reshape(n, n, 3)
    r2 = np.einsum("ijk,ijk->ij", d, d) + np.diag(np.full(n, np.inf))
    assert r2.min() >= md ** 2
    rng = np.random.default_rng(4)
    pos = []
    while len(pos) < n:
        x = rng.random(3) @ box
        if pos:
            dd = minimum_image(box, np.array(pos) - x)
            if np.min(np.einsum("ij,ij->i", dd, dd)) < md ** 2:
                continue
        pos.append(x)
    assert np.array_equal(s.positions, np.array(pos))
