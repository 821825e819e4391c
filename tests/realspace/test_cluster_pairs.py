"""The cluster-pair layout of the pair list (PME(pair_layout="clusters"),
cpp/realspace/cluster_layout.hpp, cluster_kernel.hpp): the same pairs as the atom-by-atom
evaluation, so the same energy, terms, forces and virial to 1e-12 (double) on 1-4 ranks,
every comm mode, orthorhombic and triclinic boxes, uneven splits and empty ranks, through
list reuse and rebuilds; the mixed kernel within its error estimate; the fallback to atoms
where the vector kernels do not reach (alpha * cutoff >= 8); bad values refused on every
rank."""

import numpy as np
import pytest

import pmewald
from pmewald.systems.water import water_box

TRICLINIC = np.array([[16.0, 0.0, 0.0], [2.0, 15.5, 0.0], [-1.5, 1.0, 16.5]])
ORTHO = np.diag([15.0, 16.0, 17.0])
CUTOFF, SKIN = 6.0, 1.0
MODES = ("pt2pt", "nonblocking", "collective")


def _solver(comm, box, layout, mode="nonblocking", alpha=3.2 / CUTOFF, precision="double"):
    return pmewald.PME(box, CUTOFF, alpha=alpha, mesh=(12, 12, 12), order=5, comm=comm, comm_mode=mode,
                       skin=SKIN, pair_layout=layout, precision=precision)


def _neutral_charges_in(box, n, rng):
    """n positions uniform in the cell and neutral charges uniform in [-1, 1] (in that order
    from rng)."""
    pos = rng.uniform(0, 1, size=(n, 3)) @ box
    q = rng.uniform(-1, 1, size=n)
    return pos, q - q.mean()


def _max():
    from mpi4py import MPI

    return MPI.MAX


def _close(comm, got, ref, what, rel=1e-12):
    scale = comm.allreduce(float(np.abs(ref).max()) if np.size(ref) else 0.0, op=_max())
    err = comm.allreduce(float(np.abs(got - ref).max()) if np.size(ref) else 0.0, op=_max())
    assert err <= rel * scale, (what, err, scale)


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(150)
@pytest.mark.parametrize("box", [ORTHO, TRICLINIC], ids=["orthorhombic", "triclinic"])
def test_clusters_match_atoms_on_random_walk(comm, box):
    """30 steps of a random walk with bonded (excluded) pairs, each comm mode in turn: the
    cluster layout's energy, terms, forces and virial equal the atom layout's to 1e-12 at
    every step, through reuse and rebuilds (displacement, the caller's split at step 10,
    all atoms on rank 0 and the others empty from step 20)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(7)
    n = 200
    pos, q = _neutral_charges_in(box, n, rng)
    ids = (rng.permutation(n) * 2 + 5).astype(np.int64)
    bonded = [(2 * k, 2 * k + 1) for k in range(40)]
    for i, j in bonded:
        v = rng.normal(size=3)
        pos[j] = pos[i] + 1.1 * v / np.linalg.norm(v)
    excl = np.array([[ids[i], ids[j]] for i, j in bonded], dtype=np.int64)
    atoms = [_solver(comm, box, "atoms", m) for m in MODES]
    clusters = [_solver(comm, box, "clusters", m) for m in MODES]
    for step in range(30):
        if step > 0:
            pos += rng.normal(scale=0.08, size=(n, 3))
        if step < 10:
            mine = np.arange(n)[rank::size]
        elif step < 20:
            mine = np.array_split(np.arange(n), size)[rank]
        else:
            mine = np.arange(n) if rank == 0 else np.arange(0)
        k = step % 3
        ra = atoms[k].compute(pos[mine], q[mine], ids[mine], excl[rank::size])
        rc = clusters[k].compute(pos[mine], q[mine], ids[mine], excl[rank::size])
        assert rc.energy == pytest.approx(ra.energy, rel=1e-12, abs=0), step
        for t in ra.terms:
            assert rc.terms[t] == pytest.approx(ra.terms[t], rel=1e-12, abs=1e-12 * abs(ra.energy)), (step, t)
        _close(comm, rc.forces, ra.forces, (step, "forces"))
        _close(comm, rc.virial, ra.virial, (step, "virial"))
    for p in clusters:
        assert p.parameters["pair_layout"] == "clusters"
        assert p.parameters["pair_layout_used"] == "clusters"
        assert p.timings()["pair_list_builds"] >= 3
    assert atoms[0].parameters["pair_layout_used"] == "atoms"


@pytest.mark.mpi(ranks=[1, 2])
@pytest.mark.timeout(120)
def test_mixed_clusters_within_their_error_estimate(comm):
    """Water (intramolecular pairs included: the closest, largest pair forces), automatic
    parameters at 1e-4: the mixed cluster kernel's RMS force difference from the double one
    is below its estimate (parameters["estimated_error_float"]) and not 5x below it, and the
    energies agree to 1e-6 relative."""
    rank, size = comm.Get_rank(), comm.Get_size()
    w = water_box(target_atoms=1500, seed=3)
    mine = np.arange(len(w.charges))[rank::size]
    ids = mine.astype(np.int64)

    def run(precision, layout):
        p = pmewald.PME(w.box, 9.0, tolerance=1e-4, comm=comm, skin=1.0, precision=precision,
                        pair_layout=layout, alpha=0.34, mesh=(32, 32, 32))
        p.compute(w.positions[mine], w.charges[mine], ids)
        return p.compute(w.positions[mine], w.charges[mine], ids), p.parameters

    rd, _ = run("double", "clusters")
    rm, pm = run("mixed", "clusters")
    assert pm["pair_layout_used"] == "clusters" and pm["precision"] == "mixed"
    f2 = comm.allreduce(float((rd.forces ** 2).sum()))
    d2 = comm.allreduce(float(((rm.forces - rd.forces) ** 2).sum()))
    measured = np.sqrt(d2 / f2)
    estimate = pm["estimated_error_float"]
    assert 0 < measured <= estimate < 5 * measured, (measured, estimate)
    assert rm.energy == pytest.approx(rd.energy, rel=1e-6)


@pytest.mark.mpi(ranks=[1, 2])
@pytest.mark.timeout(60)
def test_layout_falls_back_and_bad_values_raise_everywhere(comm):
    """alpha * cutoff >= 8 (beyond the vector kernels): the list evaluates by atoms, with the
    same result; a bad pair_layout raises ValueError naming it on every rank, as does one
    that differs between ranks."""
    rank, size = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(rank)
    pos, q = rng.uniform(0, 15, size=(30, 3)), rng.uniform(-1, 1, size=30)
    wide = _solver(comm, ORTHO, "clusters", alpha=9.0 / CUTOFF)
    ref = _solver(comm, ORTHO, "atoms", alpha=9.0 / CUTOFF)
    for _ in range(2):
        r, r0 = wide.compute(pos, q), ref.compute(pos, q)
    assert wide.parameters["pair_layout_used"] == "atoms"
    assert r.energy == pytest.approx(r0.energy, rel=1e-12)
    for bad in ("blocks", None, 4):
        with pytest.raises(ValueError, match="pair_layout"):
            pmewald.PME(ORTHO, CUTOFF, mesh=(12, 12, 12), comm=comm, pair_layout=bad)
    if size > 1:
        with pytest.raises(ValueError, match="pair_layout"):
            pmewald.PME(ORTHO, CUTOFF, mesh=(12, 12, 12), comm=comm,
                        pair_layout="clusters" if rank else "atoms")


def test_rational_ewald_corrections_against_erf():
    """The mixed cluster kernel's rational corrections (alpha r <= 5; pair_math.hpp):
    V(z) = erf(sqrt z) / sqrt z and F(z) = (V(z) - 2 / sqrt(pi) e^-z) / z over [0, 25]
    within 12 float ulps relative (the fits 0.8 ulp, float Horner sums and the division the
    rest; measured 7.7), computed in float (not exact), and z outside the range refused."""
    import math

    from pmewald import _core

    rs = _core._testing.realspace
    ulp = 2.0 ** -24
    z = np.linspace(0.0, 25.0, 20001)
    f, v = rs.ewald_corrections_float(z)
    x = np.sqrt(z[1:])
    ref_v = np.concatenate([[2 / math.sqrt(math.pi)], [math.erf(t) / t for t in x]])
    # F by its series below z = 0.5 (the difference of V and the exponential cancels there)
    series = [sum((-1) ** (n + 1) * t ** (n - 1) / math.factorial(n - 1) * 2 / (2 * n + 1) for n in range(1, 30))
              * 2 / math.sqrt(math.pi) for t in z]
    direct = (ref_v - 2 / math.sqrt(math.pi) * np.exp(-z)) / np.where(z > 0, z, 1.0)
    ref_f = np.where(z < 0.5, series, direct)
    err_f, err_v = np.abs(f / ref_f - 1).max() / ulp, np.abs(v / ref_v - 1).max() / ulp
    assert err_f <= 12 and err_v <= 12, (err_f, err_v)
    assert err_f > 0.5 and err_v > 0.5
    with pytest.raises(ValueError, match=r"\[0, 25\]"):
        rs.ewald_corrections_float(np.array([25.5]))


def test_kernel_timings_run_and_refuse_bad_input():
    """benchmarks/pair_kernels.py's measurements: positive, finite times per pair and per lane
    for both precisions, a positive FMA rate on 4, 8 or 16 lanes; a bad precision or count
    raises ValueError."""
    from pmewald import _core

    rs = _core._testing.realspace
    for precision in ("double", "mixed"):
        atom, cluster, short = rs.kernel_timings(precision, 5)
        assert 0 < atom < 1e4 and 0 < cluster < 1e4 and 0 < short < 1e4
    rate, lanes = rs.fma_rate(0.01)
    assert rate > 0 and lanes in (4, 8, 16)
    with pytest.raises(ValueError, match="precision"):
        rs.kernel_timings("single", 5)
    with pytest.raises(ValueError, match="reps"):
        rs.kernel_timings("double", 0)


@pytest.mark.mpi(ranks=[1, 2])
@pytest.mark.timeout(60)
def test_solver_switches_layout_between_calls(comm):
    """The C++ solver's set_pair_layout (collective): the next call rebuilds its list in the
    new layout, with the same result to 1e-12, and back again."""
    from pmewald import _core

    rank, size = comm.Get_rank(), comm.Get_size()
    n = 120
    pos, q = _neutral_charges_in(TRICLINIC, n, np.random.default_rng(5))
    mine = np.arange(n)[rank::size]
    ids = mine.astype(np.int64)
    ex = np.zeros((0, 2), dtype=np.int64)
    s = _core.PMESolver(comm, TRICLINIC, [12, 12, 12], 5, 3.2 / CUTOFF, CUTOFF, "ad", "nonblocking", 1.0, True,
                        skin=SKIN)
    ref = s.compute(pos[mine], q[mine], ids, ex, False)
    assert s.pair_layout == "atoms" and s.pair_layout_used == "atoms"
    for layout in ("clusters", "atoms"):
        s.set_pair_layout(layout)
        r = s.compute(pos[mine], q[mine], ids, ex, False)
        assert s.pair_layout == layout and s.pair_layout_used == layout
        assert r["energy"] == pytest.approx(ref["energy"], rel=1e-12)
        _close(comm, np.asarray(r["forces"]), np.asarray(ref["forces"]), layout)
    with pytest.raises(ValueError, match="pair_layout"):
        s.set_pair_layout("rows")


@pytest.mark.mpi(ranks=[1, 2, 3])
@pytest.mark.timeout(120)
def test_auto_layout_times_both_and_keeps_the_faster(comm):
    """pair_layout="auto" with the mixed kernel: the list's first four calls evaluate by
    clusters, atoms, clusters, atoms (no rebuild between them), each call's result that of a
    solver with its layout fixed (1e-12); then the layout whose slowest rank's faster call
    was faster is kept, the same on every rank, and a comm_mode="auto" trial waits for it.
    In double "auto" is atoms, without a trial."""
    rank, size = comm.Get_rank(), comm.Get_size()
    w = water_box(target_atoms=2000, seed=4)
    mine = np.arange(len(w.charges))[rank::size]
    pos, q, ids = w.positions[mine].copy(), w.charges[mine], mine.astype(np.int64)
    kw = dict(alpha=0.34, mesh=(24, 24, 24), order=5, comm=comm, skin=1.0, precision="mixed")
    auto = pmewald.PME(w.box, 8.0, pair_layout="auto", comm_mode="auto", **kw)
    fixed = {lay: pmewald.PME(w.box, 8.0, pair_layout=lay, **kw) for lay in ("clusters", "atoms")}
    rng = np.random.default_rng(10 + rank)
    used = []
    for call in range(6):
        r = auto.compute(pos, q, ids)
        p = auto.parameters
        used.append(p["pair_layout_used"])
        ref = fixed[used[-1]].compute(pos, q, ids)
        _close(comm, r.forces, ref.forces, (call, used[-1]))
        assert r.energy == pytest.approx(ref.energy, rel=1e-12)
        assert p["pair_layout"] == "auto"
        if call < 3:
            assert p["pair_layout_trial"] == "trying" and (size == 1 or p["comm_mode_used"] is None)
        pos += rng.normal(scale=0.01, size=pos.shape)  # within the skin: no rebuild
    assert used[:4] == ["clusters", "atoms", "clusters", "atoms"]
    trial = auto.parameters["pair_layout_trial"]
    assert trial["chosen"] == ("atoms" if trial["atoms"] < trial["clusters"] else "clusters")
    assert used[4:] == [trial["chosen"]] * 2
    assert all(t == trial for t in comm.allgather(trial))
    assert auto.timings()["pair_list_builds"] == 1
    if size > 1:
        assert auto.parameters["comm_mode_used"] is None  # the mode trial began after the layouts'
    assert pmewald.PME(w.box, 8.0, alpha=0.34, mesh=(24, 24, 24), comm=comm, skin=1.0).parameters[
        "pair_layout"] == "auto"
    d = pmewald.PME(w.box, 8.0, alpha=0.34, mesh=(24, 24, 24), comm=comm, skin=1.0, precision="double")
    d.compute(pos, q, ids)
    assert d.parameters["pair_layout_used"] == "atoms" and d.parameters["pair_layout_trial"] is None
