"""The generic exchange plan (index lists, both directions, assign / add) in all modes."""

import numpy as np
import pytest

from pmewald import _core
from pmewald.fft import COMM_MODES


def ring_halo_lists(P, rank, n, g):
    """1-D periodic array of n*P cells, n owned per rank, g ghosts on each side.

    Local layout: [g left ghosts | n owned | g right ghosts]. Forward exchange
    fills ghosts from their owners (src = dst = the local array).
    """
    N = n * P

    def ghosts(r):  # (local ghost index, global cell) of rank r, in order
        out = [(k, (r * n - g + k) % N) for k in range(g)]
        out += [(g + n + k, (r * n + n + k) % N) for k in range(g)]
        return out

    send_ranks, send_idx, recv_ranks, recv_idx = [], [], [], []
    self_src, self_dst = [], []
    for k in range(1, P + 1):
        r = (rank + k) % P
        # what I send to r: my owned cells that are ghosts of r, in r's ghost order
        s = [g + p % n for (_, p) in ghosts(r) if p // n == rank]
        # what I receive from r: my ghosts owned by r
        q = [loc for (loc, p) in ghosts(rank) if p // n == r]
        if r == rank:
            self_src, self_dst = s, q
            continue
        if s:
            send_ranks.append(r)
            send_idx.append(s)
        if q:
            recv_ranks.append(r)
            recv_idx.append(q)
    size = n + 2 * g
    return send_ranks, send_idx, recv_ranks, recv_idx, self_src, self_dst, size, size


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
def test_ring_halo_fill_and_reduce(comm):
    P, rank = comm.Get_size(), comm.Get_rank()
    # g > n: ghosts wrap past the neighbours (repeated elements); long n, g: run-wise kernels
    for n, g in [(5, 2), (3, 7), (50, 20), (10, 25)]:
        N = n * P
        lists = ring_halo_lists(P, rank, n, g)
        # how many ghost copies each global cell has, over all ranks
        copies = np.zeros(N)
        for r in range(P):
            for k in range(g):
                copies[(r * n - g + k) % N] += 1
                copies[(r * n + n + k) % N] += 1
        for mode in COMM_MODES:
            ex = _core._testing.comm.Exchange(comm, mode, *lists)
            for dtype in (np.float64, np.complex128):
                glob = np.arange(N, dtype=float) + 1.0
                if dtype is np.complex128:
                    glob = glob + 1j * (100.0 - glob)
                a = np.full(n + 2 * g, -999.0, dtype=dtype)
                a[g:g + n] = glob[rank * n:(rank + 1) * n]
                ex.execute(a, a)  # fill ghosts
                left = glob[(rank * n - g + np.arange(g)) % N]
                right = glob[(rank * n + n + np.arange(g)) % N]
                assert np.array_equal(a[:g], left) and np.array_equal(a[g + n:], right), (mode, n, g)
                ex.execute(a, a, reverse=True, add=True)  # ghosts summed into their owners
                want = glob[rank * n:(rank + 1) * n] * (1 + copies[rank * n:(rank + 1) * n])
                assert np.allclose(a[g:g + n], want, rtol=0, atol=1e-12), (mode, n, g, dtype)
            st = ex.stats(reverse=True, complex_data=True)
            assert st["executions"] == 1
            sent = comm.allreduce(st["bytes_sent"])
            assert sent == comm.allreduce(st["bytes_received"])
            assert sorted(ex.component) == list(range(P))


@pytest.mark.mpi(ranks=[2, 4])
def test_collective_components_are_the_connected_parts(comm):
    P, rank = comm.Get_size(), comm.Get_rank()
    partner = rank ^ 1  # pairs (0,1), (2,3): two components with 4 ranks
    for mode in COMM_MODES:
        ex = _core._testing.comm.Exchange(comm, mode, [partner], [[0, 1]], [partner], [[1, 0]], [2], [2], 3, 3)
        assert ex.component == sorted([rank, partner])
        a = np.array([10.0 * rank, 10.0 * rank + 1, 10.0 * rank + 2])
        b = np.zeros(3)
        ex.execute(a, b)
        assert list(b) == [10.0 * partner + 1, 10.0 * partner, 10.0 * rank + 2]
        c = np.zeros(3)
        ex.execute(b, c, reverse=True)
        assert np.array_equal(c, a)


@pytest.mark.mpi(ranks=[1, 2, 3])
def test_inconsistent_lists_raise_on_every_rank(comm):
    P, rank = comm.Get_size(), comm.Get_rank()
    with pytest.raises(ValueError):
        _core._testing.comm.Exchange(comm, "pt2pt", [], [], [], [], [0], [0, 1], 2, 2)  # self lists differ in length
    if P > 1:
        # rank 0 sends 2 elements to rank 1, which expects 1
        s = ([1], [[0, 1]]) if rank == 0 else ([], [])
        r = ([0], [[0]]) if rank == 1 else ([], [])
        with pytest.raises(ValueError, match="disagree"):
            _core._testing.comm.Exchange(comm, "nonblocking", s[0], s[1], r[0], r[1], [], [], 2, 2)
    with pytest.raises(ValueError, match="index"):
        _core._testing.comm.Exchange(comm, "collective", [], [], [], [], [5], [0], 2, 2)
    with pytest.raises(ValueError, match="comm_mode"):
        _core._testing.comm.Exchange(comm, "bogus", [], [], [], [], [], [], 1, 1)


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
def test_split_exchange_equals_whole(comm):
    """start() / test() until complete / finish() moves the same data as execute() in every
    mode and direction, assign and add (what overlapping the exchanges relies on)."""
    P, rank = comm.Get_size(), comm.Get_rank()
    rng = np.random.default_rng(rank)
    for n, g in [(5, 2), (3, 7), (50, 20)]:
        lists = ring_halo_lists(P, rank, n, g)
        for mode in COMM_MODES:
            ex = _core._testing.comm.Exchange(comm, mode, *lists)
            for dtype in (np.float64, np.complex128):
                # integers: sums exact in any order, so whole and split must agree bit for bit
                a = rng.integers(-1000, 1000, n + 2 * g).astype(dtype)
                if dtype is np.complex128:
                    a = a + 1j * rng.integers(-1000, 1000, n + 2 * g)
                for reverse, add in ((False, False), (True, True)):
                    whole, split = a.copy(), a.copy()
                    assert ex.execute(whole, whole, reverse=reverse, add=add) == 0
                    tests = ex.execute(split, split, reverse=reverse, add=add, split=True)
                    assert tests >= 1
                    assert np.array_equal(whole, split), (mode, n, g, reverse)
            st = ex.stats(reverse=True, complex_data=True)
            assert st["executions"] == 2 and st["tests"] >= 1


@pytest.mark.mpi(ranks=[4])
def test_sums_are_added_in_message_order_whatever_the_arrival(comm):
    """Rank 0 sums one value from each of ranks 1, 2, 3 into one element; the first message
    is sent last. The sum must be the one in message order, ((0 + 1) + 1e16) - 1e16 = 0, not
    the arrival order's (-1e16 + 1e16) + 1 = 1: the same inputs give the same bits every run
    (docs/reliability.md, Reproducible runs)."""
    import time

    rank = comm.Get_rank()
    value = {1: 1.0, 2: 1e16, 3: -1e16}
    if rank == 0:
        lists = ([], [], [1, 2, 3], [[0], [0], [0]], [], [], 1, 1)
    else:
        lists = ([0], [[0]], [], [], [], [], 1, 1)
    for mode in COMM_MODES:
        ex = _core._testing.comm.Exchange(comm, mode, *lists)
        for split in (False, True):
            src = np.array([value.get(rank, 0.0)])
            dst = np.zeros(1)
            comm.Barrier()
            if rank == 1:
                time.sleep(0.3)  # the first message arrives last
            ex.execute(src, dst, add=True, split=split)
            if rank == 0:
                assert dst[0] == 0.0, (mode, split, dst[0])
