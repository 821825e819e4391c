"""pmewald.interfaces.torch: torch.autograd.gradcheck (double precision) of the PME energy in
positions, charges and cell on 1 and 2 ranks, dtypes, and the refusal of second derivatives.
Skipped without PyTorch (PMEWALD_EXTRAS=torch bash scripts/dev.sh setup installs it)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mpi4py import MPI  # noqa: E402

from pmewald import systems  # noqa: E402
from pmewald.interfaces.torch import PMEEnergy  # noqa: E402

CELL = np.array([[8.0, 0.0, 0.0], [1.2, 7.6, 0.0], [-0.8, 0.9, 8.4]])


def _inputs(n=12):
    s = systems.random_charges(n, CELL, seed=3, min_distance=1.2)
    return (torch.tensor(s.positions, requires_grad=True), torch.tensor(s.charges + 0.02, requires_grad=True),
            torch.tensor(CELL, requires_grad=True))


class _Rows(torch.autograd.Function):
    """This rank's rows of a global tensor every rank holds; backward: the rows' gradients of
    every rank summed into the global one (each rank differentiates only its own atoms)."""

    @staticmethod
    def forward(ctx, x, rows, comm):
        ctx.shape, ctx.rows, ctx.comm = x.shape, rows, comm
        return x[rows].clone()

    @staticmethod
    def backward(ctx, g):
        full = np.zeros(ctx.shape)
        full[ctx.rows] = g.numpy()
        ctx.comm.Allreduce(MPI.IN_PLACE, full, op=MPI.SUM)
        return torch.from_numpy(full), None, None


class _Replicated(torch.autograd.Function):
    """A tensor every rank holds; backward: the ranks' shares of its gradient summed."""

    @staticmethod
    def forward(ctx, x, comm):
        ctx.comm = comm
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        total = g.numpy().copy()
        ctx.comm.Allreduce(MPI.IN_PLACE, total, op=MPI.SUM)
        return torch.from_numpy(total), None


@pytest.mark.mpi(ranks=[1, 2])
def test_gradcheck_in_positions_charges_and_cell(comm):
    """gradcheck of E(positions, charges, cell) with every rank holding the global inputs and
    passing its own atoms (r, r + P, ...): the ranks' gradients, summed, are the derivatives of
    the global energy, the cell's split included. Tuned parameters (tolerance), a net charge."""
    energy = PMEEnergy(3.5, tolerance=1e-4, comm=comm)
    rows = np.arange(comm.Get_rank(), 12, comm.Get_size())

    def f(pos, q, cell):
        return energy(_Rows.apply(pos, rows, comm), _Rows.apply(q, rows, comm), _Replicated.apply(cell, comm),
                      ids=rows)

    assert torch.autograd.gradcheck(f, _inputs(), eps=1e-6, atol=1e-7, rtol=1e-5)
    assert energy.pme_parameters["differentiation"] == "ad"


def test_dtypes_devices_and_what_is_computed():
    """float32 in, float32 out (computed in double); the potentials only when the charges
    require grad; charge sets give (m,) energies."""
    pos, q, cell = _inputs()
    energy = PMEEnergy(3.5, alpha=0.9, mesh=(16, 16, 16), order=6, comm=MPI.COMM_SELF)
    e = energy(pos, q.detach(), cell)
    assert energy.last.potentials is None
    e.backward()
    np.testing.assert_allclose(pos.grad.numpy(), -energy.last.forces, rtol=1e-14)
    p32 = pos.detach().float().requires_grad_()
    e32 = energy(p32, q.detach().float(), cell.detach().float())
    e32.backward()
    assert e32.dtype == torch.float32 and p32.grad.dtype == torch.float32
    assert abs(e32.item() - e.item()) <= 1e-6 * abs(e.item())
    q2 = torch.stack([q.detach(), -q.detach()], dim=1).requires_grad_()
    e2 = energy(pos.detach(), q2, cell.detach())
    assert e2.shape == (2,)
    e2[1].backward()
    assert torch.all(q2.grad[:, 0] == 0) and torch.allclose(q2.grad[:, 1], -torch.as_tensor(energy.last.potentials[0]))


def test_second_derivatives_raise():
    pos, q, cell = _inputs()
    energy = PMEEnergy(3.5, alpha=0.9, mesh=(16, 16, 16), order=6, comm=MPI.COMM_SELF)
    with pytest.raises(NotImplementedError, match="first derivatives only"):
        torch.autograd.gradgradcheck(lambda a, b, c: energy(a, b, c), (pos, q, cell))
    (forces,) = torch.autograd.grad(energy(pos, q, cell), pos, create_graph=True)
    with pytest.raises(NotImplementedError, match="first derivatives only"):
        (forces ** 2).sum().backward()
