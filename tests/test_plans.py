"""Plan geometry for virtual rank counts, without MPI: the remap lists of the distributed
FFTs (cpp/fft/remap.hpp, stage_plan.hpp) and the halo lists (cpp/comm/halo.hpp) are pure
functions of every rank's boxes, built here for 1 to 4,096 ranks and checked independently:

- every mesh point of a rank's input is sent exactly once (its messages and its self piece
  together tile its box) and every point of its output is written exactly once;
- partners are symmetric and agree element by element: the k-th element r sends to s is
  the k-th element s receives from r, the same global mesh point (mod the mesh for a halo);
- message lengths equal the box intersections (summed over periodic images for a halo);
- messages go in ring order from rank + 1;
- planning is O(partners) per rank: the box index looks at a few candidates per partner,
  never at every rank.
"""
import numpy as np
import pytest

from pmewald import geometry
from pmewald._core._testing import comm as tcomm
from pmewald._core._testing import fft as tfft


# ------------------------------------------------------------------------------ helpers
def _boxes(boxes):
    a = np.array(boxes, dtype=np.int64).reshape(len(boxes), 2, 3)
    return a[:, 0, :], a[:, 1, :]


def _ranges(starts, lengths):
    """Concatenation of arange(s, s + n) for each (s, n)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.sum() == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(np.asarray(starts, dtype=np.int64) - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return offsets + np.arange(lengths.sum())


def _decode(index, rank, lo, hi, order):
    """Global mesh points of local indices `index` into the boxes of `rank` (one per
    element) stored densely in `order` (slowest axis first)."""
    n = (hi - lo)[rank]
    o = np.asarray(order, dtype=np.int64)[rank]
    rows = np.arange(len(index))
    n0, n1, n2 = n[rows, o[:, 0]], n[rows, o[:, 1]], n[rows, o[:, 2]]
    c2 = index % np.maximum(n2, 1)
    c1 = (index // np.maximum(n2, 1)) % np.maximum(n1, 1)
    c0 = index // np.maximum(n1 * n2, 1)
    p = np.zeros((len(index), 3), dtype=np.int64)
    p[rows, o[:, 0]], p[rows, o[:, 1]], p[rows, o[:, 2]] = c0, c1, c2
    assert np.all(c0 < np.maximum(n0, 1)), "index outside its box"
    return p + lo[rank]


def _messages(plan, side):
    """(owner rank, partner, start, length) of every message of one side."""
    rank_start = plan[f"{side}_rank_start"]
    owner = np.repeat(np.arange(len(rank_start) - 1), np.diff(rank_start))
    start = plan[f"{side}_start"]
    return owner, plan[f"{side}_partner"], start[:-1], np.diff(start)


def _intersection_volume(alo, ahi, blo, bhi):
    return np.prod(np.clip(np.minimum(ahi, bhi) - np.maximum(alo, blo), 0, None), axis=1)


def _check_ring_order(owner, partner, P):
    ring = (partner - owner - 1) % P
    same = owner[1:] == owner[:-1]
    assert np.all(ring[1:][same] > ring[:-1][same]), "messages are not in ring order from rank + 1"
    assert np.all(partner != owner), "a message to oneself (the self piece is apart)"


def _check_covered_once(index, rank, sizes, active):
    """index/rank: local element and rank of every listed element; each element of every
    active rank's array of sizes[rank] is listed exactly once, of inactive ranks never."""
    offset = np.concatenate([[0], np.cumsum(sizes)])
    counts = np.bincount(offset[rank] + index, minlength=offset[-1])
    expected = np.repeat(np.where(active, 1, 0), sizes)
    bad = np.nonzero(counts != expected)[0]
    assert bad.size == 0, f"{bad.size} elements listed {counts[bad[:5]]} times (expected {expected[bad[:5]]})"


def _check_pairs(plan, P, send_points, recv_points, expected_length):
    """Symmetric partners, equal lengths, the same points in the same order."""
    so, sp, ss, sl = _messages(plan, "send")
    ro, rp, rs, rl = _messages(plan, "recv")
    send_key = so * P + sp
    recv_key = rp * P + ro
    a, b = np.argsort(send_key, kind="stable"), np.argsort(recv_key, kind="stable")
    assert np.array_equal(send_key[a], recv_key[b]), "what r sends to s is not what s receives from r"
    assert np.array_equal(sl[a], rl[b]), "message lengths differ between sender and receiver"
    assert np.array_equal(sl, expected_length(so, sp)), "message lengths differ from the box intersections"
    assert np.all(sl > 0), "an empty message"
    e_send = _ranges(ss[a], sl[a])
    e_recv = _ranges(rs[b], rl[b])
    assert np.array_equal(send_points(e_send), recv_points(e_recv)), "elements differ between sender and receiver"
    _check_ring_order(so, sp, P)
    _check_ring_order(ro, rp, P)
    return len(so) + len(ro)


def _element_ranks(plan, side):
    """Owner rank of every element of one side's concatenated index array."""
    owner, _, _, length = _messages(plan, side)
    return np.repeat(owner, length)


def check_remap(plan, mesh, cost_factor=4):
    P = len(plan["inbox"])
    ilo, ihi = _boxes(plan["inbox"])
    olo, ohi = _boxes(plan["outbox"])
    iord, oord = np.array(plan["in_order"]), np.array(plan["out_order"])
    identity = np.array(plan["identity"], dtype=bool)
    vin, vout = np.prod(ihi - ilo, axis=1), np.prod(ohi - olo, axis=1)
    # An identity rank keeps its data where it is: same box, no lists.
    assert np.all(vin[identity] == vout[identity])
    assert np.array_equal(ilo[identity & (vin > 0)], olo[identity & (vin > 0)])
    for side in ("send", "recv"):
        assert np.all(np.diff(plan[f"{side}_rank_start"])[identity] == 0)
    assert np.all(np.diff(plan["self_start"])[identity] == 0)
    send_rank, recv_rank = _element_ranks(plan, "send"), _element_ranks(plan, "recv")
    self_rank = np.repeat(np.arange(P), np.diff(plan["self_start"]))
    # Every input point sent exactly once (messages + self piece), every output point written once.
    _check_covered_once(np.concatenate([plan["send_index"], plan["self_src"]]),
                        np.concatenate([send_rank, self_rank]), vin, ~identity)
    _check_covered_once(np.concatenate([plan["recv_index"], plan["self_dst"]]),
                        np.concatenate([recv_rank, self_rank]), vout, ~identity)
    # The self piece maps each point to itself and is the box intersection.
    assert np.array_equal(_decode(plan["self_src"], self_rank, ilo, ihi, iord),
                          _decode(plan["self_dst"], self_rank, olo, ohi, oord))
    self_len = np.diff(plan["self_start"])
    assert np.array_equal(self_len[~identity], _intersection_volume(ilo, ihi, olo, ohi)[~identity])

    def send_points(e):
        return _decode(plan["send_index"][e], send_rank[e], ilo, ihi, iord)

    def recv_points(e):
        return _decode(plan["recv_index"][e], recv_rank[e], olo, ohi, oord)

    n_messages = _check_pairs(plan, P, send_points, recv_points,
                              lambda r, s: _intersection_volume(ilo[r], ihi[r], olo[s], ohi[s]))
    # Planning cost: the index looks at a few candidates per partner, not at every rank.
    examined = plan["examined"]
    partners = np.diff(plan["send_rank_start"]) + np.diff(plan["recv_rank_start"]) + 2
    assert np.all(examined <= cost_factor * partners), (examined.max(), partners[np.argmax(examined)])
    return n_messages


def check_halo(plan, bricks, mesh, ghost):
    P = len(bricks)
    K = np.array(mesh, dtype=np.int64)
    blo, bhi = _boxes(bricks)
    elo, ehi = _boxes(plan["extended"])
    corder = np.tile([0, 1, 2], (P, 1))
    vext = np.prod(ehi - elo, axis=1)
    send_rank, recv_rank = _element_ranks(plan, "send"), _element_ranks(plan, "recv")
    self_rank = np.repeat(np.arange(P), np.diff(plan["self_start"]))
    # Every ghost point (extended box minus brick) gets exactly one value: from its
    # owner's message or the rank's own periodic image; no brick point is written.
    dst = np.concatenate([plan["recv_index"], plan["self_dst"]])
    dst_rank = np.concatenate([recv_rank, self_rank])
    offset = np.concatenate([[0], np.cumsum(vext)])
    counts = np.bincount(offset[dst_rank] + dst, minlength=offset[-1])
    all_rank = np.repeat(np.arange(P), vext)
    all_index = np.arange(offset[-1]) - offset[all_rank]
    pts = _decode(all_index, all_rank, elo, ehi, corder)
    in_brick = np.all((pts >= blo[all_rank]) & (pts < bhi[all_rank]), axis=1)
    assert np.all(counts[in_brick] == 0), "a brick point is written by the halo fill"
    assert np.all(counts[~in_brick] == 1), "a ghost point is not filled exactly once"
    # Everything sent lies in the sender's brick.
    src = np.concatenate([plan["send_index"], plan["self_src"]])
    src_rank = np.concatenate([send_rank, self_rank])
    sp_ = _decode(src, src_rank, elo, ehi, corder)
    assert np.all((sp_ >= blo[src_rank]) & (sp_ < bhi[src_rank])), "a sent point lies outside the sender's brick"
    # Self pieces: the same point modulo the mesh, a different image.
    a = _decode(plan["self_src"], self_rank, elo, ehi, corder)
    b = _decode(plan["self_dst"], self_rank, elo, ehi, corder)
    assert np.array_equal(a % K, b % K) and not np.any(np.all(a == b, axis=1))

    shifts = np.array([[x, y, z] for x in (-1, 0) for y in (-1, 0) for z in (-1, 0)])

    def halo_length(r, s):
        return sum(_intersection_volume(elo[s], ehi[s], blo[r] + n * K, bhi[r] + n * K) for n in shifts)

    def send_points(e):
        return _decode(plan["send_index"][e], send_rank[e], elo, ehi, corder) % K

    def recv_points(e):
        return _decode(plan["recv_index"][e], recv_rank[e], elo, ehi, corder) % K

    n_messages = _check_pairs(plan, P, send_points, recv_points, halo_length)
    examined = plan["examined"]
    partners = np.diff(plan["send_rank_start"]) + np.diff(plan["recv_rank_start"]) + 2
    assert np.all(examined <= 16 * partners + 16), (examined.max(), partners[np.argmax(examined)])
    return n_messages


# -------------------------------------------------------------------------- the cases
CASES = [
    # (mesh, ranks): one rank, uneven splits, empty ranks (more ranks than points on an axis)
    ((8, 8, 8), 1),
    ((12, 10, 7), 3),
    ((12, 10, 7), 16),
    ((24, 20, 16), 64),
    ((32, 32, 32), 512),
    ((24, 20, 16), 4096),
    ((64, 64, 64), 4096),
]


def _slabs(mesh, P, axis):
    boxes = []
    for r in range(P):
        lo, hi = [0, 0, 0], list(mesh)
        lo[axis], hi[axis] = geometry.split_range(mesh[axis], P, r)
        boxes.append((tuple(lo), tuple(hi)))
    return boxes


@pytest.mark.parametrize("kind", ["complex", "real"])
@pytest.mark.parametrize("mesh,P", CASES)
def test_fft_remap_lists_for_virtual_ranks(kind, mesh, P):
    """Brick inputs, z-pencil outputs (the solver's layout: the last remap skipped) and brick
    outputs (all four remaps move data), c2c and r2c (halved spectrum)."""
    spectrum = (mesh[0] // 2 + 1, mesh[1], mesh[2]) if kind == "real" else mesh
    bricks = geometry.brick_boxes(P, mesh)
    layouts = [(bricks, geometry.pencil_boxes(2, P, spectrum)), (bricks, geometry.brick_boxes(P, spectrum))]
    for inboxes, outboxes in layouts:
        plans = tfft.remap_plans(kind, mesh, inboxes, outboxes)
        assert len(plans["groups"]) == P
        for t, plan in enumerate(plans["remaps"]):
            check_remap(plan, spectrum if t > 0 else mesh)
        if P == 1:
            assert plans["groups"] == ["xyz"]  # one rank: one 3-D plan, every remap skipped
            assert all(all(p["identity"]) for p in plans["remaps"][1:])


@pytest.mark.parametrize("P", [2, 5, 16])
def test_fft_remap_lists_custom_slabs(P):
    """A caller's slab decomposition along z with empty ranks (7 planes, up to 16 ranks) into
    slabs along x: uneven, partly empty, every rank a partner of many."""
    mesh = (12, 10, 7)
    plans = tfft.remap_plans("complex", mesh, _slabs(mesh, P, 2), _slabs(mesh, P, 0))
    messages = sum(check_remap(p, mesh) for p in plans["remaps"])
    assert messages > 0


def _random_tiling(mesh, P, rng, empty=3):
    """P boxes tiling the mesh by recursive bisection at random planes (uneven, with cuts
    that line up with nothing: the box index's irregular case), `empty` of them empty."""
    boxes = [((0, 0, 0), tuple(mesh))] + [((1, 2, 3), (1, 2, 3))] * min(empty, P - 1)
    while len(boxes) < P:
        k = int(np.argmax([np.prod(np.subtract(hi, lo)) for lo, hi in boxes]))
        lo, hi = boxes.pop(k)
        d = int(np.argmax(np.subtract(hi, lo)))
        if hi[d] - lo[d] < 2:
            boxes += [(lo, hi), (lo, lo)]  # nothing left to cut: an empty box
            continue
        cut = int(rng.integers(lo[d] + 1, hi[d]))
        hi1, lo2 = list(hi), list(lo)
        hi1[d], lo2[d] = cut, cut
        boxes += [(lo, tuple(hi1)), (tuple(lo2), hi)]
    order = rng.permutation(len(boxes))
    return [boxes[i] for i in order]


@pytest.mark.parametrize("P", [7, 64, 300])
def test_fft_remap_lists_irregular_boxes(P):
    """A caller's irregular decompositions at both ends (random bisections, shuffled over
    the ranks, three empty boxes each): the box index thins its cuts (64 and 300 ranks:
    5,700 and 16,016 buckets before thinning) and still finds every partner."""
    rng = np.random.default_rng(P)
    mesh = (30, 26, 22)
    plans = tfft.remap_plans("complex", mesh, _random_tiling(mesh, P, rng), _random_tiling(mesh, P, rng))
    assert sum(check_remap(p, mesh, cost_factor=16) for p in plans["remaps"]) > 0


@pytest.mark.parametrize("mesh,P", CASES)
@pytest.mark.parametrize("ghost", [2, 4])
def test_halo_lists_for_virtual_ranks(mesh, P, ghost):
    bricks = geometry.brick_boxes(P, mesh)
    plan = tcomm.halo_plans(bricks, mesh, ghost)
    check_halo(plan, bricks, mesh, ghost)


def test_halo_lists_thin_bricks_reach_beyond_neighbours():
    """Bricks thinner than the ghost width: a ghost layer spans several owners' bricks and
    (on 4 ranks along an axis of 6 points) images of the rank's own brick."""
    mesh = (6, 40, 40)
    bricks = _slabs(mesh, 6, 0)
    plan = tcomm.halo_plans(bricks, mesh, 4)
    assert check_halo(plan, bricks, mesh, 4) > 0
    partners = np.diff(plan["recv_rank_start"])
    assert partners.max() >= 3


def test_checks_catch_a_wrong_list():
    """The checks above fail on a list with one element changed (they can fail)."""
    mesh, P = (12, 10, 7), 3
    plans = tfft.remap_plans("complex", mesh, geometry.brick_boxes(P, mesh), geometry.brick_boxes(P, mesh))
    plan = next(p for p in plans["remaps"] if len(p["send_index"]) > 1)
    bad = dict(plan)
    bad["send_index"] = plan["send_index"].copy()
    bad["send_index"][[0, 1]] = bad["send_index"][[1, 0]]
    with pytest.raises(AssertionError):
        check_remap(bad, mesh)
