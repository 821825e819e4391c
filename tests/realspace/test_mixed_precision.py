"""The mixed-precision pair kernel (cpp/realspace/pair_kernel_mixed.cpp, PME(precision=...)):
its float erfc over the kernel's range, its pairs against the double kernel's, whole systems
(random charges, water with exclusions) within the stated error bound
(``estimated_error_float``) on 1-4 ranks, fresh search and pair list, the automatic choice
(double at tight tolerances, mixed at loose ones, the measured error below the tolerance),
and bad values refused."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

import pmewald
from pmewald import _core, systems

rs = _core._testing.realspace
ULP = 2.0 ** -24
BOX = np.array([[18.0, 0.0, 0.0], [2.0, 17.5, 0.0], [-1.5, 1.0, 18.5]])  # triclinic
CUTOFF = 7.0


def test_float_erfc_over_its_range():
    """erfc(x) and exp(-x^2) of the mixed kernel on [0, 8) within 8 and 4 float ulps of
    the double values (measured 5.75 and 2.70 at most, 1.34 and 0.75 RMS), and the range
    enforced."""
    x = np.linspace(0.0, 8.0, 40001)[:-1]
    e, g = rs.erfc_mixed(x)
    ref_e = np.array([math.erfc(v) for v in x])
    ref_g = np.exp(-x * x)
    err_e = np.abs(e / ref_e - 1).max() / ULP
    err_g = np.abs(g / ref_g - 1).max() / ULP
    assert err_e <= 8.0, err_e
    assert err_g <= 4.0, err_g
    assert err_e > 0.5  # really computed in float
    with pytest.raises(ValueError, match=r"\[0, 8\)"):
        rs.erfc_mixed(np.array([8.0]))


def _pairs(rng, n, offset, rc=10.0, rmin=0.8):
    d = rng.uniform(-rc, rc, (4 * n, 3))
    r = np.linalg.norm(d, axis=1)
    d = d[(r < rc) & (r > rmin)][:n]
    ri = np.array(offset)
    return ri, ri - d, rng.uniform(-1, 1, len(d))


@pytest.mark.parametrize("alpha", [0.2, 0.35, 0.7])
def test_kernel_pairs_against_double(alpha):
    """Far from the origin (positions 1e3 A, separations subtracted in double): each
    pair's force within 12 ulps of the double kernel's (RMS within 3), the energy, virial
    and force on i to 1e-6, and the mixed kernel's 11th sum that of |f_pair|^2."""
    rng = np.random.default_rng(5)
    ri, rj, qj = _pairs(rng, 250, (1234.5, -987.25, 2048.125), rc=min(10.0, 7.9 / alpha))
    fd, ad = rs.pair_batch(ri, 0.9, rj, qj, alpha)
    fm, am = rs.pair_batch(ri, 0.9, rj, qj, alpha, precision="mixed")
    rel = np.linalg.norm(fm - fd, axis=1) / np.linalg.norm(fd, axis=1)
    assert rel.max() <= 12 * ULP and math.sqrt((rel ** 2).mean()) <= 3 * ULP, (rel.max() / ULP,)
    assert abs(am[0] / ad[0] - 1) <= 1e-6
    scale = np.abs(ad[1:10]).max()
    assert np.abs(am[1:10] - ad[1:10]).max() <= 1e-6 * scale
    assert len(ad) == 10 and len(am) == 11
    assert am[10] == pytest.approx(float((fd ** 2).sum()), rel=1e-6)


def test_every_simd_version_of_the_mixed_kernel():
    """The baseline version (4 float lanes) agrees with this CPU's to float rounding."""
    rng = np.random.default_rng(8)
    ri, rj, qj = _pairs(rng, 101, (50.0, 60.0, 70.0))
    here = rs.pair_batch(ri, 1.0, rj, qj, 0.35, precision="mixed")[0]
    code = ("import sys, numpy as np; from pmewald import _core; d = np.load(sys.argv[1]); "
            "np.save(sys.argv[2], _core._testing.realspace.pair_batch(d['ri'], 1.0, d['rj'], d['qj'], 0.35, "
            "precision='mixed')[0])")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        np.savez(os.path.join(tmp, "in.npz"), ri=ri, rj=rj, qj=qj)
        out = os.path.join(tmp, "out.npy")
        subprocess.run([sys.executable, "-c", code, os.path.join(tmp, "in.npz"), out], check=True, timeout=100,
                       env=dict(os.environ, PMEWALD_SIMD="baseline"))
        base = np.load(out)
    rel = np.linalg.norm(base - here, axis=1) / np.linalg.norm(here, axis=1)
    assert rel.max() <= 4 * ULP


def _water():
    return systems.water_box(target_atoms=900, seed=4)


def _random():
    return systems.random_charges(600, BOX, seed=6, min_distance=1.0)


def _split(s, comm):
    rank, size = comm.Get_rank(), comm.Get_size()
    mine = np.arange(rank, s.n_atoms, size)  # interleaved: every rank's atoms everywhere
    ex = s.exclusions[rank::size] if len(s.exclusions) else np.zeros((0, 2), dtype=np.int64)
    return s.positions[mine], s.charges[mine], s.ids[mine], ex


def _rel(comm, a, b):
    num = comm.allreduce(float(((a - b) ** 2).sum()))
    return math.sqrt(num / comm.allreduce(float((b ** 2).sum())))


def _fixed(s, **kw):
    cut = min(CUTOFF, 0.45 * float(np.linalg.norm(s.box, axis=1).min()))
    return dict(box=s.box, cutoff=cut, alpha=3.3 / cut, mesh=(20, 20, 20), order=5, **kw)


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
def test_water_within_the_stated_bound(comm):
    """Water with its exclusions on 1-4 ranks (_within_bound)."""
    _within_bound(comm, _water(), pair_list=True)


@pytest.mark.mpi(ranks=[1, 2])
def test_random_charges_within_the_stated_bound(comm):
    """Random charges on 1 and 2 ranks (_within_bound)."""
    _within_bound(comm, _random(), pair_list=False)


def _within_bound(comm, s, pair_list):
    """Mixed against double at the same parameters, on this communicator: the RMS force
    difference below estimated_error_float (the stated bound) and above a fifth of it (the
    model is not idle pessimism); energy and virial to 1e-6; within twice the bound of the
    mixed result on one rank (another split of the pairs, other roundings); and with
    pair_list the reused list's call at moved positions within the bound too."""
    from mpi4py import MPI

    pos, q, ids, ex = _split(s, comm)
    kw = _fixed(s)
    box, cut = kw.pop("box"), kw.pop("cutoff")
    pd = pmewald.PME(box, cut, comm=comm, skin=0, precision="double", **kw)
    dbl = pd.compute(pos, q, ids=ids, exclusions=ex)
    pm = pmewald.PME(box, cut, comm=comm, skin=0, precision="mixed", **kw)
    mix = pm.compute(pos, q, ids=ids, exclusions=ex)
    assert pm.parameters["precision"] == "mixed"
    bound = pm.parameters["estimated_error_float"] / mix.rms_force
    measured = _rel(comm, mix.forces, dbl.forces)
    assert 0.2 * bound <= measured <= bound, (measured, bound)
    assert 1e-9 < bound < 1e-5
    assert abs(mix.energy / dbl.energy - 1) <= 1e-6
    assert np.abs(mix.virial - dbl.virial).max() <= 1e-6 * np.abs(dbl.virial).max()
    # estimated_error holds the float part in quadrature.
    p = pm.parameters
    total = math.sqrt(p["estimated_error_real"] ** 2 + p["estimated_error_reciprocal"] ** 2
                      + p["estimated_error_float"] ** 2)
    assert mix.estimated_error_absolute == pytest.approx(total, rel=1e-12)
    # One rank with all atoms (rank 0 computes it, every rank checks).
    got = comm.gather((mix.forces, ids))
    one_rank = None
    if comm.Get_rank() == 0:
        r1 = pmewald.PME(box, cut, comm=MPI.COMM_SELF, skin=0, precision="mixed", **kw).compute(
            s.positions, s.charges, ids=s.ids, exclusions=s.exclusions)
        f_n = np.zeros_like(r1.forces)
        for f, where in got:
            f_n[np.searchsorted(s.ids, where)] = f
        one_rank = _rel(MPI.COMM_SELF, f_n, r1.forces)
    assert comm.bcast(one_rank) <= 2 * bound
    if not pair_list:
        return
    # The reused pair list (skin): mixed on its stored pairs, at a moved configuration.
    lst = pmewald.PME(box, cut, comm=comm, skin=1.0, precision="mixed", **kw)
    lst.compute(pos, q, ids=ids, exclusions=ex)
    moved = pos + np.random.default_rng(comm.Get_rank()).normal(scale=0.05, size=pos.shape)
    rl = lst.compute(moved, q, ids=ids, exclusions=ex)
    assert lst.timings()["pair_list_builds"] == 1
    rd = pd.compute(moved, q, ids=ids, exclusions=ex)
    assert _rel(comm, rl.forces, rd.forces) <= lst.parameters["estimated_error_float"] / rl.rms_force


@pytest.mark.timeout(300)
def test_auto_picks_by_tolerance():
    """precision="auto" on water: double at 1e-6 (the float part, ~3e-7, would be more than
    a tenth of it), mixed at 1e-3, each result within its tolerance of a tight double
    reference and the choice reported; an explicit mesh keeps double; the default is double."""
    from mpi4py import MPI

    s = _water()
    cut = _fixed(s)["cutoff"]
    run = dict(ids=s.ids, exclusions=s.exclusions)
    ref = pmewald.PME(s.box, cut, tolerance=1e-8, comm=MPI.COMM_SELF, precision="double", skin=0)
    f_ref = ref.compute(s.positions, s.charges, **run).forces
    chosen = {}
    for tol in (1e-3, 1e-6):
        pm = pmewald.PME(s.box, cut, tolerance=tol, comm=MPI.COMM_SELF, skin=0, precision="auto")
        assert pm.parameters["precision"] is None  # not decided before the first call
        res = pm.compute(s.positions, s.charges, **run)
        chosen[tol] = pm.parameters["precision"]
        assert _rel(MPI.COMM_SELF, res.forces, f_ref) <= tol
        if chosen[tol] == "mixed":
            assert pm.parameters["estimated_error_float"] / res.rms_force <= 0.1 * tol * 1.5
        else:
            assert pm.parameters["estimated_error_float"] == 0.0
    assert chosen == {1e-3: "mixed", 1e-6: "double"}
    explicit = pmewald.PME(s.box, cut, mesh=(20, 20, 20), comm=MPI.COMM_SELF, precision="auto")
    assert explicit.parameters["precision"] == "double"
    assert pmewald.PME(s.box, cut, comm=MPI.COMM_SELF).parameters["precision"] == "double"  # the default


def test_bad_precision_refused():
    for bad in ("single", "Mixed", None, 1, True):
        with pytest.raises(ValueError, match="precision must be 'auto', 'double' or 'mixed'"):
            pmewald.PME(BOX, CUTOFF, precision=bad)
    with pytest.raises(ValueError, match="alpha \\* cutoff < 8"):
        pmewald.PME(BOX, CUTOFF, alpha=9.0 / CUTOFF, precision="mixed")
    with pytest.raises(ValueError, match="precision"):
        rs.pair_batch(np.zeros(3), 1.0, np.ones((2, 3)), np.ones(2), 0.35, precision="half")
