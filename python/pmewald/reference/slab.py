"""Plain NumPy 2-D periodic Ewald sum (a slab: periodic in x and y, open in z), used to
validate ``PME(..., slab=True)``.

The classic 2-D Ewald sum (Parry 1975, Heyes, Barber and Clarke 1977; the form of Yeh and
Berkowitz 1999, eq. 2), with Coulomb constant ``k``, in-plane cell area ``A``, pairs over
all atoms ``i, j`` (``i == j`` included in the mesh-like sums) and the 2-D lattice ``n``::

    E = E_real + E_reciprocal + E_k0 + E_self

    E_real       = k/2 sum_{i,j,n}' q_i q_j erfc(alpha r_ijn) / r_ijn
    E_reciprocal = k pi/(2A) sum_{G != 0} sum_{i,j} q_i q_j cos(G . rho_ij) f_G(z_ij) / |G|
    f_G(z)       = exp(G z) erfc(G/(2 alpha) + alpha z) + exp(-G z) erfc(G/(2 alpha) - alpha z)
    E_k0         = -k pi/A sum_{i,j} q_i q_j (z_ij erf(alpha z_ij) + exp(-alpha^2 z_ij^2)/(alpha sqrt(pi)))
    E_self       = -k alpha/sqrt(pi) sum_i q_i^2

with ``G`` the in-plane reciprocal vectors, ``rho_ij`` the in-plane and ``z_ij`` the normal
part of ``r_i - r_j``. It is independent of ``alpha`` (the tests check to 1e-10); for a net
charge ``Q`` the divergent, alpha-independent constant ``k pi Q^2/(A G)`` at ``G -> 0`` is
dropped (no background: the energy of the charged slab in vacuum up to that constant).
Forces are the analytical gradients (``df_G/dz = G (exp(G z) erfc(..+..) - exp(-G z)
erfc(..-..))``, ``d(z erf + exp/(alpha sqrt pi))/dz = erf(alpha z)``).

Cutoffs as :mod:`pmewald.reference`: ``s = sqrt(ln(100 / accuracy))``, real space
``s / alpha`` over all in-plane images, reciprocal ``|G| < 2 alpha s``. The products
``exp(G z) erfc(..)`` are formed directly; ``alpha`` is chosen so that ``alpha * thickness``
stays moderate, and arguments that would overflow are refused. Small systems only
(``O(N^2 x number of G)``). Depends on NumPy and :func:`pmewald.reference.erfc` only, no
code of the solver.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import erfc

__all__ = ["Ewald2DResult", "ewald2d", "in_plane_cell"]

_SQRT_PI = math.sqrt(math.pi)


@dataclass
class Ewald2DResult:
    """Result of :func:`ewald2d`: ``energy``, ``forces`` (n, 3) ``= -dE/dr_i``, ``terms``
    (``real``, ``reciprocal``, ``k0``, ``self``; they sum to ``energy``) and the ``alpha``
    used."""

    energy: float
    forces: np.ndarray
    terms: dict = field(default_factory=dict)
    alpha: float = float("nan")


def in_plane_cell(box):
    """The 2x2 in-plane cell (rows a, b) of a slab box: a 3x3 array whose first two rows
    lie in the xy plane (the third row is ignored), or a (2, 2) array."""
    b = np.asarray(box, dtype=float)
    if b.shape == (3,):
        b = np.diag(b)
    if b.shape == (3, 3):
        if abs(b[0, 2]) > 1e-12 * np.abs(b).max() or abs(b[1, 2]) > 1e-12 * np.abs(b).max():
            raise ValueError("the first two rows of a slab box must lie in the xy plane")
        b = b[:2, :2]
    if b.shape != (2, 2) or not np.isfinite(b).all() or abs(np.linalg.det(b)) <= 1e-12 * np.abs(b).max() ** 2:
        raise ValueError("the in-plane cell must be two finite, independent vectors in the xy plane")
    return b


def _erf(x):
    return 1.0 - erfc(x)


def ewald2d(box, positions, charges, *, coulomb_constant=1.0, alpha=None, accuracy=1e-14) -> Ewald2DResult:
    """2-D periodic Ewald energy and forces of point charges (periodic in x and y).

    Parameters
    ----------
    box : array (3, 3), (3,) or (2, 2)
        Rows: the in-plane lattice vectors a, b (z components zero); a third row is ignored.
    positions : array (n, 3)
        Cartesian positions; x and y are wrapped, z is used as given.
    charges : array (n,)
        Any total charge (see the module docstring).
    alpha : float, optional
        Splitting parameter; default ``max(3.5 / sqrt(A), 1 / thickness)`` bounded so
        that ``alpha * thickness <= 8``.
    """
    cell = in_plane_cell(box)
    pos = np.asarray(positions, dtype=float).reshape(-1, 3)
    q = np.asarray(charges, dtype=float).reshape(-1)
    if len(q) != len(pos):
        raise ValueError("positions and charges differ in length")
    k = float(coulomb_constant)
    area = abs(float(np.linalg.det(cell)))
    thick = float(np.ptp(pos[:, 2])) if len(pos) else 0.0
    if alpha is None:
        alpha = 3.5 / math.sqrt(area)
        if thick > 0:
            alpha = min(alpha, 8.0 / thick)
    alpha = float(alpha)
    s = math.sqrt(math.log(100.0 / accuracy))
    rc, kc = s / alpha, 2.0 * alpha * s
    if kc * thick > 700 or alpha * thick > 26:
        raise ValueError("alpha too large for the slab thickness (exp(G z) would overflow)")

    inv = np.linalg.inv(cell)
    frac = pos[:, :2] @ inv
    frac -= np.floor(frac)
    rho = frac @ cell  # wrapped in-plane positions
    d_rho = rho[:, None, :] - rho[None, :, :]  # (n, n, 2): i - j
    d_z = pos[:, 2][:, None] - pos[:, 2][None, :]
    qq = q[:, None] * q[None, :]
    forces = np.zeros((len(q), 3))

    # real space: all in-plane images within rc (+ one cell for the wrapped displacement)
    heights = area / np.linalg.norm(cell[::-1], axis=1)  # spacing of the lines along a, b
    nmax = np.ceil(rc / heights).astype(int) + 1
    e_real = 0.0
    for i1 in range(-nmax[0], nmax[0] + 1):
        for i2 in range(-nmax[1], nmax[1] + 1):
            shift = i1 * cell[0] + i2 * cell[1]
            dx = d_rho + shift
            r2 = (dx * dx).sum(axis=2) + d_z * d_z
            mask = r2 > 0
            if i1 == 0 and i2 == 0:
                mask &= ~np.eye(len(q), dtype=bool)
            mask &= r2 < (rc + 1e-9) ** 2
            if not mask.any():
                continue
            r = np.sqrt(r2[mask])
            ec = erfc(alpha * r)
            e_real += 0.5 * float((qq[mask] * ec / r).sum())
            g = np.zeros_like(r2)
            g[mask] = qq[mask] * (ec / r + 2 * alpha / _SQRT_PI * np.exp(-alpha * alpha * r * r)) / (r * r)
            forces[:, :2] += (g[:, :, None] * dx).sum(axis=1)
            forces[:, 2] += (g * d_z).sum(axis=1)

    # reciprocal, G != 0 (every G; cos is even)
    rec = 2.0 * math.pi * inv.T  # rows: reciprocal vectors, a_i . g_j = 2 pi delta_ij
    mmax = np.ceil(kc * np.linalg.norm(cell, axis=1) / (2 * math.pi)).astype(int) + 1
    m = np.stack(np.meshgrid(np.arange(-mmax[0], mmax[0] + 1), np.arange(-mmax[1], mmax[1] + 1),
                             indexing="ij"), axis=-1).reshape(-1, 2)
    gv = m @ rec
    gn = np.linalg.norm(gv, axis=1)
    keep = (gn > 0) & (gn < kc)
    gv, gn = gv[keep], gn[keep]
    e_rec = 0.0
    zf = d_z.ravel()
    for g_vec, g in zip(gv, gn):
        phase = d_rho @ g_vec  # (n, n)
        c, sn = np.cos(phase), np.sin(phase)
        ep, em = np.exp(g * zf), np.exp(-g * zf)
        cp, cm = erfc(g / (2 * alpha) + alpha * zf), erfc(g / (2 * alpha) - alpha * zf)
        f = (ep * cp + em * cm).reshape(d_z.shape)
        fp = (g * (ep * cp - em * cm)).reshape(d_z.shape)
        pre = math.pi / (area * g)
        e_rec += 0.5 * pre * float((qq * c * f).sum())
        # F_i = -k q_i sum_j q_j grad h(r_ij), h = pre cos(G.rho) f(z)
        forces[:, :2] += pre * ((qq * sn * f).sum(axis=1))[:, None] * g_vec[None, :]
        forces[:, 2] -= pre * (qq * c * fp).sum(axis=1)

    # G = 0
    az = alpha * zf
    gz = (zf * _erf(az) + np.exp(-az * az) / (alpha * _SQRT_PI)).reshape(d_z.shape)
    e_k0 = -math.pi / area * float((qq * gz).sum())
    forces[:, 2] += 2 * math.pi / area * (qq * _erf(az).reshape(d_z.shape)).sum(axis=1)

    e_self = -alpha / _SQRT_PI * float((q * q).sum())
    terms = {"real": k * e_real, "reciprocal": k * e_rec, "k0": k * e_k0, "self": k * e_self}
    return Ewald2DResult(energy=sum(terms.values()), forces=k * forces, terms=terms, alpha=alpha)
