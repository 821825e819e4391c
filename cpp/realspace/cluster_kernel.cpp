#include "realspace/cluster_kernel.hpp"

#include "base/simd.hpp"
#include "realspace/pair_math.hpp"

// One source, several instruction sets (as pair_kernel.cpp): a template over
// the lanes per register, instantiated in functions compiled for x86-64-v4,
// x86-64-v3 and the baseline, the best chosen once at run time.
//
// A 4 x 4 block is 16 / L registers of L lanes; lane l of register t is the
// pair p = t L + l, i.e. slot p / 4 of the i-cluster and slot p % 4 of the
// j-cluster. The i-cluster's registers are built once per row; a j-cluster's
// 4 values repeat across the register (L >= 4), so the force on j is one
// register summed over t, its groups of 4 lanes added at the block's end.

namespace pmewald {
inline namespace realspace {

namespace {

using namespace lanes;

template <class T, int L>
struct CV;
template <int L>
struct CV<double, L> {
  typedef double V __attribute__((vector_size(8 * L)));
  typedef long long I __attribute__((vector_size(8 * L)));
};
template <int L>
struct CV<float, L> {
  typedef float V __attribute__((vector_size(4 * L)));
  typedef int I __attribute__((vector_size(4 * L)));
};
typedef double D4 __attribute__((vector_size(32)));

// Group g (lanes 4g .. 4g + 3) of v, as 4 lanes of double.
template <int g, class V>
PMEWALD_INLINE D4 group4(V v) {
  return __builtin_convertvector(__builtin_shufflevector(v, v, 4 * g, 4 * g + 1, 4 * g + 2, 4 * g + 3), D4);
}

// A j-cluster's 4 values (j[0..4)) repeated over L lanes.
template <class V, class T, int L>
PMEWALD_INLINE V repeat4(const T* __restrict j) {
  typedef T T4 __attribute__((vector_size(4 * sizeof(T))));
  T4 v;
  __builtin_memcpy(&v, j, sizeof(T4));
  if constexpr (L == 4)
    return v;
  else if constexpr (L == 8)
    return __builtin_shufflevector(v, v, 0, 1, 2, 3, 0, 1, 2, 3);
  else
    return __builtin_shufflevector(v, v, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);
}

// The sum of V's groups of 4 lanes, in double.
template <class V, int L>
PMEWALD_INLINE D4 groups4(V v) {
  if constexpr (L == 4)
    return group4<0>(v);
  else if constexpr (L == 8)
    return group4<0>(v) + group4<1>(v);
  else
    return (group4<0>(v) + group4<1>(v)) + (group4<2>(v) + group4<3>(v));
}

// Lanes whose bit is set in m (bit l of lane l): -1 there, else 0.
template <class I, int L>
PMEWALD_INLINE I lane_mask(unsigned m) {
  I bits;
  for (int l = 0; l < L; ++l) bits[l] = 1 << l;
  return (splat<I>(static_cast<int>(m)) & bits) != 0;
}

// exp(-y), y in [0, 64], float: -y = n ln2 + s in float (Cody-Waite), 2^n from the bits.
template <class F, class I>
PMEWALD_INLINE F vexp_neg_f(F y) {
  const float magic = 12582912.0f;  // 1.5 * 2^23
  const F nd = y * -1.44269504f + magic;
  const F n = nd - magic;
  const F s = (-y - n * 0.693359375f) - n * -2.12194440e-4f;
  const I ni = (I)nd - (I)splat<F>(magic);
  return vexp_reduced_f(s) * (F)((ni + 127) << 23);
}

// w += f (x) r in Virial's order (xx yy zz xy xz yz).
template <class S>
PMEWALD_INLINE void add_outer(S* w, S fx, S fy, S fz, S x, S y, S z) {
  w[0] += fx * x;
  w[1] += fy * y;
  w[2] += fz * z;
  w[3] += fx * y;
  w[4] += fx * z;
  w[5] += fy * z;
}

PMEWALD_INLINE double hsum4(D4 v) { return (v[0] + v[1]) + (v[2] + v[3]); }

// The row's force on its i slots (per lane in fx/fy/fz[t]: lane l of register t is slot
// (t L + l) / 4) added to fi, and its part of the virial, sum_i F_i r_i, to w. Once per
// row: plain scalar sums.
template <class V, class T, int L>
void finish_i(const V* fx, const V* fy, const V* fz, const T* ci, double* fi, double* w) {
  double F[4][3] = {};
  for (int t = 0; t < 16 / L; ++t)
    for (int l = 0; l < L; ++l) {
      const int s = (t * L + l) / 4;
      F[s][0] += static_cast<double>(fx[t][l]);
      F[s][1] += static_cast<double>(fy[t][l]);
      F[s][2] += static_cast<double>(fz[t][l]);
    }
  for (int s = 0; s < 4; ++s) {
    for (int d = 0; d < 3; ++d) fi[3 * s + d] += F[s][d];
    add_outer<double>(w, F[s][0], F[s][1], F[s][2], ci[s], ci[4 + s], ci[8 + s]);
  }
}

// The row (i-cluster ci against its j-clusters). kMixed: float lanes, positions
// relative to the cluster centres; else double positions.
//
// Per lane only the pair terms: the energy, the force on i (summed per lane over the
// blocks) and on j (summed per block). The virial sum_p f_p d_p, d_p = r_i - r_j (+ the
// centres' separation c_i - c_j with kMixed), is formed from those sums instead of per
// pair: sum_i F_i r_i - sum_blocks sum_j G_j r_j (+ sum_blocks G (c_i - c_j)), G_j the
// block's force on i from j, G their sum.
template <class T, int L, bool kMixed>
PMEWALD_INLINE void row(const ClusterRowArgs& a, const double* __restrict centres, const T* __restrict data,
                        double* __restrict fi, double* __restrict fj, ClusterBlockSums& out) {
  using V = typename CV<T, L>::V;
  using I = typename CV<T, L>::I;
  constexpr int R = 16 / L;  // registers per block
  const T* ci = data + 16 * a.ci;
  V xi[R], yi[R], zi[R], qi[R];
  for (int t = 0; t < R; ++t)
    for (int l = 0; l < L; ++l) {
      const int s = (t * L + l) / 4;
      xi[t][l] = ci[s];
      yi[t][l] = ci[4 + s];
      zi[t][l] = ci[8 + s];
      qi[t][l] = ci[12 + s] * static_cast<T>(a.k);
    }
  const T alpha = static_cast<T>(a.alpha), a_tsp = static_cast<T>(a.alpha * kTwoOverSqrtPi);
  const T rc2 = static_cast<T>(a.rc2), tiny2 = static_cast<T>(coincident2(a.alpha));
  const V safe = splat<V>(static_cast<T>(1.0 / (a.alpha * a.alpha)));  // masked lanes: alpha r = 1
  V fxi[R], fyi[R], fzi[R];  // the force on i, by lane
  for (int t = 0; t < R; ++t) fxi[t] = fyi[t] = fzi[t] = V{};
  V ev = V{}, f2v = V{}, nv = V{};
  D4 wj[6];  // sum of G_j r_j over the blocks (xx yy zz xy xz yz), by j slot
  for (int k = 0; k < 6; ++k) wj[k] = splat<D4>(0.0);
  double wc[6] = {0, 0, 0, 0, 0, 0};  // sum of G (c_i - c_j)
  // B blocks per step, so that K = 4 registers run in lockstep (their latency chains
  // overlap: one register at a time was latency-bound, 1.5-2x slower); a step past the
  // last block runs on the last block with an empty mask.
  constexpr int B = 4 / R, K = B * R;
  for (int p0 = 0; p0 < a.n; p0 += B) {
    int cjs[B];
    unsigned ms[B];
    double dc[B][3] = {};
    V xj[B], yj[B], zj[B], qj[B], ox[B], oy[B], oz[B];
    for (int b = 0; b < B; ++b) {
      const bool real = p0 + b < a.n;
      cjs[b] = a.cj[real ? p0 + b : a.n - 1];
      ms[b] = real ? a.mask[p0 + b] : 0u;
      const T* dj = data + 16 * cjs[b];
      xj[b] = repeat4<V, T, L>(dj);
      yj[b] = repeat4<V, T, L>(dj + 4);
      zj[b] = repeat4<V, T, L>(dj + 8);
      qj[b] = repeat4<V, T, L>(dj + 12);
      ox[b] = oy[b] = oz[b] = V{};
      if constexpr (kMixed) {
        for (int d = 0; d < 3; ++d) dc[b][d] = centres[3 * a.ci + d] - centres[3 * cjs[b] + d];
        ox[b] = splat<V>(static_cast<T>(dc[b][0]));
        oy[b] = splat<V>(static_cast<T>(dc[b][1]));
        oz[b] = splat<V>(static_cast<T>(dc[b][2]));
      }
    }
    V dx[K], dy[K], dz[K], r2s[K], kqq[K];
    I act[K];
    for (int k = 0; k < K; ++k) {
      const int b = k / R, t = k % R;
      dx[k] = (xi[t] - xj[b]) + ox[b];
      dy[k] = (yi[t] - yj[b]) + oy[b];
      dz[k] = (zi[t] - zj[b]) + oz[b];
      const V r2 = dx[k] * dx[k] + dy[k] * dy[k] + dz[k] * dz[k];
      act[k] = lane_mask<I, L>((ms[b] >> (t * L)) & ((1u << L) - 1u)) & (r2 < rc2);
      r2s[k] = act[k] ? r2 - tiny2 : safe;  // NaN for a coincident pair (pair_kernel.hpp)
      kqq[k] = act[k] ? qi[t] * qj[b] : V{};
    }
    V fr[K], epair[K];
    for (int k = 0; k < K; ++k) {
      V r;
      for (int l = 0; l < L; ++l) r[l] = kMixed ? __builtin_sqrtf(r2s[k][l]) : __builtin_sqrt(r2s[k][l]);
      const V inv_r = 1 / r;
      const V xa = alpha * r;
      V ex, erfc;
      if constexpr (kMixed) {
        ex = vexp_neg_f<V, I>(xa * xa);
        erfc = ex * verfcx_f(xa);
      } else {
        ex = vexp_neg<V, I>(-(xa * xa));
        erfc = ex * verfcx<V>(xa);
      }
      epair[k] = kqq[k] * erfc * inv_r;
      fr[k] = (epair[k] + kqq[k] * a_tsp * ex) * inv_r * inv_r;
    }
    V gx[B], gy[B], gz[B];
    for (int b = 0; b < B; ++b) gx[b] = gy[b] = gz[b] = V{};
    for (int k = 0; k < K; ++k) {
      const int b = k / R, t = k % R;
      const V fx = fr[k] * dx[k], fy = fr[k] * dy[k], fz = fr[k] * dz[k];
      ev += epair[k];
      if constexpr (kMixed) f2v += fr[k] * fr[k] * r2s[k];
      nv -= __builtin_convertvector(act[k], V);
      fxi[t] += fx;
      fyi[t] += fy;
      fzi[t] += fz;
      gx[b] += fx;
      gy[b] += fy;
      gz[b] += fz;
    }
    for (int b = 0; b < B && p0 + b < a.n; ++b) {
      const D4 Gx = groups4<V, L>(gx[b]), Gy = groups4<V, L>(gy[b]), Gz = groups4<V, L>(gz[b]);
      double* o = fj + 12 * (p0 + b);
      for (int l = 0; l < 4; ++l) {
        o[3 * l] = -Gx[l];
        o[3 * l + 1] = -Gy[l];
        o[3 * l + 2] = -Gz[l];
      }
      // (lanes 0-3 of the repeated j registers are the j slots)
      add_outer<D4>(wj, Gx, Gy, Gz, group4<0>(xj[b]), group4<0>(yj[b]), group4<0>(zj[b]));
      if constexpr (kMixed) add_outer<double>(wc, hsum4(Gx), hsum4(Gy), hsum4(Gz), dc[b][0], dc[b][1], dc[b][2]);
    }
  }
  double wi[6] = {0, 0, 0, 0, 0, 0};
  finish_i<V, T, L>(fxi, fyi, fzi, ci, fi, wi);
  out.e += hsum4(groups4<V, L>(ev));
  for (int k = 0; k < 6; ++k) out.w[k] += wi[k] - hsum4(wj[k]) + wc[k];
  out.f2 += hsum4(groups4<V, L>(f2v));
  out.evaluated += hsum4(groups4<V, L>(nv));
}

using DoubleFn = void (*)(const ClusterRowArgs&, const double*, double*, double*, ClusterBlockSums&);
using MixedFn = void (*)(const ClusterRowArgs&, const double*, const float*, double*, double*, ClusterBlockSums&);
#define PMEWALD_CD_ARGS const ClusterRowArgs &a, const double *data, double *fi, double *fj, ClusterBlockSums &s
#define PMEWALD_CM_ARGS \
  const ClusterRowArgs &a, const double *c, const float *data, double *fi, double *fj, ClusterBlockSums &s

#if PMEWALD_X86_DISPATCH
PMEWALD_TARGET_V4 void double_v4(PMEWALD_CD_ARGS) { row<double, 8, false>(a, nullptr, data, fi, fj, s); }
PMEWALD_TARGET_V3 void double_v3(PMEWALD_CD_ARGS) { row<double, 4, false>(a, nullptr, data, fi, fj, s); }
PMEWALD_TARGET_V4 void mixed_v4(PMEWALD_CM_ARGS) { row<float, 16, true>(a, c, data, fi, fj, s); }
PMEWALD_TARGET_V3 void mixed_v3(PMEWALD_CM_ARGS) { row<float, 8, true>(a, c, data, fi, fj, s); }
#endif
void double_base(PMEWALD_CD_ARGS) { row<double, 4, false>(a, nullptr, data, fi, fj, s); }
void mixed_base(PMEWALD_CM_ARGS) { row<float, 8, true>(a, c, data, fi, fj, s); }

struct Dispatch {
  DoubleFn d = simd::choose<DoubleFn>(PMEWALD_SIMD_VERSIONS(double_v4, double_v3, double_base));
  MixedFn m = simd::choose<MixedFn>(PMEWALD_SIMD_VERSIONS(mixed_v4, mixed_v3, mixed_base));
};
const Dispatch& dispatch() {
  static const Dispatch d;
  return d;
}

}  // namespace

void cluster_row_double(PMEWALD_CD_ARGS) { dispatch().d(a, data, fi, fj, s); }
void cluster_row_mixed(PMEWALD_CM_ARGS) { dispatch().m(a, c, data, fi, fj, s); }
}  // namespace realspace
}  // namespace pmewald
