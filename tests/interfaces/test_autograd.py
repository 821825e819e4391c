"""pmewald.interfaces.autograd and pmewald.interfaces.jax: the PME energy's gradients in positions,
charges and cell against central finite differences of the energy itself, on 1 and 2 ranks (each
rank its own atoms, the cell gradient split over the ranks), charge sets, and the refusal of
second derivatives."""

import numpy as np
import pytest
from mpi4py import MPI

from pmewald import systems
from pmewald.interfaces.autograd import DifferentiableEnergy

CELL = np.array([[8.0, 0.0, 0.0], [1.2, 7.6, 0.0], [-0.8, 0.9, 8.4]])  # triclinic


def _atoms(n=24, seed=3):
    """n random charges (net charge 0.3: the background term counts) in CELL, and a few excluded
    pairs of neighbours."""
    s = systems.random_charges(n, CELL, neutral=True, seed=seed, min_distance=1.2)
    q = s.charges + 0.3 / n
    d = np.linalg.norm(s.positions[:, None] - s.positions[None], axis=-1)
    close = [(i, j) for i in range(n) for j in range(i + 1, n) if d[i, j] < 3.0][:4]
    return s.positions, q, np.array(close, dtype=np.int64)


def _energy(function, comm, pos, q, cell, exclusions):
    """Collective: the energy of the global arrays, rank r passing the atoms r, r + P, ..."""
    r, p = comm.Get_rank(), comm.Get_size()
    ids = np.arange(len(q))[r::p]
    return float(function.evaluate(pos[r::p], q[r::p], cell, ids=ids, exclusions=exclusions if r == 0 else None,
                                   potentials=False).energy)


def _gradients(function, comm, pos, q, cell, exclusions):
    """Collective: dE/dpos, dE/dq (global, assembled from every rank's own) and dE/dcell (the
    ranks' shares summed)."""
    r, p = comm.Get_rank(), comm.Get_size()
    ids = np.arange(len(q))[r::p]
    ev = function.evaluate(pos[r::p], q[r::p], cell, ids=ids, exclusions=exclusions if r == 0 else None)
    d_pos, d_q, d_cell = ev.vjp(1.0)
    g_pos, g_q = np.zeros_like(pos), np.zeros_like(q)
    g_pos[r::p], g_q[r::p] = d_pos, d_q
    for a in (g_pos, g_q, d_cell):
        comm.Allreduce(MPI.IN_PLACE, a, op=MPI.SUM)
    return float(ev.energy), g_pos, g_q, d_cell


@pytest.mark.mpi(ranks=[1, 2])
def test_gradients_are_the_energy_derivatives_on_ranks(comm):
    """Directional derivatives along random directions in positions, charges and cell (central
    differences, h = 1e-5) equal the gradients; the gradients assembled from two ranks equal
    one rank's (a solver of its own on rank 0) to 1e-10; the parameters were chosen once."""
    pos, q, ex = _atoms()
    f = DifferentiableEnergy(3.5, tolerance=1e-5, comm=comm)
    e, g_pos, g_q, g_cell = _gradients(f, comm, pos, q, CELL, ex)
    rng = np.random.default_rng(11)
    h = 1e-5
    for _ in range(2):
        v_pos, v_q, v_cell = rng.normal(size=pos.shape), rng.normal(size=q.shape), rng.normal(size=(3, 3))
        for v, g, shift in ((v_pos, g_pos, lambda s: (pos + s * v_pos, q, CELL)),
                            (v_q, g_q, lambda s: (pos, q + s * v_q, CELL)),
                            (v_cell, g_cell, lambda s: (pos, q, CELL + s * v_cell))):
            numeric = (_energy(f, comm, *shift(h), ex) - _energy(f, comm, *shift(-h), ex)) / (2 * h)
            assert abs(numeric - (g * v).sum()) <= 1e-6 * max(1.0, abs(numeric)), (numeric, (g * v).sum())
    assert f.parameters["differentiation"] == "ad" and f.parameters["mesh"] is not None
    mesh = f.parameters["mesh"]
    _energy(f, comm, pos, q, 1.03 * CELL, ex)
    assert f.parameters["mesh"] == mesh  # kept in another cell: the energy has no jumps
    if comm.Get_rank() == 0:
        one = _gradients(DifferentiableEnergy(3.5, tolerance=1e-5, comm=MPI.COMM_SELF), MPI.COMM_SELF,
                         pos, q, CELL, ex)
        assert abs(one[0] - e) <= 1e-12 * abs(e)
        for a, b in zip(one[1:], (g_pos, g_q, g_cell)):
            assert np.abs(a - b).max() <= 1e-10 * np.abs(b).max()


def test_charge_sets_give_each_sets_gradients():
    """Charges (n, 2): two energies from one call; their gradients with cotangent (a, b) are
    a and b times those of separate single-set calls."""
    pos, q, ex = _atoms()
    f = DifferentiableEnergy(3.5, alpha=0.9, mesh=(20, 20, 20), order=6, comm=MPI.COMM_SELF)
    q2 = np.stack([q, np.roll(q, 5)], axis=1)
    ev = f.evaluate(pos, q2, CELL, exclusions=ex)
    singles = [f.evaluate(pos, q2[:, c], CELL, exclusions=ex) for c in range(2)]
    np.testing.assert_allclose(ev.energy, [s.energy for s in singles], rtol=1e-12)
    d_pos, d_q, d_cell = ev.vjp([2.0, -0.5])
    s0, s1 = singles[0].vjp(2.0), singles[1].vjp(-0.5)
    np.testing.assert_allclose(d_pos, s0[0] + s1[0], atol=1e-10)
    np.testing.assert_allclose(d_q, np.stack([s0[1], s1[1]], axis=1), atol=1e-10)
    np.testing.assert_allclose(d_cell, s0[2] + s1[2], atol=1e-10)


def test_options_that_break_the_gradient_are_refused():
    with pytest.raises(ValueError, match="differentiation='ad'"):
        DifferentiableEnergy(3.0, differentiation="ik")
    with pytest.raises(ValueError, match="precision='double'"):
        DifferentiableEnergy(3.0, precision="mixed")
    with pytest.raises(NotImplementedError, match="slab"):
        DifferentiableEnergy(3.0, slab=True)


@pytest.fixture
def jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


def test_jax_check_grads_and_jit(jax):
    """jax.test_util.check_grads (reverse mode, double precision) in positions, charges and
    cell; the same gradients under jax.jit."""
    from jax.test_util import check_grads

    from pmewald.interfaces.jax import PMEEnergy

    pos, q, ex = _atoms(12)
    energy = PMEEnergy(3.5, alpha=0.9, mesh=(16, 16, 16), order=6, comm=MPI.COMM_SELF)
    args = tuple(jax.numpy.asarray(a) for a in (pos, q, CELL))
    check_grads(lambda p, c, h: energy(p, c, h, exclusions=ex), args, order=1, modes=["rev"], eps=1e-5)
    grad = jax.grad(lambda p, c, h: energy(p, c, h, exclusions=ex), argnums=(0, 1, 2))
    eager, jitted = grad(*args), jax.jit(grad)(*args)
    for a, b in zip(eager, jitted):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_allclose(np.asarray(eager[0]), -energy.last.forces, rtol=1e-12)


def test_jax_charge_sets_and_second_derivatives(jax):
    from pmewald.interfaces.autograd import SECOND_ORDER_MESSAGE
    from pmewald.interfaces.jax import PMEEnergy

    pos, q, _ = _atoms(12)
    energy = PMEEnergy(3.5, alpha=0.9, mesh=(16, 16, 16), order=6, comm=MPI.COMM_SELF)
    q2 = np.stack([q, -2 * q], axis=1)
    e = energy(pos, q2, CELL)
    assert e.shape == (2,) and abs(float(e[1]) - 4 * float(e[0])) <= 1e-9 * abs(float(e[1]))
    g = jax.grad(lambda c: energy(pos, c, CELL)[1])(q2)
    np.testing.assert_allclose(np.asarray(g[:, 0]), 0.0, atol=0)
    np.testing.assert_allclose(np.asarray(g[:, 1]), -2 * np.asarray(jax.grad(lambda c: energy(pos, c, CELL))(q)),
                               rtol=1e-10)
    with pytest.raises(NotImplementedError, match="first derivatives only"):
        jax.hessian(lambda p: energy(p, q, CELL))(pos)
    with pytest.raises(NotImplementedError) as info:
        jax.grad(lambda c: jax.grad(lambda p: energy(p, c, CELL))(pos).sum())(q)
    assert str(info.value) == SECOND_ORDER_MESSAGE
