// The pair kernels' arithmetic, shared by the atom-by-atom kernels
// (pair_kernel.cpp, pair_kernel_mixed.cpp) and the cluster-pair kernels
// (cluster_kernel.cpp): erfcx and exp as polynomials on vector types of
// GCC/Clang, double and float. Internal to those files (always inlined into
// each instruction set's version).
#pragma once

#include "realspace/pair_lanes.hpp"

namespace pmewald {
inline namespace realspace {
namespace lanes {

// ---- double ----

// erfcx(x) = exp(x^2) erfc(x) on [0, 8] as a polynomial of degree 21 in
// u = 1.5 t + 0.5, t = (x - 4) / (x + 4) (t in [-1, 1/3] maps to u in [-1, 1]):
// a 60-node Chebyshev interpolation at 40 digits (mpmath) truncated after 22
// terms and converted exactly to powers of u (coefficients all below 0.33).
// Measured max relative error of the double-precision Horner sum 7.7e-16 on
// [0, 8]; tests/realspace/test_realspace.py checks the kernel's erfc and exp(-x^2).
constexpr int kErfcxDegree = 21;
constexpr double kErfcx[kErfcxDegree + 1] = {
    0.25539567631050575,
    -0.3203893855604688,
    0.21603008065150453,
    -0.12130979259423537,
    0.056663898960213906,
    -0.021762555269413487,
    0.006685681777586212,
    -0.0015442591661800585,
    0.0002243981311934595,
    -2.6592099710132757e-06,
    -7.264783812003933e-06,
    1.298919563620421e-06,
    1.1133932035483724e-07,
    -6.69115031790662e-08,
    8.794765330759566e-10,
    3.0317561336361997e-09,
    -1.7519605645626383e-10,
    -1.463790254556094e-10,
    9.987779029581859e-12,
    7.600466893772068e-12,
    -3.399876080761954e-13,
    -3.288344841249953e-13};

// exp(y) for y in [-64.1, 0]: y = n ln2 + r, |r| <= ln2 / 2, degree-13 Taylor
// polynomial of exp(r) (truncation < 2e-16 relative), 2^n from the exponent bits.

template <int L>
struct Vec {
  typedef double D __attribute__((vector_size(8 * L)));
  typedef long long I __attribute__((vector_size(8 * L)));
};

template <class V, int L>
PMEWALD_INLINE V vsqrt(V a) {
  V r;
  for (int l = 0; l < L; ++l) r[l] = __builtin_sqrt(a[l]);  // one sqrtpd per register
  return r;
}

// The polynomials are evaluated as two interleaved Horner chains (even and odd
// powers, in u^2): half the dependency-chain latency of a plain Horner loop,
// which otherwise bounds the kernel (measured: 1.5x faster per pair).
template <class V, class VL>
PMEWALD_INLINE V vexp_neg(V y) {
  const V nd = y * kLog2e + kRoundMagic;
  const V n = nd - kRoundMagic;
  const V r = (y - n * kLn2Hi) - n * kLn2Lo;
  const V r2 = r * r;
  // exp(r) = sum r^k / k!, k = 0..13: even part in r^2, odd part r * (...).
  V pe = splat<V>(1.0 / 479001600.0);  // 1/12!
  pe = pe * r2 + 1.0 / 3628800.0;       // 1/10!
  pe = pe * r2 + 1.0 / 40320.0;         // 1/8!
  pe = pe * r2 + 1.0 / 720.0;           // 1/6!
  pe = pe * r2 + 1.0 / 24.0;            // 1/4!
  pe = pe * r2 + 0.5;                   // 1/2!
  pe = pe * r2 + 1.0;                   // 1/0!
  V po = splat<V>(1.0 / 6227020800.0);  // 1/13!
  po = po * r2 + 1.0 / 39916800.0;      // 1/11!
  po = po * r2 + 1.0 / 362880.0;        // 1/9!
  po = po * r2 + 1.0 / 5040.0;          // 1/7!
  po = po * r2 + 1.0 / 120.0;           // 1/5!
  po = po * r2 + 1.0 / 6.0;             // 1/3!
  po = po * r2 + 1.0;                   // 1/1!
  const V p = pe + r * po;
  const VL ni = (VL)nd - (VL)splat<V>(kRoundMagic);
  return p * (V)((ni + 1023) << 52);
}

template <class V>
PMEWALD_INLINE V verfcx(V x) {
  static_assert(kErfcxDegree == 21, "the even/odd split below is written for degree 21");
  const V u = 1.5 * ((x - 4.0) / (x + 4.0)) + 0.5;
  const V u2 = u * u;
  V pe = splat<V>(kErfcx[20]), po = splat<V>(kErfcx[21]);
#pragma GCC unroll 10
  for (int m = 9; m >= 0; --m) {
    pe = pe * u2 + kErfcx[2 * m];
    po = po * u2 + kErfcx[2 * m + 1];
  }
  return pe + u * po;
}

// ---- float ----

// erfcx(x) = exp(x^2) erfc(x) on [0, 8] as a polynomial of degree 10 in
// v = (8 - x) / (4 (x + 2)) in [0, 1] (v = 1 at x = 0, 0 at x = 8): a relative
// least-squares fit at 50 Chebyshev nodes in 40-digit arithmetic (mpmath),
// rounded to float (max relative error of these float coefficients summed
// exactly: 0.18 float ulp). Evaluated in float (v and the Horner sums rounded):
// 4.3 ulps at most, 1.0 RMS, over [0, 8]. All coefficients below 0.35, the
// large ones positive: no cancellation in the sum (a polynomial in
// (x - 4) / (x + 4) as the double kernel's lost 18 ulps to it near x = 8).
constexpr int kErfcxDegreeF = 10;
constexpr float kErfcxF[kErfcxDegreeF + 1] = {
    6.998516619e-02f, 3.446602523e-01f, 3.063275516e-01f, 2.132299691e-01f,  9.752835333e-02f, -7.503184606e-04f,
    -1.663550548e-02f, -5.350149423e-02f, 5.980363488e-02f, -2.440985478e-02f, 3.762246342e-03f};

template <class V, int L>
PMEWALD_INLINE V vsqrtf(V a) {
  V r;
  for (int l = 0; l < L; ++l) r[l] = __builtin_sqrtf(a[l]);  // one sqrtps per register
  return r;
}

// erfcx(x) for x in [0, 8] (float), by the polynomial above in two interleaved
// Horner chains (even and odd powers in v^2; the double kernel's reason: half the
// dependency chain).
template <class F>
PMEWALD_INLINE F verfcx_f(F x) {
  static_assert(kErfcxDegreeF == 10, "the even/odd split below is written for degree 10");
  const F v = (8.0f - x) * (0.25f / (x + 2.0f));
  const F v2 = v * v;
  F pe = splat<F>(kErfcxF[10]), po = splat<F>(kErfcxF[9]);
  pe = pe * v2 + kErfcxF[8];
  po = po * v2 + kErfcxF[7];
  pe = pe * v2 + kErfcxF[6];
  po = po * v2 + kErfcxF[5];
  pe = pe * v2 + kErfcxF[4];
  po = po * v2 + kErfcxF[3];
  pe = pe * v2 + kErfcxF[2];
  po = po * v2 + kErfcxF[1];
  pe = pe * v2 + kErfcxF[0];
  return pe + v * po;
}

// exp(s) for |s| <= ln2 / 2 (float): the Taylor polynomial of degree 7
// (truncation below 5.3e-9 relative, 0.09 ulp), even and odd parts.
template <class F>
PMEWALD_INLINE F vexp_reduced_f(F s) {
  const F s2 = s * s;
  F pe = splat<F>(1.0f / 720.0f);
  pe = pe * s2 + 1.0f / 24.0f;
  pe = pe * s2 + 0.5f;
  pe = pe * s2 + 1.0f;
  F po = splat<F>(1.0f / 5040.0f);
  po = po * s2 + 1.0f / 120.0f;
  po = po * s2 + 1.0f / 6.0f;
  po = po * s2 + 1.0f;
  return pe + s * po;
}

// ---- float, the Ewald corrections (the cluster kernel's rational path) ----

// With z = alpha^2 r^2: erfc(alpha r) / r = 1 / r - alpha V(z) and
// (erfc(alpha r) / r + 2 alpha / sqrt(pi) e^-z) / r^2 = 1 / r^3 - alpha^3 F(z), with
// V(z) = erf(sqrt z) / sqrt z and F(z) = (V(z) - 2 / sqrt(pi) e^-z) / z smooth and
// positive: the split of GROMACS's nbnxm kernels (no exp, no erfc, no sqrt of z).
// Our own rational fits P / Q on [0, kEwaldCorrMaxZ] (alpha r <= 5), relative
// minimax at 1,500 Chebyshev nodes, 40-digit references
// (scripts/fit_ewald_corrections.py, which prints these): F max relative error
// 4.9e-8 with these coefficients exactly, 4.6e-7 (RMS 9.6e-8) evaluated in float;
// V 2.9e-8, 3.0e-7 (RMS 8.5e-8). The subtraction from 1 / r (1 / r^3) keeps the
// absolute error of a float 1 / r: a pair near the cutoff, where erfc is ~1e-6,
// has a large relative error in a tiny term, as in GROMACS's single precision.
constexpr float kEwaldCorrFP[7] = {7.522527575e-01f, -8.396808058e-03f, 1.989183947e-02f, 3.543262137e-04f,
                                   1.197411839e-04f, 1.356312509e-06f,  -2.741732841e-09f};
constexpr float kEwaldCorrFQ[7] = {1.000000000e+00f, 5.888360143e-01f, 1.654692888e-01f, 2.910445631e-02f,
                                   3.544850508e-03f, 2.916982048e-04f, 2.017438419e-05f};
constexpr float kEwaldCorrVP[7] = {1.128379107e+00f, 1.943145692e-01f, 5.501039326e-02f, 4.158732947e-03f,
                                   3.642168595e-04f, 4.035904112e-06f, -1.040607422e-08f};
constexpr float kEwaldCorrVQ[6] = {1.000000000e+00f, 5.055392981e-01f, 1.172685698e-01f,
                                   1.602396369e-02f, 1.350496896e-03f, 5.710029654e-05f};

// F(z) and V(z) for z in [0, kEwaldCorrMaxZ] (float): four independent Horner chains.
template <class F>
PMEWALD_INLINE void vewald_corr_f(F z, F& f, F& v) {
  F fp = splat<F>(kEwaldCorrFP[6]), fq = splat<F>(kEwaldCorrFQ[6]);
  F vp = splat<F>(kEwaldCorrVP[6]), vq = splat<F>(kEwaldCorrVQ[5]);
#pragma GCC unroll 6
  for (int m = 5; m >= 0; --m) {
    fp = fp * z + kEwaldCorrFP[m];
    fq = fq * z + kEwaldCorrFQ[m];
    vp = vp * z + kEwaldCorrVP[m];
    if (m < 5) vq = vq * z + kEwaldCorrVQ[m];
  }
  f = fp / fq;
  v = vp / vq;
}

}  // namespace lanes
}  // namespace realspace
}  // namespace pmewald
