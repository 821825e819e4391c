"""Distributed 3-D FFT: against numpy.fft.fftn, in all three communication modes."""

import numpy as np
import pytest

import pmewald
from pmewald import _core, geometry
from pmewald.fft import COMM_MODES

MESHES = [(1, 1, 1), (2, 3, 5), (7, 11, 13), (16, 16, 16), (30, 27, 32)]


def global_array(mesh, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(mesh) + 1j * rng.standard_normal(mesh)


def part(g, box):
    (lo, hi) = box
    return np.ascontiguousarray(g[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]])


def slabs(mesh, axis, P, rank, skip=()):
    """Uneven slabs along `axis` over the ranks not in `skip` (which get empty boxes)."""
    owners = [r for r in range(P) if r not in skip] or list(range(P))
    if rank not in owners:
        return ((0, 0, 0), (0, 0, 0))
    k, n = owners.index(rank), len(owners)
    # uneven: part k gets weight k+1
    w = np.cumsum([0] + [j + 1 for j in range(n)])
    lo_a = int(mesh[axis] * w[k] // w[-1])
    hi_a = int(mesh[axis] * w[k + 1] // w[-1])
    lo, hi = [0, 0, 0], list(mesh)
    lo[axis], hi[axis] = lo_a, hi_a
    return (tuple(lo), tuple(hi))


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


# ---------------------------------------------------------------------------
# DistributedRealFFT: r2c along x, half spectrum (n_x // 2 + 1, n_y, n_z)
# ---------------------------------------------------------------------------

def real_array(mesh, seed=0):
    return np.random.default_rng(seed).standard_normal(mesh)


def rfft_ref(g):
    """numpy's half spectrum with axis x halved."""
    return np.fft.rfftn(g, axes=(1, 2, 0))


def real_box_cases(mesh, P, rank):
    """(name, inbox, outbox) cases: the inboxes tile the real mesh, the outboxes the half spectrum."""
    spec = pmewald.DistributedRealFFT.spectrum_shape_of(mesh)
    zp = geometry.pencil_box(2, P, spec, rank)
    brick = geometry.brick_box(P, mesh, rank)
    nothing = ((0, 0, 0), (0, 0, 0))
    return [
        ("default", None, None),
        ("brick->zpencil", brick, zp),
        ("zpencil->brick", geometry.pencil_box(2, P, mesh, rank), geometry.brick_box(P, spec, rank)),
        ("xslabs(rank0 empty)->yslabs(last empty)", slabs(mesh, 0, P, rank, skip=(0,)),
         slabs(spec, 1, P, rank, skip=(P - 1,))),
        ("all on last rank->zslabs", ((0, 0, 0), mesh) if rank == P - 1 else nothing, slabs(spec, 2, P, rank)),
    ]


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(240)
def test_real_forward_matches_numpy_rfftn_and_backward_inverts_in_every_mode(comm):
    P, rank = comm.Get_size(), comm.Get_rank()
    checked = 0
    for mesh in MESHES:
        g = real_array(mesh, seed=sum(mesh))
        ref = rfft_ref(g)
        scale = np.abs(ref).max()
        for name, inbox, outbox in real_box_cases(mesh, P, rank):
            results = {}
            for mode in COMM_MODES:
                fft = pmewald.DistributedRealFFT(mesh, comm=comm, comm_mode=mode, inbox=inbox, outbox=outbox,
                                                 planner="estimate")
                assert fft.spectrum_shape == ref.shape
                a = part(g, fft.inbox)
                b = fft.forward(a)
                assert b.shape == fft.outshape and b.dtype == np.complex128
                if b.size:
                    err = np.abs(b - part(ref, fft.outbox)).max() / scale
                    assert err < 1e-12, (mesh, name, mode, err)
                a2 = fft.backward(b)
                a3 = fft.backward(b, normalise=False)  # unnormalised: N a
                assert a2.shape == a.shape and a2.dtype == np.float64
                if a.size:
                    assert np.abs(a2 - a).max() < 1e-12 * np.abs(g).max(), (mesh, name, mode)
                    assert np.abs(a3 - g.size * a).max() < 1e-12 * g.size * np.abs(g).max()
                results[mode] = (b, a2)
                checked += 1
            for mode in COMM_MODES[1:]:
                assert np.array_equal(results[mode][0], results["pt2pt"][0]), (mesh, name, mode, "forward")
                assert np.array_equal(results[mode][1], results["pt2pt"][1]), (mesh, name, mode, "backward")
    assert checked == len(MESHES) * 5 * 3


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
def test_real_backward_matches_numpy_irfftn(comm):
    # the inverse of a given (Hermitian) half spectrum, scattered over the outboxes
    for mesh in [(6, 5, 4), (7, 11, 13), (16, 16, 16)]:
        spec = rfft_ref(real_array(mesh, 4))
        want = np.fft.irfftn(spec, s=mesh[1:] + mesh[:1], axes=(1, 2, 0))
        fft = pmewald.DistributedRealFFT(mesh, comm=comm, planner="estimate")
        got = fft.backward(part(spec, fft.outbox))
        if got.size:
            assert np.abs(got - part(want, fft.inbox)).max() < 1e-14 * np.abs(want).max() * 100


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(240)
def test_real_storage_box_reads_and_writes_only_the_inbox(comm):
    """The PME layout: the inbox inside a ghosted array; ghosts are never read nor written."""
    P, rank = comm.Get_size(), comm.Get_rank()
    for mesh, ghost in [((16, 16, 16), 4), ((30, 27, 32), 3), ((7, 11, 13), 2)]:
        g = real_array(mesh, 11)
        ref = rfft_ref(g)
        brick = geometry.brick_box(P, mesh, rank)
        lo, hi = brick
        storage = (tuple(v - ghost for v in lo), tuple(v + 1 for v in hi))  # low ghosts, one high layer
        outs = []
        for mode in COMM_MODES:
            fft = pmewald.DistributedRealFFT(mesh, comm=comm, comm_mode=mode, inbox=brick, storage=storage,
                                             planner="measure" if mode == "nonblocking" else "estimate")
            assert fft.storage == storage and fft.inshape == tuple(h - l for l, h in zip(*storage))
            a = np.full(fft.inshape, np.nan)   # a ghost read would poison the result
            inner = tuple(slice(ghost, ghost + h - l) for l, h in zip(lo, hi))
            a[inner] = part(g, brick)
            b = fft.forward(a)
            if b.size:
                assert np.abs(b - part(ref, fft.outbox)).max() < 1e-12 * np.abs(ref).max(), (mesh, mode)
            out = np.full(fft.inshape, -7.0)
            fft.backward(b, out=out)
            assert np.abs(out[inner] - part(g, brick)).max() < 1e-12 * np.abs(g).max()
            mask = np.ones(fft.inshape, bool)
            mask[inner] = False
            assert np.all(out[mask] == -7.0)   # ghosts untouched
            new = fft.backward(b)              # a fresh array is zero outside the inbox
            assert np.all(new[mask] == 0.0) and np.array_equal(new[inner], out[inner])
            outs.append((b, out))
            assert fft.stats()["fft"]["unaligned_copies"] == 0
        for b, out in outs[1:]:
            assert np.allclose(b, outs[0][0], rtol=0, atol=1e-12 * np.abs(ref).max())


@pytest.mark.mpi(ranks=[1, 2])
def test_real_misaligned_arrays_go_through_a_copy(comm):
    mesh = (8, 10, 12)  # bricks split z on 2 ranks: the r2c reads the caller's array
    g = real_array(mesh, 2)
    fft = pmewald.DistributedRealFFT(mesh, comm=comm, planner="estimate")

    def misaligned(shape, dtype):
        n = int(np.prod(shape)) * np.dtype(dtype).itemsize
        raw = np.zeros(n + 8, np.uint8)
        off = 8 if raw.ctypes.data % 16 == 0 else 0
        return raw[off:off + n].view(dtype).reshape(shape)

    a = misaligned(fft.inshape, np.float64)
    a[...] = part(g, fft.inbox)
    b = misaligned(fft.outshape, np.complex128)
    fft.forward(a, out=b)
    if b.size:
        assert np.abs(b - part(rfft_ref(g), fft.outbox)).max() < 1e-12 * np.abs(b).max()
    a2 = misaligned(fft.inshape, np.float64)
    fft.backward(b, out=a2)
    assert np.abs(a2 - a).max() < 1e-12
    if a.size and not fft._fft.remap_active(0):
        assert fft.stats()["fft"]["unaligned_copies"] > 0


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(240)
def test_real_repeated_pairs_allocate_nothing(comm):
    mesh = (8, 6, 10)
    for mode in COMM_MODES:
        fft = pmewald.DistributedRealFFT(mesh, comm=comm, comm_mode=mode, planner="estimate")
        a = part(real_array(mesh, 1), fft.inbox)
        b = np.empty(fft.outshape, complex)
        a2 = np.empty(fft.inshape)
        fft.forward(a, out=b)
        fft.backward(b, out=a2)
        before = _core._testing.comm.buffer_allocations()
        pairs = 300
        for _ in range(pairs):
            fft.forward(a, out=b)
            fft.backward(b, out=a2)
        assert _core._testing.comm.buffer_allocations() == before
        s = fft.stats()
        assert s["fft"]["forward_executions"] == pairs + 1 and s["fft"]["backward_executions"] == pairs + 1
        if a.size:
            assert np.abs(a2 - a).max() < 1e-12


@pytest.mark.mpi(ranks=[1, 2, 3])
def test_real_remaps_move_about_half_the_bytes(comm):
    P = comm.Get_size()
    mesh = (16, 16, 16)
    names = ["in->x", "x->y", "y->z", "z->out", "out->z", "z->y", "y->x", "x->in"]
    sent = {}
    for kind, cls in (("complex", pmewald.DistributedFFT), ("real", pmewald.DistributedRealFFT)):
        kw = {"outbox": pmewald.DistributedFFT.z_pencil_box(mesh, comm)} if kind == "complex" else {}
        fft = cls(mesh, comm=comm, planner="estimate", **kw)
        a = part(real_array(mesh, 3), fft.inbox).astype(complex if kind == "complex" else float)
        fft.backward(fft.forward(a))
        s = fft.stats()
        assert set(names) <= set(s)
        sent[kind] = comm.allreduce(sum(s[n]["bytes_sent"] + s[n]["self_bytes"] for n in names))
        assert comm.allreduce(sum(s[n]["bytes_sent"] for n in names)) == \
            comm.allreduce(sum(s[n]["bytes_received"] for n in names))
    if P == 1:
        assert sent["real"] == sent["complex"] == 0
    else:
        assert 0 < sent["real"] < 0.6 * sent["complex"], sent


@pytest.mark.mpi(ranks=[1, 2, 3])
def test_real_argument_errors(comm):
    P, rank = comm.Get_size(), comm.Get_rank()
    mesh = (6, 5, 4)
    with pytest.raises(ValueError, match="comm_mode"):
        pmewald.DistributedRealFFT(mesh, comm=comm, comm_mode="bogus" if rank == P - 1 else "pt2pt")
    with pytest.raises(TypeError, match="comm"):
        pmewald.DistributedRealFFT(mesh, comm=42)
    # outboxes must tile the half spectrum (4, 5, 4), not the real mesh
    with pytest.raises(ValueError, match="tile"):
        pmewald.DistributedRealFFT(mesh, comm=comm, outbox=geometry.brick_box(P, mesh, rank))
    # a storage box that does not hold the inbox, on one rank only
    brick = geometry.brick_box(P, mesh, rank)
    bad = ((brick[0][0] + 1,) + tuple(brick[0][1:]), brick[1]) if rank == P - 1 else brick
    if rank == P - 1 and brick[1][0] - brick[0][0] < 1:
        bad = ((0, 0, 0), (0, 0, 0))
    with pytest.raises(ValueError, match="storage"):
        pmewald.DistributedRealFFT(mesh, comm=comm, storage=bad)
    fft = pmewald.DistributedRealFFT(mesh, comm=comm, planner="estimate")
    good = np.zeros(fft.inshape)
    with pytest.raises(ValueError, match="float64"):
        fft.forward(good.astype(complex) if rank == P - 1 else good)
    with pytest.raises(ValueError, match="shape"):
        fft.forward(np.zeros((1, 2)) if rank == P - 1 else good)
    spec = np.zeros(fft.outshape, complex)
    with pytest.raises(ValueError, match="complex128"):
        fft.backward(spec.real.copy() if rank == P - 1 else spec)
    with pytest.raises(ValueError, match="float64"):
        fft.backward(spec, out=np.zeros(fft.inshape, np.float32) if rank == P - 1 else np.zeros(fft.inshape))
    # still usable afterwards; the input is never modified
    a = part(real_array(mesh), fft.inbox)
    a0 = a.copy()
    b = fft.forward(a)
    b0 = b.copy()
    fft.backward(b)
    assert np.array_equal(a, a0) and np.array_equal(b, b0)


@pytest.mark.mpi(ranks=[1, 2])
def test_real_fft_groups(comm):
    P = comm.Get_size()
    fft = pmewald.DistributedRealFFT((12, 10, 8), comm=comm, planner="estimate")
    if P == 1:
        # every remap skipped: one 3-D r2c plan from the caller's array to the caller's spectrum
        assert fft._fft.fft_groups == "xyz"
        assert not any(fft._fft.remap_active(t) for t in range(4))
    else:
        assert fft._fft.fft_groups in ("xy,z", "x,y,z", "x,yz")
        assert not fft._fft.remap_active(3)  # default outbox: z-pencils
    assert "DistributedRealFFT" in repr(fft)


def test_real_default_boxes_single_rank():
    from mpi4py import MPI

    fft = pmewald.DistributedRealFFT((5, 6, 7), comm=MPI.COMM_SELF, planner="estimate")
    assert fft.inbox == ((0, 0, 0), (5, 6, 7)) and fft.storage == fft.inbox
    assert fft.outbox == ((0, 0, 0), (3, 6, 7)) and fft.spectrum_shape == (3, 6, 7)
    assert fft.pencils[0] == fft.inbox and all(p == fft.outbox for p in fft.pencils[1:])
    assert pmewald.DistributedRealFFT.spectrum_shape_of((8, 2, 3)) == (5, 2, 3)
    with pytest.raises(ValueError, match="planner"):
        pmewald.DistributedRealFFT((5, 6, 7), comm=MPI.COMM_SELF, planner="fast")


def test_fftw_serial_r2c_reference_helper():
    t = _core.fftw_serial_r2c_pair_times((8, 8, 8), 3, "estimate")
    assert len(t) == 3 and all(x >= 0 for x in t)
    assert _core.FFTWSerialReal3d((6, 5, 4), "estimate").pair_seconds() >= 0


@pytest.mark.parametrize("halved", [1, 2])
def test_real_single_rank_other_halved_axis(halved):
    """On one rank the r2c may halve y or z (the solver halves z there: one 3-D plan along the
    contiguous axis), also with a storage box."""
    from mpi4py import MPI

    for mesh in MESHES:
        g = real_array(mesh, 5)
        axes = tuple(d for d in range(3) if d != halved) + (halved,)
        ref = np.fft.rfftn(g, axes=axes)
        storage = ((-3, -3, -3), tuple(n + 1 for n in mesh))
        fft = pmewald.DistributedRealFFT(mesh, comm=MPI.COMM_SELF, planner="estimate", halved_axis=halved,
                                         storage=storage)
        assert fft.spectrum_shape == ref.shape == pmewald.DistributedRealFFT.spectrum_shape_of(mesh, halved)
        assert fft.outbox == ((0, 0, 0), ref.shape) and fft._fft.fft_groups == "xyz"
        a = np.full(fft.inshape, np.nan)
        inner = tuple(slice(3, 3 + n) for n in mesh)
        a[inner] = g
        b = fft.forward(a)
        assert np.abs(b - ref).max() < 1e-12 * np.abs(ref).max(), mesh
        out = np.full(fft.inshape, 5.0)
        fft.backward(b, out=out)
        assert np.abs(out[inner] - g).max() < 1e-12 * np.abs(g).max()
        out[inner] = 5.0
        assert np.all(out == 5.0)
        assert fft.stats()["fft"]["unaligned_copies"] == 0


@pytest.mark.mpi(ranks=[2, 3])
def test_real_other_halved_axis_needs_one_rank(comm):
    with pytest.raises(ValueError, match="single rank"):
        pmewald.DistributedRealFFT((8, 8, 8), comm=comm, halved_axis=2)
    with pytest.raises(ValueError, match="halved_axis"):
        pmewald.DistributedRealFFT((8, 8, 8), comm=comm, halved_axis=3)
