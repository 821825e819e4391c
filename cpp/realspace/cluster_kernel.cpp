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

// The 8 int lanes of each 8-bit mask: -1 where bit l is set, else 0 (one load where
// building the lanes from a broadcast took ~10 instructions per register).
struct LaneMasks8 {
  alignas(32) int m[256][8];
  constexpr LaneMasks8() : m{} {
    for (int v = 0; v < 256; ++v)
      for (int l = 0; l < 8; ++l) m[v][l] = (v >> l) & 1 ? -1 : 0;
  }
};
constexpr LaneMasks8 kLaneMasks8{};

// Lanes whose bit is set in m (bit l of lane l): -1 there, else 0.
template <class I, int L>
PMEWALD_INLINE I lane_mask(unsigned m) {
  if constexpr (sizeof(I) == 4 * L && L == 8) {  // 8 int lanes: the table
    I v;
    __builtin_memcpy(&v, kLaneMasks8.m[m], sizeof v);
    return v;
  } else if constexpr (sizeof(I) == 4 * L && L == 16) {  // 16 int lanes: two rows of it
    typedef int I8 __attribute__((vector_size(32)));
    I8 lo, hi;
    __builtin_memcpy(&lo, kLaneMasks8.m[m & 0xffu], sizeof lo);
    __builtin_memcpy(&hi, kLaneMasks8.m[m >> 8], sizeof hi);
    return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  } else {
    I bits;
    for (int l = 0; l < L; ++l) bits[l] = 1 << l;
    return (splat<I>(static_cast<int>(m)) & bits) != 0;
  }
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

PMEWALD_INLINE double hsum4(D4 v) { return (v[0] + v[1]) + (v[2] + v[3]); }

// The row's force on its i slots (per lane in fx/fy/fz[t]: lane l of register t is slot
// (t L + l) / 4) added to fi (x of the 4 slots, then y, z). Once per row: plain scalar sums.
template <class V, int L>
void finish_i(const V* fx, const V* fy, const V* fz, double* fi) {
  for (int t = 0; t < 16 / L; ++t)
    for (int l = 0; l < L; ++l) {
      const int s = (t * L + l) / 4;
      fi[s] += static_cast<double>(fx[t][l]);
      fi[4 + s] += static_cast<double>(fy[t][l]);
      fi[8 + s] += static_cast<double>(fz[t][l]);
    }
}

// The row (i-cluster ci against its j-clusters). kMixed: float lanes, positions
// relative to the cluster centres; else double positions. kRational (float): the
// Ewald corrections of pair_math.hpp instead of erfcx and exp.
//
// Per lane only the pair terms: the energy, the force on i (summed per lane over the
// blocks) and on j (summed per block). The virial is the caller's, from the forces.
template <class T, int L, bool kMixed, bool kRational = false>
PMEWALD_INLINE void row(const ClusterRowArgs& a, const double* __restrict centres, const T* __restrict data,
                        double* __restrict fi, double* __restrict cforce, ClusterBlockSums& out) {
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
  static_assert(!kRational || kMixed, "the rational corrections are float");
  const T alpha = static_cast<T>(a.alpha), a_tsp = static_cast<T>(a.alpha * kTwoOverSqrtPi);
  const T alpha2 = static_cast<T>(a.alpha * a.alpha), alpha3 = static_cast<T>(a.alpha * a.alpha * a.alpha);
  const T rc2 = static_cast<T>(a.rc2), tiny2 = static_cast<T>(coincident2(a.alpha));
  const V safe = splat<V>(static_cast<T>(1.0 / (a.alpha * a.alpha)));  // masked lanes: alpha r = 1
  V fxi[R], fyi[R], fzi[R];  // the force on i, by lane
  for (int t = 0; t < R; ++t) fxi[t] = fyi[t] = fzi[t] = V{};
  V ev = V{}, f2v = V{}, nv = V{};
  // B blocks per step, so that K = 4 registers run in lockstep (their latency chains
  // overlap: one register at a time was latency-bound, 1.5-2x slower); a step past the
  // last block runs on the last block with an empty mask.
  // The rational path has four independent chains per register already: two registers
  // in lockstep (kLockstep) spill less to the stack.
  constexpr int kLockstep = kRational ? 2 : 4;
  constexpr int B = kLockstep > R ? kLockstep / R : 1, K = B * R;
  for (int p0 = 0; p0 < a.n; p0 += B) {
    int cjs[B];
    unsigned ms[B];
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
        const double* c0 = centres + 3 * a.ci;
        const double* c1 = centres + 3 * cjs[b];
        ox[b] = splat<V>(static_cast<T>(c0[0] - c1[0]));
        oy[b] = splat<V>(static_cast<T>(c0[1] - c1[1]));
        oz[b] = splat<V>(static_cast<T>(c0[2] - c1[2]));
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
      if constexpr (kRational) {  // erfc(x) / r = 1 / r - alpha V(z), z = x^2 (pair_math.hpp)
        V fc, vc;
        vewald_corr_f(r2s[k] * alpha2, fc, vc);
        epair[k] = kqq[k] * (inv_r - alpha * vc);
        fr[k] = kqq[k] * (inv_r * inv_r * inv_r - alpha3 * fc);
      } else {
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
      const D4 G[3] = {groups4<V, L>(gx[b]), groups4<V, L>(gy[b]), groups4<V, L>(gz[b])};
      double* o = cforce + 12 * cjs[b];  // the j-cluster's forces: minus the force on i
      for (int d = 0; d < 3; ++d) {
        D4 f;
        __builtin_memcpy(&f, o + 4 * d, sizeof f);
        f -= G[d];
        __builtin_memcpy(o + 4 * d, &f, sizeof f);
      }
    }
  }
  finish_i<V, L>(fxi, fyi, fzi, fi);
  out.e += hsum4(groups4<V, L>(ev));
  out.f2 += hsum4(groups4<V, L>(f2v));
  out.evaluated += hsum4(groups4<V, L>(nv));
}

using DoubleFn = void (*)(const ClusterRowArgs&, const double*, double*, double*, ClusterBlockSums&);
using MixedFn = void (*)(const ClusterRowArgs&, const double*, const float*, double*, double*, ClusterBlockSums&);
#define PMEWALD_CD_ARGS const ClusterRowArgs &a, const double *data, double *fi, double *cforce, ClusterBlockSums &s
#define PMEWALD_CM_ARGS \
  const ClusterRowArgs &a, const double *c, const float *data, double *fi, double *cforce, ClusterBlockSums &s

#if PMEWALD_X86_DISPATCH
PMEWALD_TARGET_V4 void double_v4(PMEWALD_CD_ARGS) { row<double, 8, false>(a, nullptr, data, fi, cforce, s); }
PMEWALD_TARGET_V3 void double_v3(PMEWALD_CD_ARGS) { row<double, 4, false>(a, nullptr, data, fi, cforce, s); }
PMEWALD_TARGET_V4 void mixed_v4(PMEWALD_CM_ARGS) { row<float, 16, true>(a, c, data, fi, cforce, s); }
PMEWALD_TARGET_V3 void mixed_v3(PMEWALD_CM_ARGS) { row<float, 8, true>(a, c, data, fi, cforce, s); }
PMEWALD_TARGET_V4 void rational_v4(PMEWALD_CM_ARGS) { row<float, 16, true, true>(a, c, data, fi, cforce, s); }
PMEWALD_TARGET_V3 void rational_v3(PMEWALD_CM_ARGS) { row<float, 8, true, true>(a, c, data, fi, cforce, s); }
#endif
void double_base(PMEWALD_CD_ARGS) { row<double, 4, false>(a, nullptr, data, fi, cforce, s); }
void mixed_base(PMEWALD_CM_ARGS) { row<float, 8, true>(a, c, data, fi, cforce, s); }
void rational_base(PMEWALD_CM_ARGS) { row<float, 8, true, true>(a, c, data, fi, cforce, s); }

struct Dispatch {
  DoubleFn d = simd::choose<DoubleFn>(PMEWALD_SIMD_VERSIONS(double_v4, double_v3, double_base));
  MixedFn m = simd::choose<MixedFn>(PMEWALD_SIMD_VERSIONS(mixed_v4, mixed_v3, mixed_base));
  MixedFn r = simd::choose<MixedFn>(PMEWALD_SIMD_VERSIONS(rational_v4, rational_v3, rational_base));
};
const Dispatch& dispatch() {
  static const Dispatch d;
  return d;
}

}  // namespace

void cluster_row_double(PMEWALD_CD_ARGS) { dispatch().d(a, data, fi, cforce, s); }
void cluster_row_mixed(PMEWALD_CM_ARGS) {
  (a.alpha * a.alpha * a.rc2 <= kEwaldCorrMaxZ ? dispatch().r : dispatch().m)(a, c, data, fi, cforce, s);
}
void ewald_corrections_float(int n, const double* z, double* f, double* v) {
  typedef float F8 __attribute__((vector_size(32)));
  for (int i0 = 0; i0 < n; i0 += 8) {
    F8 zz = F8{};
    for (int l = 0; l < 8 && i0 + l < n; ++l) zz[l] = static_cast<float>(z[i0 + l]);
    F8 fv, vv;
    vewald_corr_f(zz, fv, vv);
    for (int l = 0; l < 8 && i0 + l < n; ++l) {
      f[i0 + l] = fv[l];
      v[i0 + l] = vv[l];
    }
  }
}

}  // namespace realspace
}  // namespace pmewald
