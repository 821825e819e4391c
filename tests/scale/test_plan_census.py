"""The plan census and the communication model (solver/plan_census.hpp, pmewald.bench.scale.comm_model).

- The census of a compute call, built from the plan geometry alone, counts exactly the
  messages and bytes the solver's own timers count on 1-4 real ranks (FFT remaps and
  halo), and the ghost-atom partners the migration talks to.
- For virtual rank counts every byte sent is received, components are consistent, and
  65,536 ranks are counted and modelled in seconds (O(partners) per rank).
- The model's time has the limits it should (latency-bound tiny exchanges, bandwidth-bound
  large ones; pt2pt >= nonblocking; collective = nonblocking within one throttle block).
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from pmewald import _core
from pmewald.bench.scale import comm_model

BOX = np.diag([23.0, 21.0, 19.0])
MESH = (24, 20, 18)
CUTOFF = 7.0


def _atoms(n, seed=3):
    rng = np.random.default_rng(seed)
    pos = rng.uniform(0, 1, (n, 3)) @ BOX
    q = rng.choice([-1.0, 1.0], n)
    q -= q.mean()
    return pos, q, np.arange(n, dtype=np.int64)


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(120)
@pytest.mark.parametrize("diff,order", [("ad", 5), ("ik", 4)])
def test_census_counts_what_the_solver_sends(comm, diff, order):
    P, rank = comm.Get_size(), comm.Get_rank()
    n = 600
    pos, q, ids = _atoms(n)
    # Each rank passes the atoms of its own domain, so no atom migrates.
    K = np.array(MESH)
    m = np.minimum(np.floor((pos @ np.linalg.inv(BOX)) % 1.0 * K).astype(int), K - 1)
    from pmewald import geometry
    lo, hi = (np.array(v) for v in geometry.brick_box(P, MESH, rank))
    mine = np.all((m >= lo) & (m < hi), axis=1)
    solver = _core.PMESolver(comm, BOX, MESH, order, 0.45, CUTOFF, diff, "nonblocking", 1.0, True)
    solver.compute(pos[mine], q[mine], ids[mine], np.zeros((0, 2), np.int64))
    solver.reset_timings()
    solver.compute(pos[mine], q[mine], ids[mine], np.zeros((0, 2), np.int64))
    t = solver.timings()
    cen = comm_model.census(P, MESH, order, diff, BOX, CUTOFF, n)
    tr = comm_model.traffic(cen)
    remaps = [k for k in ("in->x", "x->y", "y->z", "z->out") if k in tr]
    assert t["fft_messages"] == sum(tr[k]["messages"][rank] for k in remaps)
    assert t["fft_bytes"] == sum(tr[k]["bytes"][rank] for k in remaps)
    assert t["ghost_messages"] == tr["halo"]["messages"][rank]
    assert t["ghost_bytes"] == tr["halo"]["bytes"][rank]
    assert t["migrate_messages"] == 0  # nothing moved
    # Ghost atoms: one size message to every partner of the census, and the records to
    # those with ghosts (the census estimates how many from the density; the real atoms
    # are random, so only the partners are compared exactly).
    ga = cen[[c["name"] for c in cen].index("ghost atoms")]
    partners = set(ga["dst"][ga["start"][rank]:ga["start"][rank + 1]])
    sizes_and_data = t["ghost_atoms_messages"]
    assert sizes_and_data >= len(partners)
    assert sizes_and_data <= 3 * len(partners)  # sizes, records, forces back (at most one each)
    # Staged, once the counts have settled (the second call: every swap one message each
    # way), the solver sends exactly the census's messages: 2 per axis with more than one
    # rank and pulse, and as many back with the forces.
    staged = _core.PMESolver(comm, BOX, MESH, order, 0.45, CUTOFF, diff, "nonblocking", 1.0, True,
                             ghost_exchange="staged")
    staged.compute(pos[mine], q[mine], ids[mine], np.zeros((0, 2), np.int64))
    staged.reset_timings()
    staged.compute(pos[mine], q[mine], ids[mine], np.zeros((0, 2), np.int64))
    tr = comm_model.traffic(comm_model.census(P, MESH, order, diff, BOX, CUTOFF, n, "staged"))
    want = sum(v["messages"][rank] for k, v in tr.items() if k.startswith(("ghost atoms ", "ghost forces ")))
    assert staged.timings()["ghost_atoms_messages"] == want


def _check_census(P, mesh, order, diff, atoms, ghosts="auto"):
    L = 3.1 * max(mesh)
    cen = comm_model.census(P, mesh, order, diff, [L, L, L], 9.0, atoms, ghosts)
    names = [c["name"] for c in cen]
    direct = {"ghost atoms", "ghost forces"} <= set(names)
    staged = [n for n in names if n.startswith(("ghost atoms ", "ghost forces "))]
    assert "halo" in names and not (direct and staged)
    assert direct or staged or P == 1  # (one rank, staged: its own images are copies, no exchange)
    if ghosts != "auto":
        assert direct == (ghosts == "direct")
    remaps = [n for n in names if n in ("in->x", "x->y", "y->z", "z->out")]
    # Remaps that are identities on every rank send nothing and are left out: one rank
    # needs none, more ranks at least one (bricks are not z-pencils everywhere).
    assert (len(remaps) > 0) == (P > 1)
    for c in cen:
        assert len(c["start"]) == P + 1 and np.all(np.diff(c["start"]) >= 0)
        assert np.all((c["dst"] >= 0) & (c["dst"] < P)) and np.all(c["src"] != c["dst"])
        # (a staged swap returns its forces even when it carried no ghosts: empty messages)
        assert np.all(c["elements"] >= 0 if c["name"].startswith("ghost forces ") else c["elements"] > 0)
        # a component holds each of its ranks once, at places 0 .. size - 1
        size, place = c["component_size"], c["component_rank"]
        assert np.all((place >= 0) & (place < size))
        # both ends of a message are in the same component
        assert np.array_equal(size[c["src"]], size[c["dst"]])
    # Every mesh point of the real FFT's first remap is sent once or kept: the bricks tile the mesh.
    if "in->x" in names:
        x = cen[names.index("in->x")]
        assert x["elements"].sum() + x["self_elements"].sum() == np.prod(mesh)
    return cen


@pytest.mark.parametrize("P", [1, 2, 7, 64, 100, 256])
@pytest.mark.parametrize("ghosts", ["direct", "staged"])
def test_census_is_consistent_for_virtual_rank_counts(P, ghosts):
    _check_census(P, (30, 27, 32), 5, "ad", 20000, ghosts)


@pytest.mark.parametrize("P", [16, 64, 256, 1024, 4096, 16384, 65536])
def test_staged_ghost_messages_are_six_per_pulse(P):
    """Ghost messages per rank per exchange (the atoms' way; the forces' is the same):
    staged at most 6 x the largest pulse count (2 per pulse along each axis with more than
    one rank), where the direct exchange sends a size and a data message to every domain in
    reach; water98k's box, mesh and cutoff (docs/scaling.md has the table). The direct
    census is compared up to 4,096 ranks (at 65,536 it alone takes 45 s: every rank's
    hundreds of partners; the table has its counts)."""
    box, mesh = np.diag([99.4] * 3), (125, 125, 125)
    grid = _core.geometry.processor_grid_3d(P, mesh)
    reach = 9.0 / 99.4 * 125 * (1 + 1e-9)
    cuts = [[125 * g // p for g in range(p)] + [125] for p in grid]
    pulses = _core.geometry.domain_grid(tuple(grid), mesh, cuts, reach, reach, reach)[0]
    counts = {}
    for g in ("direct", "staged") if P <= 4096 else ("staged",):
        tr = comm_model.traffic(comm_model.census(P, mesh, 7, "ad", box, 9.0, 98304, g))
        counts[g] = sum(v["messages"] for k, v in tr.items() if k.startswith("ghost atoms")).max()
    assert counts["staged"] <= 6 * max(pulses)
    assert counts["staged"] == 2 * sum(p for p, n in zip(pulses, grid) if n > 1)
    assert counts.get("direct", np.inf) > counts["staged"]


def test_census_of_65536_ranks_is_local():
    # O(partners) per rank: counting 65,536 virtual ranks takes seconds of CPU (an O(P)
    # step per rank, such as a divisor search over P for every pencil, took minutes),
    # and every rank sends O(sqrt P + neighbours) messages, not O(P). Mesh 64^3 here
    # leaves most pencils and many bricks empty: the extremes at that scale.
    t0 = time.process_time()
    cen = _check_census(65536, (64, 64, 64), 5, "ad", 20000, "staged")
    counted = time.process_time() - t0
    tr = comm_model.traffic(cen)
    msgs = sum(v["messages"] for v in tr.values())
    assert 50 < msgs.max() < 2000
    assert counted < 60, counted
    t = comm_model.comm_time(cen, comm_model.FAT_TREE, "nonblocking", allreduces=2)
    assert np.isfinite(t["total"]) and t["total"] > 0


def _exchange(P, pairs, nbytes, size=None):
    """A census-shaped exchange: messages (src, dst) of nbytes each, one component."""
    src = np.array([a for a, _ in pairs])
    dst = np.array([b for _, b in pairs])
    order = np.argsort(src, kind="stable")
    src, dst = src[order], dst[order]
    start = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=P))])
    return {"name": "x->y", "ranks": P, "src": src, "dst": dst, "start": start,
            "elements": np.full(len(src), nbytes), "bytes": np.full(len(src), float(nbytes)),
            "self_elements": np.zeros(P, int), "forward_calls": 1, "reverse_calls": 0,
            "component_size": np.full(P, size or P), "component_rank": np.arange(P)}


def test_model_limits():
    net = comm_model.Network("t", "fat_tree", link_latency=1e-6, bandwidth=1e9, leaf=4)
    P = 8
    ring = [(r, (r + 1) % P) for r in range(P)]
    # One tiny message per rank: latency only (ranks 3 -> 4 cross leaves: 4 links).
    tiny = _exchange(P, ring, 1)
    assert comm_model.exchange_time(tiny, net, "nonblocking") == pytest.approx(4e-6 + 1e-9, rel=1e-6)
    # Large messages: bandwidth (1 MB at 1 GB/s) plus latency.
    big = _exchange(P, ring, 10**6)
    assert comm_model.exchange_time(big, net, "nonblocking") == pytest.approx(1e-3 + 4e-6, rel=1e-6)
    # All-to-all: pt2pt serialises every message's latency; nonblocking pays one.
    a2a = _exchange(P, [(r, s) for r in range(P) for s in range(P) if r != s], 1)
    nb = comm_model.exchange_time(a2a, net, "nonblocking")
    pt = comm_model.exchange_time(a2a, net, "pt2pt")
    assert nb == pytest.approx(4e-6 + 7e-9) and pt > 5 * nb  # 7 one-byte messages out
    # Within one throttle block the scattered Alltoallv is one round, like nonblocking.
    assert comm_model.exchange_time(a2a, net, "collective") == pytest.approx(nb)
    # In a component of 100 ranks, partners 1 and 50 places away fall in two blocks of 32
    # (MPICH pairs rank r with r + i and r - i in block i // 32): two rounds.
    far = _exchange(100, [(r, (r + k) % 100) for r in range(100) for k in (1, 50)], 1)
    assert comm_model.exchange_time(far, net, "collective") > comm_model.exchange_time(far, net, "nonblocking")
