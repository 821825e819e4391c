"""Local (single-rank, no MPI) smooth-PME kernels: B-splines, moduli and the
reciprocal pipeline (spread -> FFT -> solve -> gather) of cpp/pme/.

The reciprocal part is checked against a compact direct Ewald k-space sum
(tests/kspace_reference.py; its energy against ``pmewald.reference``). The error
estimates and the parameter choice of cpp/tuning/ are tests/tuning/test_error_estimates.py.
"""

import numpy as np
import pytest

from pmewald._core import tuning as T
from pmewald._core._testing import pme as K

from kspace_reference import BOXES, direct_reciprocal, random_system, rms

ORDERS = range(3, 11)


# ----------------------------------------------------------------------------
# B-splines and moduli
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("p", ORDERS)
def test_bspline_partition_of_unity_and_derivative(p):
    w = np.linspace(0.0, 0.999, 37)
    M, dM = K.bspline_weights(p, w)
    assert np.allclose(M.sum(1), 1.0, atol=1e-14)
    assert np.allclose(dM.sum(1), 0.0, atol=1e-13)
    assert np.all(M >= -1e-16)
    # values against the scalar M_p: weight j is M_p(w + p-1-j)
    for i, wi in enumerate(w[::6]):
        ref = [K.bspline_value(p, wi + p - 1 - j) for j in range(p)]
        assert np.allclose(M[6 * i], ref, atol=1e-15)
    # symmetry M_p(x) = M_p(p - x)
    xs = np.linspace(0.01, p - 0.01, 23)
    assert np.allclose([K.bspline_value(p, x) for x in xs],
                       [K.bspline_value(p, p - x) for x in xs], atol=1e-14)
    # derivative by central finite differences (inside one polynomial piece)
    h = 1e-6
    wc = np.linspace(0.05, 0.95, 13)
    Mp, _ = K.bspline_weights(p, wc + h)
    Mm, _ = K.bspline_weights(p, wc - h)
    _, dMc = K.bspline_weights(p, wc)
    assert np.allclose((Mp - Mm) / (2 * h), dMc, atol=1e-8)


@pytest.mark.parametrize("p", ORDERS)
@pytest.mark.parametrize("Km", [10, 13, 16])
def test_bspline_moduli_direct(p, Km):
    if Km < p:
        pytest.skip("mesh smaller than order")
    b = K.bspline_moduli(Km, p)
    Mk = np.array([K.bspline_value(p, k + 1.0) for k in range(p - 1)])
    m = np.arange(Km)
    den = np.abs(np.exp(2j * np.pi * np.outer(m, np.arange(p - 1)) / Km) @ Mk) ** 2
    zero = den < 1e-7
    fixed = den.copy()
    idx = np.nonzero(zero)[0]
    fixed[idx] = 0.5 * (den[(idx - 1) % Km] + den[(idx + 1) % Km])
    assert np.allclose(b, 1.0 / fixed, rtol=1e-12)
    assert np.all(np.isfinite(b)) and np.all(b > 0)
    # zeros occur exactly for odd order and even K, at m = K/2
    assert list(idx) == ([Km // 2] if (p % 2 == 1 and Km % 2 == 0) else [])
    # Poisson summation: the denominator equals |sum_j U(m + jK)|^2 with U the
    # Fourier transform of M_p, sinc^p(pi x) exp(-i pi p x), x = (m + jK)/K
    j = np.arange(-200, 201)
    x = (m[:, None] + j[None, :] * Km) / Km
    euler = np.sum(np.sinc(x) ** p * (-1.0) ** (p * j[None, :]), axis=1) ** 2
    assert np.allclose(den[~zero], euler[~zero], rtol=1e-5, atol=1e-12)


# ----------------------------------------------------------------------------
# the reciprocal pipeline against the direct sum
# ----------------------------------------------------------------------------
@pytest.fixture(scope="module", params=list(BOXES))
def system(request):
    box = BOXES[request.param]
    pos, q = random_system(120, box, seed=7)
    alpha = 0.35
    ref = direct_reciprocal(box, pos, q, alpha)
    return request.param, box, pos, q, alpha, ref


@pytest.mark.parametrize("diff", ["ad", "ik"])
def test_reciprocal_matches_direct_sum(system, diff):
    name, box, pos, q, alpha, (E0, F0, W0, phi0) = system
    E, F, W, phi = K.serial_reference(box, pos, q, alpha, (48, 45, 50), 8, diff)
    assert abs(E - E0) <= 1e-9 * abs(E0)
    assert rms(F - F0) <= 1e-8 * rms(F0)
    assert np.abs(W - W0).max() <= 1e-9 * np.abs(W0).max()
    assert np.allclose(W, W.T)
    assert np.abs(phi - phi0).max() <= 1e-8 * np.abs(phi0).max()
    assert E == pytest.approx(0.5 * q @ phi, rel=1e-12)
    # Coulomb constant scales everything
    E2, F2, W2, _ = K.serial_reference(box, pos, q, alpha, (48, 45, 50), 8, diff, 14.4)
    assert E2 == pytest.approx(14.4 * E, rel=1e-13)
    assert np.allclose(F2, 14.4 * F, rtol=1e-12, atol=1e-14)


def test_energy_matches_pmewald_reference():
    reference = pytest.importorskip("pmewald.reference")
    box = BOXES["triclinic"]
    pos, q = random_system(60, box, seed=3)
    alpha = 0.4
    res = reference.ewald(box, pos, q, alpha=alpha)
    E, *_ = K.serial_reference(box, pos, q, alpha, (50, 50, 50), 8, "ad")
    assert E == pytest.approx(res.terms["reciprocal"], rel=1e-9)


@pytest.mark.parametrize("diff", ["ad", "ik"])
def test_ik_and_ad_converge(system, diff):
    name, box, pos, q, alpha, (E0, F0, W0, phi0) = system
    errs = []
    for Km in (12, 20, 32):
        _, F, _, _ = K.serial_reference(box, pos, q, alpha, (Km, Km, Km), 5, diff)
        errs.append(rms(F - F0) / rms(F0))
    assert errs[0] > errs[1] > errs[2]
    assert errs[2] < 1e-5


@pytest.mark.parametrize("name", list(BOXES))
def test_ad_forces_are_exact_gradient_of_pme_energy(name):
    box = BOXES[name]
    pos, q = random_system(30, box, seed=11)
    alpha, mesh, p = 0.4, (12, 10, 11), 5  # coarse: PME energy != Ewald energy
    E, F, _, _ = K.serial_reference(box, pos, q, alpha, mesh, p, "ad")
    h = 1e-4
    for i in (0, 7, 19):
        for a in range(3):
            xp = pos.copy()
            xp[i, a] += h
            xm = pos.copy()
            xm[i, a] -= h
            Ep = K.serial_reference(box, xp, q, alpha, mesh, p, "ad")[0]
            Em = K.serial_reference(box, xm, q, alpha, mesh, p, "ad")[0]
            fd = -(Ep - Em) / (2 * h)
            assert fd == pytest.approx(F[i, a], rel=1e-7, abs=1e-8 * np.abs(F).max())


@pytest.mark.parametrize("name", list(BOXES))
def test_virial_matches_strain_derivative(name):
    box = BOXES[name]
    pos, q = random_system(30, box, seed=5)
    alpha, mesh, p = 0.4, (12, 12, 12), 4
    _, _, W, _ = K.serial_reference(box, pos, q, alpha, mesh, p, "ad")
    h = 1e-6
    fd = np.zeros((3, 3))
    for a in range(3):
        for b in range(3):
            eps = np.zeros((3, 3))
            eps[a, b] = h
            Ep = K.serial_reference(box @ (np.eye(3) + eps).T, pos @ (np.eye(3) + eps).T,
                                     q, alpha, mesh, p, "ad")[0]
            Em = K.serial_reference(box @ (np.eye(3) - eps).T, pos @ (np.eye(3) - eps).T,
                                     q, alpha, mesh, p, "ad")[0]
            fd[a, b] = -(Ep - Em) / (2 * h)
    assert np.allclose(fd, W, rtol=1e-6, atol=1e-7 * np.abs(W).max())


def test_translation_invariance():
    box = BOXES["triclinic"]
    pos, q = random_system(80, box, seed=9)
    alpha, mesh, p = 0.35, (24, 24, 24), 6
    E, F, W, _ = K.serial_reference(box, pos, q, alpha, mesh, p, "ad")
    # shift by whole mesh cells (and lattice images): exact invariance
    shift = 3 * box[0] / mesh[0] - 5 * box[1] / mesh[1] + 2 * box[2]
    E1, F1, W1, _ = K.serial_reference(box, pos + shift, q, alpha, mesh, p, "ad")
    assert E1 == pytest.approx(E, rel=1e-12)
    assert np.allclose(F1, F, atol=1e-11 * np.abs(F).max())
    # arbitrary rigid shift: changes only at the discretisation error level
    rng = np.random.default_rng(1)
    for _ in range(3):
        d = rng.random(3) @ box
        E2, F2, _, _ = K.serial_reference(box, pos + d, q, alpha, mesh, p, "ad")
        assert abs(E2 - E) < 1e-6 * abs(E)
        assert rms(F2 - F) < 1e-5 * rms(F)
    # positions far outside the cell are wrapped
    E3, *_ = K.serial_reference(box, pos - 7 * box[2] + 4 * box[0], q, alpha, mesh, p, "ad")
    assert E3 == pytest.approx(E, rel=1e-10)


# ----------------------------------------------------------------------------
# pieces the distributed solver uses: bricks, sub-box k-space, storage order
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("p", ORDERS)
def test_spread_weights_are_the_scalar_bsplines(p):
    """The stencils' weights, computed eight atoms at a time (cpp/pme/stencils.cpp), spread 13
    atoms (a block and a partial one) exactly as the scalar B-splines of each atom's own
    fractional offset put them on the mesh (bspline_weights, one atom at a time)."""
    box = np.diag([10.0, 11.0, 12.5])
    mesh = (20, 21, 23)
    rng = np.random.default_rng(p)
    pos = rng.uniform(0.0, 1.0, (13, 3)) * np.diag(box)
    q = rng.uniform(-1.0, 1.0, 13)
    grid, eb, _ = K.spread_brick(box, pos, q, mesh, p, ((0, 0, 0), mesh))
    ref = np.zeros_like(grid)
    u = pos / np.diag(box) * np.array(mesh)
    cell = np.floor(u).astype(int)
    for i in range(13):
        w = [K.bspline_weights(p, np.array([u[i, d] - cell[i, d]]))[0][0] for d in range(3)]
        # the extended box starts p - 1 below the brick: the stencil's first point is the cell
        sl = tuple(slice(cell[i, d], cell[i, d] + p) for d in range(3))
        ref[sl] += q[i] * np.einsum("a,b,c->abc", *w)
    assert np.abs(grid - ref).max() <= 1e-14 * np.abs(ref).max()


def test_spread_bricks_sum_to_full_mesh():
    box = BOXES["triclinic"]
    pos, q = random_system(70, box, seed=2)
    mesh, p = (12, 10, 9), 5
    full, eb_full, _ = K.spread_brick(box, pos, q, mesh, p, ((0, 0, 0), mesh))
    assert eb_full == ((-(p - 1),) * 3, mesh)

    def fold(grid, eb):
        out = np.zeros(mesh)
        lo = eb[0]
        ix = [(np.arange(grid.shape[d]) + lo[d]) % mesh[d] for d in range(3)]
        np.add.at(out, np.ix_(*ix), grid)
        return out

    ref = fold(full, eb_full)
    assert ref.sum() == pytest.approx(q.sum(), abs=1e-12)
    cells = K.mesh_cells(box, pos, mesh)
    assert cells.min() >= 0 and np.all(cells < np.array(mesh))
    total = np.zeros(mesh)
    splits = [(0, 5, 12), (0, 4, 10), (0, 9)]
    for x0, x1 in zip(splits[0][:-1], splits[0][1:]):
        for y0, y1 in zip(splits[1][:-1], splits[1][1:]):
            brick = ((x0, y0, 0), (x1, y1, 9))
            own = ((cells[:, 0] >= x0) & (cells[:, 0] < x1) & (cells[:, 1] >= y0) & (cells[:, 1] < y1))
            g, eb, _ = K.spread_brick(box, pos[own], q[own], mesh, p, brick)
            assert eb == ((x0 - p + 1, y0 - p + 1, -p + 1), (x1, y1, 9))
            total += fold(g, eb)
    assert np.allclose(total, ref, atol=1e-14)
    # atomic, plain and coloured (the threaded path, x slabs of p planes) adds give the same grid
    ga, _, _ = K.spread_brick(box, pos, q, mesh, p, ((0, 0, 0), mesh), mode="atomic")
    gp, _, _ = K.spread_brick(box, pos, q, mesh, p, ((0, 0, 0), mesh), mode="plain")
    gc, _, _ = K.spread_brick(box, pos, q, mesh, p, ((0, 0, 0), mesh), mode="coloured")
    assert np.allclose(ga, full, atol=1e-15) and np.allclose(gp, full, atol=1e-15)
    assert np.allclose(gc, full, atol=1e-15)
    # an atom outside the brick is refused
    with pytest.raises(ValueError, match="outside the brick"):
        K.spread_brick(box, pos, q, mesh, p, ((0, 0, 0), (5, 4, 9)))


@pytest.mark.parametrize("diff", ["ad", "ik"])
def test_kspace_sub_boxes_and_storage_order(diff):
    box = BOXES["triclinic"]
    mesh, alpha, p = (8, 6, 10), 0.5, 4
    rng = np.random.default_rng(4)
    data = rng.normal(size=mesh) + 1j * rng.normal(size=mesh)
    full = ((0, 0, 0), mesh)
    E, W, out = K.kspace_apply(box, mesh, alpha, p, 1.0, full, (0, 1, 2), data.ravel(), diff)
    outs = out if diff == "ik" else (out,)
    outs = [o.reshape(mesh) for o in outs]
    Esum, Wsum = 0.0, np.zeros((3, 3))
    for lo, hi in [((0, 0, 0), (8, 6, 4)), ((0, 0, 4), (8, 3, 10)), ((0, 3, 4), (8, 6, 10))]:
        for perm in [(0, 1, 2), (2, 0, 1), (1, 2, 0)]:
            sub = data[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]].transpose(perm)
            e, w, o = K.kspace_apply(box, mesh, alpha, p, 1.0, (lo, hi), perm,
                                     np.ascontiguousarray(sub).ravel(), diff)
            os_ = o if diff == "ik" else (o,)
            for got, want in zip(os_, outs):
                want_sub = want[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]].transpose(perm)
                assert np.allclose(got.reshape(want_sub.shape), want_sub, rtol=1e-13, atol=0)
            if perm == (0, 1, 2):
                Esum += e
                Wsum += w
    assert Esum == pytest.approx(E, rel=1e-13)
    assert np.allclose(Wsum, W, rtol=1e-12)


@pytest.mark.parametrize("diff", ["ad", "ik"])
@pytest.mark.parametrize("half", [0, 2])
@pytest.mark.parametrize("mesh", [(8, 6, 10), (7, 9, 5), (6, 5, 8), (4, 3, 4)])
def test_kspace_half_spectrum_matches_full_spectrum(diff, half, mesh):
    """SpectrumLayout.half_axis: the r2c half spectrum (axis x or z halved) gives the
    full c2c spectrum's energy, virial and (after the c2r) fields, in a triclinic box,
    where Nyquist frequencies (+K/2 for both m and -m) make G(m) != G(-m)."""
    box = BOXES["triclinic"]
    alpha, p = 0.9, 3
    a = np.random.default_rng(sum(mesh)).normal(size=mesh)
    full = ((0, 0, 0), mesh)
    E, W, out = K.kspace_apply(box, mesh, alpha, p, 1.0, full, (0, 1, 2), np.fft.fftn(a).ravel(), diff)
    fields = [np.fft.ifftn(o.reshape(mesh)).real for o in (out if diff == "ik" else (out,))]
    axes = tuple(d for d in range(3) if d != half) + (half,)   # numpy halves the last axis given
    spec = np.fft.rfftn(a, axes=axes)
    H = spec.shape
    inverse = lambda o: np.fft.irfftn(o.reshape(H), s=[mesh[d] for d in axes], axes=axes)  # noqa: E731
    e, w, o = K.kspace_apply(box, mesh, alpha, p, 1.0, ((0, 0, 0), H), (0, 1, 2), spec.ravel(), diff,
                             half_axis=half)
    assert e == pytest.approx(E, rel=1e-13)
    assert np.abs(w - W).max() <= 1e-12 * np.abs(W).max()
    scale = max(np.abs(f).max() for f in fields)
    for got, want in zip(o if diff == "ik" else (o,), fields):
        assert np.abs(inverse(got) - want).max() <= 1e-12 * scale
    # the 1/N folded in: outputs scaled by 1/N, energy and virial unchanged
    e2, w2, o2 = K.kspace_apply(box, mesh, alpha, p, 1.0, ((0, 0, 0), H), (0, 1, 2), spec.ravel(), diff,
                                half_axis=half, unnormalised_backward=True)
    assert e2 == e and np.array_equal(w2, w)
    N = np.prod(mesh)
    for x, y in zip(o2 if diff == "ik" else (o2,), o if diff == "ik" else (o,)):
        assert np.allclose(x * N, y, rtol=1e-14, atol=0)
    # sub-boxes of the half spectrum in any storage order add up
    hx = H[0]
    Esum, Wsum = 0.0, np.zeros((3, 3))
    parts = [((0, 0, 0), (hx, H[1], H[2] // 2)), ((0, 0, H[2] // 2), (hx // 2 + 1, H[1], H[2])),
             ((hx // 2 + 1, 0, H[2] // 2), H)]
    for lo, hi in parts:
        for perm in [(0, 1, 2), (2, 0, 1), (1, 2, 0)]:
            sub = spec[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]]
            es, ws, os_ = K.kspace_apply(box, mesh, alpha, p, 1.0, (lo, hi), perm,
                                         np.ascontiguousarray(sub.transpose(perm)).ravel(), diff,
                                         half_axis=half)
            wants = o if diff == "ik" else (o,)
            for got, want in zip(os_ if diff == "ik" else (os_,), wants):
                want_sub = want.reshape(H)[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]].transpose(perm)
                assert np.allclose(got.reshape(want_sub.shape), want_sub, rtol=1e-13, atol=0)
            if perm == (0, 1, 2):
                Esum += es
                Wsum += ws
    assert Esum == pytest.approx(E, rel=1e-13)
    assert np.abs(Wsum - W).max() <= 1e-12 * np.abs(W).max()


def test_kspace_half_spectrum_box_must_fit():
    box = BOXES["cubic"]
    with pytest.raises(ValueError, match="half spectrum"):
        K.kspace_apply(box, (8, 8, 8), 0.4, 5, 1.0, ((0, 0, 0), (6, 8, 8)), (0, 1, 2),
                       np.zeros(6 * 64, complex), "ad", half_axis=0)
    e, w, out = K.kspace_apply(box, (8, 8, 8), 0.4, 5, 1.0, ((0, 0, 0), (5, 8, 8)), (0, 1, 2),
                               np.zeros(5 * 64, complex), "ad", half_axis=0)
    assert e == 0.0


def test_bad_input_raises_value_error():
    box = BOXES["cubic"]
    pos, q = random_system(5, box, seed=0)
    with pytest.raises(ValueError):
        K.serial_reference(box, pos, q, 0.4, (16, 16, 16), 2, "ad")
    with pytest.raises(ValueError):
        K.serial_reference(box, pos, q, 0.4, (16, 16, 16), 11, "ad")
    with pytest.raises(ValueError):
        K.serial_reference(box, pos, q, 0.4, (4, 16, 16), 5, "ad")
    with pytest.raises(ValueError):
        K.serial_reference(box, pos, q, 0.4, (16, 16, 16), 5, "xy")
    with pytest.raises(ValueError):
        K.serial_reference(np.zeros((3, 3)), pos, q, 0.4, (16, 16, 16), 5, "ad")
    with pytest.raises(ValueError):
        K.serial_reference(box, pos, q[:3], 0.4, (16, 16, 16), 5, "ad")
    bad = pos.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError):
        K.serial_reference(box, bad, q, 0.4, (16, 16, 16), 5, "ad")
    with pytest.raises(ValueError):
        K.serial_reference(box, pos, q, -1.0, (16, 16, 16), 5, "ad")
    with pytest.raises(ValueError):
        K.serial_reference(box, pos, np.full(5, np.inf), 0.4, (16, 16, 16), 5, "ad")
    # the next call after errors works, and an empty system is fine
    E, F, W, phi = K.serial_reference(box, np.zeros((0, 3)), np.zeros(0), 0.4, (8, 8, 8), 5, "ik")
    assert E == 0.0 and F.shape == (0, 3) and np.all(W == 0) and phi.shape == (0,)
    e, w, out = K.kspace_apply(box, (8, 8, 8), 0.4, 5, 1.0, ((0, 0, 0), (0, 8, 8)), (0, 1, 2),
                               np.zeros(0, complex), "ad")
    assert e == 0.0 and out.size == 0
    with pytest.raises(ValueError):
        T.choose_parameters(box, 4.0, 1e-14, 5.0, 5, "ad", order=3)  # unreachable
    with pytest.raises(ValueError):
        T.choose_parameters(box, 4.0, -1.0, 5.0, 5, "ad")
