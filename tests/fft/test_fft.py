"""DistributedFFT (complex-to-complex): against numpy.fft.fftn, in all three communication modes.

The real-to-complex DistributedRealFFT is tests/fft/test_real_fft.py; the mesh cases and
slab tilings both use are tests/fft/fft_cases.py.
"""

import numpy as np
import pytest

import pmewald
from pmewald import _core, geometry
from pmewald.fft import COMM_MODES

from fft_cases import MESHES, global_array, part, slabs

def box_cases(mesh, P, rank):
    """(name, inbox, outbox) cases: default, z-pencil output, and custom tilings with empty boxes."""
    zp = geometry.pencil_box(2, P, mesh, rank)
    brick = geometry.brick_box(P, mesh, rank)
    everything = ((0, 0, 0), mesh)
    nothing = ((0, 0, 0), (0, 0, 0))
    return [
        ("default", None, None),
        ("brick->zpencil", brick, zp),
        ("zpencil->brick", zp, brick),
        ("xslabs(rank0 empty)->yslabs(last empty)", slabs(mesh, 0, P, rank, skip=(0,)),
         slabs(mesh, 1, P, rank, skip=(P - 1,))),
        ("all on last rank->zslabs", everything if rank == P - 1 else nothing, slabs(mesh, 2, P, rank)),
    ]


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(240)
def test_forward_matches_numpy_and_backward_inverts_in_every_mode(comm):
    P, rank = comm.Get_size(), comm.Get_rank()
    checked = 0
    for mesh in MESHES:
        g = global_array(mesh, seed=sum(mesh))
        ref = np.fft.fftn(g)
        scale = np.abs(ref).max()
        for name, inbox, outbox in box_cases(mesh, P, rank):
            results = {}
            for mode in COMM_MODES:
                fft = pmewald.DistributedFFT(mesh, comm=comm, comm_mode=mode, inbox=inbox, outbox=outbox,
                                             planner="estimate")
                if inbox is not None:
                    assert fft.inbox == (tuple(inbox[0]), tuple(inbox[1])) or np.prod(fft.inshape) == 0
                a = part(g, fft.inbox)
                b = fft.forward(a)
                assert b.shape == fft.outshape and b.dtype == np.complex128
                expect = part(ref, fft.outbox)
                if b.size:
                    err = np.abs(b - expect).max() / scale
                    assert err < 1e-12, (mesh, name, mode, err)
                a2 = fft.backward(b)
                assert a2.shape == a.shape
                if a.size:
                    assert np.abs(a2 - a).max() < 1e-12 * np.abs(g).max(), (mesh, name, mode)
                results[mode] = (b, a2)
                checked += 1
            for mode in COMM_MODES[1:]:
                assert np.array_equal(results[mode][0], results["pt2pt"][0]), (mesh, name, mode, "forward")
                assert np.array_equal(results[mode][1], results["pt2pt"][1]), (mesh, name, mode, "backward")
    assert checked == len(MESHES) * 5 * 3


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
def test_modes_bitwise_identical_with_measured_plans(comm):
    mesh = (30, 27, 32)
    g = global_array(mesh, 5)
    outs = []
    variants = [(m, {}) for m in COMM_MODES] + [("collective", {"_collective_self_via_mpi": True})]
    for mode, kw in variants:
        fft = pmewald.DistributedFFT(mesh, comm=comm, comm_mode=mode, planner="measure", **kw)
        b = fft.forward(part(g, fft.inbox))
        outs.append((b, fft.backward(b)))
    for b, a in outs[1:]:
        assert np.array_equal(b, outs[0][0])
        assert np.array_equal(a, outs[0][1])
    # and identical on every rank pattern: compare the gathered forward result with numpy
    if outs[0][0].size:
        ref = part(np.fft.fftn(g), fft.outbox)
        assert np.abs(outs[0][0] - ref).max() < 1e-12 * np.abs(ref).max()


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(240)
def test_repeated_pairs_allocate_nothing(comm):
    mesh = (8, 6, 10)
    for mode in COMM_MODES:
        zp = pmewald.DistributedFFT.z_pencil_box(mesh, comm)
        fft = pmewald.DistributedFFT(mesh, comm=comm, comm_mode=mode, outbox=zp, planner="estimate")
        a = part(global_array(mesh, 1), fft.inbox)
        b = np.empty(fft.outshape, complex)
        a2 = np.empty(fft.inshape, complex)
        fft.forward(a, out=b)
        fft.backward(b, out=a2)
        before = _core._testing.comm.buffer_allocations()
        assert fft.stats()["allocations"] == before
        pairs = 1000 if mode == "nonblocking" else 200
        for _ in range(pairs):
            fft.forward(a, out=b)
            fft.backward(b, out=a2)
        assert _core._testing.comm.buffer_allocations() == before
        s = fft.stats()
        assert s["allocations"] == before
        assert s["fft"]["forward_executions"] == pairs + 1
        assert s["fft"]["backward_executions"] == pairs + 1
        if a.size:
            assert np.abs(a2 - a).max() < 1e-12


@pytest.mark.mpi(ranks=[1, 2, 3])
def test_stats_count_messages_and_bytes(comm):
    mesh = (16, 16, 16)
    P = comm.Get_size()
    fft = pmewald.DistributedFFT(mesh, comm=comm, comm_mode="nonblocking", planner="estimate")
    a = part(global_array(mesh), fft.inbox)
    fft.forward(a)
    fft.backward(fft.forward(a))
    s = fft.stats()
    names_f = ["in->x", "x->y", "y->z", "z->out"]
    names_b = ["out->z", "z->y", "y->x", "x->in"]
    for name in names_f + names_b + ["fft", "allocations", "comm_mode"]:
        assert name in s
    assert s["comm_mode"] == "nonblocking"
    assert s["fft"]["forward_executions"] == 2 and s["fft"]["backward_executions"] == 1
    sent = comm.allreduce(sum(s[n]["bytes_sent"] for n in names_f + names_b))
    recv = comm.allreduce(sum(s[n]["bytes_received"] for n in names_f + names_b))
    assert sent == recv
    msgs = comm.allreduce(sum(s[n]["messages_sent"] for n in names_f))
    if P == 1:
        # one rank: every remap is skipped, the FFTs run on strided data in place
        assert sent == 0 and msgs == 0
        assert not any(s[n]["active"] for n in names_f)
    else:
        assert sent > 0 and msgs > 0
        for n in names_f + names_b:
            if s[n]["executions"]:
                assert s[n]["wait_seconds"] >= 0 and s[n]["pack_seconds"] >= 0


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
def test_bad_tiling_raises_on_every_rank(comm):
    P, rank = comm.Get_size(), comm.Get_rank()
    mesh = (6, 5, 4)
    # every rank claims the whole mesh (overlap when P > 1; fine when P == 1), and
    # rank 0 additionally claims too little when alone
    inbox = ((0, 0, 0), mesh) if P > 1 else ((0, 0, 0), (6, 5, 3))
    with pytest.raises(ValueError, match="tile"):
        pmewald.DistributedFFT(mesh, comm=comm, inbox=inbox)
    # only one rank is wrong: its box sticks out of the mesh
    brick = geometry.brick_box(P, mesh, rank)
    bad = ((brick[0]), (brick[1][0] + 1, brick[1][1], brick[1][2])) if rank == P - 1 else brick
    with pytest.raises(ValueError, match="tile"):
        pmewald.DistributedFFT(mesh, comm=comm, outbox=bad)
    comm.Barrier()


@pytest.mark.mpi(ranks=[1, 2, 3])
def test_argument_errors(comm):
    P, rank = comm.Get_size(), comm.Get_rank()
    with pytest.raises(ValueError, match="comm_mode"):
        pmewald.DistributedFFT((4, 4, 4), comm=comm, comm_mode="alltoall")
    # a bad mode on one rank only: every rank raises, nobody hangs
    with pytest.raises(ValueError, match="comm_mode"):
        pmewald.DistributedFFT((4, 4, 4), comm=comm, comm_mode="bogus" if rank == P - 1 else "pt2pt")
    with pytest.raises(TypeError, match="comm"):
        pmewald.DistributedFFT((4, 4, 4), comm="COMM_WORLD")
    with pytest.raises(TypeError, match="comm"):
        pmewald.DistributedFFT((4, 4, 4), comm=42)
    fft = pmewald.DistributedFFT((4, 4, 4), comm=comm, planner="estimate")
    good = np.zeros(fft.inshape, complex)
    # a wrong array on the last rank only: every rank raises, nobody hangs
    bad = good.astype(np.complex64) if rank == P - 1 else good
    with pytest.raises(ValueError, match="complex128"):
        fft.forward(bad)
    bad = np.zeros((1, 2), complex) if rank == P - 1 else good
    with pytest.raises(ValueError, match="shape"):
        fft.forward(bad)
    with pytest.raises(ValueError, match="shape"):
        fft.backward(bad)
    # still usable afterwards
    assert fft.forward(good).shape == fft.outshape
    # non-contiguous input is accepted (copied)
    g = global_array((4, 4, 4))
    big = np.zeros(tuple(2 * n for n in fft.inshape), complex)
    big[::2, ::2, ::2] = part(g, fft.inbox)
    assert np.array_equal(fft.forward(big[::2, ::2, ::2]), fft.forward(part(g, fft.inbox)))


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
def test_split_sub_communicator(comm):
    rank = comm.Get_rank()
    sub = comm.Split(color=rank % 2, key=-rank)  # reversed rank order inside each half
    mesh = (7, 11, 13) if rank % 2 == 0 else (16, 16, 16)
    g = global_array(mesh, 3)
    for mode in COMM_MODES:
        fft = pmewald.DistributedFFT(mesh, comm=sub, comm_mode=mode, planner="estimate")
        b = fft.forward(part(g, fft.inbox))
        if b.size:
            ref = part(np.fft.fftn(g), fft.outbox)
            assert np.abs(b - ref).max() < 1e-12 * np.abs(ref).max()
        assert np.allclose(fft.backward(b), part(g, fft.inbox), atol=1e-12)
    sub.Free()


def test_fftw_serial_reference_helper():
    t = _core.fftw_serial_pair_times((8, 8, 8), 3, "estimate")
    assert len(t) == 3 and all(x >= 0 for x in t)


def test_default_boxes_and_pencils_single_rank():
    from mpi4py import MPI

    fft = pmewald.DistributedFFT((5, 6, 7), comm=MPI.COMM_SELF, planner="estimate")
    assert fft.inbox == ((0, 0, 0), (5, 6, 7)) and fft.outbox == fft.inbox
    assert all(p == ((0, 0, 0), (5, 6, 7)) for p in fft.pencils)
    assert "DistributedFFT" in repr(fft)
    with pytest.raises(ValueError, match="planner"):
        pmewald.DistributedFFT((5, 6, 7), comm=MPI.COMM_SELF, planner="fast")


@pytest.mark.mpi(ranks=[1, 2])
def test_fft_groups_and_in_place_use(comm):
    P = comm.Get_size()
    mesh = (12, 10, 8)
    g = global_array(mesh, 9)
    fft = pmewald.DistributedFFT(mesh, comm=comm, planner="estimate")
    if P == 1:
        # every remap is skipped: one 3-D FFTW plan, caller's arrays in and out
        assert fft._fft.fft_groups == "xyz"
    else:
        assert fft._fft.fft_groups in ("xy,z", "x,y,z", "x,yz")
    a = part(g, fft.inbox)
    ref = part(np.fft.fftn(g), fft.outbox)
    # out may be the input array itself (inbox == outbox)
    work = a.copy()
    res = fft.forward(work, out=work)
    assert res is work or np.shares_memory(res, work)
    assert np.abs(work - ref).max() < 1e-12 * np.abs(ref).max()
    fft.backward(work, out=work)
    assert np.abs(work - a).max() < 1e-12
    # input arrays are never modified
    a0 = a.copy()
    b = fft.forward(a)
    b0 = b.copy()
    fft.backward(b)
    assert np.array_equal(a, a0) and np.array_equal(b, b0)
