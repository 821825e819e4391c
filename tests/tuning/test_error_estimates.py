"""The error estimates, cost model and parameter choice of cpp/tuning/ (``pmewald._core.tuning``),
single rank, no MPI: each estimate against the error measured with the serial reciprocal
reference (``_core._testing.pme.serial_reference``) and a direct k-space sum
(tests/kspace_reference.py); the choice meets its target and is the cheapest by the model.
"""

import math

import numpy as np
import pytest

from kspace_reference import BOXES, direct_reciprocal, random_system, rms
from pme_cases import AD_CHEAP, IK_CHEAP
from pmewald._core import tuning as T
from pmewald._core._testing import pme as K


ESTIMATE_CASES = [  # order, meshes spanning ~1e-2 .. 1e-7 measured errors
    (3, [8, 16, 32, 64]),
    (4, [8, 16, 32, 48]),
    (5, [8, 12, 24, 40]),
    (6, [8, 12, 20, 32]),
    (7, [8, 12, 16, 24]),
    (8, [8, 10, 16, 24]),
]


@pytest.fixture(scope="module")
def estimate_systems():
    out = {}
    for name, box in BOXES.items():
        pos, q = random_system(200, box, seed=21)
        alpha = 0.45
        out[name] = (box, pos, q, alpha, direct_reciprocal(box, pos, q, alpha)[1])
    return out


@pytest.mark.parametrize("diff", ["ad", "ik"])
@pytest.mark.parametrize("name", list(BOXES))
def test_reciprocal_error_estimate_within_factor_two(estimate_systems, name, diff):
    box, pos, q, alpha, F0 = estimate_systems[name]
    measured_range = []
    for p, meshes in ESTIMATE_CASES:
        for Km in meshes:
            mesh = (Km, Km, Km)
            _, F, _, _ = K.serial_reference(box, pos, q, alpha, mesh, p, diff)
            meas = rms(F - F0)
            est = T.estimate_errors(box, alpha, 9.0, mesh, p, diff, float(q @ q), len(q))["recip"]
            assert 0.5 <= est / meas <= 2.0, (p, Km, meas, est)
            measured_range.append(meas)
    assert min(measured_range) < 1e-7 and max(measured_range) > 1e-3


def test_real_space_estimate_formula():
    box = BOXES["cubic"]
    e = T.estimate_errors(box, 0.3, 9.0, (16, 16, 16), 5, "ad", 50.0, 100)
    ref = 2 * 50.0 / math.sqrt(100 * 9.0 * 1000.0) * math.exp(-(0.3 * 9.0) ** 2)
    assert e["real"] == pytest.approx(ref, rel=1e-14)
    assert e["total"] == pytest.approx(math.hypot(e["real"], e["recip"]), rel=1e-14)
    e2 = T.estimate_errors(box, 0.3, 9.0, (16, 16, 16), 5, "ad", 50.0, 100, coulomb_constant=2.0)
    assert e2["recip"] == pytest.approx(2 * e["recip"], rel=1e-12)


def test_fft_friendly():
    assert [T.fft_friendly(n) for n in (1, 7, 11, 13, 17, 31, 49, 97, 121)] == \
        [1, 8, 12, 15, 18, 32, 50, 100, 125]


@pytest.mark.parametrize("diff", ["ad", "ik"])
def test_choose_parameters_meets_target(estimate_systems, diff):
    box, pos, q, _, _ = estimate_systems["triclinic"]
    sq2, n, rc = float(q @ q), len(q), 4.0
    for target in (1e-3, 1e-5):
        P = T.choose_parameters(box, rc, target, sq2, n, diff)
        assert P["order"] == 5
        assert all(T.fft_friendly(k) == k and k >= 5 for k in P["mesh"])
        assert P["est_real"] == pytest.approx(target / math.sqrt(2), rel=1e-9)
        assert P["est_recip"] <= target / math.sqrt(2) * (1 + 1e-12)
        assert P["est_total"] <= target * (1 + 1e-12)
        # the chosen mesh really delivers the reciprocal accuracy
        F0 = direct_reciprocal(box, pos, q, P["alpha"])[1]
        _, F, _, _ = K.serial_reference(box, pos, q, P["alpha"], P["mesh"], 5, diff)
        assert rms(F - F0) <= target
        assert rms(F - F0) >= 0.3 * P["est_recip"]  # and the mesh is not wastefully fine
    # triclinic: mesh follows the plane spacings (heights), not the edge lengths:
    # a_1 and a_3 are equally long but the a_1 planes are 2.2x closer
    sheared = np.array([[10.0, 0.0, 0.0], [8.0, 4.0, 0.0], [0.0, 0.0, 10.0]])
    h = 1 / np.linalg.norm(np.linalg.inv(sheared), axis=0)
    Ps = T.choose_parameters(sheared, 3.0, 1e-4, 100.0, 200, diff)
    ratio = np.array(Ps["mesh"]) / h
    assert ratio.max() / ratio.min() < 1.25
    assert Ps["mesh"][2] > 2 * Ps["mesh"][0]
    # overrides
    P2 = T.choose_parameters(box, rc, 1e-4, sq2, n, diff, alpha=0.8, mesh=(20, 24, 30), order=6)
    assert (P2["alpha"], P2["mesh"], P2["order"]) == (0.8, (20, 24, 30), 6)
    P3 = T.choose_parameters(box, rc, 1e-4, sq2, n, diff, order=None)
    assert 4 <= P3["order"] <= 8 and P3["est_total"] <= 1e-4 * (1 + 1e-12)


def test_reciprocal_error_parts_and_continuum_scaling():
    """recip = k sqrt((pair + self) / n), and the scaling choose_cheapest relies on: at a
    fixed alpha h, pair ~ alpha and self ~ alpha^4 (checked for alpha L = 8 -> 16)."""
    box = np.array([[20.0, 0.0, 0.0], [5.0, 18.0, 0.0], [-3.0, 2.0, 22.0]])
    sq2, n = 300.0, 400
    for diff in ("ad", "ik"):
        e = T.reciprocal_error_parts(box, 0.4, (20, 18, 22), 6, diff, sq2, n)
        est = T.estimate_errors(box, 0.4, 9.0, (20, 18, 22), 6, diff, sq2, n, coulomb_constant=3.0)["recip"]
        assert est == pytest.approx(3.0 * math.sqrt((e["pair"] + e["self"]) / n), rel=1e-12)
        lo = T.reciprocal_error_parts(box, 0.4, (24, 24, 27), 6, diff, sq2, n)
        hi = T.reciprocal_error_parts(box, 0.8, (48, 48, 54), 6, diff, sq2, n)
        assert hi["pair"] == pytest.approx(2.0 * lo["pair"], rel=0.05)
        if diff == "ad":   # ik's self force is negligible
            assert hi["self"] == pytest.approx(16.0 * lo["self"], rel=0.05)


def test_cost_model():
    c = T.cost_model()
    assert set(c) == {"fft", "mesh_ad", "mesh_ik", "atom_ad", "atom_ik", "point_ad", "point_ik",
                      "transforms_ad", "transforms_ik"}
    assert all(v >= 0 for v in c.values()) and c["fft"] > 0
    mesh, p, n = (40, 45, 48), 6, 1000
    N = 40 * 45 * 48
    for diff in ("ad", "ik"):
        want = (c["fft"] * c[f"transforms_{diff}"] * N * math.log2(N) + c[f"mesh_{diff}"] * N
                + (c[f"atom_{diff}"] + c[f"point_{diff}"] * p ** 3) * n)
        assert T.reciprocal_cost(mesh, p, diff, n) == pytest.approx(want, rel=1e-12)
    assert T.reciprocal_cost(mesh, p, "ad", n, cost={"fft": 1.0, "mesh_ad": 0.0, "atom_ad": 0.0,
                                                     "point_ad": 0.0}) == pytest.approx(2 * N * math.log2(N))
    with pytest.raises(ValueError):
        T.reciprocal_cost(mesh, p, "ad", n, cost={"fast": 1.0})


@pytest.mark.parametrize("name", list(BOXES))
def test_choose_cheapest(estimate_systems, name):
    box, pos, q, _, _ = estimate_systems[name]
    sq2, n, rc = float(q @ q), len(q), 4.0
    for target in (1e-3, 1e-5):
        auto = T.choose_cheapest(box, rc, target, sq2, n)
        # meets the target: exact estimates at the chosen parameters
        e = T.estimate_errors(box, auto["alpha"], rc, auto["mesh"], auto["order"], auto["differentiation"], sq2, n)
        assert e["real"] == pytest.approx(auto["est_real"], rel=1e-12)
        assert e["recip"] == pytest.approx(auto["est_recip"], rel=1e-12)
        assert e["total"] <= target * (1 + 1e-12)
        assert 4 <= auto["order"] <= 8 and auto["alpha"] * rc >= 2.0 - 1e-12
        assert all(T.fft_friendly(k) == k and k >= auto["order"] for k in auto["mesh"])
        assert auto["cost"] == pytest.approx(T.reciprocal_cost(auto["mesh"], auto["order"],
                                                               auto["differentiation"], n), rel=1e-12)
        cands = auto["candidates"]
        assert cands[0]["exact"] and cands[0]["cost"] == auto["cost"]
        assert [c["cost"] for c in cands] == sorted(c["cost"] for c in cands)
        # no explicit choice is cheaper (by the model) than the automatic one
        for diff in ("ad", "ik"):
            for order in (None, 5):
                r = T.choose_cheapest(box, rc, target, sq2, n, differentiation=diff, order=order)
                assert r["differentiation"] == diff and (order is None or r["order"] == order)
                assert T.estimate_errors(box, r["alpha"], rc, r["mesh"], r["order"], diff, sq2, n)["total"] \
                    <= target * (1 + 1e-12)
                assert auto["cost"] <= r["cost"] * 1.02, (diff, order, auto, r)
        # the cost model decides the differentiation
        assert T.choose_cheapest(box, rc, target, sq2, n, cost=IK_CHEAP)["differentiation"] == "ik"
        assert T.choose_cheapest(box, rc, target, sq2, n, cost=AD_CHEAP)["differentiation"] == "ad"
        # a given alpha is kept; the scan finds a smaller alpha than the old fixed rule would
        fixed = T.choose_cheapest(box, rc, target, sq2, n, alpha=0.9)
        assert fixed["alpha"] == 0.9 and fixed["est_total"] <= target * (1 + 1e-12)
        # a mesh bound (on the ad estimate) is honoured by ik too
        bound = 0.3 * target
        b = T.choose_cheapest(box, rc, target, sq2, n, cost=IK_CHEAP, mesh_target=bound)
        ad_est = T.estimate_errors(box, b["alpha"], rc, b["mesh"], b["order"], "ad", sq2, n)["recip"]
        assert ad_est <= bound * (1 + 1e-12)
    with pytest.raises(ValueError):
        T.choose_cheapest(box, rc, 1e-14, sq2, n, orders=(4, 5))  # unreachable
    with pytest.raises(ValueError):
        T.choose_cheapest(box, rc, 1e-4, sq2, n, orders=(2, 5))
