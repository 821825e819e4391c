"""Plain NumPy direct Ewald summation, used to validate the PME solver.

This module is deliberately simple and slow-but-exact: a textbook Ewald sum
with real-space and reciprocal-space cutoffs chosen from a requested accuracy
so that results are converged to about 1e-13 relative.  It depends on NumPy
and the Python standard library only.

Longer than 600 lines because it is one independent reference: its own erfc, real and
reciprocal sums and exclusion terms, sharing no code with the solver it validates but the cell
algebra of ``pmewald.geometry.cell`` (heights, image shifts, minimum image: tested on its own against a
brute-force image search), which the solver's input checks use too (splitting it would only add
imports between its parts).

Conventions
-----------
Box
    ``box`` is a 3x3 array whose *rows* are the lattice vectors ``a``, ``b``,
    ``c`` (a length-3 array means an orthorhombic box).  Any non-degenerate
    cell is accepted, including strongly skewed triclinic cells that do not
    follow the LAMMPS/GROMACS "restricted" form.  Positions may lie anywhere;
    they are wrapped into the cell internally.

Energy
    With Coulomb constant ``k`` (see :mod:`pmewald.units`) the energy is::

        E = E_real + E_reciprocal + E_self + E_background + E_exclusion

        E_real       = k/2 sum_{i,j,n}' q_i q_j erfc(alpha r_ijn) / r_ijn
        E_reciprocal = k/(2V) sum_{G != 0} 4 pi / G^2 exp(-G^2/(4 alpha^2)) |S(G)|^2
        E_self       = -k alpha / sqrt(pi) sum_i q_i^2
        E_background = -k pi Q^2 / (2 V alpha^2),     Q = sum_i q_i
        E_exclusion  = -k sum_{(i,j) excluded} q_i q_j / r_ij

    where ``r_ijn = |r_i - r_j + n|`` over lattice vectors ``n`` (the prime
    drops ``i == j, n == 0``), ``S(G) = sum_j q_j exp(i G.r_j)``, and the
    background term is the energy of a uniform neutralising background
    (the tin-foil, net-charge-corrected Ewald energy used by OpenMM and
    LAMMPS).  For an excluded pair the periodic Ewald total is kept except
    for exactly ``k q_i q_j / r_ij`` with ``r_ij`` the *minimum-image*
    distance; that removed amount is reported as ``terms["exclusion"]``.
    Numerically, the minimum image of an excluded pair enters the total as
    ``-k q_i q_j erf(alpha r)/r`` (equal to ``erfc/r - 1/r``) so that the
    large intramolecular terms do not cancel; the reported ``terms`` sum to
    ``energy`` up to rounding of the largest term.

Cutoffs
    With ``s = sqrt(ln(100 / accuracy))`` the real-space cutoff is
    ``s / alpha`` (all lattice images within it are summed; the image range
    follows from the perpendicular heights of the cell) and the
    reciprocal-space cutoff is ``|G| < 2 alpha s``.  When ``alpha`` is not
    given it is chosen to minimise an operation-count estimate.

Forces
    ``forces[i] = -dE/dr_i``.

Virial
    The virial is ``W = -dE/d(eps)`` where the system is strained
    homogeneously by ``1 + eps``: every position ``r -> (1 + eps) r`` and
    every lattice vector (row of ``box``) ``h_k -> (1 + eps) h_k``, i.e.
    ``box -> box @ (1 + eps).T``.  Component-wise
    ``W_ab = -dE/d(eps_ab)``.  For a pair potential this is the familiar
    ``W_ab = sum_{pairs} r_ij,a F_ij,b`` (``r_ij = r_i - r_j``, ``F_ij`` the
    force on ``i`` due to ``j``).  The virial is symmetric.  Because the
    Coulomb energy is homogeneous of degree -1 in length (``E(lambda) =
    E / lambda`` under isotropic scaling), ``trace(W) == E``; this holds for
    every term combination including the net-charge background and
    exclusions.  The pressure contribution is ``P = trace(W) / (3 V)`` and
    the stress (ASE sign) is ``-W / V``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..geometry.cell import MAX_GRID as _MAX_GRID
from ..geometry.cell import as_box, cell_heights, image_shifts, minimum_image, minimum_image_shifts

__all__ = ["EwaldResult", "ewald", "erfc", "minimum_image", "cell_heights"]

_SQRT_PI = math.sqrt(math.pi)
_TWO_OVER_SQRT_PI = 2.0 / _SQRT_PI

# Work-array size (number of float64 elements per temporary) used for chunking.
_CHUNK_ELEMENTS = 1 << 20


# --------------------------------------------------------------------------
# Complementary error function
# --------------------------------------------------------------------------

_ERFC_SERIES_TERMS = 22          # erf power series for 0 <= x < 0.5
_ERFC_TAYLOR_LO = 0.5            # Taylor tables cover [0.5, 3.0)
_ERFC_TAYLOR_HI = 3.0
_ERFC_TAYLOR_STEP = 1.0 / 32.0
_ERFC_TAYLOR_TERMS = 17
_ERFC_CF_TERMS = 48              # continued fraction for x >= 3


def _build_erfc_taylor_table():
    """Taylor coefficients of erfc about the nodes x0 = 0.5 + (m + 1/2) step.

    ``c[m, n] = erfc^(n)(x0_m) / n!``.  For ``n >= 1``,
    ``erfc^(n)(x) = -(2/sqrt(pi)) (-1)^(n-1) H_{n-1}(x) exp(-x^2)`` with
    physicists' Hermite polynomials ``H``.
    """
    nodes = np.arange(_ERFC_TAYLOR_LO + 0.5 * _ERFC_TAYLOR_STEP, _ERFC_TAYLOR_HI,
                      _ERFC_TAYLOR_STEP)
    table = np.empty((nodes.size, _ERFC_TAYLOR_TERMS))
    for m, x0 in enumerate(nodes):
        x0 = float(x0)
        table[m, 0] = math.erfc(x0)
        g = math.exp(-x0 * x0) * _TWO_OVER_SQRT_PI
        h_prev, h_cur = 0.0, 1.0  # H_{-1} (unused), H_0
        fact = 1.0
        for n in range(1, _ERFC_TAYLOR_TERMS):
            # h_cur = H_{n-1}(x0)
            fact *= n
            sign = -1.0 if (n - 1) % 2 == 0 else 1.0
            table[m, n] = sign * g * h_cur / fact
            h_prev, h_cur = h_cur, 2.0 * x0 * h_cur - 2.0 * (n - 1) * h_prev
    return nodes, table


_ERFC_NODES, _ERFC_TABLE = _build_erfc_taylor_table()


def _exp_minus_square(x):
    """``exp(-x*x)`` without the rounding error of forming ``x*x`` (x >= 0)."""
    xh = np.floor(x * 4096.0) / 4096.0  # few significant bits: xh*xh is exact
    return np.exp(-xh * xh) * np.exp(-(x - xh) * (x + xh))


def _erf_series(xs, expm):
    """erf(x) for small x >= 0 (below _ERFC_TAYLOR_LO), given exp(-x^2):
    2/sqrt(pi) exp(-x^2) sum_n 2^n x^(2n+1) / (2n+1)!!  (no cancellation)."""
    x2 = 2.0 * xs * xs
    term = xs.copy()
    acc = xs.copy()
    for n in range(1, _ERFC_SERIES_TERMS):
        term = term * x2 / (2 * n + 1)
        acc += term
    return _TWO_OVER_SQRT_PI * expm * acc


def _erfc_nonneg(x):
    """erfc(x) and exp(-x^2) for a 1-D float array with x >= 0."""
    out = np.empty_like(x)
    expm = _exp_minus_square(x)

    small = x < _ERFC_TAYLOR_LO
    if np.any(small):
        out[small] = 1.0 - _erf_series(x[small], expm[small])

    mid = (~small) & (x < _ERFC_TAYLOR_HI)
    if np.any(mid):
        xm = x[mid]
        idx = np.minimum(((xm - _ERFC_TAYLOR_LO) / _ERFC_TAYLOR_STEP).astype(np.intp),
                         _ERFC_NODES.size - 1)
        h = xm - _ERFC_NODES[idx]
        coef = _ERFC_TABLE[idx]
        acc = coef[:, -1].copy()
        for n in range(_ERFC_TAYLOR_TERMS - 2, -1, -1):
            acc = acc * h + coef[:, n]
        out[mid] = acc

    large = x >= _ERFC_TAYLOR_HI
    if np.any(large):
        xl = x[large]
        # erfc(x) = exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))
        t = np.zeros_like(xl)
        for k in range(_ERFC_CF_TERMS, 0, -1):
            t = (0.5 * k) / (xl + t)
        out[large] = expm[large] / (_SQRT_PI * (xl + t))
    return out, expm


def _erf_nonneg(x):
    """erf(x) and exp(-x^2) for a 1-D float array with x >= 0, accurate for small x."""
    ec, expm = _erfc_nonneg(x)
    out = 1.0 - ec
    small = x < _ERFC_TAYLOR_LO
    if np.any(small):
        out[small] = _erf_series(x[small], expm[small])
    return out, expm


def erfc(x):
    """Vectorised complementary error function accurate to ~1e-15 relative.

    Pure NumPy: a positive-term power series for ``|x| < 0.5``, tabulated
    Taylor expansions on ``[0.5, 3)`` and a continued fraction beyond.
    Negative arguments use ``erfc(-x) = 2 - erfc(x)``.

    Parameters
    ----------
    x : array_like
        Real argument(s).

    Returns
    -------
    numpy.ndarray or float
        ``erfc(x)`` with the shape of ``x`` (a float for scalar input).
    """
    xa = np.asarray(x, dtype=float)
    flat = xa.ravel()
    neg = flat < 0
    val, _ = _erfc_nonneg(np.abs(flat))
    val = np.where(neg, 2.0 - val, val)
    nan = np.isnan(flat)
    if np.any(nan):
        val[nan] = np.nan
    val = val.reshape(xa.shape)
    if np.ndim(x) == 0:
        return float(val)
    return val


# --------------------------------------------------------------------------
# Ewald sum
# --------------------------------------------------------------------------

@dataclass
class EwaldResult:
    """Result of a direct Ewald summation.

    Attributes
    ----------
    energy : float
        Total electrostatic energy (the sum of ``terms`` up to rounding).
    forces : numpy.ndarray, shape (n, 3)
        ``-dE/dr_i``.
    virial : numpy.ndarray, shape (3, 3)
        ``W = -dE/d(eps)`` (see module docstring); ``trace(W) == energy``.
    terms : dict
        Energy contributions ``"real"``, ``"reciprocal"``, ``"self"``,
        ``"background"`` and ``"exclusion"``.
    alpha : float
        Ewald splitting parameter used.
    real_cutoff : float
        Real-space cutoff used.
    kspace_cutoff : float
        Reciprocal-space cutoff ``|G|`` used.
    """

    energy: float
    forces: np.ndarray
    virial: np.ndarray
    terms: dict = field(default_factory=dict)
    alpha: float = float("nan")
    real_cutoff: float = float("nan")
    kspace_cutoff: float = float("nan")


def _splitting_width(accuracy):
    """Dimensionless cutoff s with alpha*r_cut = s and k_cut = 2*alpha*s."""
    if not (0.0 < accuracy < 1.0):
        raise ValueError("accuracy must be in (0, 1)")
    # exp(-s^2) ~ accuracy / 100: margin for the many pairs/k-vectors near the cutoff.
    return math.sqrt(-math.log(accuracy) + math.log(100.0))


def _choose_alpha(box, vol, n_atoms, s):
    """Pick alpha minimising an operation-count estimate of the two sums."""
    heights = cell_heights(box)
    circ = 0.5 * float(np.max(np.linalg.norm(
        np.array([[1, 1, 1], [1, 1, -1], [1, -1, 1], [-1, 1, 1]], dtype=float) @ box, axis=1)))
    n_pairs = n_atoms * (n_atoms - 1) / 2.0
    hmin = float(np.min(heights))
    best = None
    # alpha such that r_cut ranges from ~0.1 to ~4 box heights
    for alpha in s / (hmin * np.geomspace(0.1, 4.0, 120)):
        rc = s / alpha
        kc = 2.0 * alpha * s
        n_img = (4.0 * math.pi / 3.0) * (rc + circ) ** 3 / vol + 1.0
        n_k = (4.0 * math.pi / 3.0) * kc ** 3 * vol / (2.0 * math.pi) ** 3 / 2.0 + 1.0
        n_inside = (4.0 * math.pi / 3.0) * rc ** 3 / vol
        cost = (max(n_pairs, 1.0) * (n_img + 4.0 * n_inside)
                + 6.0 * max(n_atoms, 1) * n_k + 0.3 * n_k)
        if best is None or cost < best[0]:
            best = (cost, float(alpha))
    return best[1]


def _kvectors(box, kc):
    """Half-space reciprocal vectors 0 < |G| < kc (one of each +-G pair)."""
    recip = 2.0 * math.pi * np.linalg.inv(box).T   # rows b_k, b_k . h_l = 2 pi delta
    lengths = np.linalg.norm(box, axis=1)
    mmax = np.floor(kc * lengths / (2.0 * math.pi)).astype(int)
    if float(np.prod(2.0 * mmax + 1.0)) > _MAX_GRID:
        raise ValueError("reciprocal-space cutoff needs too many k-vectors; "
                         "alpha is too large for this box")
    rngs = [np.arange(-m, m + 1) for m in mmax]
    m = np.stack(np.meshgrid(*rngs, indexing="ij"), axis=-1).reshape(-1, 3)
    half = (m[:, 0] > 0) | ((m[:, 0] == 0) & ((m[:, 1] > 0) | ((m[:, 1] == 0) & (m[:, 2] > 0))))
    m = m[half]
    g = m.astype(float) @ recip
    g2 = np.einsum("ij,ij->i", g, g)
    keep = g2 < kc * kc
    return g[keep], g2[keep]


def _pair_flat_index(i, j, i0, n):
    """Position of pair (i, j), i < j, in the row-major upper triangle of rows i0.."""
    return (i - i0) * (n - 1) - ((i0 + i - 1) * (i - i0)) // 2 + (j - i - 1)


def _real_space(box, frac, q, alpha, rc, skip=None):
    """Real-space energy, forces and virial (Coulomb constant 1).

    ``frac`` are wrapped fractional coordinates.  ``skip`` optionally holds
    ``(I, J, t)``: pairs ``I < J`` whose image ``t`` (index into the shift
    list) is left out of the sum (the minimum images of excluded pairs).
    """
    n = frac.shape[0]
    forces = np.zeros((n, 3))
    virial = np.zeros((3, 3))
    energy = 0.0
    rc2 = rc * rc
    nshifts = image_shifts(box, rc)
    shifts = nshifts @ box
    c_exp = _TWO_OVER_SQRT_PI * alpha

    def pair_terms(r2, qq):
        r = np.sqrt(r2)
        ec, em = _erfc_nonneg(alpha * r)
        e = qq * ec / r
        fscal = (e + qq * c_exp * em) / r2
        return e, fscal

    # atom with its own periodic images: 1/2 sum_i q_i^2 sum_{n != 0} phi(|n|)
    sr2 = np.einsum("ij,ij->i", shifts, shifts)
    sel = (sr2 > 0.0) & (sr2 < rc2)
    if np.any(sel):
        e, fscal = pair_terms(sr2[sel], 1.0)
        q2sum = float(np.dot(q, q))
        energy += 0.5 * q2sum * float(np.sum(e))
        virial += 0.5 * q2sum * np.einsum("i,ij,ik->jk", fscal, shifts[sel], shifts[sel])

    if n < 2:
        return energy, forces, virial, nshifts

    block = max(1, min(n, _CHUNK_ELEMENTS // (4 * n)))
    for i0 in range(0, n - 1, block):
        i1 = min(n - 1, i0 + block)
        ii = np.arange(i0, i1)[:, None]
        jj = np.arange(i0, n)[None, :]
        mask = jj > ii
        I = np.broadcast_to(ii, mask.shape)[mask]
        J = np.broadcast_to(jj, mask.shape)[mask]
        skip_shift = None
        if skip is not None:
            sI, sJ, st = skip
            inblk = (sI >= i0) & (sI < i1) & (st >= 0)
            if np.any(inblk):
                skip_shift = np.full(I.shape[0], -1, dtype=np.intp)
                skip_shift[_pair_flat_index(sI[inblk], sJ[inblk], i0, n)] = st[inblk]
        d = frac[I] - frac[J]
        d -= np.round(d)
        dc = d @ box
        qq_all = q[I] * q[J]
        for t, s in enumerate(shifts):
            v = dc + s
            r2 = np.einsum("ij,ij->i", v, v)
            inside = r2 < rc2
            if skip_shift is not None:
                inside &= skip_shift != t
            hit = np.nonzero(inside)[0]
            if hit.size == 0:
                continue
            v = v[hit]
            e, fscal = pair_terms(r2[hit], qq_all[hit])
            energy += float(np.sum(e))
            fv = fscal[:, None] * v
            for a in range(3):
                forces[:, a] += np.bincount(I[hit], weights=fv[:, a], minlength=n)
                forces[:, a] -= np.bincount(J[hit], weights=fv[:, a], minlength=n)
            virial += v.T @ fv
    return energy, forces, virial, nshifts


def _reciprocal_space(box, vol, pos, q, alpha, kc):
    """Reciprocal-space energy, forces and virial (Coulomb constant 1)."""
    n = pos.shape[0]
    forces = np.zeros((n, 3))
    g, g2 = _kvectors(box, kc)
    if g.shape[0] == 0 or n == 0:
        return 0.0, forces, np.zeros((3, 3))
    # half-space weights: E = sum_half a(G) |S(G)|^2
    a = 4.0 * math.pi / vol * np.exp(-g2 / (4.0 * alpha * alpha)) / g2
    nk = g.shape[0]
    block = max(1, _CHUNK_ELEMENTS // nk)
    s_re = np.zeros(nk)
    s_im = np.zeros(nk)
    for i0 in range(0, n, block):
        ph = pos[i0:i0 + block] @ g.T
        s_re += q[i0:i0 + block] @ np.cos(ph)
        s_im += q[i0:i0 + block] @ np.sin(ph)
    s2 = s_re * s_re + s_im * s_im
    eg = a * s2
    energy = float(np.sum(eg))
    for i0 in range(0, n, block):
        ph = pos[i0:i0 + block] @ g.T
        w = np.sin(ph) * (a * s_re) - np.cos(ph) * (a * s_im)
        forces[i0:i0 + block] = 2.0 * q[i0:i0 + block, None] * (w @ g)
    coef = 2.0 * (1.0 + g2 / (4.0 * alpha * alpha)) / g2
    virial = energy * np.eye(3) - np.einsum("k,ka,kb->ab", eg * coef, g, g)
    return energy, forces, virial


def _check_exclusions(exclusions, n):
    """Validate exclusions; return an (m, 2) int64 array (possibly empty)."""
    if exclusions is None:
        return np.zeros((0, 2), dtype=np.int64)
    ex = np.asarray(exclusions)
    if ex.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if ex.ndim != 2 or ex.shape[1] != 2:
        raise ValueError("exclusions must be an (m, 2) integer array")
    if not np.issubdtype(ex.dtype, np.integer):
        if not np.all(ex == np.round(ex)):
            raise ValueError("exclusions must be integer atom indices")
    ex = ex.astype(np.int64)
    if np.any(ex < 0) or np.any(ex >= n):
        raise ValueError("exclusion index out of range")
    if np.any(ex[:, 0] == ex[:, 1]):
        raise ValueError("an atom cannot be excluded from itself")
    canon = np.sort(ex, axis=1)
    if np.unique(canon, axis=0).shape[0] != canon.shape[0]:
        raise ValueError("duplicate exclusion pairs")
    return canon


def _exclusion_terms(box, frac, q, ex, alpha, rc, nshifts):
    """Excluded pairs (canonical, i < j): removal of q_i q_j / r at minimum image.

    Returns the removed energy ``-sum q_i q_j / r``, the real-space part
    ``sum q_i q_j erfc(alpha r) / r`` of those minimum images (when inside the
    cutoff), the combined ``-q_i q_j erf(alpha r) / r`` energy, forces and
    virial, and the ``(I, J, t)`` triple telling the real-space loop which
    image to leave out.  Coulomb constant 1.
    """
    n = frac.shape[0]
    forces = np.zeros((n, 3))
    if ex.shape[0] == 0:
        return 0.0, 0.0, 0.0, forces, np.zeros((3, 3)), None
    i, j = ex[:, 0], ex[:, 1]
    d = frac[i] - frac[j]          # same arithmetic as the real-space loop
    d -= np.round(d)
    nmin = minimum_image_shifts(box, d)
    v = (d + nmin) @ box
    r2 = np.einsum("ij,ij->i", v, v)
    if np.any(r2 == 0.0):
        raise ValueError("excluded pair at zero distance")
    r = np.sqrt(r2)
    qq = q[i] * q[j]
    e_bare = -float(np.sum(qq / r))
    # index of the minimum image in the real-space shift list (-1: beyond cutoff)
    t = np.full(ex.shape[0], -1, dtype=np.intp)
    lookup = {tuple(row): k for k, row in enumerate(nshifts.astype(np.int64).tolist())}
    for m, row in enumerate(nmin.astype(np.int64).tolist()):
        t[m] = lookup.get(tuple(row), -1)
    # the loop's own distance for that image decides whether it was inside rc
    vloop = d @ box + np.where(t[:, None] >= 0, nmin @ box, 0.0)
    inside = (t >= 0) & (np.einsum("ij,ij->i", vloop, vloop) < rc * rc)
    t[~inside] = -1
    erf_ar, em = _erf_nonneg(alpha * r)
    e_real_part = float(np.sum(np.where(inside, qq * (1.0 - erf_ar) / r, 0.0)))
    # combined potential u = -qq erf(alpha r)/r for images the loop skipped,
    # u = -qq / r for images it never contained (erfc(alpha r) below rounding there)
    g = np.where(inside, erf_ar, 1.0)
    e_comb = -float(np.sum(qq * g / r))
    dg = np.where(inside, _TWO_OVER_SQRT_PI * alpha * em, 0.0)     # r * d(erf)/dr / r
    fscal = qq * (dg - g / r) / r2        # force on i = fscal * v
    fv = fscal[:, None] * v
    for a in range(3):
        forces[:, a] += np.bincount(i, weights=fv[:, a], minlength=n)
        forces[:, a] -= np.bincount(j, weights=fv[:, a], minlength=n)
    virial = v.T @ fv
    return e_bare, e_real_part, e_comb, forces, virial, (i, j, t)


def ewald(box, positions, charges, *, exclusions=None, coulomb_constant=1.0,
          accuracy=1e-14, alpha=None):
    """Direct Ewald sum: energy, forces and virial of periodic point charges.

    Parameters
    ----------
    box : array_like, shape (3, 3) or (3,)
        Lattice vectors as rows; a length-3 array is an orthorhombic box.
        Any non-degenerate triclinic cell is allowed.
    positions : array_like, shape (n, 3)
        Cartesian positions (anywhere; wrapped internally).
    charges : array_like, shape (n,)
        Charges.  A net charge is compensated by a uniform background.
    exclusions : array_like of int, shape (m, 2), optional
        Atom-index pairs whose direct interaction ``k q_i q_j / r_ij``
        (minimum-image ``r_ij``) is removed from the periodic total.
    coulomb_constant : float
        ``k`` of the unit system (see :mod:`pmewald.units`).
    accuracy : float
        Target truncation error, relative to typical term sizes; the
        default gives results converged to about 1e-13 relative.
    alpha : float, optional
        Ewald splitting parameter (inverse length).  Chosen automatically
        to minimise the work when omitted; the result does not depend on
        it beyond the truncation error.

    Returns
    -------
    EwaldResult
        Energy, forces, virial (``W = -dE/d(eps)``, see module docstring)
        and the energy terms.
    """
    b, vol = as_box(box)
    pos = np.asarray(positions, dtype=float)
    if pos.ndim == 1 and pos.size == 3:
        pos = pos.reshape(1, 3)
    if pos.ndim != 2 or pos.shape[1] != 3:
        raise ValueError("positions must have shape (n, 3)")
    n = pos.shape[0]
    q = np.asarray(charges, dtype=float).reshape(-1)
    if q.shape[0] != n:
        raise ValueError("charges must have one entry per position")
    if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(q))):
        raise ValueError("positions and charges must be finite")
    k = float(coulomb_constant)

    s = _splitting_width(float(accuracy))
    if alpha is None:
        alpha = _choose_alpha(b, vol, n, s)
    alpha = float(alpha)
    if not alpha > 0.0:
        raise ValueError("alpha must be positive")
    rc = s / alpha
    kc = 2.0 * alpha * s

    # wrap into the cell (fractional coordinates in [0, 1))
    frac = pos @ np.linalg.inv(b)
    frac -= np.floor(frac)
    pos_w = frac @ b

    ex = _check_exclusions(exclusions, n)
    nshifts = image_shifts(b, rc)
    e_bare, e_ex_real, e_comb, f_ex, w_ex, skip = _exclusion_terms(
        b, frac, q, ex, alpha, rc, nshifts)
    e_loop, f_real, w_real, _ = _real_space(b, frac, q, alpha, rc, skip)
    e_rec, f_rec, w_rec = _reciprocal_space(b, vol, pos_w, q, alpha, kc)
    e_self = -alpha / _SQRT_PI * float(np.dot(q, q))
    qtot = float(np.sum(q))
    e_bg = -math.pi * qtot * qtot / (2.0 * vol * alpha * alpha)

    terms = {
        "real": k * (e_loop + e_ex_real),
        "reciprocal": k * e_rec,
        "self": k * e_self,
        "background": k * e_bg,
        "exclusion": k * e_bare,
    }
    # Excluded minimum images enter as -q_i q_j erf(alpha r)/r rather than as
    # erfc(alpha r)/r - 1/r: the same value, without the cancellation.  The
    # terms therefore sum to the energy up to rounding of the larger terms.
    energy = k * ((e_loop + e_comb) + e_rec + e_self + e_bg)
    forces = k * (f_real + f_rec + f_ex)
    virial = k * (w_real + w_rec + w_ex + e_bg * np.eye(3))
    virial = 0.5 * (virial + virial.T)
    return EwaldResult(energy=float(energy), forces=forces, virial=virial, terms=terms,
                       alpha=alpha, real_cutoff=rc, kspace_cutoff=kc)
