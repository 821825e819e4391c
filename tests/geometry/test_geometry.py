"""The pure geometry layer: boxes, processor grids, bricks and pencils (no MPI)."""

import itertools

import numpy as np
import pytest

from pmewald import geometry as g

MESHES = [(1, 1, 1), (2, 3, 5), (7, 11, 13), (16, 16, 16), (30, 27, 32), (64, 8, 3)]


def _paint(boxes, mesh):
    """Count how often each mesh point is covered, independently of the C++ check."""
    count = np.zeros(mesh, dtype=np.int32)
    for lo, hi in boxes:
        assert all(0 <= l <= h <= n for l, h, n in zip(lo, hi, mesh)) or any(h <= l for l, h in zip(lo, hi)), (lo, hi)
        if all(h > l for l, h in zip(lo, hi)):
            count[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]] += 1
    return count


def test_intersect_and_volume():
    a = ((0, 0, 0), (4, 5, 6))
    b = ((2, 3, -1), (10, 4, 2))
    assert g.intersect(a, b) == ((2, 3, 0), (4, 4, 2))
    assert g.volume(g.intersect(a, b)) == 2 * 1 * 2
    disjoint = g.intersect(a, ((4, 0, 0), (6, 5, 6)))
    assert g.volume(disjoint) == 0
    assert g.volume(((3, 3, 3), (1, 5, 5))) == 0


def test_split_range_covers_evenly():
    for n in [0, 1, 5, 17, 100]:
        for p in [1, 2, 3, 7, 150]:
            parts = [g.split_range(n, p, i) for i in range(p)]
            assert parts[0][0] == 0 and parts[-1][1] == n
            assert all(parts[i][1] == parts[i + 1][0] for i in range(p - 1))
            sizes = [hi - lo for lo, hi in parts]
            assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("mesh", MESHES)
def test_grid_minimises_surface(mesh):
    for P in list(range(1, 65)) + [96, 120, 128, 210, 1000]:
        grid = tuple(g.processor_grid_3d(P, mesh))
        assert grid[0] * grid[1] * grid[2] == P
        candidates = [(a, b, P // (a * b)) for a in range(1, P + 1) if P % a == 0
                      for b in range(1, P // a + 1) if (P // a) % b == 0]
        no_empty = [c for c in candidates if all(ci <= ni for ci, ni in zip(c, mesh))]
        pool = no_empty or candidates
        best = min(g.grid_surface(c, mesh) for c in pool)
        assert g.grid_surface(grid, mesh) == best, (P, grid)
        if no_empty:
            assert all(ci <= ni for ci, ni in zip(grid, mesh))


@pytest.mark.parametrize("n0,n1", [(1, 1), (7, 11), (30, 27), (64, 3), (270, 136)])
def test_grid_2d_is_the_brute_force_choice(n0, n1):
    # The divisor search runs to sqrt(P) only; the choice must be the exhaustive one:
    # no empty pencil if possible, then the smallest p0 n1 + p1 n0, then the larger p1.
    for P in list(range(1, 130)) + [210, 1000, 1024, 4096, 65536, 65537]:
        cands = [(a, P // a) for a in range(1, P + 1) if P % a == 0]
        best = min(cands, key=lambda c: (c[0] > n0 or c[1] > n1, c[0] * n1 + c[1] * n0, -c[1]))
        assert tuple(g.processor_grid_2d(P, n0, n1)) == best, (P, n0, n1)


def test_grid_surface_formula():
    assert g.grid_surface((2, 1, 1), (10, 20, 30)) == 2 * (2 * 600 + 300 + 200)


@pytest.mark.parametrize("mesh", [(7, 11, 13), (16, 16, 16), (30, 27, 32), (2, 3, 5)])
def test_bricks_tile_mesh_for_1_to_1000_ranks(mesh):
    for P in range(1, 1001):
        boxes = g.brick_boxes(P, mesh)
        assert len(boxes) == P
        ok, why = g.tiles_exactly(boxes, mesh)
        assert ok, (P, why)
        if P in (1, 2, 3, 4, 7, 64, 97, 360, 1000):
            assert (_paint(boxes, mesh) == 1).all(), P


@pytest.mark.parametrize("mesh", [(7, 11, 13), (30, 27, 32), (1, 1, 1)])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_pencils_tile_mesh_for_1_to_1000_ranks(mesh, axis):
    for P in range(1, 1001):
        boxes = g.pencil_boxes(axis, P, mesh)
        ok, why = g.tiles_exactly(boxes, mesh)
        assert ok, (P, axis, why)
        for lo, hi in boxes:
            if g.volume((lo, hi)):
                assert lo[axis] == 0 and hi[axis] == mesh[axis]
        if P in (1, 2, 3, 5, 143, 1000):
            assert (_paint(boxes, mesh) == 1).all()


def test_more_ranks_than_planes_gives_empty_bricks():
    mesh = (2, 3, 5)
    boxes = g.brick_boxes(64, mesh)
    empties = sum(1 for b in boxes if g.volume(b) == 0)
    assert empties == 64 - 30
    assert g.tiles_exactly(boxes, mesh)[0]


def test_tiles_exactly_detects_gaps_overlaps_and_outside():
    mesh = (4, 4, 4)
    good = [((0, 0, 0), (2, 4, 4)), ((2, 0, 0), (4, 4, 4))]
    assert g.tiles_exactly(good, mesh) == (True, "")
    ok, why = g.tiles_exactly([((0, 0, 0), (2, 4, 4)), ((1, 0, 0), (4, 4, 4))], mesh)
    assert not ok and "overlap" in why
    ok, why = g.tiles_exactly([((0, 0, 0), (2, 4, 4)), ((3, 0, 0), (4, 4, 4))], mesh)
    assert not ok and "cover" in why
    ok, why = g.tiles_exactly([((0, 0, 0), (2, 4, 4)), ((2, 0, 0), (5, 4, 4))], mesh)
    assert not ok and "outside" in why


def test_brick_box_rank_order_is_x_fastest():
    mesh = (8, 8, 8)
    grid = g.processor_grid_3d(8, mesh)
    assert tuple(grid) == (2, 2, 2)
    assert g.brick_box(8, mesh, 1) == ((4, 0, 0), (8, 4, 4))
    assert g.brick_box(8, mesh, 2) == ((0, 4, 0), (4, 8, 4))
    assert g.brick_box(8, mesh, 4) == ((0, 0, 4), (4, 4, 8))


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        g.processor_grid_3d(0, (4, 4, 4))
    with pytest.raises(ValueError):
        g.brick_box(4, (4, 4, 4), 4)
    with pytest.raises(ValueError):
        g.pencil_box(3, 2, (4, 4, 4), 0)
    with pytest.raises(TypeError):
        g.intersect("not a box", ((0, 0, 0), (1, 1, 1)))


# --------------------------------------------------------------------------
# Neighbourhoods: which domains are within reach (the known partners of the
# migration and ghost-atom exchanges), a pure function of the decomposition.
# --------------------------------------------------------------------------

from pmewald import _core  # noqa: E402

_geo = _core.geometry


def _point_reach(K, p, a_part, b_part, R):
    """Independent check by sampling: some point u of slab a_part, moved by an image
    shift n, covers a mesh index of slab b_part within R spacings (what the ghost
    code computes for an atom at index coordinate u)."""
    a0, a1 = g.split_range(K, p, a_part)
    b0, b1 = g.split_range(K, p, b_part)
    if a0 == a1 or b0 == b1:
        return False
    us = np.append(np.arange(a0, a1, 1 / 32), a1 - 1e-9)
    for n in range(-2, 3):
        lo = np.maximum(np.floor(us + n * K - R), 0)
        hi = np.minimum(np.floor(us + n * K + R), K - 1)
        if np.any((lo <= hi) & (lo <= b1 - 1) & (hi >= b0)):
            return True
    return False


@pytest.mark.parametrize("K", [7, 12, 40])
def test_slab_reach_covers_every_point_and_is_tight(K):
    for p in sorted({1, 2, 3, 5, K, K + 3}):
        for R in (0.0, 0.5, 1.0, 2.3, K / 2):
            for a in range(p):
                for b in range(p):
                    got = _geo.slab_reaches(K, p, a, b, R)
                    # Every point's reach is included ...
                    assert got or not _point_reach(K, p, a, b, R), (K, p, a, b, R)
                    # ... and nothing beyond it (up to the sampling's resolution).
                    assert not got or _point_reach(K, p, a, b, R + 1 / 16), (K, p, a, b, R)


@pytest.mark.parametrize("mesh,counts", [((12, 10, 9), list(range(1, 31)) + [64, 100, 210]),
                                         ((4, 4, 4), [8, 27, 64, 100])])
def test_neighborhood_send_and_recv_sets_agree(mesh, counts):
    """r receives from s exactly when s sends to r, so both sides of a known-partner
    exchange agree without asking; empty bricks take part in nothing."""
    for P in counts:
        grid = g.processor_grid_3d(P, mesh)
        boxes = g.brick_boxes(P, mesh)
        for reach in ((0.0, 0.0, 0.0), (1.5, 2.0, 0.7), (4.0, 4.0, 4.0)):
            sets = [_geo.brick_neighborhood(grid, mesh, r, reach) for r in range(P)]
            for r, (send, recv) in enumerate(sets):
                assert send == sorted(send) and recv == sorted(recv) and r not in send and r not in recv
                assert recv == [s for s in range(P) if r in sets[s][0]], (P, reach, r)
                if g.volume(boxes[r]) == 0:
                    assert send == [] and recv == []
                assert all(g.volume(boxes[s]) > 0 for s in send)
            if reach == (0.0, 0.0, 0.0) and all(p >= 3 and p <= n for p, n in zip(grid, mesh)):
                assert all(len(s) == 26 for s, _ in sets)  # the face, edge and corner neighbours


def test_neighborhood_cost_is_local_at_65536_ranks():
    """O(p_x + p_y + p_z + partners) per rank: no O(P) work or memory."""
    import time

    mesh, P = (256, 256, 256), 65536
    grid = g.processor_grid_3d(P, mesh)
    assert tuple(grid) == (32, 32, 64) or np.prod(grid) == P
    t0 = time.perf_counter()
    send, recv = _geo.brick_neighborhood(grid, mesh, 12345, (0.0, 0.0, 0.0))
    assert len(send) == 26 and send == recv
    send, recv = _geo.brick_neighborhood(grid, mesh, 12345, (9.0, 9.0, 9.0))
    assert len(send) == len(recv) and len(send) < 300
    assert time.perf_counter() - t0 < 0.05


# --------------------------------------------------------------------------- domain grids


def _random_cuts(rng, p, K, allow_empty=True):
    inner = np.sort(rng.integers(0 if allow_empty else 1, K + (1 if allow_empty else 0), size=p - 1))
    if not allow_empty:
        inner = np.sort(rng.choice(np.arange(1, K), size=p - 1, replace=False))
    return [0] + [int(c) for c in inner] + [K]


def _pulses_brute(cuts, K, R):
    """Largest hop |h| (coordinates between a needing domain and a source domain, through the
    periodic images) at which a non-empty source has a point within R index points of a
    non-empty domain: the forwarding chain's length (staged exchange)."""
    p = len(cuts) - 1
    most = 0
    for g in range(p):
        lo, hi = cuts[g], cuts[g + 1]
        if lo == hi:
            continue
        for s in range(p):
            a, b = cuts[s], cuts[s + 1]
            if a == b:
                continue
            for n in range(-3, 4):
                h = s + n * p - g
                if h == 0:
                    continue
                src_lo, src_hi = a + n * K, b + n * K
                if src_hi + R > lo and src_lo - R < hi:  # some point of the source within R
                    most = max(most, abs(h))
    return most


def test_domain_grid_coordinates_and_pulses_match_brute_force():
    """Each index's grid coordinate is the slab holding it; the staged exchange's pulse count
    is the longest forwarding chain to a domain within reach (random cuts with empty slabs,
    reaches up to half the axis)."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        p = int(rng.integers(1, 6))
        K = int(rng.integers(p, 40))
        cuts = _random_cuts(rng, p, K)
        R = float(rng.uniform(0, K / 2))
        pulses, _, _, coords, _ = _geo.domain_grid((p, 1, 1), (K, 1, 1), [cuts, [0, 1], [0, 1]], R, 0.0, 0.0)
        for m, g in enumerate(coords[0]):
            assert cuts[g] <= m < cuts[g + 1], (cuts, m, g)
        assert pulses[0] == _pulses_brute(cuts, K, R), (cuts, K, R, pulses)
        assert pulses[1] == pulses[2] == 0


def test_bricks_are_split_range_cuts():
    for grid, mesh in (((2, 3, 4), (10, 9, 17)), ((5, 1, 2), (3, 7, 8))):
        cuts = _geo.bricks_as_cuts(grid, mesh)
        for d in range(3):
            assert cuts[d] == [_geo.split_range(mesh[d], grid[d], g)[0] for g in range(grid[d])] + [mesh[d]]


@pytest.mark.parametrize("grid, reach, pulses, direct, staged, prefer", [
    ((1, 1, 1), 0.2, 1, 0, 0, False),     # one rank: images of its own atoms only
    ((2, 2, 2), 0.2, 1, 7, 6, False),     # every other rank is a neighbour: direct
    ((4, 4, 4), 0.2, 1, 26, 6, True),     # 26 neighbours against 6 messages
    ((4, 4, 2), 0.2, 1, 17, 6, True),
    ((8, 8, 8), 0.2, 2, 124, 12, True),   # the cutoff spans two domains: 2 pulses
])
def test_ghost_message_counts(grid, reach, pulses, direct, staged, prefer):
    """Direct: one message to every domain within reach (the brick neighbourhood's size);
    staged: 2 per pulse and axis with more than one rank."""
    K = 40
    cuts = [[K * g // p for g in range(p)] + [K] for p in grid]
    R = reach * K
    got_pulses, n_direct, n_staged, _, pref = _geo.domain_grid(grid, (K, K, K), cuts, R, R, R)
    assert [got_pulses[d] for d in range(3) if grid[d] > 1] == [pulses] * sum(p > 1 for p in grid)
    assert (n_direct, n_staged, pref) == (direct, staged, prefer)
    if grid != (1, 1, 1):
        send, _ = _geo.brick_neighborhood(grid, (K, K, K), 0, (R, R, R))
        assert len(send) == direct
