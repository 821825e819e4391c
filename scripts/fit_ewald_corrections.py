"""The rational fits of the float cluster kernel's Ewald corrections (cpp/realspace/pair_math.hpp,
kEwaldCorrF / kEwaldCorrV): ``python scripts/fit_ewald_corrections.py`` (needs mpmath and numpy,
not the package's dependencies: ``pip install mpmath``).

With z = alpha^2 r^2 the real-space pair terms are
    erfc(alpha r) / r                                  = 1 / r   - alpha   V(z),
    (erfc(alpha r) / r + 2 alpha / sqrt(pi) e^-z) / r^2 = 1 / r^3 - alpha^3 F(z),
where V(z) = erf(sqrt z) / sqrt z and F(z) = (V(z) - 2 / sqrt(pi) e^-z) / z are smooth and
positive (V(0) = 2 / sqrt(pi), F(0) = 4 / (3 sqrt(pi))). GROMACS's nbnxm kernels evaluate the same
split (its "analytical Ewald correction"); these fits are our own: P(z) / Q(z), Q(0) = 1, on
[0, Z] (Z = 25, alpha r <= 5), relative least squares at Chebyshev nodes (40-digit references),
re-weighted towards the largest errors (Lawson) to approach the minimax fit. Prints the
coefficients (C++), and the max and RMS relative error of the exact coefficients and of the
float coefficients evaluated in float (Horner), the kernel's arithmetic.
"""

from __future__ import annotations

import argparse

import mpmath as mp
import numpy as np

mp.mp.dps = 40


def V(z):
    z = mp.mpf(z)
    if z == 0:
        return 2 / mp.sqrt(mp.pi)
    x = mp.sqrt(z)
    return mp.erf(x) / x


def F(z):
    z = mp.mpf(z)
    if z < mp.mpf("1e-30"):
        return 4 / (3 * mp.sqrt(mp.pi))
    return (V(z) - 2 / mp.sqrt(mp.pi) * mp.exp(-z)) / z


def nodes(Z: float, n: int = 1500) -> np.ndarray:
    t = np.cos(np.pi * (np.arange(n) + 0.5) / n)
    return np.sort(np.concatenate([(t + 1) / 2 * Z, [0.0, Z]]))


def fit(y: np.ndarray, zs: np.ndarray, Z: float, n: int, m: int, iters: int = 60):
    """P (degree n) / Q (degree m, Q(0) = 1) with min max |P/Q / y - 1|, approximately."""
    zz = zs / Z  # scaled for conditioning, unscaled at the end
    Ap = np.vander(zz, n + 1, increasing=True)
    Aq = np.vander(zz, m + 1, increasing=True)
    q, w = np.ones_like(zz), np.ones_like(zz)
    for it in range(iters):
        s = w / (np.abs(y) * q)  # linearised relative error (P - y Q) / (y Q_previous)
        c, *_ = np.linalg.lstsq(np.hstack([Ap, -y[:, None] * Aq[:, 1:]]) * s[:, None], y * s, rcond=None)
        p, qc = c[: n + 1], np.concatenate([[1.0], c[n + 1:]])
        q = Aq @ qc
        err = np.abs((Ap @ p) / q / y - 1)
        if it >= 5:
            w = w * np.sqrt(err / err.max()) + 1e-300
            w /= w.max()
    return p / Z ** np.arange(n + 1), qc / Z ** np.arange(m + 1)


def horner_f32(c: np.ndarray, z: np.ndarray) -> np.ndarray:
    acc = np.full_like(z, c[-1])
    for a in c[-2::-1]:
        acc = acc * z + a
    return acc


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zmax", type=float, default=25.0)
    ap.add_argument("--degrees", type=int, nargs=4, default=[6, 6, 6, 5], metavar=("FN", "FD", "VN", "VD"))
    args = ap.parse_args(argv)
    zs = nodes(args.zmax)
    z32 = zs.astype(np.float32)
    fn, fd, vn, vd = args.degrees
    for name, f, n, m in (("F", F, fn, fd), ("V", V, vn, vd)):
        y = np.array([float(f(z)) for z in zs])
        p, q = fit(y, zs, args.zmax, n, m)
        exact = np.abs(np.polyval(p[::-1], zs) / np.polyval(q[::-1], zs) / y - 1)
        p32, q32 = p.astype(np.float32), q.astype(np.float32)
        flt = np.abs((horner_f32(p32, z32) / horner_f32(q32, z32)).astype(np.float64) / y - 1)
        print(f"// {name}: P degree {n}, Q degree {m} on [0, {args.zmax:g}]: max relative error "
              f"{exact.max():.2e} (exact coefficients), {flt.max():.2e} (float, RMS {np.sqrt((flt ** 2).mean()):.2e})")
        print(f"constexpr float kEwaldCorr{name}P[{n + 1}] = {{{', '.join(f'{c:.9e}f' for c in p32)}}};")
        print(f"constexpr float kEwaldCorr{name}Q[{m + 1}] = {{{', '.join(f'{c:.9e}f' for c in q32)}}};")


if __name__ == "__main__":
    main()
