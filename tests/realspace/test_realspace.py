"""Real-space Ewald part: erfc pair kernel, the pair sum with ghosts and exclusions.

Checked against a direct NumPy pair sum written here (every periodic image
with r < cutoff, math.erfc), across rank counts, atom splits and orders. The particle
decomposition it runs on (migration, ghosts, exclusion routing) is tested in
tests/particles/.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pmewald import _core
from realspace_cases import CASES, ORTHO, TRICLINIC, heights, random_system, split

rs = _core._testing.realspace
geometry = _core.geometry

ERFC = np.frompyfunc(math.erfc, 1, 1)
ERF = np.frompyfunc(math.erf, 1, 1)


# --------------------------------------------------------------------------
# Reference
# --------------------------------------------------------------------------

def reference(box, pos, q, cutoff, alpha, k=1.0, excl_idx=()):
    """Direct real-space sum: E (terms), forces, virial W_ab = sum r_ij,a F_ij,b."""
    box = np.asarray(box, float)
    pos = np.asarray(pos, float)
    q = np.asarray(q, float)
    n = len(q)
    excluded = np.zeros((n, n), bool)
    for i, j in excl_idx:
        excluded[i, j] = excluded[j, i] = True
    d0 = pos[:, None, :] - pos[None, :, :]
    qq = k * q[:, None] * q[None, :]
    e_real = 0.0
    forces = np.zeros((n, 3))
    vir = np.zeros((3, 3))
    best = np.full((n, n), np.inf)
    best_d = np.zeros((n, n, 3))
    for img in itertools.product(range(-2, 3), repeat=3):
        d = d0 - np.asarray(img, float) @ box
        r2 = np.einsum("ijk,ijk->ij", d, d)
        closer = r2 < best
        best = np.where(closer, r2, best)
        best_d = np.where(closer[..., None], d, best_d)
        mask = r2 < cutoff * cutoff
        if img == (0, 0, 0):
            np.fill_diagonal(mask, False)
        mask &= ~excluded
        if not mask.any():
            continue
        ii, jj = np.nonzero(mask)
        r = np.sqrt(r2[ii, jj])
        dd = d[ii, jj]
        erfc = ERFC(alpha * r).astype(float)
        e_pair = qq[ii, jj] * erfc / r
        fr = qq[ii, jj] * (erfc + 2 * alpha / math.sqrt(math.pi) * r * np.exp(-(alpha * r) ** 2)) / r**3
        e_real += 0.5 * e_pair.sum()
        np.add.at(forces, ii, fr[:, None] * dd)
        vir += 0.5 * np.einsum("p,pa,pb->ab", fr, dd, dd)
    e_excl = 0.0
    for i, j in excl_idx:
        dd = best_d[i, j]
        r = math.sqrt(best[i, j])
        erf = math.erf(alpha * r)
        e_excl += -qq[i, j] * erf / r
        fr = qq[i, j] * (2 * alpha / math.sqrt(math.pi) * math.exp(-(alpha * r) ** 2) * r - erf) / r**3
        forces[i] += fr * dd
        forces[j] -= fr * dd
        vir += fr * np.outer(dd, dd)
    vol = abs(np.linalg.det(box))
    e_self = -k * alpha / math.sqrt(math.pi) * float(np.sum(q * q))
    e_bg = -k * math.pi * float(np.sum(q)) ** 2 / (2 * vol * alpha**2)
    vir += e_bg * np.eye(3)
    terms = {"real": e_real, "exclusion": e_excl, "self": e_self, "background": e_bg}
    return sum(terms.values()), forces, vir, terms


# --------------------------------------------------------------------------
# Systems
# --------------------------------------------------------------------------

def wrap(box, pos):
    s = pos @ np.linalg.inv(box)
    return (s - np.floor(s)) @ box


def run(comm, box, mesh, pos, q, ids, idx, cutoff, alpha, excl=None, k=1.0):
    return rs.compute(comm, box, mesh, pos[idx], q[idx], ids[idx], excl, cutoff, alpha, k)


def gather_forces(comm, idx, f, n):
    all_idx = comm.allgather(idx)
    all_f = comm.allgather(f)
    out = np.full((n, 3), np.nan)
    for i, ff in zip(all_idx, all_f):
        out[i] = ff
    return out


def assert_rel(a, b, rtol, what=""):
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    if a.size == 0:
        return
    scale = max(np.max(np.abs(b)), 1e-300)
    err = np.max(np.abs(a - b)) / scale
    assert err <= rtol, f"{what}: relative error {err:.3e} > {rtol:.1e}"


# --------------------------------------------------------------------------
# Serial tests
# --------------------------------------------------------------------------

def test_erfc_table_accuracy():
    x = np.concatenate([np.linspace(0, 8.5, 200001), np.random.default_rng(1).uniform(0, 7, 100000)])
    e, g = rs.erfc(x)
    ref_e = ERFC(x).astype(float)
    ref_g = np.exp(-x * x)
    rel_e = np.max(np.abs(e - ref_e) / ref_e)
    rel_g = np.max(np.abs(g - ref_g) / ref_g)
    assert rel_e < 1e-13, rel_e
    assert rel_g < 1e-13, rel_g


def test_timings_reported():
    from mpi4py import MPI

    pos, q, ids = random_system(ORTHO, 20, seed=2)
    out = rs.compute(MPI.COMM_SELF, ORTHO, (4, 4, 4), pos, q, ids, None, 3.0, 1.0, 1.0, timings=True)
    assert len(out) == 5
    assert set(out[4]) == {"migrate", "exclusions", "ghosts", "cells", "pairs", "reverse", "candidates",
                           "pairs_evaluated"}
    assert all(v >= 0 for v in out[4].values())
    # Every pair within the cutoff is evaluated once (the half search), out of more candidates.
    assert 0 < out[4]["pairs_evaluated"] <= out[4]["candidates"]


def _pair_reference(ri, kqi, rj, qj, alpha):
    d = ri[None, :] - rj
    r = np.linalg.norm(d, axis=1)
    erfc = ERFC(alpha * r).astype(float)
    e = kqi * qj * erfc / r
    fr = (e + kqi * qj * 2 * alpha / math.sqrt(math.pi) * np.exp(-(alpha * r) ** 2)) / r**2
    f = fr[:, None] * d
    vir = np.einsum("pa,pb->ab", f, d)
    acc = np.array([np.sum(e), vir[0, 0], vir[1, 1], vir[2, 2], vir[0, 1], vir[0, 2], vir[1, 2],
                    *f.sum(axis=0)])
    return f, acc


@pytest.mark.parametrize("n", [1, 3, 7, 8, 9, 31, 256])
@pytest.mark.parametrize("vector", [True, False])
def test_pair_kernel_against_erfc(n, vector):
    """The vectorised kernel (exp + erfcx polynomial, 8/4/2 lanes) and the scalar table kernel
    agree with math.erfc pair by pair, for any batch length (tails)."""
    rng = np.random.default_rng(n)
    ri = rng.uniform(-1, 1, 3)
    # Distances 0.05 .. 9.9 and alpha so that alpha r spans [0, 7.9]: the whole table range.
    u = rng.normal(size=(n, 3))
    u /= np.linalg.norm(u, axis=1)[:, None]
    r = np.concatenate([[0.05, 9.9], rng.uniform(0.05, 9.9, n)])[:n]
    rj = ri[None, :] + r[:, None] * u
    qj = rng.uniform(-1, 1, n)
    alpha = 7.9 / 9.9
    f, acc = rs.pair_batch(ri, 0.7, rj, qj, alpha, vector=vector)
    f_ref, acc_ref = _pair_reference(ri, 0.7, rj, qj, alpha)
    scale = np.abs(f_ref).max()
    assert np.abs(f - f_ref).max() <= 1e-13 * scale
    assert np.abs(acc - acc_ref).max() <= 1e-13 * np.abs(acc_ref).max()


def test_pair_kernel_vector_matches_scalar_and_reports_isa():
    rng = np.random.default_rng(5)
    ri = np.zeros(3)
    rj = rng.uniform(-5, 5, (200, 3))
    qj = rng.uniform(-1, 1, 200)
    fv, av = rs.pair_batch(ri, 1.0, rj, qj, 0.35, vector=True)
    fs, as_ = rs.pair_batch(ri, 1.0, rj, qj, 0.35, vector=False)
    assert np.abs(fv - fs).max() <= 1e-14 * np.abs(fs).max()
    assert np.abs(av - as_).max() <= 1e-13 * np.abs(as_).max()
    assert any(k in rs.pair_kernel_isa() for k in ("x86-64-v4", "x86-64-v3", "baseline"))
    with pytest.raises(ValueError, match="alpha"):
        rs.pair_batch(ri, 1.0, rj, qj, 3.0, vector=True)  # alpha r up to 26


def test_erfc_table_speed_reported():
    t_table, t_std, _ = rs.erfc_benchmark(4.0, 4096, 50)
    print(f"erfc+exp: table {t_table:.2f} ns, std {t_std:.2f} ns")
    assert t_table > 0 and t_std > 0


@pytest.mark.parametrize("case", list(CASES))
def test_serial_against_reference(case):
    from mpi4py import MPI

    box, mesh, n, neutral = CASES[case]
    pos, q, ids = random_system(box, n, seed=len(case), neutral=neutral)
    cutoff = 0.49 * heights(box).min()
    alpha = 3.0 / cutoff
    e, f, w, terms = rs.compute(MPI.COMM_SELF, box, mesh, pos, q, ids, None, cutoff, alpha, 1.0)
    e_ref, f_ref, w_ref, t_ref = reference(box, wrap(box, pos), q, cutoff, alpha)
    assert e == pytest.approx(e_ref, rel=1e-12, abs=1e-12 * sum(abs(v) for v in t_ref.values()))
    for key in t_ref:
        assert terms[key] == pytest.approx(t_ref[key], rel=1e-12, abs=1e-14), key
    assert_rel(f, f_ref, 1e-12, "forces")
    assert_rel(w, w_ref, 1e-12, "virial")
    assert np.allclose(w, w.T, rtol=0, atol=1e-12 * np.abs(w).max())


def test_forces_finite_differences():
    from mpi4py import MPI

    box = TRICLINIC
    pos, q, ids = random_system(box, 40, seed=5, neutral=False)
    cutoff = 0.49 * heights(box).min()
    alpha = 6.0 / cutoff  # erfc(alpha rc) ~ 2e-17: no jump at the cutoff
    args = dict(cutoff=cutoff, alpha=alpha, coulomb_constant=2.5)
    excl = np.array([[ids[0], ids[1]]])
    # Place atom 1 near atom 0 so the exclusion lies within the cutoff.
    pos[1] = pos[0] + np.array([0.7, -0.4, 0.3])

    def energy(p):
        return rs.compute(MPI.COMM_SELF, box, (8, 8, 8), p, q, ids, excl, **args)[0]

    _, f, _, _ = rs.compute(MPI.COMM_SELF, box, (8, 8, 8), pos, q, ids, excl, **args)
    h = 1e-5
    for i in (0, 1, 7, 23):
        for a in range(3):
            p1 = pos.copy()
            p1[i, a] += h
            p2 = pos.copy()
            p2[i, a] -= h
            fd = -(energy(p1) - energy(p2)) / (2 * h)
            assert fd == pytest.approx(f[i, a], rel=1e-6, abs=1e-8 * np.abs(f).max())


def test_virial_finite_differences():
    from mpi4py import MPI

    box = TRICLINIC
    pos, q, ids = random_system(box, 40, seed=6, neutral=False)
    pos = wrap(box, pos)
    cutoff = 0.45 * heights(box).min()
    alpha = 6.0 / cutoff
    excl = np.array([[ids[2], ids[3]]])
    pos[3] = pos[2] + np.array([-0.5, 0.6, 0.2])

    def energy(eps):
        m = np.eye(3) + eps
        return rs.compute(MPI.COMM_SELF, box @ m.T, (8, 8, 8), pos @ m.T, q, ids, excl, cutoff, alpha, 1.0)[0]

    _, _, w, _ = rs.compute(MPI.COMM_SELF, box, (8, 8, 8), pos, q, ids, excl, cutoff, alpha, 1.0)
    h = 1e-6
    fd = np.zeros((3, 3))
    for a in range(3):
        for b in range(3):
            e = np.zeros((3, 3))
            e[a, b] = h
            fd[a, b] = -(energy(e) - energy(-e)) / (2 * h)
    assert_rel(w, fd, 1e-6, "virial vs finite differences")


def test_exclusions_serial():
    from mpi4py import MPI

    box = ORTHO
    pos, q, ids = random_system(box, 60, seed=9, neutral=True)
    pos = wrap(box, pos)
    # Bonded pairs: partner placed close by, some across the periodic boundary.
    pairs = [(0, 1), (2, 3), (4, 5), (4, 6), (10, 11)]
    rng = np.random.default_rng(3)
    for i, j in pairs:
        pos[j] = pos[i] + rng.normal(scale=0.6, size=3)
    pos[11] = pos[10] + np.array([0.0, 0.0, 0.0]) + 1e-3  # nearly coincident
    pos[0] = np.array([0.05, 5.0, 5.0])
    pos[1] = np.array([-0.5, 5.2, 4.9])  # across the x boundary
    cutoff = 0.45 * heights(box).min()
    alpha = 3.2 / cutoff
    excl = np.array([[ids[i], ids[j]] for i, j in pairs], dtype=np.int64)
    e, f, w, terms = rs.compute(MPI.COMM_SELF, box, (9, 9, 9), pos, q, ids, excl, cutoff, alpha, 1.0)
    e_ref, f_ref, w_ref, t_ref = reference(box, wrap(box, pos), q, cutoff, alpha, excl_idx=pairs)
    for key in t_ref:
        assert terms[key] == pytest.approx(t_ref[key], rel=1e-12, abs=1e-13), key
    assert_rel(f, f_ref, 1e-12, "forces")
    assert_rel(w, w_ref, 1e-12, "virial")


# --------------------------------------------------------------------------
# MPI tests
# --------------------------------------------------------------------------

def pairs_within(box, pos, cutoff):
    """Number of distinct atom pairs whose minimum image is closer than the cutoff."""
    box = np.asarray(box, float)
    d0 = pos[:, None, :] - pos[None, :, :]
    best = np.full((len(pos), len(pos)), np.inf)
    for img in itertools.product(range(-2, 3), repeat=3):
        d = d0 - np.asarray(img, float) @ box
        best = np.minimum(best, np.einsum("ijk,ijk->ij", d, d))
    return int(np.count_nonzero(np.triu(best < cutoff * cutoff, k=1)))


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", list(CASES))
def test_mpi_each_pair_evaluated_once(comm, case):
    """Over all ranks the kernel evaluates every pair within the cutoff exactly once: a pair
    of an owned atom and a ghost on one side only (the other side's ghost gets its force back),
    and the two ranks of a boundary split those pairs about evenly."""
    box, mesh, n, neutral = CASES[case]
    pos, q, ids = random_system(box, n, seed=300 + len(case), neutral=neutral)
    cutoff = 0.49 * heights(box).min()
    rank, size = comm.Get_rank(), comm.Get_size()
    expected = pairs_within(box, wrap(box, pos), cutoff)
    for how in ("roundrobin", "rank0"):
        idx = split(n, comm, how)
        out = rs.compute(comm, box, mesh, pos[idx], q[idx], ids[idx], None, cutoff, 3.0 / cutoff, 1.0,
                         timings=True)
        counts = comm.allgather(out[4]["pairs_evaluated"])
        assert sum(counts) == expected, (how, counts, expected)
    if size == 2 and case.startswith("ortho"):
        # Slab split along one axis: most pairs cross a boundary, so the rule decides the balance.
        assert min(counts) >= 0.3 * max(counts), counts


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(90)
@pytest.mark.parametrize("n_cluster", [5, 70])
def test_mpi_isolated_clusters_without_ghosts(comm, n_cluster):
    """Clusters far from every domain boundary: no rank has ghost atoms, so the last rows of
    every rank's pair loop are owned atoms with partners (elsewhere they are mostly ghosts,
    which pair with nothing there). Through the solver, which runs the loop before or during
    the reciprocal part and then finishes it: every 64-row block must run exactly once, also
    the last, partial one (it once ran twice, silently, at 256 simulated ranks). In every
    mode, with and without overlap, twice on one object."""
    import pmewald

    size = comm.Get_size()
    L = 60.0
    box = np.diag([L * size, L, L])  # one L-cube per rank along x (the decomposition splits x first)
    rng = np.random.default_rng(7 + n_cluster)
    pos = np.concatenate([np.array([L * (c + 0.5), 0.5 * L, 0.5 * L]) + rng.uniform(-4, 4, (n_cluster, 3))
                          for c in range(size)])
    q = rng.uniform(-1, 1, len(pos))
    ids = np.arange(len(pos), dtype=np.int64)
    cutoff, alpha = 9.0, 0.35
    _, f_ref, w_ref, t_ref = reference(box, pos, q, cutoff, alpha)
    for mode, overlap in (("pt2pt", False), ("nonblocking", True), ("nonblocking", False), ("collective", True)):
        pme = pmewald.PME(box, cutoff, alpha=alpha, mesh=(8 * size, 8, 8), order=4, comm=comm, comm_mode=mode,
                          overlap=overlap)
        for how in ("roundrobin", "rank0"):
            idx = split(len(q), comm, how)
            r = pme.compute(pos[idx], q[idx], ids[idx])
            assert r.terms["real"] == pytest.approx(t_ref["real"], rel=1e-12), (mode, overlap, how)


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", list(CASES))
def test_mpi_independent_of_ranks_and_split(comm, case):
    """Every split on the whole communicator matches one rank alone to 1e-12,
    and both match the direct NumPy sum."""
    from mpi4py import MPI

    box, mesh, n, neutral = CASES[case]
    pos, q, ids = random_system(box, n, seed=100 + len(case), neutral=neutral)
    cutoff = 0.49 * heights(box).min()
    alpha = 3.0 / cutoff
    # Exclusions between near neighbours (held by rank 0 only).
    rng = np.random.default_rng(7)
    pairs = [(i, i + 1) for i in range(0, 40, 4)]
    for i, j in pairs:
        pos[j] = pos[i] + rng.normal(scale=0.7, size=3)
    excl_all = np.array([[ids[i], ids[j]] for i, j in pairs], dtype=np.int64)

    e1, f1, w1, t1 = rs.compute(MPI.COMM_SELF, box, mesh, pos, q, ids, excl_all, cutoff, alpha, 1.0)
    e_ref, f_ref, w_ref, t_ref = reference(box, wrap(box, pos), q, cutoff, alpha, excl_idx=pairs)
    assert_rel(f1, f_ref, 1e-12, "serial forces vs reference")
    assert_rel(w1, w_ref, 1e-12, "serial virial vs reference")
    for key in t_ref:
        assert t1[key] == pytest.approx(t_ref[key], rel=1e-12, abs=1e-13), key

    rank, size = comm.Get_rank(), comm.Get_size()
    for how in ("rank0", "last", "roundrobin", "reversed", "blocks"):
        idx = split(n, comm, how)
        # Exclusions spread over ranks too (round robin), or all on the last rank.
        excl = excl_all[rank::size] if how != "last" else (excl_all if rank == size - 1 else excl_all[:0])
        e, f, w, t = run(comm, box, mesh, pos, q, ids, idx, cutoff, alpha, excl)
        assert f.shape == (len(idx), 3)
        assert_rel(f, f1[idx], 1e-12, f"forces ({how}) in the caller's order")
        full = gather_forces(comm, idx, f, n)
        assert_rel(full, f1, 1e-12, f"gathered forces ({how})")
        assert e == pytest.approx(e1, rel=1e-12), how
        assert_rel(w, w1, 1e-12, f"virial ({how})")
        for key in t1:
            assert t[key] == pytest.approx(t1[key], rel=1e-12, abs=1e-13), (how, key)
        # Identical on every rank.
        assert comm.allgather(e) == [e] * size
        assert all(np.array_equal(x, w) for x in comm.allgather(w))


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(60)
def test_mpi_atom_order_and_ids(comm):
    """Reordering atoms (and their ids) changes nothing but the order of the forces."""
    box, mesh, n, _ = CASES["tric-neutral"]
    pos, q, ids = random_system(box, n, seed=42)
    cutoff = 0.4 * heights(box).min()
    alpha = 3.0 / cutoff
    perm = np.random.default_rng(0).permutation(n)
    idx = split(n, comm, "roundrobin")
    e, f, w, _ = run(comm, box, mesh, pos, q, ids, idx, cutoff, alpha)
    e2, f2, w2, _ = run(comm, box, mesh, pos[perm], q[perm], ids[perm], idx, cutoff, alpha)
    f_all = gather_forces(comm, idx, f, n)
    f2_all = gather_forces(comm, idx, f2, n)
    assert e2 == pytest.approx(e, rel=1e-12)
    assert_rel(w2, w, 1e-12, "virial")
    assert_rel(f2_all, f_all[perm], 1e-12, "forces")
    # Default ids (None) work and give the same answer without exclusions.
    e3, f3, _, _ = rs.compute(comm, box, mesh, pos[idx], q[idx], None, None, cutoff, alpha, 1.0)
    assert e3 == pytest.approx(e, rel=1e-12)
    assert_rel(f3, f, 1e-12, "forces with default ids")


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(60)
def test_mpi_repeated_calls_and_empty_ranks(comm):
    """Repeated calls reuse nothing stale; ranks with no atoms and tiny systems work."""
    box = ORTHO
    cutoff = 0.45 * heights(box).min()
    alpha = 3.0 / cutoff
    for trial in range(3):
        pos, q, ids = random_system(box, 2 + trial, seed=trial, neutral=False)
        idx = split(len(q), comm, "last")
        e, f, w, t = run(comm, box, (4, 4, 4), pos, q, ids, idx, cutoff, alpha)
        e_ref, f_ref, w_ref, _ = reference(box, wrap(box, pos), q, cutoff, alpha)
        assert e == pytest.approx(e_ref, rel=1e-12)
        assert_rel(gather_forces(comm, idx, f, len(q)), f_ref, 1e-12, "forces")
    # Meshes coarser than the processor grid (ranks with empty bricks), far-away atoms.
    pos, q, ids = random_system(box, 40, seed=8, neutral=False, spread=40.0)
    e_ref, f_ref, w_ref, _ = reference(box, wrap(box, pos), q, cutoff, alpha)
    for mesh in ((1, 1, 1), (2, 2, 2), (1, 3, 2)):
        idx = split(len(q), comm, "roundrobin")
        e, f, w, t = run(comm, box, mesh, pos, q, ids, idx, cutoff, alpha)
        assert e == pytest.approx(e_ref, rel=1e-12)
        assert_rel(gather_forces(comm, idx, f, len(q)), f_ref, 1e-11, "forces")
        assert_rel(w, w_ref, 1e-11, "virial")
    # No atoms at all.
    empty = np.zeros((0, 3))
    e, f, w, t = rs.compute(comm, box, (4, 4, 4), empty, np.zeros(0), np.zeros(0, np.int64), None,
                            cutoff, alpha, 1.0)
    assert e == 0.0 and f.shape == (0, 3) and not w.any()


def _expect_value_error(comm, match, **kw):
    box, mesh, n, _ = CASES["ortho-neutral"]
    pos, q, ids = random_system(box, 30, seed=1)
    args = dict(box=box, mesh=mesh, positions=pos, charges=q, ids=ids, exclusions=None,
                cutoff=0.4 * heights(box).min(), alpha=1.0, coulomb_constant=1.0)
    args.update(kw)
    rank, size = comm.Get_rank(), comm.Get_size()
    idx = split(30, comm, "roundrobin")
    for key in ("positions", "charges", "ids"):
        if isinstance(args[key], np.ndarray) and len(args[key]) == 30:
            args[key] = args[key][idx]
    with pytest.raises(ValueError, match=match):
        rs.compute(comm, **args)


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(60)
def test_mpi_bad_input_raises_everywhere(comm):
    box, mesh, n, _ = CASES["ortho-neutral"]
    pos, q, ids = random_system(box, 30, seed=1)
    wpos = wrap(box, pos)
    rank, size = comm.Get_rank(), comm.Get_size()
    last = rank == size - 1
    # Excluded pair farther apart than the cutoff (given on the last rank only).
    far = np.argmax(np.linalg.norm(wpos - wpos[0], axis=1))
    d = wpos[far] - wpos[0]
    s = d @ np.linalg.inv(box)
    dmin = np.linalg.norm((s - np.round(s)) @ box)
    cutoff = 0.4 * heights(box).min()
    if dmin > cutoff:
        bad = np.array([[ids[0], ids[far]]]) if last else np.zeros((0, 2), np.int64)
        _expect_value_error(comm, "not closer than the cutoff", exclusions=bad)
    # Unknown id in an exclusion.
    bad = np.array([[ids[0], 999999]]) if last else np.zeros((0, 2), np.int64)
    _expect_value_error(comm, "no rank passed", exclusions=bad)
    # Self exclusion.
    bad = np.array([[ids[0], ids[0]]]) if last else np.zeros((0, 2), np.int64)
    _expect_value_error(comm, "itself", exclusions=bad)
    # Duplicate atom ids (detected when exclusions are given).
    dup = ids.copy()
    dup[5] = dup[6]
    _expect_value_error(comm, "more than one atom", ids=dup,
                        exclusions=np.array([[ids[1], ids[2]]]) if last else np.zeros((0, 2), np.int64))
    # Cutoff longer than half the smallest height.
    _expect_value_error(comm, "half the smallest box height", cutoff=0.51 * heights(box).min())
    # NaN position on one rank only.
    p = pos.copy()
    p[29] = np.nan
    _expect_value_error(comm, "not finite", positions=p)
    # Degenerate box, bad shapes.
    _expect_value_error(comm, "degenerate", box=np.array([[1.0, 0, 0], [2.0, 0, 0], [0, 0, 1.0]]))
    _expect_value_error(comm, "one entry per position", charges=np.zeros(1) if last else q[split(30, comm, "roundrobin")])
    _expect_value_error(comm, "alpha", alpha=-1.0)
    # Different cutoff on different ranks.
    if size > 1:
        _expect_value_error(comm, "same on every rank", cutoff=0.3 + 0.01 * rank)
    # And the next good call still works.
    idx = split(30, comm, "roundrobin")
    e, f, w, t = run(comm, box, mesh, pos, q, ids, idx, 0.4 * heights(box).min(), 1.0)
    assert np.isfinite(e)
