"""Tests of the pure-NumPy direct Ewald reference (pmewald.reference)."""

import math

import numpy as np
import pytest

from pmewald import reference, systems, units
from pmewald.reference import ewald

# xi for a unit charge in a cube with neutralising background, E = xi q^2 / (2 L).
XI_TABLE = -2.837297           # literature value, 7 digits
XI_DIGITS = -2.83729747948062  # more digits, as computed here (agrees with the literature)

STRONG = systems.triclinic_box(1.0, "strong")


def _random_system(n, box, seed, neutral=False):
    rng = np.random.default_rng(seed)
    pos = rng.uniform(-1.5, 2.5, (n, 3)) @ box   # deliberately outside the cell
    q = rng.uniform(-1.0, 1.0, n)
    if neutral:
        q -= q.mean()
    return pos, q


def _rel(a, b):
    return abs(a - b) / max(abs(a), abs(b))


# --------------------------------------------------------------------------- erfc

def test_erfc_matches_math_erfc():
    x = np.concatenate([np.linspace(-6.0, 0.0, 2001), np.linspace(0.0, 27.0, 40001),
                        [1e-300, 1e-10, 0.4999999999, 0.5, 2.9999999999, 3.0, 26.5]])
    ref = np.array([math.erfc(v) for v in x])
    got = reference.erfc(x)
    assert got.shape == x.shape
    mask = ref > 1e-290          # subnormal results carry fewer significant bits
    assert np.max(np.abs(got[mask] / ref[mask] - 1.0)) < 3e-15
    assert reference.erfc(0.0) == 1.0
    assert isinstance(reference.erfc(1.0), float)
    assert reference.erfc(40.0) == 0.0


# --------------------------------------------------------------------------- Madelung

MADELUNG_CASES = [
    (systems.rock_salt, (1, 1, 1)),
    (systems.rock_salt, (2, 1, 1)),
    (systems.caesium_chloride, (1, 1, 1)),
    (systems.caesium_chloride, (2, 2, 1)),
    (systems.zinc_blende, (1, 1, 1)),
    (systems.zinc_blende, (1, 1, 2)),
    (systems.wurtzite, (1, 1, 1)),
    (systems.wurtzite, (2, 1, 1)),
]


@pytest.mark.parametrize("factory,cells", MADELUNG_CASES)
def test_madelung_constants(factory, cells):
    s = factory(cells, a=3.7, charge=2.0)
    k = units.KCAL_MOL_ANGSTROM
    res = ewald(s.box, s.positions, s.charges, coulomb_constant=k)
    n_pairs = s.n_atoms / 2
    m = -res.energy * s.nearest_neighbor_distance / (k * 2.0 ** 2 * n_pairs)
    assert _rel(m, s.madelung_reference) < 1e-9
    # the 7-digit table values of the shared reference notes
    table = {"rock_salt": 1.747565, "caesium_chloride": 1.762675,
             "zinc_blende": 1.638055, "wurtzite": 1.641322}
    name = s.name.split()[0]
    assert abs(m - table[name]) < 6e-7
    if name == "wurtzite":
        # ideal u = 3/8 is not the electrostatic equilibrium: forces along c only,
        # equal and opposite on cations and anions
        assert np.max(np.abs(res.forces[:, :2])) < 1e-10 * k
        fz = res.forces[:, 2]
        assert np.min(np.abs(fz)) > 1e-3 * k
        assert np.max(np.abs(np.abs(fz) - np.abs(fz[0]))) < 1e-10 * k
        assert abs(fz.sum()) < 1e-10 * k
    else:
        # cubic structures: every ion sits at a site of cubic symmetry
        assert np.max(np.abs(res.forces)) < 1e-10 * k
    assert _rel(np.trace(res.virial), res.energy) < 1e-12


def test_madelung_rock_salt_primitive_triclinic_cell():
    """NaCl in its 2-atom rhombohedral primitive cell (a genuinely triclinic box)."""
    a = 2.0
    box = 0.5 * a * np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    pos = np.array([[0.0, 0.0, 0.0], [0.5 * a, 0.0, 0.0]])
    res = ewald(box, pos, [1.0, -1.0])
    m = -res.energy * (a / 2)
    assert _rel(m, systems.MADELUNG_CONSTANTS["rock_salt"]) < 1e-12


# --------------------------------------------------------------------------- single charge

@pytest.mark.parametrize("L,position", [(1.0, (0.0, 0.0, 0.0)), (3.5, (-7.3, 12.1, 3.3))])
def test_single_charge_in_cube(L, position):
    q = -1.7
    res = ewald(np.full(3, L), [position], [q])
    xi = 2.0 * L * res.energy / q ** 2
    assert abs(xi - XI_TABLE) < 1e-6
    assert abs(xi - XI_DIGITS) < 1e-12 * abs(XI_DIGITS)
    assert res.terms["background"] < 0
    assert res.terms["exclusion"] == 0.0
    assert np.all(res.forces == 0.0) or np.max(np.abs(res.forces)) < 1e-13
    # the cube is isotropic: W = E/3 * I
    np.testing.assert_allclose(res.virial, np.eye(3) * res.energy / 3.0, atol=1e-13)


def test_single_charge_alpha_independent():
    vals = [ewald(np.ones(3), [[0.2, 0.3, 0.4]], [1.0], alpha=al).energy
            for al in (2.0, 5.0, 11.0)]
    assert max(vals) - min(vals) < 1e-13


# --------------------------------------------------------------------------- invariances

def test_alpha_independence_triclinic_charged_with_exclusions():
    box = 4.0 * STRONG
    pos, q = _random_system(12, box, seed=3)
    ex = np.array([[0, 1], [2, 7], [11, 4]])
    r1 = ewald(box, pos, q, exclusions=ex, alpha=0.9)
    r2 = ewald(box, pos, q, exclusions=ex, alpha=2.3)
    assert _rel(r1.energy, r2.energy) < 1e-12
    scale = np.max(np.abs(r1.forces))
    assert np.max(np.abs(r1.forces - r2.forces)) < 1e-11 * scale
    assert np.max(np.abs(r1.virial - r2.virial)) < 1e-11 * np.max(np.abs(r1.virial))
    # the individual terms do depend on alpha
    assert abs(r1.terms["real"] - r2.terms["real"]) > 1e-3
    # automatic alpha agrees too
    r3 = ewald(box, pos, q, exclusions=ex)
    assert _rel(r1.energy, r3.energy) < 1e-12


def test_lattice_translation_invariance():
    box = 5.0 * STRONG
    pos, q = _random_system(10, box, seed=4, neutral=True)
    ref = ewald(box, pos, q)
    rng = np.random.default_rng(0)
    shifts = rng.integers(-3, 4, size=(10, 3)).astype(float) @ box
    r = ewald(box, pos + shifts, q)
    assert _rel(ref.energy, r.energy) < 1e-12
    np.testing.assert_allclose(r.forces, ref.forces, rtol=0, atol=1e-11 * np.abs(ref.forces).max())
    np.testing.assert_allclose(r.virial, ref.virial, rtol=0, atol=1e-11 * np.abs(ref.virial).max())
    # rigid translation of everything by an arbitrary vector
    r = ewald(box, pos + np.array([0.123, -4.56, 7.89]), q)
    assert _rel(ref.energy, r.energy) < 1e-12


def test_equivalent_cell_vectors():
    box = 4.5 * STRONG
    pos, q = _random_system(9, box, seed=5)
    ex = np.array([[0, 3], [4, 8]])
    ref = ewald(box, pos, q, exclusions=ex, alpha=1.2)
    for m in ([[1, 0, 0], [1, 1, 0], [0, 0, 1]],       # b -> b + a
              [[1, 0, 0], [0, 1, 0], [1, -2, 1]],      # c -> c + a - 2b
              [[0, 1, 0], [0, 0, 1], [1, 0, 0]]):      # cyclic relabelling
        box2 = np.array(m, dtype=float) @ box
        r = ewald(box2, pos, q, exclusions=ex, alpha=1.2)
        assert _rel(ref.energy, r.energy) < 1e-12
        assert _rel(ref.energy, ewald(box2, pos, q, exclusions=ex).energy) < 1e-12
        for key in ("real", "reciprocal", "background", "self", "exclusion"):
            assert abs(ref.terms[key] - r.terms[key]) < 1e-12 * abs(ref.energy)
        np.testing.assert_allclose(r.forces, ref.forces, rtol=0,
                                   atol=1e-11 * np.abs(ref.forces).max())
        np.testing.assert_allclose(r.virial, ref.virial, rtol=0,
                                   atol=1e-11 * np.abs(ref.virial).max())


def test_orthorhombic_box_as_vector_or_matrix():
    pos, q = _random_system(6, np.diag([3.0, 4.0, 5.0]), seed=6, neutral=True)
    r1 = ewald([3.0, 4.0, 5.0], pos, q)
    r2 = ewald(np.diag([3.0, 4.0, 5.0]), pos, q)
    assert r1.energy == r2.energy


def test_coulomb_constant_scales_everything():
    box = 3.0 * STRONG
    pos, q = _random_system(5, box, seed=7)
    r1 = ewald(box, pos, q, exclusions=[[0, 1]], alpha=1.3)
    k = units.COULOMB_CONSTANTS["kj_mol_nm"]
    rk = ewald(box, pos, q, exclusions=[[0, 1]], alpha=1.3, coulomb_constant=k)
    assert _rel(rk.energy, k * r1.energy) < 1e-14
    np.testing.assert_allclose(rk.forces, k * r1.forces, rtol=1e-13, atol=1e-13 * k)
    for key in r1.terms:
        assert abs(rk.terms[key] - k * r1.terms[key]) <= 1e-13 * abs(k * r1.terms[key]) + 1e-300


def test_terms_sum_to_energy_and_net_force_vanishes():
    box = 3.0 * STRONG
    pos, q = _random_system(7, box, seed=8)
    r = ewald(box, pos, q, exclusions=[[1, 2], [3, 6]])
    assert set(r.terms) == {"real", "reciprocal", "self", "background", "exclusion"}
    assert abs(sum(r.terms.values()) - r.energy) < 1e-13 * abs(r.energy)
    assert np.max(np.abs(r.forces.sum(axis=0))) < 1e-12 * np.abs(r.forces).max()
    np.testing.assert_allclose(r.virial, r.virial.T, atol=1e-14)
    assert r.forces.shape == (7, 3) and r.virial.shape == (3, 3)
    qt = q.sum()
    vol = abs(np.linalg.det(box))
    assert abs(r.terms["background"] + math.pi * qt ** 2 / (2 * vol * r.alpha ** 2)) < 1e-14
    assert abs(r.terms["self"] + r.alpha / math.sqrt(math.pi) * np.dot(q, q)) < 1e-13


# --------------------------------------------------------------------------- derivatives

def _energy(box, pos, q, ex):
    return ewald(box, pos, q, exclusions=ex, alpha=1.1).energy


@pytest.mark.parametrize("box", [np.diag([3.0, 3.4, 3.8]), 3.5 * STRONG],
                         ids=["orthorhombic", "strong-triclinic"])
def test_forces_match_central_differences(box):
    pos, q = _random_system(5, box, seed=9)
    ex = np.array([[0, 2]])
    res = ewald(box, pos, q, exclusions=ex, alpha=1.1)
    h = 1e-5
    fd = np.zeros_like(pos)
    for i in range(pos.shape[0]):
        for a in range(3):
            p = pos.copy()
            p[i, a] += h
            ep = _energy(box, p, q, ex)
            p[i, a] -= 2 * h
            em = _energy(box, p, q, ex)
            fd[i, a] = -(ep - em) / (2 * h)
    assert np.max(np.abs(fd - res.forces)) < 1e-7 * np.max(np.abs(res.forces))


@pytest.mark.parametrize("box", [np.diag([3.0, 3.4, 3.8]), 3.5 * STRONG],
                         ids=["orthorhombic", "strong-triclinic"])
def test_virial_matches_strain_derivative(box):
    pos, q = _random_system(5, box, seed=10)        # net charge: background term included
    ex = np.array([[1, 4]])
    res = ewald(box, pos, q, exclusions=ex, alpha=1.1)
    h = 1e-6
    w = np.zeros((3, 3))
    for a in range(3):
        for b in range(3):
            eps = np.zeros((3, 3))
            eps[a, b] = h
            tp, tm = np.eye(3) + eps, np.eye(3) - eps
            ep = _energy(box @ tp.T, pos @ tp.T, q, ex)
            em = _energy(box @ tm.T, pos @ tm.T, q, ex)
            w[a, b] = -(ep - em) / (2 * h)
    assert np.max(np.abs(w - res.virial)) < 1e-7 * np.max(np.abs(res.virial))


def test_trace_of_virial_equals_energy_neutral():
    box = 4.0 * STRONG
    pos, q = _random_system(20, box, seed=11, neutral=True)
    r = ewald(box, pos, q)
    assert abs(np.trace(r.virial) - r.energy) < 1e-12 * abs(r.energy)
    # and under an explicit isotropic scaling E(lambda) = E / lambda
    lam = 1.37
    r2 = ewald(lam * box, lam * pos, q)
    assert _rel(r2.energy, r.energy / lam) < 1e-12


def test_trace_of_virial_equals_energy_charged_with_exclusions():
    box = 4.0 * STRONG
    pos, q = _random_system(15, box, seed=12)
    r = ewald(box, pos, q, exclusions=[[0, 1], [5, 9]])
    assert abs(q.sum()) > 0.1
    assert abs(np.trace(r.virial) - r.energy) < 1e-12 * abs(r.energy)


# --------------------------------------------------------------------------- exclusions

@pytest.mark.parametrize("box", [np.full(3, 3.0), 3.0 * STRONG], ids=["cube", "strong"])
def test_exclusion_removes_exactly_minimum_image_coulomb(box):
    pos = np.array([[0.1, 0.2, 0.3], [2.6, 2.1, 1.9]])
    q = np.array([0.7, -1.3])
    k = units.EV_ANGSTROM
    full = ewald(box, pos, q, coulomb_constant=k)
    excl = ewald(box, pos, q, exclusions=np.array([[1, 0]]), coulomb_constant=k)
    d = reference.minimum_image(box, pos[0] - pos[1])
    r = np.linalg.norm(d)
    # brute force minimum image
    n = np.stack(np.meshgrid(*[np.arange(-4, 5)] * 3, indexing="ij"), -1).reshape(-1, 3)
    r_brute = np.min(np.linalg.norm(pos[0] - pos[1] + n @ np.asarray(reference.as_box(box)[0]),
                                    axis=1))
    assert abs(r - r_brute) < 1e-14
    removed = k * q[0] * q[1] / r
    assert abs(excl.terms["exclusion"] + removed) < 1e-14 * abs(removed)
    assert abs(excl.energy - (full.energy - removed)) < 1e-12 * abs(full.energy)
    f = k * q[0] * q[1] * d / r ** 3        # Coulomb force on atom 0
    np.testing.assert_allclose(excl.forces[0], full.forces[0] - f, atol=1e-12 * k)
    np.testing.assert_allclose(excl.forces[1], full.forces[1] + f, atol=1e-12 * k)
    np.testing.assert_allclose(excl.virial, full.virial - np.outer(d, f), atol=1e-12 * k)


def test_water_exclusions_and_intramolecular_energy():
    w = systems.water_box(8, seed=1)
    k = units.KCAL_MOL_ANGSTROM
    full = ewald(w.box, w.positions, w.charges, coulomb_constant=k)
    ex = ewald(w.box, w.positions, w.charges, exclusions=w.exclusions, coulomb_constant=k)
    i, j = w.exclusions.T
    r = np.linalg.norm(w.positions[i] - w.positions[j], axis=1)
    removed = k * np.sum(w.charges[i] * w.charges[j] / r)
    assert abs((full.energy - ex.energy) - removed) < 1e-11 * abs(removed)
    assert abs(np.trace(ex.virial) - ex.energy) < 1e-11 * abs(ex.energy)


def test_invalid_exclusions_raise():
    box = np.full(3, 3.0)
    pos = np.array([[0.0, 0, 0], [1.0, 0, 0], [0, 1.0, 0]])
    q = np.array([1.0, -0.5, -0.5])
    for bad in ([[0, 0]], [[0, 3]], [[0, 1], [1, 0]], [[0, 1, 2]], [[-1, 0]]):
        with pytest.raises(ValueError):
            ewald(box, pos, q, exclusions=np.array(bad))
    with pytest.raises(ValueError):
        ewald(np.zeros((3, 3)), pos, q)
    with pytest.raises(ValueError):
        ewald(box, pos, q[:2])
    with pytest.raises(ValueError):
        ewald(box, pos, q, alpha=1e-4)          # absurdly many real-space images
    with pytest.raises(ValueError):
        ewald(box, pos, q, alpha=1e4)           # absurdly many k-vectors
    # an empty exclusion list is the same as none
    assert ewald(box, pos, q, exclusions=np.zeros((0, 2), np.int64)).energy == \
        ewald(box, pos, q).energy


# --------------------------------------------------------------------------- larger system

def test_water_box_moderate_size():
    w = systems.water_box(100, seed=2)
    r = ewald(w.box, w.positions, w.charges, exclusions=w.exclusions,
              coulomb_constant=units.KCAL_MOL_ANGSTROM)
    assert abs(np.trace(r.virial) - r.energy) < 1e-11 * abs(r.energy)
    assert np.max(np.abs(r.forces.sum(axis=0))) < 1e-9 * np.abs(r.forces).max()
    r2 = ewald(w.box, w.positions, w.charges, exclusions=w.exclusions,
               coulomb_constant=units.KCAL_MOL_ANGSTROM, alpha=1.5 * r.alpha)
    assert _rel(r.energy, r2.energy) < 1e-12
    # the intramolecular exclusions cancel most of the real-space sum; the virial
    # must still be alpha-independent to ~1e-13 of its size
    assert np.max(np.abs(r.virial - r2.virial)) < 1e-12 * np.max(np.abs(r.virial))
    assert np.max(np.abs(r.forces - r2.forces)) < 1e-12 * np.max(np.abs(r.forces))
    assert abs(sum(r.terms.values()) - r.energy) < 1e-12 * abs(r.terms["real"])


def test_units_constants():
    assert units.COULOMB_CONSTANTS == {
        "gaussian": 1.0, "ev_angstrom": 14.3996454784,
        "kj_mol_nm": 138.93545764, "kcal_mol_angstrom": 332.0637133}
    # kJ/mol nm -> kcal/mol Angstrom: divide by 4.184, multiply by 10
    assert abs(units.KJ_MOL_NM * 10 / 4.184 / units.KCAL_MOL_ANGSTROM - 1) < 1e-8


def test_zero_and_one_atom_edge_cases():
    r = ewald(np.full(3, 2.0), np.zeros((0, 3)), np.zeros(0))
    assert r.energy == 0.0 and r.forces.shape == (0, 3)
    # one neutral atom: nothing at all
    r = ewald(2.0 * STRONG, [[5.0, -3.0, 1.0]], [0.0])
    assert r.energy == 0.0
    # one charged atom in the strongly triclinic cell equals it in an equivalent cell
    box = 2.0 * STRONG
    r1 = ewald(box, [[0.1, 0.2, 0.3]], [1.0])
    r2 = ewald(np.array([[1, 0, 0], [-1, 1, 0], [0, 1, 1]], float) @ box, [[9.0, 9.0, 9.0]], [1.0])
    assert _rel(r1.energy, r2.energy) < 1e-12
    assert abs(np.trace(r1.virial) - r1.energy) < 1e-12 * abs(r1.energy)
