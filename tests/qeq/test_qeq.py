"""Charge equilibration (pmewald.qeq, issue 17 item 2) against a dense direct solve.

The Coulomb matrix of the reference is built from pmewald.reference's direct Ewald sum
(``A_ii = 2 E(e_i)``, ``A_ij = E(e_i + e_j) - E(e_i) - E(e_j)``: the energy is quadratic in the
charges; an excluded pair loses its minimum-image ``k / r``), net charge, exclusions and an
external field included; the constrained minimum is
the solution of the bordered (KKT) system.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from pme_cases import split_atoms
from pmewald import PME, reference, systems
from pmewald.qeq import QEq, per_atom

BOX = np.array([6.0, 6.5, 7.0])
CUTOFF = 2.9
# Explicit PME parameters whose potentials are within 3e-11 of the direct sum's here
# (measured; a tolerance of 1e-10 makes the automatic choice a 216 x 225 x 240 mesh).
TIGHT = dict(alpha=1.6, mesh=(64, 64, 64), order=10)


@functools.lru_cache(maxsize=None)
def _matrix():
    """The system and its Coulomb matrix from the direct Ewald sum (quadratic in q)."""
    s = systems.random_charges(10, BOX, neutral=True, seed=21)
    n = s.n_atoms

    def energy(q):
        return reference.ewald(s.box, s.positions, q, accuracy=1e-13).energy

    single = np.array([energy(np.eye(n)[i]) for i in range(n)])
    A = np.diag(2 * single)
    for i in range(n):
        for j in range(i + 1, n):
            A[i, j] = A[j, i] = energy(np.eye(n)[i] + np.eye(n)[j]) - single[i] - single[j]
    return s, A


def _case(with_exclusions):
    """(system, exclusions, Coulomb matrix, chi, J). An excluded pair loses exactly its
    minimum-image k / r_ij (the reference's definition of an exclusion)."""
    s, A = _matrix()
    A = A.copy()
    n = s.n_atoms
    ex = np.zeros((0, 2), np.int64)
    if with_exclusions:
        i, j = np.triu_indices(n, 1)
        d = np.linalg.norm(reference.minimum_image(s.box, s.positions[i] - s.positions[j]), axis=1)
        near = np.flatnonzero(d < 2.5)[:4]
        assert len(near) == 4
        ex = np.stack([i[near], j[near]], axis=1).astype(np.int64)
        for a, b, r in zip(i[near], j[near], d[near]):
            A[a, b] -= 1.0 / r
            A[b, a] -= 1.0 / r
    rng = np.random.default_rng(22)
    chi = rng.uniform(-1.0, 1.0, n)
    J = rng.uniform(4.0, 6.0, n)
    # QEq is a minimum only where diag(J) + A is positive definite on the neutral charges
    # (point charges alone are not: an ion pair's energy is negative): check it is.
    basis = np.linalg.qr(np.vstack((np.ones(n), np.eye(n)[:-1])).T)[0][:, 1:]
    assert np.linalg.eigvalsh(basis.T @ (A + np.diag(J)) @ basis).min() > 0.5
    return s, ex, A, chi, J


def _dense(A, chi, J, Q, field, pos):
    n = len(chi)
    K = np.zeros((n + 1, n + 1))
    K[:n, :n] = A + np.diag(J)
    K[:n, n] = -1.0
    K[n, :n] = 1.0
    rhs = np.concatenate((pos @ field - chi, [Q]))
    x = np.linalg.solve(K, rhs)
    return x[:n], x[n]


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(200)
def test_qeq_matches_dense_solve(comm):
    """Charges within 1e-8 of the dense solve (PME potentials within 3e-11) on 1-4 ranks, uneven
    splits with empty ranks, net charge, exclusions, an external field; the constraint holds;
    a warm start (same ids) needs one evaluation."""
    rank, size = comm.Get_rank(), comm.Get_size()
    pme = PME(BOX, CUTOFF, comm=comm, **TIGHT)  # one fixed Coulomb operator for both cases
    for with_ex, Q, field, how in ((False, 0.0, None, "random"), (True, 1.0, np.array([0.02, -0.01, 0.03]),
                                                                     "odd_ranks_only")):
        s, ex, A, chi, J = comm.bcast(_case(with_ex) if rank == 0 else None)
        qref, muref = _dense(A, chi, J, Q, np.zeros(3) if field is None else field, s.positions)
        qeq = QEq(pme, tolerance=1e-11)
        mine = split_atoms(s.n_atoms, size, how, seed=3)[rank]
        kw = dict(total_charge=Q, ids=s.ids[mine], exclusions=ex if rank == 0 else None, external_field=field)
        res = qeq.solve(s.positions[mine], chi[mine], J[mine], **kw)
        q = np.full(s.n_atoms, np.nan)
        for idx, v in zip(comm.allgather(mine), comm.allgather(res.charges)):
            q[idx] = v
        assert np.abs(q - qref).max() <= 1e-8, (np.abs(q - qref).max(), with_ex)
        assert abs(q.sum() - Q) <= 1e-12
        assert abs(res.chemical_potential - muref) <= 1e-8 * max(1.0, abs(muref))
        assert res.converged and res.evaluations == res.iterations + 1 and 2 <= res.evaluations <= 40
        e_ref = chi @ qref + 0.5 * (J * qref) @ qref + 0.5 * qref @ A @ qref
        if field is not None:
            e_ref -= qref @ (s.positions @ field)
        assert abs(res.energy - e_ref) <= 1e-8 * abs(e_ref)
        again = qeq.solve(s.positions[mine], chi[mine], J[mine], **kw)
        assert again.evaluations == 1 and comm.allreduce(again.warm_start) == size
        np.testing.assert_allclose(again.charges, res.charges, rtol=0, atol=1e-10)


@pytest.mark.mpi(ranks=[1, 2])
@pytest.mark.timeout(120)
@pytest.mark.parametrize("tiny", [1e-12, 1e-200])
def test_tiny_hardness_matches_dense_solve(comm, tiny):
    """One hardness far below the others' (1e-12 and 1e-200) is a well-posed problem while the
    Coulomb part keeps it definite (with two, here it is not: refused as "not positive definite",
    naming the hardness): the charges match the dense
    solve to 1e-8 and sum to the total charge to 1e-12 (with the hardness itself as the
    preconditioner they were off by 4e-4 and 8e-5, and 1e-200 overflowed into "charges are
    too large": qeq.PRECONDITIONER_FLOOR)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    s, ex, A, chi, J = comm.bcast(_case(False) if rank == 0 else None)
    J = J.copy()
    J[0] = tiny
    qref, _ = _dense(A, chi, J, 0.0, np.zeros(3), s.positions)
    mine = np.arange(rank, s.n_atoms, size)
    res = QEq(PME(BOX, CUTOFF, comm=comm, **TIGHT), tolerance=1e-11).solve(s.positions[mine], chi[mine], J[mine])
    assert res.converged
    assert np.abs(res.charges - qref[mine]).max() <= 1e-8
    assert abs(comm.allreduce(float(res.charges.sum()))) <= 1e-12


@pytest.mark.mpi(ranks=[1, 2])
@pytest.mark.timeout(120)
def test_qeq_bad_input_is_agreed(comm):
    """Bad input on one rank: the same ValueError on every rank; per_atom maps elements."""
    rank, size = comm.Get_rank(), comm.Get_size()
    s = systems.random_charges(10, BOX, neutral=True, seed=21)
    chi, J = np.ones(s.n_atoms), np.full(s.n_atoms, 5.0)
    qeq = QEq(PME(s.box, CUTOFF, tolerance=1e-6, comm=comm))
    mine = np.arange(rank, s.n_atoms, size)
    last = rank == size - 1
    bad_J = J[mine].copy()
    if last:
        bad_J[0] = 0.0
    ids = s.ids[mine]
    for what, match, args, kw in [
        ("hardness zero", "hardness must be positive", (chi[mine], bad_J), {}),
        ("string ids", "ids must be integers", (chi[mine], J[mine]), dict(ids=ids.astype(str) if last else ids)),
        ("fractional ids", "ids must be integers", (chi[mine], J[mine]), dict(ids=ids + 0.5 if last else ids)),
        ("ids short", r"ids must have shape \(", (chi[mine], J[mine]), dict(ids=ids[:-1] if last else ids)),
        ("chi short", "electronegativity has", (chi[mine][:-1] if last else chi[mine], J[mine]), {}),
        ("field", "external_field must be", (chi[mine], J[mine]), dict(external_field=[1.0, 2.0] if last else None)),
    ]:
        with pytest.raises(ValueError, match=match):
            qeq.solve(s.positions[mine], *args, **kw)
    res = qeq.solve(s.positions[mine], chi[mine], J[mine], ids=ids)  # still usable after the refusals
    assert res.converged and abs(comm.allreduce(float(res.charges.sum()))) < 1e-12
    if size > 1:
        with pytest.raises(ValueError, match="same on every rank"):
            qeq.solve(s.positions[mine], chi[mine], J[mine], total_charge=float(rank))
    np.testing.assert_array_equal(per_atom(["O", "H", "H"], {"O": 8.7, "H": 4.5}), [8.7, 4.5, 4.5])
    with pytest.raises(ValueError, match="element 'C'"):
        per_atom(["C"], {"O": 1.0})
