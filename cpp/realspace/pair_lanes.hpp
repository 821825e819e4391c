// What the double (pair_kernel.cpp) and mixed-precision (pair_kernel_mixed.cpp)
// erfc pair kernels share: constants, the coincident-pair guard, the gather and
// padding of the partners, and the double sums over lanes. Internal to those two
// files (vector types of GCC/Clang, inlined into each instruction set's version).
#pragma once

#include "realspace/pair_kernel.hpp"

#define PMEWALD_INLINE inline __attribute__((always_inline))

// The batch kernels' and block kernels' arguments (pair_kernel.hpp's contracts).
#define PMEWALD_BATCH_ARGS                                                                         \
  int n, const int *js, double xi, double yi, double zi, double kqi, const double *x, const double *y, \
      const double *z, const double *q, double alpha, double *fx, double *fy, double *fz, double *acc
#define PMEWALD_BATCH_PASS n, js, xi, yi, zi, kqi, x, y, z, q, alpha, fx, fy, fz, acc
#define PMEWALD_BLOCK_ARGS                                                                                 \
  int n, double *bx, double *by, double *bz, double *bq, double xi, double yi, double zi, double kqi,       \
      double alpha, double *fx, double *fy, double *fz, double *acc
#define PMEWALD_BLOCK_PASS n, bx, by, bz, bq, xi, yi, zi, kqi, alpha, fx, fy, fz, acc

namespace pmewald {
inline namespace realspace {
namespace lanes {

constexpr double kTwoOverSqrtPi = 1.12837916709551257390;
// exp by range reduction: y = n ln2 + r, n rounded by adding 1.5 * 2^52.
constexpr double kLog2e = 1.44269504088896340736;
constexpr double kLn2Hi = 6.93147180369123816490e-01;
constexpr double kLn2Lo = 1.90821492927058770002e-10;
constexpr double kRoundMagic = 6755399441055744.0;

// Two atoms closer than this (alpha r below 1e-10; rc / 1e10 or so) are taken as one
// position: r is computed as sqrt(r2 - coincident2), NaN for them, so the call's
// result is not finite and the caller names the pair (python/pmewald/pme/solver.py). For
// any other pair r2 - coincident2 rounds to r2 (exact below ~1e-2 rc apart), so the
// results do not change.
inline double coincident2(double alpha) { return 1e-20 / (alpha * alpha); }

template <class V, class S>
PMEWALD_INLINE V splat(S a) {
  return V{} + a;
}

// Partners js gathered into contiguous scratch (room for kMaxBatch).
PMEWALD_INLINE void gather(int n, const int* __restrict js, const double* __restrict x, const double* __restrict y,
                           const double* __restrict z, const double* __restrict q, double* __restrict bx,
                           double* __restrict by, double* __restrict bz, double* __restrict bq) {
  for (int b = 0; b < n; ++b) {
    const int j = js[b];
    bx[b] = x[j];
    by[b] = y[j];
    bz[b] = z[j];
    bq[b] = q[j];
  }
}

// The lanes past n up to a multiple of L: a zero charge 1 / alpha away, which
// contributes nothing, whatever the units; returns that multiple.
template <int L>
PMEWALD_INLINE int pad(int n, double* __restrict bx, double* __restrict by, double* __restrict bz,
                       double* __restrict bq, double xi, double yi, double zi, double alpha) {
  const int padded = (n + L - 1) / L * L;
  for (int b = n; b < padded; ++b) {
    bx[b] = xi + 1.0 / alpha;
    by[b] = yi;
    bz[b] = zi;
    bq[b] = 0.0;
  }
  return padded;
}

// The sums of PairBatchAcc over the lanes of double vectors V (W lanes); without
// Virial the pairs' virial is left to the caller (it stays zero).
template <class V, int W, bool Virial = true>
struct PairSums {
  V e = splat<V>(0.0), w00 = e, w01 = e, w02 = e, w11 = e, w12 = e, w22 = e, fx = e, fy = e, fz = e, f2 = e;
  // One register of pairs: energy, force on i (fr d) and virial (fr d_a d_b); stores
  // fr d into (ox, oy, oz)[b..b + W).
  PMEWALD_INLINE void add(V epair, V fr, V dx, V dy, V dz, int b, double* __restrict ox, double* __restrict oy,
                          double* __restrict oz) {
    const V fxb = fr * dx, fyb = fr * dy, fzb = fr * dz;
    __builtin_memcpy(ox + b, &fxb, sizeof(V));
    __builtin_memcpy(oy + b, &fyb, sizeof(V));
    __builtin_memcpy(oz + b, &fzb, sizeof(V));
    e += epair;
    fx += fxb;
    fy += fyb;
    fz += fzb;
    if constexpr (Virial) {
      w00 += fxb * dx;
      w01 += fxb * dy;
      w02 += fxb * dz;
      w11 += fyb * dy;
      w12 += fyb * dz;
      w22 += fzb * dz;
    }
  }
  // Adds the first `count` sums (PairBatchAcc's order) to acc.
  PMEWALD_INLINE void into(double* acc, int count) const {
    const V* v[PairBatchAcc::kSize] = {&e, &w00, &w11, &w22, &w01, &w02, &w12, &fx, &fy, &fz, &f2};
    for (int k = 0; k < count; ++k) {
      double t = 0;
      for (int l = 0; l < W; ++l) t += (*v[k])[l];
      acc[k] += t;
    }
  }
};

}  // namespace lanes
}  // namespace realspace
}  // namespace pmewald
