"""Direct reciprocal-space Ewald sum for the single-rank kernel tests (tests/pme/test_kernels.py,
tests/tuning/test_error_estimates.py): every m != 0 once, Gaussian units, in NumPy; with the
random neutral systems and boxes those tests use.
"""

import math

import numpy as np

BOXES = {
    "cubic": np.diag([10.0, 10.0, 10.0]),
    "triclinic": np.array([[10.0, 0.0, 0.0], [6.0, 9.0, 0.0], [4.0, -3.0, 8.0]]),
}


# ----------------------------------------------------------------------------
# direct reciprocal Ewald sum (Gaussian units, every m != 0 once)
# ----------------------------------------------------------------------------
def direct_reciprocal(box, pos, q, alpha, kc=1.0, tol=1e-17):
    """E, F, W (= -dE/d strain) and phi_i = dE/dq_i of
    E = k/(2 pi V) sum_{m!=0} exp(-pi^2 |m~|^2/alpha^2)/|m~|^2 |S(m)|^2."""
    box = np.asarray(box, float)
    recip = np.linalg.inv(box)
    V = abs(np.linalg.det(box))
    h = 1.0 / np.linalg.norm(recip, axis=0)
    mt_max = alpha * math.sqrt(-math.log(tol)) / math.pi
    M = np.ceil(mt_max * h).astype(int) + 1
    grids = np.meshgrid(*[np.arange(-M[d], M[d] + 1) for d in range(3)], indexing="ij")
    m = np.stack(grids, -1).reshape(-1, 3)
    m = m[np.any(m != 0, axis=1)]
    mt = m @ recip.T
    m2 = np.einsum("ij,ij->i", mt, mt)
    keep = m2 <= mt_max**2
    m, mt, m2 = m[keep], mt[keep], m2[keep]
    ph = 2 * np.pi * ((pos @ recip) @ m.T)
    c, s = np.cos(ph), np.sin(ph)
    sr, si = q @ c, q @ s
    f = kc / (2 * np.pi * V) * np.exp(-np.pi**2 * m2 / alpha**2) / m2
    em = f * (sr**2 + si**2)
    E = em.sum()
    g = 2 * q[:, None] * (-s * sr + c * si) * f
    F = -(g @ (2 * np.pi * mt))
    coef = 2 * (1 + np.pi**2 * m2 / alpha**2) / m2
    W = E * np.eye(3) - np.einsum("m,ma,mb->ab", em * coef, mt, mt)
    phi = 2 * (c * sr + s * si) @ f
    return E, F, W, phi


def random_system(n, box, seed):
    rng = np.random.default_rng(seed)
    pos = rng.random((n, 3)) @ box
    q = rng.choice([-1.0, 1.0], n)
    q -= q.mean()
    return pos, q


def rms(a):
    return math.sqrt(np.mean(np.sum(np.asarray(a) ** 2, axis=1)))
