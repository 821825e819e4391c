"""The error estimate on molecular and correlated systems (issue 15).

The validation sweep of ``pmewald.bench.accuracy`` at its ``small`` size, against the direct
Ewald sum: random charges (neutral, and with a net charge in a triclinic cell), a displaced
rock-salt crystal, SPC/E-like water, peptide-like chains with partial charges in water
(1-2/1-3/1-4 exclusions), ion pairs in a triclinic cell. Criteria (issue 15's "Done when"):

- automatic parameters, tolerances 1e-3..1e-6: measured <= tolerance and
  estimated / measured relative RMS force error within [0.67, 1.5];
- explicit parameters (orders 4, 6, 8, ad and ik, two meshes; the benchmark runs 4-8 and
  three meshes): within [0.5, 2].

Known limit (docs/accuracy.md): on a crystal, whose atoms all sit alike in the mesh cells of
a commensurate mesh, the functional's average over the mesh position does not hold (ik up to
~3x pessimistic), and the real-space and mesh errors of the displaced crystal are
anti-correlated (-0.4..-0.8), so their quadrature sum is up to 1.7x the total while each
part alone is right to 10%. The automatic choice measures that correlation
(tests/tuning/test_error_correlation.py) and meets the common criteria; with explicit
parameters nothing is measured, and the crystal's explicit cases assert only that the
estimate is never optimistic by more than 1.5x.

Also: the structure factors the correlated model uses are the direct sums, and neither
they nor the choice depend on how the atoms are split over the ranks.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import pmewald
from pmewald import systems
from pmewald.bench import accuracy as bench_accuracy
from pmewald._core import tuning


def _failures(rows):
    return [bench_accuracy._line(r) for r in rows if not r["ok"]]


CRYSTALS = {"nacl-displaced"}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(bench_accuracy.sweep_systems("small")))
def test_sweep_automatic(name):
    rows = bench_accuracy.run_sweep("small", names=[name], explicit=False, diffs=("auto",))
    assert len(rows) == len(bench_accuracy.TOLERANCES)
    bad = _failures(rows)
    assert not bad, "\n".join(bad)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(bench_accuracy.sweep_systems("small")))
def test_sweep_explicit(name):
    rows = bench_accuracy.run_sweep("small", names=[name], auto=False,
                                    explicit_kw=dict(orders=(4, 6, 8), spacings=(1.2, 0.7)))
    assert len(rows) == 12
    if name in CRYSTALS:
        optimistic = [r for r in rows if not r["ratio"] >= 1 / 1.5]
        assert not optimistic, "\n".join(bench_accuracy._line(r) for r in optimistic)
        rows = [r for r in rows if r["differentiation"] == "ad" and r["real_share"] < 0.2]
        assert len(rows) >= 4
    bad = _failures(rows)
    assert not bad, "\n".join(bad)


def test_structure_factors_are_the_direct_sums():
    s = systems.random_charges(40, systems.triclinic_box(9.0, "strong"), neutral=False, seed=5)
    half = (3, 4, 5)
    got = tuning.local_structure_factors(s.box, s.positions, s.charges, half)
    x = np.stack(np.meshgrid(*[np.arange(-h, h + 1) for h in half], indexing="ij"), -1).reshape(-1, 3)
    frac = s.positions @ np.linalg.inv(s.box)
    ph = np.exp(-2j * np.pi * x @ frac.T)
    S, T = ph @ s.charges, ph @ s.charges ** 3
    scale = np.abs(s.charges).sum()
    assert np.max(np.abs(got[0].reshape(-1) - S)) < 1e-3 * scale
    assert np.max(np.abs(got[1].reshape(-1) - T)) < 1e-3 * np.abs(s.charges ** 3).sum()
    # the correlation c = C / (sum_q2^2 - sum_q4), C = sum_q2 |S|^2 - 2 Re(S T*) + sum_q4
    q2, q4 = float((s.charges ** 2).sum()), float((s.charges ** 4).sum())
    corr = tuning.ChargeCorrelation(half, got, q2, q4)
    i = 17
    want = (q2 * abs(S[i]) ** 2 - 2 * (S[i] * T[i].conjugate()).real + q4) / (q2 * q2 - q4)
    assert corr(*x[i]) == pytest.approx(want, rel=1e-3, abs=1e-4)
    assert corr(half[0] + 1, 0, 0) == 1.0  # outside the table: uncorrelated


def test_the_estimate_memo_tells_correlation_tables_apart():
    """reciprocal_error_parts remembers its sums (every input bit for bit, the table by its
    serial number): a table made after another was freed, at the same address perhaps, gets
    its own estimate, and asking twice gives the same value."""
    import gc

    box = np.diag([14.0, 15.0, 16.0])
    half = (4, 4, 4)

    def table_and_estimate(seed):
        s = systems.random_charges(60, box, seed=seed)
        q2, q4 = float((s.charges ** 2).sum()), float((s.charges ** 4).sum())
        corr = tuning.ChargeCorrelation(half, tuning.local_structure_factors(box, s.positions, s.charges, half),
                                        q2, q4)
        e = tuning.reciprocal_error_parts(box, 0.4, (16, 16, 18), 5, "ad", 50.0, 60, correlation=corr)
        again = tuning.reciprocal_error_parts(box, 0.4, (16, 16, 18), 5, "ad", 50.0, 60, correlation=corr)
        assert again == e
        return e

    first = table_and_estimate(1)
    gc.collect()
    second = table_and_estimate(2)
    assert second["pair"] != first["pair"]


@pytest.mark.parametrize("diff", ["ad", "ik"])
def test_the_orthogonal_sum_is_the_general_one(diff):
    """An orthorhombic cell's estimate sums its aliases from per-axis tables (their |k|^2 and
    Gaussians factorise); a cell tilted by 1e-9 takes the general sum (k from the reciprocal
    lattice, exp per alias). They agree to the tilt's effect, with and without the charges'
    table, on meshes whose aliases matter (coarse, small alpha h) or not (fine: the ellipsoid
    part of the mesh only)."""
    box = np.diag([14.0, 15.0, 23.0])
    tilted = box.copy()
    tilted[2, 0] = 1e-9
    s = systems.random_charges(60, box, seed=3)
    q2, q4 = float((s.charges ** 2).sum()), float((s.charges ** 4).sum())
    half = (5, 5, 8)
    corr = tuning.ChargeCorrelation(half, tuning.local_structure_factors(box, s.positions, s.charges, half), q2, q4)
    for mesh, order, alpha in (((12, 12, 20), 4, 0.45), ((16, 18, 25), 6, 0.3), ((40, 40, 64), 5, 0.25)):
        for table in (corr, None):
            a, b = (tuning.reciprocal_error_parts(c, alpha, mesh, order, diff, q2, 60, correlation=table)
                    for c in (box, tilted))
            assert a["pair"] == pytest.approx(b["pair"], rel=1e-7), (mesh, table is None)
            assert a["self"] == pytest.approx(b["self"], rel=1e-7), (mesh, table is None)
            assert a["pair"] > 0


def test_uncorrelated_model_is_the_textbook_functional():
    """error_model="uncorrelated" reports the plain functional; on random charges the two
    models agree, on water the correlated estimate is the smaller (and the right) one."""
    for s, close in ((systems.random_charges(200, [11.0, 12.0, 13.0], neutral=True, seed=31), True),
                     (systems.water_box(100, seed=34), False)):
        est = {}
        for model in ("correlated", "uncorrelated"):
            pme = pmewald.PME(s.box, 5.0, alpha=0.6, mesh=(16, 16, 16), order=4, differentiation="ad",
                              error_model=model)
            est[model] = pme.compute(s.positions, s.charges, exclusions=s.exclusions).estimated_error
        ratio = est["correlated"] / est["uncorrelated"]
        assert (0.8 < ratio < 1.25) if close else ratio < 0.8, (close, est)


@pytest.mark.mpi(ranks=[1, 2, 3])
@pytest.mark.timeout(200)
def test_correlated_estimate_is_rank_independent(comm):
    s = systems.solvated_chains(1, 6, n_water=100, seed=35)
    rng = np.random.default_rng(comm.Get_size())
    owner = rng.integers(0, comm.Get_size(), s.n_atoms)
    owner[: s.n_atoms // 3] = 0  # uneven
    mine = np.nonzero(owner == comm.Get_rank())[0]
    pme = pmewald.PME(s.box, 6.0, tolerance=1e-4, comm=comm)
    res = pme.compute(s.positions[mine], s.charges[mine], ids=s.ids[mine], exclusions=s.exclusions
                      if comm.Get_rank() == 0 else np.zeros((0, 2), dtype=np.int64))
    solo = None
    if comm.Get_rank() == 0:  # one rank alone, once (every rank tuning its own copy tripled the time)
        one = pmewald.PME(s.box, 6.0, tolerance=1e-4, comm=MPI.COMM_SELF)
        est = one.compute(s.positions, s.charges, exclusions=s.exclusions).estimated_error
        solo = ({key: one.parameters[key] for key in ("alpha", "mesh", "order", "differentiation")}, est)
    params, solo_est = comm.bcast(solo)
    for key, value in params.items():
        assert pme.parameters[key] == value, key
    assert res.estimated_error == pytest.approx(solo_est, rel=1e-9)
    ests = comm.allgather(res.estimated_error)
    assert all(e == ests[0] for e in ests)
