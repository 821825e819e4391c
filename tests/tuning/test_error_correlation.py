"""The correlation of the real-space and mesh force errors (issue 15; docs/accuracy.md,
"Correlated errors").

On a displaced crystal the two errors are anti-correlated (-0.4..-0.8 at the automatic
choices), so their quadrature sum was 1.5-1.7x the total. The automatic choice measures the
correlation on the tail sample at its parameters (``Tuner._measure_errors``) and chooses
again with it. Checked here: the budget arithmetic, the measured correlation against one
from independent references (a fine mesh and the direct Ewald sum), the estimate then
within [0.67, 1.5] of the measured error and the tolerance met, and the same correlation
and choice on any rank count and split.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from mpi4py import MPI

import pmewald
from pmewald import reference, systems
from pmewald._core import tuning


def _crystal():
    return systems.displace(systems.rock_salt((3, 3, 3)), 0.1, seed=33)


def _rel(f, ref):
    return math.sqrt(float(((f - ref) ** 2).sum()) / float((ref ** 2).sum()))


@pytest.mark.parametrize("cross", [-1.0, -0.6, 0.0, 0.4, 1.0])
def test_budget_meets_the_target_exactly(cross):
    for real in (0.0, 0.2, 0.7, 0.99):
        k = tuning.reciprocal_budget(1.0, real, cross)
        assert k > 0
        assert tuning.combined_error(real, k, cross) == pytest.approx(1.0, rel=1e-12)
    assert tuning.reciprocal_budget(1.0, 1.0, -0.5) == 0.0
    assert tuning.combined_error(3.0, 4.0, 0.0) == pytest.approx(5.0)
    assert tuning.combined_error(1.0, 1.0, -1.0) == 0.0


def test_choice_with_anticorrelated_errors_is_coarser_and_meets_the_target():
    s = _crystal()
    q2 = float((s.charges ** 2).sum())
    alpha = 3.8 / 6.0
    real = tuning.real_space_error(alpha, 6.0, q2, s.n_atoms, float(abs(np.linalg.det(s.box))), 1.0)
    kw = dict(differentiation="ad", coulomb_constant=1.0, order=8, alpha=alpha)
    target = 1.4 * real  # the real-space error is most of the budget
    plain = tuning.choose_cheapest(s.box, 6.0, target, q2, s.n_atoms, **kw)
    anti = tuning.choose_cheapest(s.box, 6.0, target, q2, s.n_atoms, cross=-0.6, **kw)
    assert np.prod(anti["mesh"]) < np.prod(plain["mesh"]) and anti["cost"] < plain["cost"]
    assert anti["est_recip"] > real > plain["est_recip"]  # more than the quadrature budget allows
    assert anti["est_total"] <= target
    assert anti["est_total"] == pytest.approx(tuning.combined_error(anti["est_real"], anti["est_recip"], -0.6))
    with pytest.raises(ValueError, match="cross"):
        tuning.choose_cheapest(s.box, 6.0, target, q2, s.n_atoms, cross=-1.5, **kw)


@pytest.mark.parametrize("tol,diff", [(1e-5, "ad"), (1e-4, "ik"), (1e-6, "auto")])
def test_measured_errors_are_the_reference_ones(tol, diff):
    """Every atom of the 216 is sampled: the errors the choice measured (tail field, two
    reciprocal-only meshes) are those measured independently (the full calculation against
    a 2x finer order-8 mesh; that mesh against reference.ewald), and the estimate made of
    them is the measured error."""
    s = _crystal()
    pme = pmewald.PME(s.box, 6.0, tolerance=tol, differentiation=diff)
    res = pme.compute(s.positions, s.charges)
    p = pme.parameters
    fine_mesh = tuple(tuning.fft_friendly(2 * k) for k in p["mesh"])
    fine = pmewald.PME(s.box, 6.0, alpha=p["alpha"], mesh=fine_mesh, order=8,
                       differentiation="ad").compute(s.positions, s.charges).forces
    ref = reference.ewald(s.box, s.positions, s.charges).forces
    e_k, e_r = res.forces - fine, fine - ref
    rho = float((e_k * e_r).sum() / math.sqrt((e_k ** 2).sum() * (e_r ** 2).sum()))
    if diff != "auto":
        assert rho < -0.4  # the crystal's errors are anti-correlated at these choices
    assert p["estimated_error_measured"]
    assert p["estimated_error_correlation"] == pytest.approx(rho, abs=0.05)
    assert p["estimated_error_reciprocal"] == pytest.approx(math.sqrt((e_k ** 2).sum() / s.n_atoms), rel=0.05)
    assert p["estimated_error_real"] == pytest.approx(math.sqrt((e_r ** 2).sum() / s.n_atoms), rel=0.02)
    measured = _rel(res.forces, ref)
    assert measured <= tol
    assert 0.9 <= res.estimated_error / measured <= 1.1, (res.estimated_error, measured)


def test_uncorrelated_charges_keep_the_quadrature_sum():
    s = systems.random_charges(200, [11.0, 12.0, 13.0], neutral=True, seed=31)
    pme = pmewald.PME(s.box, 5.0, tolerance=1e-5)
    pme.compute(s.positions, s.charges)
    assert abs(pme.parameters["estimated_error_correlation"]) < 0.2
    # explicit parameters: nothing measured, independent errors
    fixed = pmewald.PME(s.box, 5.0, alpha=0.6, mesh=(16, 16, 16), order=6)
    fixed.compute(s.positions, s.charges)
    assert fixed.parameters["estimated_error_correlation"] == 0.0
    assert not fixed.parameters["estimated_error_measured"]


@pytest.mark.mpi(ranks=[1, 2, 3])
@pytest.mark.timeout(120)
def test_correlation_and_choice_are_rank_independent(comm):
    s = _crystal()
    rng = np.random.default_rng(7 + comm.Get_size())
    owner = rng.integers(0, comm.Get_size(), s.n_atoms)
    owner[: s.n_atoms // 2] = 0  # uneven; the last rank of 3 may hold few
    mine = np.nonzero(owner == comm.Get_rank())[0]
    pme = pmewald.PME(s.box, 6.0, tolerance=1e-5, differentiation="ad", comm=comm)
    res = pme.compute(s.positions[mine], s.charges[mine], ids=s.ids[mine])
    solo = None
    if comm.Get_rank() == 0:
        one = pmewald.PME(s.box, 6.0, tolerance=1e-5, differentiation="ad", comm=MPI.COMM_SELF)
        est = one.compute(s.positions, s.charges).estimated_error
        solo = ({k: one.parameters[k] for k in ("alpha", "mesh", "order", "differentiation", "estimated_error_real",
                                                "estimated_error_reciprocal", "estimated_error_correlation")}, est)
    params, solo_est = comm.bcast(solo)
    assert params["estimated_error_correlation"] < -0.4
    for key, value in params.items():
        assert pme.parameters[key] == value, key
    assert res.estimated_error == pytest.approx(solo_est, rel=1e-9)
