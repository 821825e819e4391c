"""DistributedRealFFT (real-to-complex, the half spectrum along x): against numpy.fft.rfftn and
irfftn, in all three communication modes; storage boxes, alignment, allocations, bytes moved,
argument errors and the other halved axes of a single rank.
"""

import numpy as np
import pytest

import pmewald
from pmewald import _core, geometry
from pmewald.fft import COMM_MODES

from fft_cases import MESHES, part, slabs


# ---------------------------------------------------------------------------
# DistributedRealFFT: r2c along x, half spectrum (n_x // 2 + 1, n_y, n_z)
# ---------------------------------------------------------------------------

def real_array(mesh, seed=0):
    return np.random.default_rng(seed).standard_normal(mesh)


def rfft_ref(g):
    """numpy's half spectrum with axis x halved."""
    return np.fft.rfftn(g, axes=(1, 2, 0))


def pme_layout(mesh, ghost, P, rank):
    """The PME solver's layout of rank `rank` of P: its brick inside a storage box with `ghost`
    layers below and one above, the storage's shape, the brick's slices in it, and its z-pencil
    of the half spectrum (the outbox). (brick, storage, shape, inner, out_box)."""
    spec = pmewald.DistributedRealFFT.spectrum_shape_of(mesh)
    brick = geometry.brick_box(P, mesh, rank)
    lo, hi = brick
    storage = (tuple(v - ghost for v in lo), tuple(v + 1 for v in hi))
    shape = tuple(h - l for l, h in zip(*storage))
    inner = tuple(slice(ghost, ghost + h - l) for l, h in zip(lo, hi))
    return brick, storage, shape, inner, geometry.pencil_box(2, P, spec, rank)


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
@pytest.mark.parametrize("paired", [True, False])
def test_real_misaligned_arrays_go_through_a_copy(comm, paired):
    """FFTW's plans are alignment specific: misaligned caller arrays go through a copy where
    FFTW reads or writes them (its r2c in place, on two ranks without paired lines); the
    paired transform reads and writes through its own loops and needs none."""
    mesh = (8, 10, 12)  # bricks split z on 2 ranks: the r2c reads the caller's array
    g = real_array(mesh, 2)
    P, rank = comm.Get_size(), comm.Get_rank()
    inbox = geometry.brick_box(P, mesh, rank)
    outbox = pmewald.DistributedRealFFT.z_pencil_box(mesh, comm, 2 if P == 1 else 0)
    fft = _core.RealFFT3d(comm, mesh, inbox, outbox, "nonblocking", "estimate", halved_axis=2 if P == 1 else 0,
                          pair_real_lines=paired)
    in_place = not fft.remap_active(0)
    assert fft.paired_real_lines == (paired and P == 2 and in_place)

    def misaligned(shape, dtype):
        n = int(np.prod(shape)) * np.dtype(dtype).itemsize
        raw = np.zeros(n + 8, np.uint8)
        off = 8 if raw.ctypes.data % 16 == 0 else 0
        return raw[off:off + n].view(dtype).reshape(shape)

    shape = tuple(h - l for l, h in zip(*inbox))
    a = misaligned(shape, np.float64)
    a[...] = part(g, inbox)
    b = misaligned(tuple(h - l for l, h in zip(*outbox)), np.complex128)
    fft.forward(a, b)
    ref = np.fft.rfftn(g) if P == 1 else rfft_ref(g)
    if b.size:
        assert np.abs(b - part(ref, outbox)).max() < 1e-12 * np.abs(b).max()
    a2 = misaligned(shape, np.float64)
    fft.backward(b, a2)
    assert np.abs(a2 - a).max() < 1e-12
    copies = fft.stats()["fft"]["unaligned_copies"]
    assert (copies > 0) == (a.size > 0 and not fft.paired_real_lines), copies


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


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
def test_real_contiguous_x_copy_gives_the_same_transform(comm):
    """contiguous_real_x (the PME solver's alternative where a brick is its x-pencil): the
    inbox is copied x-fastest before the r2c. The same transform as numpy's to 1e-12, in
    the PME layout (ghosted storage, bricks to z-pencils), ghosts untouched; where the
    brick is the x-pencil, in->x becomes an active (local) remap. The PME solver times both
    where it plans by measurement and reports its choice."""
    P, rank = comm.Get_size(), comm.Get_rank()
    for mesh, ghost in [((16, 16, 16), 3), ((12, 10, 18), 2)]:
        g = real_array(mesh, 5)
        ref = rfft_ref(g)
        brick, storage, shape, inner, out_box = pme_layout(mesh, ghost, P, rank)
        got = {}
        for contiguous in (False, True):
            f = _core.RealFFT3d(comm, mesh, brick, out_box, "nonblocking", "estimate", in_storage=storage,
                                contiguous_real_x=contiguous)
            assert f.contiguous_real_x == contiguous
            if contiguous:
                assert f.remap_active(0)  # a local x-fastest copy even where the brick is the x-pencil
            a = np.full(shape, np.nan)
            a[inner] = part(g, brick)
            b = np.asarray(f.forward(a))
            if b.size:
                assert np.abs(b - part(ref, out_box)).max() < 1e-12 * np.abs(ref).max(), (mesh, contiguous)
            back = np.full(shape, -7.0)
            f.backward(b, back)
            assert np.abs(back[inner] - part(g, brick)).max() < 1e-12 * np.abs(g).max()
            mask = np.ones(shape, bool)
            mask[inner] = False
            assert np.all(back[mask] == -7.0)
            got[contiguous] = b
        assert np.allclose(got[True], got[False], rtol=0, atol=1e-12 * np.abs(ref).max())


@pytest.mark.mpi(ranks=[2, 3, 4])
def test_real_paired_lines_match_fftw_r2c_and_c2r(comm):
    """Paired z lines (pair_real_lines, where the r2c reads the caller's storage in place, x
    halved): the same transforms as FFTW's r2c and c2r to 1e-12, forward, and backward for a
    spectrum that is not Hermitian too (both keep its Hermitian part on the planes kx = 0
    and K_x/2), with K_x even and odd, y in the group or not, in the PME layout (ghosted
    storage, bricks to z-pencils); ghosts untouched, the backward's input preserved."""
    P, rank = comm.Get_size(), comm.Get_rank()
    paired, groups = 0, set()
    for mesh, ghost in [((16, 16, 16), 3), ((15, 12, 20), 2), ((9, 7, 8), 1), ((12, 10, 18), 2)]:
        g = real_array(mesh, 9)
        brick, storage, shape, inner, out_box = pme_layout(mesh, ghost, P, rank)
        f = {p: _core.RealFFT3d(comm, mesh, brick, out_box, "nonblocking", "estimate", in_storage=storage,
                                pair_real_lines=p) for p in (True, False)}
        assert not f[False].paired_real_lines
        if f[True].paired_real_lines:
            paired += 1
            groups.add(f[True].fft_groups.split(",")[0])
        a = np.full(shape, np.nan)  # a ghost read would poison the result
        a[inner] = part(g, brick)
        b = {p: np.asarray(f[p].forward(a)) for p in f}
        scale = np.abs(rfft_ref(g)).max()
        if b[True].size:
            assert np.abs(b[True] - b[False]).max() < 1e-12 * scale, mesh
            assert np.abs(b[True] - part(rfft_ref(g), out_box)).max() < 1e-12 * scale, mesh
        rng = np.random.default_rng(rank + 31)
        s = rng.standard_normal(b[True].shape) + 1j * rng.standard_normal(b[True].shape)  # not Hermitian
        kept = s.copy()
        back = {}
        for p in f:
            back[p] = np.full(shape, -7.0)
            f[p].backward(s, back[p], normalise=False)
            assert np.array_equal(s, kept)
        mask = np.ones(shape, bool)
        mask[inner] = False
        assert np.all(back[True][mask] == -7.0)
        if a.size:
            assert np.abs(back[True][inner] - back[False][inner]).max() < 1e-12 * np.abs(back[False]).max(), mesh
    # somewhere on some rank the paired transform ran, over x and y and over x alone
    all_groups = set().union(*comm.allgather(groups))
    assert comm.allreduce(paired) > 0
    if P == 2:
        assert "xy" in all_groups  # bricks split z: the x-pencil group joins y
    if P == 4:
        assert "x" in all_groups  # bricks split y and z: x alone
