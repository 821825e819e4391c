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


@pytest.mark.mpi(ranks=[1, 2, 3])
@pytest.mark.timeout(120)
def test_exclusion_changes_between_reused_calls(comm):
    """An object reusing its pair list (skin="auto") gets the same result as a fresh object
    after the exclusions change in any way between calls: dropped (None), emptied ((0, 2)),
    restored, halved, added to, and with the atoms renamed (new ids, the same pairs), in plain,
    potentials and charge-sets calls. Issue 26: dropping every exclusion after the list was
    built kept the old ones applied (360 waters: E = -0.4641 instead of -73.477), on any rank
    count, because the emptied lists were reported unchanged and the list was not rebuilt."""
    from pmewald import systems

    rank, size = comm.Get_rank(), comm.Get_size()
    w = systems.water_box(120, seed=5)  # 360 atoms
    cutoff = 0.45 * float(np.min(np.diag(w.box)))
    mine = np.arange(rank, w.n_atoms, size)
    pos, q = w.positions[mine], w.charges[mine]
    full = w.exclusions
    # Extra pairs: each water's O with the nearest atom of the next molecule (within the cutoff).
    d = np.linalg.norm(_min_image(w.box, w.positions[3::3][:, None] - w.positions[None, 0::3]), axis=2)
    extra = np.array([[w.ids[3 * (m + 1)], w.ids[0]] for m in range(len(d)) if d[m, 0] < cutoff][:5], dtype=np.int64)
    assert len(extra) == 5
    states = {"full": full, "none": None, "empty": np.zeros((0, 2), np.int64), "half": full[::2],
              "added": np.concatenate([full, extra])}
    renamed = {int(i): 7 * int(i) + 1000 for i in w.ids}
    rename = np.vectorize(lambda i: renamed[int(i)], otypes=[np.int64])

    def exclusions(name, ids_renamed):
        e = states[name]
        if e is None:
            return None
        e = rename(e).reshape(-1, 2) if ids_renamed and len(e) else e
        return np.ascontiguousarray(e[rank::size])

    def call(pme, kind, name, ids_renamed):
        ids = rename(w.ids[mine]) if ids_renamed else w.ids[mine]
        ex = exclusions(name, ids_renamed)
        if kind == "sets":
            return pme.compute(pos, np.stack([q, -0.5 * q], axis=1), ids=ids, exclusions=ex)
        return pme.compute(pos, q, ids=ids, exclusions=ex, potentials=kind == "potentials")

    def fresh():
        return pmewald.PME(w.box, cutoff, alpha=3.0 / cutoff, mesh=(20, 20, 20), comm=comm, skin=0)

    reused = pmewald.PME(w.box, cutoff, alpha=3.0 / cutoff, mesh=(20, 20, 20), comm=comm)  # skin="auto"
    steps = [("plain", "full", False), ("plain", "full", False), ("plain", "none", False), ("plain", "full", False),
             ("plain", "empty", False), ("plain", "full", False), ("plain", "half", False),
             ("plain", "added", False), ("plain", "full", False), ("potentials", "full", False),
             ("potentials", "none", False), ("plain", "none", False), ("plain", "full", False),
             ("sets", "full", False), ("sets", "empty", False), ("plain", "empty", False),
             ("plain", "full", False), ("plain", "full", True), ("plain", "none", True), ("plain", "half", True),
             ("potentials", "added", True), ("plain", "added", True), ("sets", "none", True), ("plain", "full", True)]
    for step, (kind, name, ids_renamed) in enumerate(steps):
        r = call(reused, kind, name, ids_renamed)
        r0 = call(fresh(), kind, name, ids_renamed)
        what = (step, kind, name, ids_renamed)
        assert np.allclose(r.energy, r0.energy, rtol=1e-12, atol=0), (what, r.energy, r0.energy)
        for t in r0.terms:
            assert np.allclose(r.terms[t], r0.terms[t], rtol=1e-12, atol=1e-12 * np.abs(r0.energy).max()), (what, t)
        _close(comm, r.forces, r0.forces, (what, "forces"))
        _close(comm, r.virial, r0.virial, (what, "virial"))
        if kind == "potentials":
            _close(comm, r.potentials, r0.potentials, (what, "potentials"))
        if name in ("none", "empty"):
            assert np.all(np.asarray(r.terms["exclusion"]) == 0), what
    assert reused.timings()["pair_list_builds"] >= 8  # the list was in use, and rebuilt


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(150)
@pytest.mark.parametrize("layout", ["atoms", "clusters"])
def test_excluded_pair_beyond_the_cutoff_is_named_on_every_rank(comm, layout):
    """A reused list counts the stored excluded pairs beyond the cutoff (the build checked
    that each exclusion was recorded once): an excluded pair that drifts past the cutoff
    while the list is reused (within half the skin, no rebuild) raises ValueError naming it
    on every rank, as one beyond cutoff + skin at a build does; the next good call gives the
    fresh search's result."""
    from pmewald import systems

    rank, size = comm.Get_rank(), comm.Get_size()
    w = systems.water_box(120, seed=5)  # 360 atoms
    cutoff, skin = 0.35 * float(np.min(np.diag(w.box))), 1.0  # cutoff + skin within half the box
    mine = np.arange(rank, w.n_atoms, size)
    others = np.arange(3, w.n_atoms)  # not in atom 0's molecule
    d = np.linalg.norm(_min_image(w.box, w.positions[others] - w.positions[0]), axis=1)
    near = int(others[(d > cutoff - 0.35) & (d < cutoff - 0.05)][0])  # just inside the cutoff
    far = int(others[np.argmax(d)])                                   # beyond cutoff + skin
    assert np.linalg.norm(_min_image(w.box, w.positions[far] - w.positions[0])) > cutoff + skin

    def exclusions(extra):
        e = np.concatenate([w.exclusions, [[w.ids[0], w.ids[extra]]]]).astype(np.int64)
        return np.ascontiguousarray(e[rank::size])

    def call(pme, positions, extra):
        return pme.compute(positions[mine], w.charges[mine], ids=w.ids[mine], exclusions=exclusions(extra))

    def solver(s):
        return pmewald.PME(w.box, cutoff, alpha=3.0 / cutoff, mesh=(20, 20, 20), comm=comm, skin=s,
                           pair_layout=layout)

    pme = solver(skin)
    r = call(pme, w.positions, near)
    r0 = call(solver(0), w.positions, near)
    assert np.allclose(r.energy, r0.energy, rtol=1e-12, atol=0)
    builds = pme.timings()["pair_list_builds"]
    # Drift the near partner 0.4 A (< skin / 2) outwards: past the cutoff, the list reused.
    moved = w.positions.copy()
    u = _min_image(w.box, w.positions[near] - w.positions[0])
    moved[near] += 0.4 * u / np.linalg.norm(u)
    with pytest.raises(ValueError, match=rf"excluded pair \({w.ids[0]}, {w.ids[near]}\) is not closer than the cutoff"):
        call(pme, moved, near)
    assert pme.timings()["pair_list_builds"] == builds  # it was the reused list that saw it
    # Beyond cutoff + skin at a build (a new object builds its list).
    with pytest.raises(ValueError, match=rf"excluded pair \({w.ids[0]}, {w.ids[far]}\) is not closer than the cutoff"):
        call(solver(skin), w.positions, far)
    # The next good call is right.
    r = call(pme, w.positions, near)
    assert np.allclose(r.energy, r0.energy, rtol=1e-12, atol=0)
    _close(comm, r.forces, r0.forces, "forces after the error")


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(150)
@pytest.mark.parametrize("precision", ["double", "mixed"])
def test_list_virial_from_forces_matches_the_pairs_virial(comm, precision):
    """The reused list's atom rows run the kernel without the pairs' virial and form it from
    the forces on the sorted atoms (sum_a F_a (r_a - centre), less the excluded pairs' share
    of it): the same virial as the fresh search's pair-by-pair sum to 1e-12, in both kernel
    precisions, with excluded pairs split across ranks (owned-ghost ones among them) and the
    atoms passed unwrapped; and (double) the virial is the energy's strain derivative (a
    finite difference of the list's energy under a small homogeneous strain, to 1e-6)."""
    from pmewald import systems

    rank, size = comm.Get_rank(), comm.Get_size()
    w = systems.water_box(120, seed=7)  # 360 atoms, 240 excluded pairs
    cutoff = 0.35 * float(np.min(np.diag(w.box)))
    mine = np.arange(rank, w.n_atoms, size)
    shift = np.where((np.arange(w.n_atoms) % 5 == 0)[:, None], w.box[0] + w.box[2], 0.0)  # some atoms an image away
    pos = (w.positions + shift)[mine]
    ex = np.ascontiguousarray(w.exclusions[(rank + 1) % size::size])  # given away from their atoms' ranks

    def solver(skin, box=w.box):  # alpha rc = 5: no pair crossing the cutoff under strain matters
        return pmewald.PME(box, cutoff, alpha=5.0 / cutoff, mesh=(20, 20, 20), comm=comm, skin=skin,
                           precision=precision, pair_layout="atoms")

    listed, fresh = solver(1.0), solver(0)
    for _ in range(2):  # the build's call and a reuse
        r = listed.compute(pos, w.charges[mine], ids=w.ids[mine], exclusions=ex)
    r0 = fresh.compute(pos, w.charges[mine], ids=w.ids[mine], exclusions=ex)
    assert listed.timings()["pair_list_builds"] == 1
    _close(comm, r.forces, r0.forces, (precision, "forces"))
    _close(comm, r.virial, r0.virial, (precision, "virial"))
    # The virial against the strain derivative of the energy (double: the mixed kernel's
    # energies carry float rounding far above a 1e-6 strain's change).
    if precision != "double":
        return
    h = 1e-6
    e = []
    for sign in (1, -1):
        strain = np.eye(3) + sign * h * np.array([[1.0, 0.3, 0.0], [0.3, -0.5, 0.2], [0.0, 0.2, 0.7]])
        box_s = w.box @ strain
        p = solver(1.0, box_s)
        e.append(p.compute(pos @ strain, w.charges[mine], ids=w.ids[mine], exclusions=ex).energy)
    # dE/dh = -sum_ab W_ab eps_ab (pmewald's convention, tests/pme/test_pme.py: W = -dE/d eps)
    eps = np.array([[1.0, 0.3, 0.0], [0.3, -0.5, 0.2], [0.0, 0.2, 0.7]])
    full = np.asarray(r.virial)
    dE = (e[0] - e[1]) / (2 * h)
    assert dE == pytest.approx(-np.sum(full * eps), rel=1e-6), (dE, full)
