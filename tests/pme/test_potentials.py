"""Per-atom potentials, energies and fields, and probe points (issue 17, item 1):
``PME.compute(..., potentials=True, probes=...)``.

phi_i is checked against central finite differences of the energy in q_i (the energy is
quadratic in the charges at fixed parameters, so the difference is exact to rounding), the
per-atom energies against the total, the fields against forces / charges and, at probes,
against finite differences of the probe potential in its position (ad: the field is the
exact gradient of the interpolated potential); probes against zero-charge atoms; and
everything against the serial result on 1-4 ranks, all comm modes, uneven splits and empty
ranks.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from pme_cases import (MODES, _SYSTEMS, assert_same_per_atom, gather_rows, half_height_cutoff, split_atoms,
                       split_exclusions)
from pmewald import PME, systems


def _solo(s, diff, tolerance=1e-7, **kw):
    return PME(s.box, half_height_cutoff(s.box), tolerance=tolerance, differentiation=diff,
               comm=MPI.COMM_SELF, **kw)


@pytest.mark.parametrize("key,diff", [("triclinic-charged-excl", "ad"), ("triclinic-charged-excl", "ik"),
                                      ("water40", "ad"), ("ortho-neutral", "ik")])
def test_potentials_are_charge_derivatives(key, diff):
    """phi_i = dE/dq_i (central differences, relative 1e-6 at tolerance 1e-7), with net
    charge and exclusions; energies sum to E; fields are forces / charges; forces, energy and
    virial are those of a call without potentials."""
    s = _SYSTEMS[key]()
    pme = _solo(s, diff)
    plain = pme.compute(s.positions, s.charges, ids=s.ids, exclusions=s.exclusions)
    res = pme.compute(s.positions, s.charges, ids=s.ids, exclusions=s.exclusions, potentials=True)
    assert plain.potentials is None and res.potentials.shape == (s.n_atoms,)
    assert res.fields.shape == (s.n_atoms, 3) and res.energies.shape == (s.n_atoms,)
    assert res.energy == plain.energy
    assert_same_per_atom(res.forces, plain.forces)
    np.testing.assert_array_equal(res.virial, plain.virial)
    assert abs(res.energies.sum() - res.energy) <= 1e-11 * max(abs(v) for v in res.terms.values())
    np.testing.assert_allclose(s.charges[:, None] * res.fields, res.forces, rtol=0,
                               atol=1e-11 * np.abs(res.forces).max())
    h = 1e-3
    for i in np.random.default_rng(1).choice(s.n_atoms, 6, replace=False):
        e = []
        for sign in (1, -1):
            q = s.charges.copy()
            q[i] += sign * h
            e.append(pme.compute(s.positions, q, ids=s.ids, exclusions=s.exclusions).energy)
        fd = (e[0] - e[1]) / (2 * h)
        assert abs(fd - res.potentials[i]) <= 1e-6 * abs(res.potentials[i]), (i, fd, res.potentials[i])


@pytest.mark.parametrize("diff", ["ad", "ik"])
def test_probes_are_zero_charge_atoms(diff):
    """A probe's potential and field are those of a zero-charge atom at its place; with ad
    the field is minus the gradient of the probe potential (central differences); probes
    change nothing else; a zero-charge atom gets a field (forces / charges is undefined)."""
    s = _SYSTEMS["ortho-charged"]()
    rng = np.random.default_rng(3)
    pts = rng.uniform(0, 1, (5, 3)) @ s.box
    pme = _solo(s, diff)
    plain = pme.compute(s.positions, s.charges)
    res = pme.compute(s.positions, s.charges, probes=pts)
    assert res.probe_potentials.shape == (5,) and res.probe_fields.shape == (5, 3)
    assert res.forces.shape == (s.n_atoms, 3) and res.potentials.shape == (s.n_atoms,)
    assert abs(res.energy - plain.energy) <= 1e-13 * abs(plain.energy)
    np.testing.assert_allclose(res.forces, plain.forces, rtol=0, atol=1e-12 * np.abs(plain.forces).max())
    # the same points as atoms of zero charge
    atoms = pme.compute(np.vstack((s.positions, pts)), np.concatenate((s.charges, np.zeros(5))), potentials=True)
    np.testing.assert_allclose(res.probe_potentials, atoms.potentials[-5:], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(res.probe_fields, atoms.fields[-5:], rtol=1e-12,
                               atol=1e-12 * np.abs(atoms.fields).max())
    assert np.all(np.abs(atoms.fields[-5:]) > 0) and np.all(atoms.forces[-5:] == 0)
    if diff == "ad":
        h = 1e-4
        for d in range(3):
            step = np.zeros(3)
            step[d] = h
            up = pme.compute(s.positions, s.charges, probes=pts + step).probe_potentials
            down = pme.compute(s.positions, s.charges, probes=pts - step).probe_potentials
            fd = -(up - down) / (2 * h)
            np.testing.assert_allclose(fd, res.probe_fields[:, d], rtol=1e-6,
                                       atol=1e-6 * np.abs(res.probe_fields).max())


def test_potential_calls_between_pair_list_calls():
    """With the pair list in use (skin="auto": from the second call), calls with potentials
    or probes search afresh and the list stays right: along a random walk, every call equals
    a skin-0 solver's to rounding; exclusions that change in a potentials call make the
    list's next call rebuild (a list kept would silently use the old exclusions)."""
    s = _SYSTEMS["triclinic-charged-excl"]()
    listed, fresh = _solo(s, "ad"), _solo(s, "ad", skin=0)
    rng = np.random.default_rng(7)
    pos = s.positions.copy()
    pts = rng.uniform(0, 1, (3, 3)) @ s.box
    excl = s.exclusions
    for step in range(10):
        pos = pos + rng.normal(0, 0.01, pos.shape)
        if step == 4:
            excl = s.exclusions[1:]  # changed in a potentials call (same ids), kept after it
        kw = dict(potentials=step in (1, 4, 7), probes=pts if step in (2, 8) else None)
        a = listed.compute(pos, s.charges, ids=s.ids, exclusions=excl, **kw)
        b = fresh.compute(pos, s.charges, ids=s.ids, exclusions=excl, **kw)
        assert abs(a.energy - b.energy) <= 1e-12 * abs(b.energy), step
        np.testing.assert_allclose(a.forces, b.forces, rtol=0, atol=1e-11 * np.abs(b.forces).max())
        for name in ("potentials", "fields", "probe_potentials"):
            if getattr(b, name) is not None:
                np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-12, atol=1e-12)
    assert listed.parameters["skin_used"] > 0 and listed.timings()["pair_list_builds"] >= 2


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(200)
def test_potentials_independent_of_ranks(comm):
    """Potentials, energies, fields and probe results on 1-4 ranks, every comm mode, uneven
    splits, empty ranks and probes spread unevenly (some ranks none) equal the serial ones."""
    rank, size = comm.Get_rank(), comm.Get_size()
    s = _SYSTEMS["triclinic-charged-excl"]()
    cutoff = half_height_cutoff(s.box)
    pts = np.random.default_rng(5).uniform(-0.5, 1.5, (11, 3)) @ s.box
    for diff in ("ad", "ik"):
        params = dict(alpha=3.2 / cutoff, mesh=(24, 25, 27), order=6, differentiation=diff)
        base = PME(s.box, cutoff, comm=MPI.COMM_SELF, **params).compute(
            s.positions, s.charges, ids=s.ids, exclusions=s.exclusions, probes=pts)
        scale_phi = np.abs(base.potentials).max()
        scale_e = np.abs(base.fields).max()
        for mode, how in zip(MODES, ("random", "odd_ranks_only", "blocks")):
            pme = PME(s.box, cutoff, comm=comm, comm_mode=mode, **params)
            mine = split_atoms(s.n_atoms, size, how, seed=9)[rank]
            # probes: all on the last rank, or round robin over the odd ranks
            pmine = split_atoms(len(pts), size, "all_on_0" if mode == "pt2pt" else "odd_ranks_only")
            pmine = pmine[(rank + 1) % size] if mode == "pt2pt" else pmine[rank]
            ex = split_exclusions(s.exclusions, size, "spread")[rank]
            res = pme.compute(s.positions[mine], s.charges[mine], ids=s.ids[mine], exclusions=ex,
                              potentials=True, probes=pts[pmine])
            assert res.forces.shape == (len(mine), 3) and res.probe_fields.shape == (len(pmine), 3)
            what = f"{diff} {mode} {how}"
            phi = gather_rows(comm, mine, res.potentials, s.n_atoms)
            field = gather_rows(comm, mine, res.fields, s.n_atoms)
            assert np.abs(phi - base.potentials).max() <= 1e-12 * scale_phi, what
            assert np.abs(field - base.fields).max() <= 1e-12 * scale_e, what
            total = comm.allreduce(float(res.energies.sum()))
            assert abs(total - res.energy) <= 1e-11 * max(abs(v) for v in res.terms.values()), what
            pphi = gather_rows(comm, pmine, res.probe_potentials, len(pts))
            pfield = gather_rows(comm, pmine, res.probe_fields, len(pts))
            assert np.abs(pphi - base.probe_potentials).max() <= 1e-12 * scale_phi, what
            assert np.abs(pfield - base.probe_fields).max() <= 1e-12 * scale_e, what


@pytest.mark.mpi(ranks=[1, 2, 3])
@pytest.mark.timeout(120)
def test_bad_potential_requests_are_agreed(comm):
    """Bad probes or requests on one rank: the same ValueError on every rank, and the object
    still gives the right answer afterwards."""
    rank, size = comm.Get_rank(), comm.Get_size()
    s = systems.random_charges(30, [7.0, 7.5, 8.0], neutral=True, seed=2)
    pme = PME(s.box, 3.0, alpha=1.1, mesh=(16, 16, 18), order=5, comm=comm)
    mine = np.arange(rank, s.n_atoms, size)
    good = pme.compute(s.positions[mine], s.charges[mine], potentials=True)
    last = rank == size - 1
    pts = np.array([[1.0, 2.0, 3.0], [2.0, 3.0, 4.0]])
    nan = pts.copy()
    nan[1, 2] = np.nan
    cases = [
        ("probes shape", r"probes must have shape", dict(probes=pts[:, :2] if last else pts)),
        ("probes NaN", r"probes contain NaN", dict(probes=nan if last else pts)),
        ("probes strings", r"probes must be a numeric", dict(probes=np.full((2, 3), "x") if last else None)),
        ("potentials not bool", r"potentials must be True or False", dict(potentials="yes" if last else True)),
        ("probe on an atom", r"probe 0 .* same position", dict(probes=s.positions[:1] + s.box[0] if last else None)),
    ]
    if size > 1:
        cases.append(("potentials on one rank", r"potentials=True was passed on 1 of", dict(potentials=last)))
    for what, match, kw in cases:
        with pytest.raises(ValueError, match=match):
            pme.compute(s.positions[mine], s.charges[mine], **kw)
        res = pme.compute(s.positions[mine], s.charges[mine], potentials=True)
        assert res.energy == good.energy, what
        assert_same_per_atom(res.potentials, good.potentials)
    # all charges zero: zero potentials and fields, probes included
    zero = pme.compute(s.positions[mine], 0.0 * s.charges[mine], probes=pts if rank == 0 else None)
    assert zero.energy == 0 and not zero.potentials.any() and not zero.fields.any()
    assert zero.probe_potentials.shape == ((2,) if rank == 0 else (0,))
