"""The particle decomposition (cpp/particles): atoms migrated to the ranks whose brick owns
them, ghost images within the margin, excluded pairs routed to their atoms' holders and
travelling with the atoms; exact sets and orders computed here independently, across rank
counts and atom splits.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from mpi4py import MPI

from pmewald import _core
from realspace_cases import CASES, heights, random_system, split

rs = _core._testing.realspace
geometry = _core.geometry


def _owners(box, mesh, pos, size):
    """Owner rank of every atom (the rank whose brick holds floor(K s))."""
    K = np.array(mesh)
    s = pos @ np.linalg.inv(box)
    s -= np.floor(s)
    m = np.minimum(np.floor(s * K).astype(int), K - 1)
    owner = np.full(len(pos), -1)
    for r, (lo, hi) in enumerate(geometry.brick_boxes(size, mesh)):
        owner[np.all((m >= np.array(lo)) & (m < np.array(hi)), axis=1)] = r
    return owner


# Besides the shared cases: a mesh with fewer points than ranks along x (3 and 4
# ranks leave a slab empty, which the staged exchange must forward through).
MIGRATION_CASES = dict(CASES, **{"ortho-empty": (CASES["ortho-neutral"][0], (3, 1, 1), 150, True)})


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(60)
@pytest.mark.parametrize("ghosts", ["direct", "staged"])
@pytest.mark.parametrize("how", ["reversed", "owned", "shifted"])
@pytest.mark.parametrize("case", ["ortho-charged", "tric-charged", "tric-neutral", "ortho-empty"])
def test_mpi_migration_and_ghosts_exact(comm, case, how, ghosts):
    """Owned atoms are exactly those whose mesh point floor(K s) lies in this
    rank's brick; ghosts are exactly the images (other than owned atoms
    themselves) inside the brick grown by the margin, whether they come directly
    or staged through the neighbours (ortho-charged on 4 ranks: 2 pulses along z;
    ortho-empty: an empty slab between); their rows go back to every owner
    (reverse_ghosts) and out from it (route_ghosts); results come back to the
    caller in its order. Whatever the callers pass: atoms anywhere (the NBX
    path), atoms already owned (no messages at all), or atoms owned by the next
    rank (known partners when that rank's domain is adjacent)."""
    box, mesh, n, _ = MIGRATION_CASES[case]
    pos, q, ids = random_system(box, n, seed=11)
    rank, size = comm.Get_rank(), comm.Get_size()
    owner = _owners(box, mesh, pos, size)
    if how == "reversed":
        idx = split(n, comm, "reversed")
        holder = np.empty(n, int)
        for r in range(size):
            holder[np.arange(n)[::-1][r::size]] = r
    else:
        holder = owner if how == "owned" else (owner + 1) % size
        idx = np.nonzero(holder == rank)[0][::-1]
    grid = geometry.processor_grid_3d(size, mesh)
    adjacent = [set(geometry.brick_neighborhood(grid, mesh, r, (0.0, 0.0, 0.0))[0]) for r in range(size)]
    if np.all(holder == owner):
        want_path = "none"
    elif all(owner[k] in adjacent[holder[k]] for k in range(n) if owner[k] != holder[k]):
        want_path = "neighbors"
    else:
        want_path = "sparse"
    # Each path is exercised: nothing moves; moves to adjacent domains; and, with a
    # 1 x 1 x 4 grid (thin bricks), moves past them.
    if how == "owned" or size == 1:
        assert want_path == "none"
    elif how == "shifted" and case != "ortho-empty":  # (an empty slab between: not adjacent)
        assert want_path == "neighbors"
    elif size == 4 and case not in ("tric-neutral", "ortho-empty"):
        assert want_path == "sparse"
    cutoff = 0.49 * heights(box).min()
    d = rs.migrate(comm, box, mesh, pos[idx], q[idx], ids[idx], cutoff, ghost_exchange=ghosts)
    assert d["forward_path"] == want_path
    lo, hi = (np.array(v) for v in d["brick"])
    K = np.array(mesh)
    recip = np.linalg.inv(box)
    s_all = pos @ recip
    s_all -= np.floor(s_all)
    m_all = np.minimum(np.floor(s_all * K).astype(int), K - 1)
    mine = np.all((m_all >= lo) & (m_all < hi), axis=1)
    assert np.array_equal(mine, owner == rank)
    assert sorted(d["owned_ids"]) == sorted(ids[mine])
    assert list(d["owned_ids"]) == sorted(d["owned_ids"])  # owned order: by id
    # Owned data: wrapped positions, fractional coordinates, charges, origin.
    where = {i: k for k, i in enumerate(ids)}
    all_idx = comm.allgather(idx)
    for j, i in enumerate(d["owned_ids"]):
        k = where[i]
        assert np.allclose(d["owned_fractional"][j], s_all[k], atol=1e-13)
        assert np.allclose(d["owned_positions"][j], s_all[k] @ box, atol=1e-12)
        assert d["owned_charges"][j] == q[k]
        assert all_idx[d["origin_rank"][j]][d["origin_index"][j]] == k
    # Every atom is owned exactly once globally.
    counts = comm.allreduce(len(d["owned_ids"]))
    assert counts == n
    # Reverse path returns the owner's rows in the caller's order.
    ret = d["returned"]
    assert np.array_equal(ret[:, 0].astype(np.int64), ids[idx])
    assert np.allclose(ret[:, 1:], s_all[idx] @ box, atol=1e-12)
    # Ghosts: brute force over images.
    margin = np.array(d["margin"])
    assert np.allclose(margin, cutoff / heights(box) * (1 + 1e-9))
    flo = lo / K - margin
    fhi = hi / K + margin
    expect = []
    for img in itertools.product(range(-1, 2), repeat=3):
        s = s_all + np.array(img)
        inside = np.all((s >= flo) & (s < fhi), axis=1)
        if img == (0, 0, 0):
            inside &= ~mine
        for k in np.nonzero(inside)[0]:
            expect.append((int(ids[k]),) + img)
    got = []
    for g, i in enumerate(d["ghost_ids"]):
        k = where[i]
        shift = d["ghost_fractional"][g] - s_all[k]
        sh = np.round(shift).astype(int)
        assert np.allclose(shift, sh, atol=1e-12)
        assert np.allclose(d["ghost_positions"][g], (s_all[k] + sh) @ box, atol=1e-11)
        assert d["ghost_charges"][g] == q[k]
        got.append((int(i),) + tuple(int(v) for v in sh))
    assert len(got) == len(set(got)), "duplicate ghost"
    empty = bool(np.any(hi <= lo))
    if not empty:  # an empty domain needs no ghosts (staged, it keeps what it forwards)
        assert sorted(got) == sorted(expect)
    # The ghosts' rows summed back to their owners (from every rank that holds a copy,
    # forwarding ones included), the owners' rows out to the ghosts.
    counts = {}
    for part in comm.allgather(list(d["ghost_ids"])):
        for i in part:
            counts[int(i)] = counts.get(int(i), 0) + 1
    back = d["ghost_images_back"]
    for j, i in enumerate(d["owned_ids"]):
        assert back[j, 0] == counts.get(int(i), 0), (i, back[j], counts.get(int(i)))
        assert back[j, 1] == counts.get(int(i), 0) * int(i)
    assert np.array_equal(d["ghost_routed"][:, 0], d["ghost_ids"].astype(float))
    assert np.array_equal(d["ghost_routed"][:, 1], d["ghost_charges"])
    if ghosts == "staged" and size > 1:
        # 2 swaps per pulse along each axis with more than one rank, each at most 2
        # messages (the first exchange's caps are small).
        grid = d["grid"]
        assert d["ghost_messages"] <= 4 * sum(p for p, g in zip(d["pulses"], grid) if g > 1)
        if case == "ortho-charged" and size == 4:
            assert tuple(grid) == (1, 1, 4) and d["pulses"][2] == 2


def _expected_partners(ids_local, pairs_all):
    partners = {int(i): set() for i in ids_local}
    for a, b in pairs_all:
        if int(a) in partners:
            partners[int(a)].add(int(b))
        if int(b) in partners:
            partners[int(b)].add(int(a))
    return partners


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(60)
def test_mpi_exclusion_lists_routed_once_and_cached(comm):
    rank, size = comm.Get_rank(), comm.Get_size()
    n = 50
    ids = np.arange(n, dtype=np.int64) * 3 + 1
    pairs_all = np.array([[ids[i], ids[(i * 7 + 3) % n]] for i in range(0, n, 2) if i != (i * 7 + 3) % n])
    idx = split(n, comm, "reversed")
    mine = pairs_all[rank::size]
    ex = rs.ExclusionList(comm)
    rerouted, lists = ex.update(ids[idx], mine)
    assert rerouted
    want = _expected_partners(ids[idx], pairs_all)
    assert [set(l) for l in lists] == [want[int(i)] for i in ids[idx]]
    # Same input everywhere: cached, no routing.
    rerouted, lists2 = ex.update(ids[idx], mine)
    assert not rerouted and lists2 == lists
    # One rank changes its pairs: everyone re-routes.
    mine2 = mine[:-1] if (rank == size - 1 and len(mine)) else mine
    rerouted, lists3 = ex.update(ids[idx], mine2)
    assert rerouted
    kept = np.concatenate(comm.allgather(mine2))
    want = _expected_partners(ids[idx], kept)
    assert [set(l) for l in lists3] == [want[int(i)] for i in ids[idx]]
    # A bad update raises everywhere, and the next good one routes again.
    bad = np.array([[ids[0], -5]]) if rank == 0 else np.zeros((0, 2), np.int64)
    with pytest.raises(ValueError, match="no rank passed"):
        ex.update(ids[idx], bad)
    rerouted, lists4 = ex.update(ids[idx], mine2)
    assert rerouted and lists4 == lists3
    # Dropped on every rank: the lists change (to none), which a reused pair list must see
    # (issue 26: an emptied list was reported unchanged, and the old exclusions stayed).
    changed, lists5 = ex.update(ids[idx], np.zeros((0, 2), np.int64))
    assert changed and all(not l for l in lists5)
    changed, _ = ex.update(ids[idx], np.zeros((0, 2), np.int64))
    assert not changed
    changed, lists6 = ex.update(ids[idx], mine2)
    assert changed and lists6 == lists3


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(60)
def test_mpi_exclusions_travel_with_migration(comm):
    box, mesh, n, _ = CASES["tric-charged"]
    pos, q, ids = random_system(box, n, seed=3)
    rank, size = comm.Get_rank(), comm.Get_size()
    pairs_all = np.array([[ids[i], ids[i + 1]] for i in range(0, n - 1, 3)])
    idx = split(n, comm, "blocks")
    d = rs.migrate(comm, box, mesh, pos[idx], q[idx], ids[idx], 0.3 * heights(box).min(),
                   pairs_all[rank::size])
    want = _expected_partners(ids, pairs_all)
    assert [set(l) for l in d["owned_payload"]] == [want[int(i)] for i in d["owned_ids"]]


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", ["ortho-charged", "tric-neutral", "ortho-empty"])
def test_mpi_kept_plan_is_the_full_migration(comm, case):
    """A Migration keeps its plan while every rank passes the same atoms (ids, in the
    same order) and each stays with its owner: the positions and charges then go along
    the kept plan into the same slots. Over a sequence of steps (small moves, a large
    one that changes owners, the same again, the charges alone changed, the local order
    permuted, an empty rank's atoms arriving on another), each step's owned atoms and
    returned rows equal, bit for bit, those of a fresh migration of the same input, and
    the plan is kept exactly when the owners and ids allow it on every rank."""
    box, mesh, n, _ = MIGRATION_CASES[case]
    pos0, q0, ids = random_system(box, n, seed=23)
    rank, size = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(5)
    h = heights(box).min()
    idx = split(n, comm, "reversed")
    perm = rng.permutation(len(idx))
    moved = pos0 + rng.normal(scale=0.3 * h, size=pos0.shape)
    steps = [  # (global positions, global charges, this rank's indices)
        (pos0, q0, idx),
        (pos0 + rng.normal(scale=1e-9 * h, size=pos0.shape), q0, idx),
        (moved, q0, idx),
        (moved, q0, idx),
        (moved, -q0, idx),
        (moved, -q0, idx[perm]),
        (moved, -q0, split(n, comm, "rank0")),
    ]
    got = rs.migrate_steps(comm, box, mesh, [(p[i], q[i], ids[i]) for p, q, i in steps])
    before = None
    for k, ((p, q, i), g) in enumerate(zip(steps, got)):
        fresh = rs.migrate(comm, box, mesh, p[i], q[i], ids[i], 0.1 * h)
        for key in ("owned_positions", "owned_fractional", "owned_charges", "owned_ids", "returned"):
            assert np.array_equal(g[key], fresh[key]), (k, key)
        owners = _owners(box, mesh, p, size)
        now = (tuple(ids[i]), tuple(owners[i]))
        same = comm.allreduce(int(before is not None and now == before), op=MPI.MIN)
        assert g["reused"] == bool(same), k
        before = now
    # (one rank owns everything: the large move keeps the plan too)
    assert [g["reused"] for g in got][:5] == [False, True, size == 1, True, True]
