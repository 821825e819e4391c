// The mixed-precision pair kernel (PairPrecision::Mixed, pair_kernel.hpp):
// single-precision distances, erfc and exp in twice the lanes of the double
// kernel, double-precision inputs, scale factors and sums.
//
// Per lane, for partners gathered in bx, by, bz, bq (double):
//
//   double: d = ri - rj (positions are large against separations: subtracting
//           in double keeps d exact to double rounding), r2 = |d|^2,
//           y = alpha^2 r2 and its range reduction -y = n ln2 + s, |s| <= ln2/2
//   float:  r = sqrt((float) r2), 1/r, x = alpha r,
//           erfcx(x) (a degree-10 polynomial in v = (8 - x) / (4 (x + 2))),
//           exp(s) (degree-7 polynomial),
//           e' = exp(s) erfcx(x) / r,  g' = (e' + 2 alpha/sqrt(pi) exp(s)) / r^2
//   double: w = k q_i q_j 2^n, e = w e', fr = w g', f = fr d; every sum in double.
//
// So exp(-alpha^2 r^2) is reduced in double (its float argument would carry an
// absolute error of y u, i.e. 2 x^2 float ulps at x = alpha r, 128 at x = 8)
// and the charges and 2^n stay exact: a pair's relative error is a few float
// ulps whatever alpha r (measured: docs/realspace.md, tests/realspace/test_mixed_precision.py).
//
// Lanes: 16 floats with AVX-512 (x86-64-v4), 8 with AVX2+FMA (x86-64-v3), 4 on
// the baseline; the double parts run as two registers of half as many lanes.

#include <cstdint>
#include <utility>

#include "base/simd.hpp"
#include "realspace/pair_kernel.hpp"
#include "realspace/pair_math.hpp"

namespace pmewald {
inline namespace realspace {

namespace {

using namespace lanes;  // pair_lanes.hpp, pair_math.hpp: constants, splat, gather, pad, PairSums, erfcx, exp

// L float lanes (one register); the double parts as two registers of H = L / 2
// lanes (GCC's code for one 2-register double vector spilled every store
// through the stack: measured 1.5x slower than the double kernel).
template <int L>
struct VecF {
  static constexpr int H = L / 2;
  typedef float F __attribute__((vector_size(4 * L)));
  typedef float FH __attribute__((vector_size(4 * H)));
  typedef double D __attribute__((vector_size(8 * H)));
  typedef long long I __attribute__((vector_size(8 * H)));
};

template <int S, int... K>
constexpr std::integer_sequence<int, (K + S)...> shift_seq(std::integer_sequence<int, K...>) {
  return {};
}
template <class F, class FH, int... K>
PMEWALD_INLINE F concat_impl(FH a, FH b, std::integer_sequence<int, K...>) {
  return __builtin_shufflevector(a, b, K...);
}
template <class FH, class F, int... K>
PMEWALD_INLINE FH half_impl(F a, std::integer_sequence<int, K...>) {
  return __builtin_shufflevector(a, a, K...);
}
// Two double registers (lanes 0..H-1, H..L-1) to one float register, and back.
template <int L>
PMEWALD_INLINE typename VecF<L>::F to_float(typename VecF<L>::D lo, typename VecF<L>::D hi) {
  using V = VecF<L>;
  return concat_impl<typename V::F>(__builtin_convertvector(lo, typename V::FH),
                                    __builtin_convertvector(hi, typename V::FH), std::make_integer_sequence<int, L>{});
}
template <int L, int kHalf>
PMEWALD_INLINE typename VecF<L>::D to_double(typename VecF<L>::F f) {
  using V = VecF<L>;
  using Seq = std::make_integer_sequence<int, V::H>;
  const typename V::FH h = kHalf == 0 ? half_impl<typename V::FH>(f, Seq{})
                                      : half_impl<typename V::FH>(f, shift_seq<V::H>(Seq{}));
  return __builtin_convertvector(h, typename V::D);
}


// exp(-y) for y = alpha^2 r^2 in [0, 64] (double, one register): -y = n ln2 + s.
// Returns s and 2^n (exact).
template <class D, class I>
PMEWALD_INLINE void reduce_exp(D y, D& s, D& scale) {
  const D nd = y * -kLog2e + kRoundMagic;
  const D n = nd - kRoundMagic;
  s = (-y - n * kLn2Hi) - n * kLn2Lo;
  const I ni = (I)nd - (I)splat<D>(kRoundMagic);
  scale = (D)((ni + 1023) << 52);
}

// The double inputs of one half (H lanes from b): r2, the exp's reduction s and
// w = k q_i q_j 2^n. The differences are formed again by HalfSums::add (loads
// from L1 are cheaper than keeping them live: AVX2 has 16 registers).
template <int L>
struct HalfIn {
  using D = typename VecF<L>::D;
  D r2, s, w;
  PMEWALD_INLINE void load(const double* __restrict bx, const double* __restrict by, const double* __restrict bz,
                           const double* __restrict bq, int b, double xi, double yi, double zi, double kqi,
                           double alpha2) {
    D xj, yj, zj, qj;
    __builtin_memcpy(&xj, bx + b, sizeof(D));
    __builtin_memcpy(&yj, by + b, sizeof(D));
    __builtin_memcpy(&zj, bz + b, sizeof(D));
    __builtin_memcpy(&qj, bq + b, sizeof(D));
    const D dx = xi - xj, dy = yi - yj, dz = zi - zj;
    r2 = dx * dx + dy * dy + dz * dz;
    D scale;
    reduce_exp<D, typename VecF<L>::I>(alpha2 * r2, s, scale);
    w = (kqi * qj) * scale;
  }
};

// Sums over lanes (double, H per register).
template <int L, bool Virial = true>
struct HalfSums : lanes::PairSums<typename VecF<L>::D, VecF<L>::H, Virial> {
  using D = typename VecF<L>::D;
  // Pair terms e' and g' (converted) of lanes [b, b + H), the differences formed
  // again from the positions: stores fr d into (ox, oy, oz).
  PMEWALD_INLINE void add_half(const HalfIn<L>& in, D eu, D gu, const double* __restrict bx,
                               const double* __restrict by, const double* __restrict bz, int b, double xi,
                               double yi, double zi, double* __restrict ox, double* __restrict oy,
                               double* __restrict oz) {
    D xj, yj, zj;
    __builtin_memcpy(&xj, bx + b, sizeof(D));
    __builtin_memcpy(&yj, by + b, sizeof(D));
    __builtin_memcpy(&zj, bz + b, sizeof(D));
    const D fr = in.w * gu;
    this->add(in.w * eu, fr, xi - xj, yi - yj, zi - zj, b, ox, oy, oz);
    this->f2 += fr * fr * in.r2;
  }
};

template <int L, bool Virial = true>
PMEWALD_INLINE void block_mixed(int n, double* __restrict bx, double* __restrict by, double* __restrict bz,
                                double* __restrict bq, double xi, double yi, double zi, double kqi, double alpha,
                                double* __restrict fx, double* __restrict fy, double* __restrict fz,
                                double* __restrict acc) {
  using F = typename VecF<L>::F;
  constexpr int H = VecF<L>::H;
  const float alpha_f = static_cast<float>(alpha);
  const float a_tsp = static_cast<float>(alpha * kTwoOverSqrtPi);
  const double alpha2 = alpha * alpha, tiny2 = coincident2(alpha);
  HalfSums<L, Virial> sums;  // both halves' lanes (one set: 22 accumulators spill on AVX2's 16 registers)
  const int padded = lanes::pad<L>(n, bx, by, bz, bq, xi, yi, zi, alpha);
  for (int b0 = 0; b0 < padded; b0 += L) {
    HalfIn<L> a, c;
    a.load(bx, by, bz, bq, b0, xi, yi, zi, kqi, alpha2);
    c.load(bx, by, bz, bq, b0 + H, xi, yi, zi, kqi, alpha2);
    // Float part: distances, erfc, exp.
    const F r = vsqrtf<F, L>(to_float<L>(a.r2 - tiny2, c.r2 - tiny2));  // NaN for a coincident pair
    const F inv_r = 1.0f / r;
    const F ex = vexp_reduced_f(to_float<L>(a.s, c.s));  // exp(-alpha^2 r^2) / 2^n
    const F eu = ex * verfcx_f(alpha_f * r) * inv_r;
    const F gu = (eu + a_tsp * ex) * inv_r * inv_r;
    // Double part: charges, scale and every sum.
    sums.add_half(a, to_double<L, 0>(eu), to_double<L, 0>(gu), bx, by, bz, b0, xi, yi, zi, fx, fy, fz);
    sums.add_half(c, to_double<L, 1>(eu), to_double<L, 1>(gu), bx, by, bz, b0 + H, xi, yi, zi, fx, fy, fz);
  }
  sums.into(acc, PairBatchAcc::kSize);
}

template <int L>
PMEWALD_INLINE void batch_mixed(int n, const int* __restrict js, double xi, double yi, double zi, double kqi,
                                const double* __restrict x, const double* __restrict y, const double* __restrict z,
                                const double* __restrict q, double alpha, double* __restrict fx,
                                double* __restrict fy, double* __restrict fz, double* __restrict acc) {
  alignas(64) double bx[kMaxBatch], by[kMaxBatch], bz[kMaxBatch], bq[kMaxBatch];
  lanes::gather(n, js, x, y, z, q, bx, by, bz, bq);
  block_mixed<L>(n, bx, by, bz, bq, xi, yi, zi, kqi, alpha, fx, fy, fz, acc);
}

// erfc(x) and exp(-x^2) as the kernel computes them (x^2 reduced in double, x in float).
template <int L>
PMEWALD_INLINE void erfc_lanes(int n, const double* __restrict x, double* __restrict erfc,
                               double* __restrict exp_mx2) {
  using D = typename VecF<L>::D;
  using I = typename VecF<L>::I;
  using F = typename VecF<L>::F;
  constexpr int H = VecF<L>::H;
  for (int b0 = 0; b0 < n; b0 += L) {
    D xd[2] = {splat<D>(0.0), splat<D>(0.0)}, s[2], scale[2];
    for (int l = 0; l < L && b0 + l < n; ++l) xd[l / H][l % H] = x[b0 + l];
    for (int h = 0; h < 2; ++h) reduce_exp<D, I>(xd[h] * xd[h], s[h], scale[h]);
    const F ex = vexp_reduced_f(to_float<L>(s[0], s[1]));
    const F er = ex * verfcx_f(to_float<L>(xd[0], xd[1]));
    const D e2[2] = {scale[0] * to_double<L, 0>(er), scale[1] * to_double<L, 1>(er)};
    const D g2[2] = {scale[0] * to_double<L, 0>(ex), scale[1] * to_double<L, 1>(ex)};
    for (int l = 0; l < L && b0 + l < n; ++l) {
      erfc[b0 + l] = e2[l / H][l % H];
      exp_mx2[b0 + l] = g2[l / H][l % H];
    }
  }
}

#if PMEWALD_X86_DISPATCH
PMEWALD_TARGET_V4 void mixed_batch_v4(PMEWALD_BATCH_ARGS) { batch_mixed<16>(PMEWALD_BATCH_PASS); }
PMEWALD_TARGET_V3 void mixed_batch_v3(PMEWALD_BATCH_ARGS) { batch_mixed<8>(PMEWALD_BATCH_PASS); }
PMEWALD_TARGET_V4 void mixed_block_v4(PMEWALD_BLOCK_ARGS) { block_mixed<16>(PMEWALD_BLOCK_PASS); }
PMEWALD_TARGET_V3 void mixed_block_v3(PMEWALD_BLOCK_ARGS) { block_mixed<8>(PMEWALD_BLOCK_PASS); }
PMEWALD_TARGET_V4 void mixed_block_nv_v4(PMEWALD_BLOCK_ARGS) { block_mixed<16, false>(PMEWALD_BLOCK_PASS); }
PMEWALD_TARGET_V3 void mixed_block_nv_v3(PMEWALD_BLOCK_ARGS) { block_mixed<8, false>(PMEWALD_BLOCK_PASS); }
PMEWALD_TARGET_V4 void mixed_erfc_v4(int n, const double* x, double* e, double* g) { erfc_lanes<16>(n, x, e, g); }
PMEWALD_TARGET_V3 void mixed_erfc_v3(int n, const double* x, double* e, double* g) { erfc_lanes<8>(n, x, e, g); }
#endif
void mixed_batch_base(PMEWALD_BATCH_ARGS) { batch_mixed<4>(PMEWALD_BATCH_PASS); }
void mixed_block_base(PMEWALD_BLOCK_ARGS) { block_mixed<4>(PMEWALD_BLOCK_PASS); }
void mixed_block_nv_base(PMEWALD_BLOCK_ARGS) { block_mixed<4, false>(PMEWALD_BLOCK_PASS); }
void mixed_erfc_base(int n, const double* x, double* e, double* g) { erfc_lanes<4>(n, x, e, g); }

using ErfcFn = void (*)(int, const double*, double*, double*);

struct MixedDispatch {
  PairKernels::Batch batch =
      simd::choose<PairKernels::Batch>(PMEWALD_SIMD_VERSIONS(mixed_batch_v4, mixed_batch_v3, mixed_batch_base));
  PairKernels::Block block =
      simd::choose<PairKernels::Block>(PMEWALD_SIMD_VERSIONS(mixed_block_v4, mixed_block_v3, mixed_block_base));
  PairKernels::Block block_nv = simd::choose<PairKernels::Block>(
      PMEWALD_SIMD_VERSIONS(mixed_block_nv_v4, mixed_block_nv_v3, mixed_block_nv_base));
  ErfcFn erfc = simd::choose<ErfcFn>(PMEWALD_SIMD_VERSIONS(mixed_erfc_v4, mixed_erfc_v3, mixed_erfc_base));
};

const MixedDispatch& mixed_dispatch() {
  static const MixedDispatch d;
  return d;
}

}  // namespace

void erfc_pair_batch_mixed(PMEWALD_BATCH_ARGS) { mixed_dispatch().batch(PMEWALD_BATCH_PASS); }
void erfc_pair_block_mixed(PMEWALD_BLOCK_ARGS) { mixed_dispatch().block(PMEWALD_BLOCK_PASS); }
void erfc_pair_block_mixed_no_virial(PMEWALD_BLOCK_ARGS) { mixed_dispatch().block_nv(PMEWALD_BLOCK_PASS); }
void erfc_mixed(int n, const double* x, double* erfc, double* exp_mx2) { mixed_dispatch().erfc(n, x, erfc, exp_mx2); }

}  // namespace realspace
}  // namespace pmewald
