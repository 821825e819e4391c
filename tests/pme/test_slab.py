"""2-D periodic slabs: ``PME(..., slab=True)`` (issue 17, item 3), the EW3DC method of
python/pmewald/pme/slab.py, against the 2-D Ewald reference (pmewald.reference.slab).

Energies and forces converge to the reference with the gap and the tolerance (orthorhombic
and xy-tilted, neutral, dipolar and charged); phi_i = dE/dq_i with the correction; the
virial's lateral and atoms-only components are finite differences of the reference energy;
every rank count, comm mode and split gives the serial result; bad input is refused on
every rank and leaves the object usable.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from mpi4py import MPI

from pme_cases import MODES, gather_rows, rel_rms, split_atoms
from pmewald import PME
from pmewald.reference import slab as reference2d
from pmewald.pme import slab as _slab
from slab_cases import ew3dc, make_slab, slab_reference

CUTOFF = 3.8  # below half the in-plane heights of the test slabs


def _pme(s, tolerance=1e-5, comm=MPI.COMM_SELF, **kw):
    return PME(s.box, CUTOFF, tolerance=tolerance, slab=True, comm=comm, **kw)


@pytest.mark.parametrize("kind,tolerances", [("neutral-ortho", (1e-5,)), ("dipolar-ortho", (1e-5,)),
                                             ("neutral-tilted", (1e-5,)), ("dipolar-tilted", (1e-5,)),
                                             ("charged-tilted", (1e-5, 1e-7))])
def test_auto_gap_meets_the_tolerance(kind, tolerances):
    """With the automatic gap, the relative RMS force error against the 2-D reference is
    below the tolerance (1e-5; 1e-7 on the charged one), and so is the relative energy error; the dipole
    correction is not negligible (without it the forces are far off)."""
    s, ref = slab_reference(kind)
    for tol in tolerances:
        pme = _pme(s, tol)
        res = pme.compute(s.positions, s.charges)
        err = rel_rms(res.forces, ref.forces)
        assert err < tol, (tol, err, pme.parameters["slab_gap"])
        assert abs(res.energy - ref.energy) < tol * abs(ref.energy), (tol, res.energy, ref.energy)
        assert pme.parameters["slab_gap"] == pytest.approx(_slab.auto_gap(s.box[:2, :2], tol))
        assert pme.parameters["box"][2, 2] == s.box[2, 2]
    plain = res.forces.copy()
    plain[:, 2] -= s.charges * (-4 * math.pi / np.linalg.det(pme._problem.box)) * (
        (s.charges * s.positions[:, 2]).sum() - s.charges.sum() * s.positions[:, 2])
    if kind != "neutral-ortho":
        assert rel_rms(plain, ref.forces) > 1e-3


def test_error_falls_with_the_gap_as_the_rule_says():
    """At a tight mesh the force error falls as exp(-g_min gap) (g_min the shortest in-plane
    reciprocal vector) and stays below the rule's GAP_PREFACTOR exp(-g_min gap); on a flat
    box (24 x 24 x 3) LAMMPS's fixed 3x height (gap 2 Lz) leaves an error above 1e-3."""
    s, ref = slab_reference("dipolar-tilted")
    g = _slab.shortest_reciprocal(s.box[:2, :2])
    errs = []
    for gap in (3.0, 6.0, 9.0):  # a fixed fine mesh (spacing 1/3, order 8): its error ~1e-7
        mesh = (24, 27, int(math.ceil(3 * (s.box[2, 2] + gap))))
        res = _pme(s, slab_gap=gap, alpha=1.0, mesh=mesh, order=8).compute(s.positions, s.charges)
        errs.append(rel_rms(res.forces, ref.forces))
        assert errs[-1] < _slab.GAP_PREFACTOR * math.exp(-g * gap), (gap, errs)
    for a, b in zip(errs, errs[1:]):
        assert 0.3 * math.exp(-3 * g) < b / a < 3 * math.exp(-3 * g), errs
    flat = make_slab("neutral-ortho", seed=4)
    box = np.diag([24.0, 24.0, 3.0])
    pos = flat.positions * [3.0, 24.0 / 9.0, 0.5]
    fref = reference2d.ewald2d(box, pos, flat.charges).forces
    lammps = PME(box, 4.0, tolerance=1e-6, slab=True, slab_gap=6.0, comm=MPI.COMM_SELF).compute(pos, flat.charges)
    auto = PME(box, 4.0, tolerance=1e-5, slab=True, comm=MPI.COMM_SELF).compute(pos, flat.charges)
    assert rel_rms(lammps.forces, fref) > 1e-3
    assert rel_rms(auto.forces, fref) < 1e-5


@pytest.mark.parametrize("kind", ["neutral-ortho", "dipolar-tilted", "charged-tilted"])
def test_gap_error_is_the_exact_image_term(kind):
    """Slab.gap_force_error is the RMS of EW3DC's own force error, the exact 3-D Ewald sum on
    the extended box plus the correction against the 2-D sum (tests/slab_cases.py::ew3dc), to
    1e-5 relative (the modes beyond _slab.gap_modes's range: measured at most 2.4e-6), for gaps
    from a quarter of the cell (errors of 5%) to 10."""
    s, ref = slab_reference(kind)
    for gap in (2.0, 5.0, 10.0):
        slab = _slab.Slab.build(s.box, 1e-5, gap)
        exact = ew3dc(s.box, s.positions, s.charges, gap)[1] - ref.forces
        want = math.sqrt(float((exact ** 2).sum()) / s.n_atoms)
        got = slab.gap_force_error(MPI.COMM_SELF, s.positions, s.charges, 1.0)
        assert got == pytest.approx(want, rel=1e-5), (gap, got, want)


@pytest.mark.mpi(ranks=[1, 2])
@pytest.mark.timeout(240)
def test_estimate_includes_the_gap(comm):
    """Issue 31: estimated_error includes the gap's error, so it is within [0.67, 1.5] of the
    force error against the 2-D reference for explicit gaps of 2-45 (errors 4e-2 to 5e-6 at
    tolerance 1e-5), and after set_box scales the slab in-plane by 1.5 and 2 with an explicit
    gap (kept) and with the automatic one (chosen again for the wider cell: its rule error
    there exceeds GAP_KEEP x its share); on 1 rank, and on 2 ranks (round-robin split) a
    subset: the short and the long gap, the wider cell (what is new there is the split)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    few = size > 1
    s, ref = slab_reference("dipolar-tilted")
    mine = np.arange(rank, s.n_atoms, size)

    def measured(res, forces):
        return rel_rms(gather_rows(comm, mine, res.forces, s.n_atoms), forces)

    for gap in (2.0, 45.0) if few else (2.0, 5.0, 10.0, 20.0, 45.0):
        pme = _pme(s, comm=comm, slab_gap=gap)
        res = pme.compute(s.positions[mine], s.charges[mine])
        err = measured(res, ref.forces)
        assert 0.67 <= res.estimated_error / err <= 1.5, (gap, res.estimated_error, err)
        assert pme.parameters["estimated_error"] == res.estimated_error
        if gap <= 10.0:  # the gap's part dominates
            assert pme.parameters["estimated_error_slab_gap"] > 0.9 * res.estimated_error, gap
    for scale in (2.0,) if few else (1.5, 2.0):
        box, pos = s.box.copy(), s.positions.copy()
        box[:2, :2] *= scale
        pos[:, :2] *= scale
        wide = reference2d.ewald2d(box, pos, s.charges).forces
        for gap in ("auto", 5.0):
            pme = _pme(s, comm=comm, slab_gap=gap)
            pme.compute(s.positions[mine], s.charges[mine])
            pme.set_box(box)
            res = pme.compute(pos[mine], s.charges[mine])
            err = measured(res, wide)
            assert 0.67 <= res.estimated_error / err <= 1.5, (scale, gap, res.estimated_error, err)
            if gap == "auto":
                assert pme.parameters["slab_gap"] == pytest.approx(_slab.auto_gap(box[:2, :2], 1e-5))
                assert err < 1e-5, (scale, err)
            else:
                assert pme.parameters["slab_gap"] == 5.0


@pytest.mark.parametrize("diff", ["ad", "ik"])
def test_potentials_are_charge_derivatives(diff):
    """With slab=True and a net charge: phi_i = dE/dq_i (central differences, relative 1e-6),
    per-atom energies sum to E, fields are forces / charges, probes are zero-charge atoms."""
    s, _ = slab_reference("charged-tilted")
    pme = _pme(s, 1e-7, differentiation=diff)
    pts = np.array([[1.0, 2.0, 0.1], [3.0, 5.0, 5.5]])
    res = pme.compute(s.positions, s.charges, probes=pts)
    assert abs(res.energies.sum() - res.energy) <= 1e-11 * max(abs(v) for v in res.terms.values())
    assert abs(sum(res.terms.values()) - res.energy) <= 1e-12 * max(abs(v) for v in res.terms.values())
    np.testing.assert_allclose(s.charges[:, None] * res.fields, res.forces, rtol=0,
                               atol=1e-11 * np.abs(res.forces).max())
    atoms = pme.compute(np.vstack((s.positions, pts)), np.concatenate((s.charges, [0.0, 0.0])), potentials=True)
    np.testing.assert_allclose(res.probe_potentials, atoms.potentials[-2:], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(res.probe_fields, atoms.fields[-2:], rtol=0, atol=1e-12 * np.abs(atoms.fields).max())
    h = 1e-3
    for i in (0, 5, 11):
        e = []
        for sign in (1, -1):
            q = s.charges.copy()
            q[i] += sign * h
            e.append(pme.compute(s.positions, q).energy)
        fd = (e[0] - e[1]) / (2 * h)
        assert abs(fd - res.potentials[i]) <= 1e-6 * abs(res.potentials[i]), (i, fd, res.potentials[i])


def _strained(s, eps, lattice):
    """Positions and box under r -> (1 + eps) r; the in-plane cell strained too if lattice."""
    t = np.eye(3) + eps
    pos = s.positions @ t.T
    box = s.box @ t.T if lattice else s.box
    return box, pos


def test_virial_is_the_strain_derivative():
    """W = -dE/d(eps) of the 2-D reference energy: xx, yy, xy for a lateral strain of the
    cell and the atoms; xz, yz (x += eps z) and zz (z scaled) for the atoms alone."""
    s, ref = slab_reference("charged-tilted")  # a dipole and a net charge
    res = _pme(s, 1e-7).compute(s.positions, s.charges)
    h = 1e-5
    wscale = np.abs(res.virial).max()
    for a, b, lattice in [(0, 0, True), (1, 1, True), (0, 1, True), (0, 2, False), (1, 2, False), (2, 2, False)]:
        e = []
        for sign in (1, -1):
            eps = np.zeros((3, 3))
            eps[a, b] = sign * h
            if a != b and lattice:
                eps[b, a] = sign * h  # a symmetric in-plane shear
            box, pos = _strained(s, eps, lattice)
            e.append(reference2d.ewald2d(box, pos, s.charges, alpha=ref.alpha).energy)
        fd = -(e[0] - e[1]) / (2 * h)
        want = res.virial[a, b] + res.virial[b, a] if a != b and lattice else res.virial[a, b]
        assert abs(fd - want) <= 2e-6 * wscale, (a, b, fd, want)
    np.testing.assert_allclose(res.virial, res.virial.T, rtol=0, atol=1e-12 * wscale)


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(120)
def test_independent_of_ranks(comm):
    """1-4 ranks, every comm mode, uneven splits and empty ranks: energy, forces, virial,
    potentials and probe results equal the serial ones (net charge, tilted cell)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    s = make_slab("charged-tilted")
    params = dict(alpha=0.9, mesh=(16, 16, 30), order=5, slab_gap=9.0)
    pts = np.array([[1.0, 2.0, 0.1], [3.0, 5.0, 5.5], [7.0, 1.0, 3.0]])
    base = _pme(s, **params).compute(s.positions, s.charges, probes=pts)
    for mode, how in zip(MODES, ("random", "odd_ranks_only", "blocks")):
        pme = _pme(s, comm=comm, comm_mode=mode, **params)
        mine = split_atoms(s.n_atoms, size, how, seed=3)[rank]
        pmine = split_atoms(len(pts), size, "all_on_0")[(rank + 1) % size]
        res = pme.compute(s.positions[mine], s.charges[mine], probes=pts[pmine])
        what = f"{mode} {how}"
        assert abs(res.energy - base.energy) <= 1e-12 * abs(base.energy), what
        assert res.terms["slab"] == pytest.approx(base.terms["slab"], rel=1e-12, abs=1e-14)
        np.testing.assert_allclose(res.virial, base.virial, rtol=0, atol=1e-12 * np.abs(base.virial).max())
        f = gather_rows(comm, mine, res.forces, s.n_atoms)
        assert np.abs(f - base.forces).max() <= 1e-12 * np.abs(base.forces).max(), what
        phi = gather_rows(comm, mine, res.potentials, s.n_atoms)
        assert np.abs(phi - base.potentials).max() <= 1e-12 * np.abs(base.potentials).max(), what
        pphi = gather_rows(comm, pmine, res.probe_potentials, len(pts))
        assert np.abs(pphi - base.probe_potentials).max() <= 1e-12 * np.abs(base.potentials).max(), what
        assert res.rms_force == pytest.approx(base.rms_force, rel=1e-12)


@pytest.mark.mpi(ranks=[1, 2, 3])
@pytest.mark.timeout(120)
def test_bad_slab_input_is_refused_everywhere(comm):
    """Non-slab cells, a bad gap, atoms or probes outside 0 <= z < Lz (on one rank only) and
    a non-slab set_box: the same ValueError on every rank; the object then gives the right
    answer."""
    rank, size = comm.Get_rank(), comm.Get_size()
    s = make_slab("neutral-tilted")
    for box, match in [(np.array([[8.0, 0, 0.5], [0, 9, 0], [0, 0, 6]]), "first two rows lie in the xy plane"),
                       (np.array([[8.0, 0, 0], [0, 9, 0], [1.0, 0, 6]]), r"third is \(0, 0, Lz\)"),
                       (np.array([[8.0, 0, 0], [0, 9, 0], [0, 0, -6]]), r"Lz > 0")]:
        with pytest.raises(ValueError, match=match):
            PME(box, CUTOFF, slab=True, comm=comm)
    for gap in (-1.0, float("nan"), "wide", True):
        with pytest.raises(ValueError, match="slab_gap must be"):
            _pme(s, comm=comm, slab_gap=gap)
    with pytest.raises(ValueError, match="slab must be True or False"):
        PME(s.box, CUTOFF, slab="yes", comm=comm)
    with pytest.raises(ValueError, match="without slab=True"):
        PME(s.box, CUTOFF, slab_gap=10.0, comm=comm)
    pme = _pme(s, comm=comm, alpha=0.9, mesh=(16, 16, 30), order=5, slab_gap=9.0)
    mine = np.arange(rank, s.n_atoms, size)
    good = pme.compute(s.positions[mine], s.charges[mine])
    last = rank == size - 1
    for z in (-0.1, 6.0):  # just below, and at Lz
        pos = s.positions[mine].copy()
        if last:
            pos[0, 2] = z
        with pytest.raises(ValueError, match="positions must lie in the slab"):
            pme.compute(pos, s.charges[mine])
        assert pme.compute(s.positions[mine], s.charges[mine]).energy == good.energy
    with pytest.raises(ValueError, match="probes must lie in the slab"):
        pme.compute(s.positions[mine], s.charges[mine], probes=np.array([[1.0, 1.0, 7.0]]) if last else None)
    with pytest.raises(ValueError, match="first two rows lie in the xy plane"):
        pme.set_box(np.array([[8.0, 0, 0.5], [2.5, 8.5, 0], [0, 0, 6]]))
    res = pme.compute(s.positions[mine], s.charges[mine])
    assert res.energy == good.energy
    np.testing.assert_allclose(res.virial, good.virial, rtol=1e-14, atol=1e-14)
    pme.set_box(s.box * [[1.01], [1.01], [1.0]])  # a lateral strain keeps the gap
    assert pme.parameters["slab_gap"] == 9.0 and pme._problem.box[2, 2] == 15.0


def test_qeq_on_a_slab():
    """The slab's potentials are a symmetric linear map of the charges (the correction's
    Hessian -2 pi k / V ((z_i - z_j)^2 + L^2 / 6) included), so pmewald.qeq works on a slab:
    its charges with a net charge equal a dense direct solve to 1e-10."""
    from pmewald.qeq import QEq

    s = make_slab("neutral-tilted")
    n = s.n_atoms
    pme = _pme(s, alpha=0.9, mesh=(16, 16, 32), order=5, slab_gap=10.0)
    rng = np.random.default_rng(0)
    chi, hard = rng.uniform(-1, 1, n), rng.uniform(8, 12, n)
    res = QEq(pme, tolerance=1e-10).solve(s.positions, chi, hard, total_charge=0.5)
    a = np.column_stack([pme.compute(s.positions, e, potentials=True).potentials for e in np.eye(n)])
    assert np.abs(a - a.T).max() <= 1e-13 * np.abs(a).max()
    k = np.block([[a + np.diag(hard), np.ones((n, 1))], [np.ones((1, n)), np.zeros((1, 1))]])
    x = np.linalg.solve(k, np.concatenate((-chi, [0.5])))
    assert np.abs(res.charges - x[:n]).max() <= 1e-10
