"""The real-space pair list reused across calls (cpp/realspace/pair_list.hpp, PME(skin=...)):
the same energy, forces and virial as a fresh search (skin=0) at every step of a random walk,
rebuilt exactly when an atom has moved more than half the skin, the caller's split, the
exclusions or the box changed; bad skins refused on every rank."""

import math

import numpy as np
import pytest

import pmewald

BOX = np.array([[16.0, 0.0, 0.0], [2.0, 15.5, 0.0], [-1.5, 1.0, 16.5]])  # triclinic
CUTOFF, SKIN = 6.0, 1.2
MODES = ("pt2pt", "nonblocking", "collective")


def _solver(comm, skin, mode="nonblocking", box=BOX):
    return pmewald.PME(box, CUTOFF, alpha=3.2 / CUTOFF, mesh=(12, 12, 12), order=5, comm=comm,
                       comm_mode=mode, skin=skin)


def _min_image(box, d):
    s = d @ np.linalg.inv(box)
    return (s - np.rint(s)) @ box


def _close(comm, got, ref, what):
    """|got - ref| <= 1e-12 x the largest |ref| on any rank (1e-12 relative)."""
    scale = comm.allreduce(float(np.abs(ref).max()) if np.size(ref) else 0.0, op=_max())
    err = comm.allreduce(float(np.abs(got - ref).max()) if np.size(ref) else 0.0, op=_max())
    assert err <= 1e-12 * scale, (what, err, scale)


def _max():
    from mpi4py import MPI

    return MPI.MAX


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(150)
def test_reuse_matches_fresh_search_on_random_walk(comm):
    """200 steps of a random walk (atoms crossing rank and periodic boundaries, passed with
    random lattice shifts, exclusions present), every comm mode: the list's results equal a
    fresh search's to 1e-12 at every step, and it rebuilds exactly when the test's own
    bookkeeping says it must (an atom moved more than skin / 2 since the last build, the
    caller's split changed at step 80, an exclusion was dropped at step 130, the box changed
    at step 170)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(16)
    n = 180
    pos = rng.uniform(0, 1, size=(n, 3)) @ BOX
    q = rng.uniform(-1, 1, size=n)
    q -= q.mean()
    ids = (rng.permutation(n) * 3 + 1).astype(np.int64)
    pairs = [(2 * k, 2 * k + 1) for k in range(30)]
    for i, j in pairs:  # bonded partners 1 A apart
        v = rng.normal(size=3)
        pos[j] = pos[i] + v / np.linalg.norm(v)
    excl = np.array([[ids[i], ids[j]] for i, j in pairs], dtype=np.int64)
    box = BOX.copy()
    fresh = _solver(comm, 0.0)
    listed = [_solver(comm, SKIN, mode) for mode in MODES]
    assert fresh.parameters["skin_used"] == 0 and listed[0].parameters["skin"] == SKIN
    # The list objects take turns (one per step, with the fresh search every step): each sees
    # three steps of the walk per call, and its own rebuilds are predicted from its own calls.
    ref, builds, pending = [None] * 3, [0] * 3, [True] * 3
    for step in range(200):
        if step > 0:
            pos += rng.normal(scale=0.03, size=(n, 3))
        if step == 130:
            excl = excl[:-1]
            pending = [True] * 3
        if step == 170:
            box = BOX * 1.01
            for p in [fresh] + listed:
                p.set_box(box)
            pending = [True] * 3
        if step == 80 and size > 1:
            pending = [True] * 3
        split_now = np.arange(n)[rank::size] if step < 80 else np.array_split(np.arange(n), size)[rank]
        k = step % 3
        moved = 0.0 if ref[k] is None else np.linalg.norm(_min_image(box, pos - ref[k]), axis=1).max()
        if pending[k] or moved > SKIN / 2:
            ref[k], builds[k], pending[k] = pos.copy(), builds[k] + 1, False
        # The caller passes its atoms wrapped or not, some shifted by a lattice vector.
        shift = rng.integers(-1, 2, size=(n, 3)) * (rng.uniform(size=(n, 1)) < 0.1)
        passed = (pos + shift @ box)[split_now]
        my_excl = excl[rank::size]
        r0 = fresh.compute(passed, q[split_now], ids[split_now], my_excl)
        p, mode = listed[k], MODES[k]
        r = p.compute(passed, q[split_now], ids[split_now], my_excl)
        assert r.energy == pytest.approx(r0.energy, rel=1e-12, abs=0), (step, mode)
        for t in r0.terms:
            assert r.terms[t] == pytest.approx(r0.terms[t], rel=1e-12, abs=1e-12 * abs(r0.energy)), (step, t)
        _close(comm, r.forces, r0.forces, (step, mode, "forces"))
        _close(comm, r.virial, r0.virial, (step, mode, "virial"))
        assert p.timings()["pair_list_builds"] == builds[k], (step, mode, builds)
    # The walk triggered rebuilds by displacement as well as the forced ones (first call,
    # split, exclusions, box).
    assert min(builds) >= 3 + (size > 1) + 2, builds
    t = listed[1].timings()
    assert t["pair_list_evaluate"] > 0 and t["pair_list_build"] > 0 and t["pair_list_refresh"] > 0
    assert "pair_list_builds" not in fresh.timings()


@pytest.mark.mpi(ranks=[1, 2])
@pytest.mark.timeout(60)
def test_bad_skin_raises_everywhere(comm):
    """A bad skin raises ValueError naming it on every rank; skins differing between ranks
    too; 'auto' is 0.1 x cutoff, limited to half the smallest cell height minus the cutoff."""
    for bad in (-1.0, math.nan, math.inf, "big", True, None, [1.0]):
        with pytest.raises(ValueError, match="skin"):
            pmewald.PME(BOX, CUTOFF, mesh=(16, 16, 16), comm=comm, skin=bad)
    if comm.Get_size() > 1:
        with pytest.raises(ValueError, match="skin"):
            pmewald.PME(BOX, CUTOFF, mesh=(16, 16, 16), comm=comm, skin=1.0 + comm.Get_rank())
    p = pmewald.PME(BOX, CUTOFF, mesh=(16, 16, 16), comm=comm)
    assert p.parameters["skin"] == pytest.approx(0.1 * CUTOFF)
    assert p.parameters["skin_used"] == 0  # "auto": the first call searches afresh
    rng = np.random.default_rng(comm.Get_rank())
    pos, q = rng.uniform(0, 15, size=(20, 3)), rng.uniform(-1, 1, size=20)
    p.compute(pos, q)
    p.compute(pos, q)
    assert p.parameters["skin_used"] == pytest.approx(0.1 * CUTOFF)
    assert p.timings()["pair_list_builds"] == 1
    # Near half the cell height the skin shrinks to what the box allows.
    heights = [abs(np.linalg.det(BOX)) / np.linalg.norm(np.cross(BOX[(d + 1) % 3], BOX[(d + 2) % 3]))
               for d in range(3)]
    rc = 0.5 * min(heights) - 0.25
    p = pmewald.PME(BOX, rc, mesh=(16, 16, 16), comm=comm, skin=1.0)
    assert p.parameters["skin_used"] == pytest.approx(0.25)
