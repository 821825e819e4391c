"""Charge sets (issue 17, item 2): ``PME.compute(positions, charges)`` with charges of shape
(n, m), m charge vectors on the same atoms in one call.

Every set of a batched call is checked against a separate call with that set alone (energy,
every term, forces, virial, potentials, fields, probes; 1e-12 of their size), with net
charge and exclusions, ad and ik; on 1-4 ranks in every comm mode, uneven splits and empty
ranks against the serial result; bad input (shapes, m differing between ranks, NaN in one
set) raises the same ValueError on every rank and leaves the object right; an all-zero set
among others is exactly zero; the pair list (skin) stays right across sets calls.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from pme_cases import MODES, _SYSTEMS, assert_same_per_atom, half_height_cutoff, split_atoms, split_exclusions
from pmewald import PME, systems


def _sets(s, m, seed=0, zero=None):
    """m charge sets on system s: the system's charges scaled and perturbed (net charge
    differing from set to set), set `zero` all zeros."""
    rng = np.random.default_rng(seed)
    q = s.charges[:, None] * rng.uniform(0.5, 1.5, m) + rng.normal(0, 0.2, (s.n_atoms, m))
    if zero is not None:
        q[:, zero] = 0.0
    return q


def _close(a, b, what, rel=1e-12):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    scale = max(np.abs(b).max(), 1e-300)
    assert np.abs(a - b).max() <= rel * scale, (what, np.abs(a - b).max(), scale)


def _same_as_alone(res, alone, what, rel=1e-12):
    """One set of a batched result (res.charge_set(c)) against the call with that set alone."""
    scale = max(abs(v) for v in alone.terms.values())
    assert abs(res.energy - alone.energy) <= rel * scale, (what, res.energy, alone.energy)
    for t, v in alone.terms.items():
        assert abs(res.terms[t] - v) <= rel * scale, (what, t, res.terms[t], v)
    _close(res.forces, alone.forces, what + " forces", rel)
    _close(res.virial, alone.virial, what + " virial", rel)
    for name in ("potentials", "fields", "energies", "probe_potentials", "probe_fields"):
        if getattr(alone, name) is not None and getattr(alone, name).size:
            _close(getattr(res, name), getattr(alone, name), f"{what} {name}", rel)
    assert abs(res.total_charge - alone.total_charge) <= 1e-12 * max(1.0, abs(alone.total_charge))


@pytest.mark.parametrize("key,diff", [("triclinic-charged-excl", "ad"), ("triclinic-charged-excl", "ik"),
                                      ("water40", "ad")])
def test_sets_equal_separate_calls(key, diff):
    """m = 4 sets (net charge, exclusions, one set all zero) in one call equal four separate
    calls; with potentials and probes too; the shapes have the set axis first."""
    s = _SYSTEMS[key]()
    pme = PME(s.box, half_height_cutoff(s.box), tolerance=1e-6, differentiation=diff, comm=MPI.COMM_SELF)
    q = _sets(s, 4, seed=1, zero=2)
    pts = np.random.default_rng(2).uniform(0, 1, (3, 3)) @ s.box
    res = pme.compute(s.positions, q, ids=s.ids, exclusions=s.exclusions, probes=pts)
    n = s.n_atoms
    assert res.energy.shape == (4,) and res.forces.shape == (4, n, 3) and res.virial.shape == (4, 3, 3)
    assert res.potentials.shape == (4, n) and res.fields.shape == (4, n, 3) and res.energies.shape == (4, n)
    assert res.probe_potentials.shape == (4, 3) and res.probe_fields.shape == (4, 3, 3)
    assert all(v.shape == (4,) for v in res.terms.values()) and res.estimated_error.shape == (4,)
    for c in range(4):
        alone = pme.compute(s.positions, q[:, c], ids=s.ids, exclusions=s.exclusions, probes=pts)
        if c == 2:  # the all-zero set: exactly zero
            one = res.charge_set(c)
            assert one.energy == 0 and not one.forces.any() and not one.virial.any()
            assert not one.potentials.any() and not one.fields.any() and not one.probe_potentials.any()
            assert all(v == 0 for v in one.terms.values()) and one.estimated_error == 0
            continue
        _same_as_alone(res.charge_set(c), alone, f"{key} {diff} set {c}")
        assert abs(res.estimated_error_absolute[c] - alone.estimated_error_absolute) <= 1e-12 * \
            alone.estimated_error_absolute
    # without potentials: the same energies and forces
    plain = pme.compute(s.positions, q, ids=s.ids, exclusions=s.exclusions)
    assert plain.potentials is None
    _close(plain.energy, res.energy, "energy without potentials")
    _close(plain.forces, res.forces, "forces without potentials")


def test_one_set_and_first_call_tuning():
    """m = 1 as (n, 1): the 1-D result with a leading axis of 1. A first call with sets tunes
    on the set with the largest sum of squares: the same parameters as a first 1-D call with
    that set; real_space=False (exclusion corrections only) works per set too."""
    s = _SYSTEMS["ortho-charged"]()
    cutoff = half_height_cutoff(s.box)
    q = _sets(s, 3, seed=4)
    q[:, 1] *= 3.0  # the largest sum of squares
    batched = PME(s.box, cutoff, tolerance=1e-5, comm=MPI.COMM_SELF)
    res = batched.compute(s.positions, q)
    single = PME(s.box, cutoff, tolerance=1e-5, comm=MPI.COMM_SELF)
    lead = single.compute(s.positions, q[:, 1])
    for key in ("alpha", "mesh", "order", "differentiation"):
        assert batched.parameters[key] == single.parameters[key], key
    _same_as_alone(res.charge_set(1), lead, "lead set")
    assert batched.parameters["estimated_error"] == res.estimated_error[1]
    one = batched.compute(s.positions, q[:, :1])
    alone = batched.compute(s.positions, q[:, 0])
    assert one.energy.shape == (1,) and one.forces.shape == (1, s.n_atoms, 3) and one.virial.shape == (1, 3, 3)
    _same_as_alone(one.charge_set(0), alone, "m = 1")
    # real_space=False with exclusions: the exclusion corrections per set
    t = _SYSTEMS["triclinic-charged-excl"]()
    engine = PME(t.box, half_height_cutoff(t.box), alpha=0.9, mesh=(20, 21, 22), order=5, real_space=False,
                 comm=MPI.COMM_SELF)
    qt = _sets(t, 2, seed=5)
    r = engine.compute(t.positions, qt, ids=t.ids, exclusions=t.exclusions, potentials=True)
    assert (r.terms["real"] == 0).all() and (r.terms["exclusion"] != 0).all()
    for c in range(2):
        _same_as_alone(r.charge_set(c), engine.compute(t.positions, qt[:, c], ids=t.ids, exclusions=t.exclusions,
                                                       potentials=True), f"real_space=False set {c}")


def test_sets_between_pair_list_calls():
    """With the pair list in use (skin="auto"), sets calls search afresh and the list stays
    right: along a random walk every call equals a skin-0 solver's; exclusions changed in a
    sets call make the list's next ordinary call rebuild."""
    s = _SYSTEMS["triclinic-charged-excl"]()
    kw = dict(tolerance=1e-6, differentiation="ad", comm=MPI.COMM_SELF)
    listed = PME(s.box, half_height_cutoff(s.box), **kw)
    fresh = PME(s.box, half_height_cutoff(s.box), skin=0, **kw)
    rng = np.random.default_rng(7)
    pos = s.positions.copy()
    q = _sets(s, 3, seed=8)
    excl = s.exclusions
    for step in range(8):
        pos = pos + rng.normal(0, 0.01, pos.shape)
        if step == 3:
            excl = s.exclusions[1:]  # changed in a sets call (same ids), kept after it
        charges = q if step in (1, 3, 6) else q[:, 0]
        a = listed.compute(pos, charges, ids=s.ids, exclusions=excl)
        b = fresh.compute(pos, charges, ids=s.ids, exclusions=excl)
        _close(a.energy, b.energy, f"energy {step}")
        _close(a.forces, b.forces, f"forces {step}", 1e-11)
    assert listed.parameters["skin_used"] > 0 and listed.timings()["pair_list_builds"] >= 2


def _gather(comm, mine, values, n):
    """Rows of every rank's atoms (axis 1: after the set axis) in global order."""
    values = np.asarray(values)
    out = np.full((values.shape[0], n) + values.shape[2:], np.nan)
    for idx, v in zip(comm.allgather(mine), comm.allgather(values)):
        out[:, idx] = v
    assert not np.isnan(out).any()
    return out


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(200)
def test_sets_independent_of_ranks(comm):
    """m = 3 sets (one all zero) on 1-4 ranks, every comm mode, uneven splits, empty ranks,
    ad and ik, with potentials: energies, terms, virials, forces and potentials equal the
    serial batched call's."""
    rank, size = comm.Get_rank(), comm.Get_size()
    s = _SYSTEMS["triclinic-charged-excl"]()
    cutoff = half_height_cutoff(s.box)
    q = _sets(s, 3, seed=3, zero=1)
    for diff in ("ad", "ik"):
        params = dict(alpha=3.2 / cutoff, mesh=(24, 25, 27), order=6, differentiation=diff)
        base = PME(s.box, cutoff, comm=MPI.COMM_SELF, **params).compute(
            s.positions, q, ids=s.ids, exclusions=s.exclusions, potentials=True)
        for mode, how in zip(MODES, ("random", "odd_ranks_only", "blocks")):
            if diff == "ik" and mode != "nonblocking":
                continue  # ik's mesh part per set, once (the modes and splits: with ad)
            pme = PME(s.box, cutoff, comm=comm, comm_mode=mode, **params)
            mine = split_atoms(s.n_atoms, size, how, seed=9)[rank]
            ex = split_exclusions(s.exclusions, size, "spread")[rank]
            res = pme.compute(s.positions[mine], q[mine], ids=s.ids[mine], exclusions=ex, potentials=True)
            what = f"{diff} {mode} {how}"
            assert res.forces.shape == (3, len(mine), 3), what
            scale = max(np.abs(v).max() for v in base.terms.values())
            assert np.abs(res.energy - base.energy).max() <= 1e-12 * scale, what
            for t, v in base.terms.items():
                assert np.abs(res.terms[t] - v).max() <= 1e-12 * scale, (what, t)
            _close(res.virial, base.virial, what + " virial")
            _close(_gather(comm, mine, res.forces, s.n_atoms), base.forces, what + " forces")
            _close(_gather(comm, mine, res.potentials, s.n_atoms), base.potentials, what + " potentials")
            _close(_gather(comm, mine, res.fields, s.n_atoms), base.fields, what + " fields")
            assert not res.forces[1].any() and not res.potentials[1].any(), what


@pytest.mark.mpi(ranks=[1, 2, 3])
@pytest.mark.timeout(120)
def test_bad_charge_sets_are_agreed(comm):
    """Bad charge sets on one rank (wrong shape, m differing between ranks, 1-D against 2-D,
    NaN or inf in one set, no sets): the same ValueError on every rank, and the object still
    gives the right answer afterwards."""
    rank, size = comm.Get_rank(), comm.Get_size()
    s = systems.random_charges(30, [7.0, 7.5, 8.0], neutral=True, seed=2)
    pme = PME(s.box, 3.0, alpha=1.1, mesh=(16, 16, 18), order=5, comm=comm)
    mine = np.arange(rank, s.n_atoms, size)
    q = _sets(s, 3, seed=6)[mine]
    good = pme.compute(s.positions[mine], q, potentials=True)
    last = rank == size - 1
    nan, inf = q.copy(), q.copy()
    if len(q):
        nan[0, 2] = np.nan
        inf[-1, 1] = -np.inf
    cases = [
        ("rows", r"positions has \d+ atoms but charges has", q[:-1] if last and len(q) else q),
        ("3-D", r"charges must have shape \(n,\) or \(n, m\)", q[:, :, None] if last else q),
        ("no sets", r"at least one charge set", q[:, :0] if last else q),
        ("NaN", r"charges contain NaN or inf \(charge set 2\)", nan if last else q),
        ("inf", r"charges contain NaN or inf \(charge set 1\)", inf if last else q),
        ("strings", r"charges must be a numeric", np.full(q.shape, "x") if last else q),
    ]
    if size > 1:
        cases += [("m differs", r"same number of columns \(charge sets\) on every rank", q[:, :2] if last else q),
                  ("1-D and 2-D", r"1-D on every rank", q[:, 0] if last else q)]
    for what, match, charges in cases:
        with pytest.raises(ValueError, match=match):
            pme.compute(s.positions[mine], charges, potentials=True)
        res = pme.compute(s.positions[mine], q, potentials=True)
        assert (res.energy == good.energy).all(), what
        assert_same_per_atom(res.forces, good.forces)
        assert_same_per_atom(res.potentials, good.potentials)
    # every set zero: exactly zero, nothing computed; an empty rank passes (0, m)
    zero = pme.compute(s.positions[mine], 0.0 * q, potentials=True)
    assert zero.energy.shape == (3,) and not zero.energy.any() and not zero.forces.any()
    assert zero.potentials.shape == (3, len(mine)) and not zero.potentials.any()


def test_parameters_have_the_same_keys_on_every_path():
    """Issue 27: one estimate report (pmewald.pme.result.estimate_report) for the single-set,
    charge-sets and all-zero paths, so parameters has the same keys before a call and after
    each kind of call (before: 7, 7, 6 and 4 estimate keys)."""
    from pmewald.pme.result import ESTIMATE_KEYS

    s = systems.random_charges(60, np.array([9.0, 9.5, 10.0]), neutral=True, seed=4)
    pme = PME(s.box, 4.0, tolerance=1e-4, comm=MPI.COMM_SELF)
    keys = set(pme.parameters)
    assert set(ESTIMATE_KEYS) <= keys and pme.parameters["estimated_error"] is None
    calls = {"single": s.charges, "sets": np.stack([s.charges, 0.5 * s.charges], axis=1),
             "zero": np.zeros(s.n_atoms), "zero sets": np.zeros((s.n_atoms, 2))}
    for what, q in calls.items():
        pme.compute(s.positions, q)
        assert set(pme.parameters) == keys, (what, set(pme.parameters) ^ keys)
        assert pme.parameters["estimated_error"] is not None, what
