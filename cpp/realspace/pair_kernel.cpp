#include "realspace/pair_kernel.hpp"

#include <cmath>
#include <stdexcept>

#include "realspace/erfc_table.hpp"
#include "realspace/pair_lanes.hpp"
#include "base/simd.hpp"

// One source, several instruction sets: the kernel is a template over the
// vector width (GCC/Clang vector extensions), instantiated inside functions
// compiled for AVX-512 (x86-64-v4, 8 lanes), AVX2+FMA (x86-64-v3, 4 lanes) and
// the baseline (2 lanes); the best one the CPU supports is chosen once at run
// time (simd.hpp). Measured on the development machine (AMD EPYC, one atom
// against 256 partners in a loop, each width compiled alone): ~5 ns per pair
// with 8 lanes, ~7.5 with 4, ~23 with SSE2.

namespace pmewald {
inline namespace realspace {

namespace {

using namespace lanes;  // pair_lanes.hpp: constants, coincident2, splat, gather, pad, PairSums

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

// The kernel on partners already contiguous in bx, by, bz, bq (room for n rounded
// up to L: the lanes past n are padded here with a zero charge 1 / alpha away,
// which contributes nothing, whatever the units), so the vector loop only does
// whole-register loads and stores.
template <int L>
PMEWALD_INLINE void block(int n, double* __restrict bx, double* __restrict by, double* __restrict bz,
                          double* __restrict bq, double xi, double yi, double zi, double kqi, double alpha,
                          double* __restrict fx, double* __restrict fy, double* __restrict fz,
                          double* __restrict acc) {
  using V = typename Vec<L>::D;
  using VL = typename Vec<L>::I;
  const double a_tsp = alpha * kTwoOverSqrtPi;
  const double tiny2 = coincident2(alpha);
  lanes::PairSums<V, L> sums;
  const int padded = lanes::pad<L>(n, bx, by, bz, bq, xi, yi, zi, alpha);
  for (int b0 = 0; b0 < padded; b0 += L) {
    V xj, yj, zj, qj;
    __builtin_memcpy(&xj, bx + b0, sizeof(V));
    __builtin_memcpy(&yj, by + b0, sizeof(V));
    __builtin_memcpy(&zj, bz + b0, sizeof(V));
    __builtin_memcpy(&qj, bq + b0, sizeof(V));
    const V dx = xi - xj, dy = yi - yj, dz = zi - zj;
    const V r2 = dx * dx + dy * dy + dz * dz;
    const V r = vsqrt<V, L>(r2 - tiny2);  // NaN for a coincident pair
    const V inv_r = 1.0 / r;
    const V xa = alpha * r;  // < kMaxAlphaR (the caller's contract)
    const V ex = vexp_neg<V, VL>(-(xa * xa));
    const V erfc = ex * verfcx<V>(xa);
    const V kqq = kqi * qj;
    const V epair = kqq * erfc * inv_r;
    const V fr = (epair + kqq * a_tsp * ex) * inv_r * inv_r;
    sums.add(epair, fr, dx, dy, dz, b0, fx, fy, fz);
  }
  sums.into(acc, PairBatchAcc::kPairForce2);  // no sum |f|^2 in double
}

// The kernel on partners js: gathered into contiguous scratch first.
template <int L>
PMEWALD_INLINE void batch(int n, const int* __restrict js, double xi, double yi, double zi, double kqi,
                          const double* __restrict x, const double* __restrict y,
                          const double* __restrict z, const double* __restrict q, double alpha, double* __restrict fx,
                          double* __restrict fy, double* __restrict fz, double* __restrict acc) {
  alignas(64) double bx[kMaxBatch], by[kMaxBatch], bz[kMaxBatch], bq[kMaxBatch];
  lanes::gather(n, js, x, y, z, q, bx, by, bz, bq);
  block<L>(n, bx, by, bz, bq, xi, yi, zi, kqi, alpha, fx, fy, fz, acc);
}

using BlockFn = void (*)(int, double*, double*, double*, double*, double, double, double, double, double, double*,
                         double*, double*, double*);

using BatchFn = void (*)(int, const int*, double, double, double, double, const double*, const double*,
                         const double*, const double*, double, double*, double*, double*, double*);

// ---- Potentials (erfc_unit_batch): the unit-charge pair terms, same arithmetic as batch ----
template <int L>
PMEWALD_INLINE void unit_batch(int n, const int* __restrict js, double xi, double yi, double zi, double k,
                               const double* __restrict x, const double* __restrict y, const double* __restrict z,
                               double alpha, double* __restrict s, double* __restrict g) {
  using V = typename Vec<L>::D;
  using VL = typename Vec<L>::I;
  const double a_tsp = alpha * kTwoOverSqrtPi;
  const double tiny2 = coincident2(alpha);
  alignas(64) double bx[kMaxBatch], by[kMaxBatch], bz[kMaxBatch];
  const int padded = (n + L - 1) / L * L;
  for (int b = 0; b < n; ++b) {
    const int j = js[b];
    bx[b] = x[j];
    by[b] = y[j];
    bz[b] = z[j];
  }
  for (int b = n; b < padded; ++b) {  // padding 1 / alpha away: finite, never read back
    bx[b] = xi + 1.0 / alpha;
    by[b] = yi;
    bz[b] = zi;
  }
  for (int b0 = 0; b0 < padded; b0 += L) {
    V xj, yj, zj;
    __builtin_memcpy(&xj, bx + b0, sizeof(V));
    __builtin_memcpy(&yj, by + b0, sizeof(V));
    __builtin_memcpy(&zj, bz + b0, sizeof(V));
    const V dx = xi - xj, dy = yi - yj, dz = zi - zj;
    const V r = vsqrt<V, L>(dx * dx + dy * dy + dz * dz - tiny2);
    const V inv_r = 1.0 / r;
    const V xa = alpha * r;
    const V ex = vexp_neg<V, VL>(-(xa * xa));
    const V sv = k * (ex * verfcx<V>(xa)) * inv_r;
    const V gv = (sv + (k * a_tsp) * ex) * inv_r * inv_r;
    __builtin_memcpy(s + b0, &sv, sizeof(V));
    __builtin_memcpy(g + b0, &gv, sizeof(V));
  }
}

using UnitFn = void (*)(int, const int*, double, double, double, double, const double*, const double*,
                        const double*, double, double*, double*);
#define PMEWALD_UNIT_ARGS                                                                           \
  int n, const int *js, double xi, double yi, double zi, double k, const double *x, const double *y, \
      const double *z, double alpha, double *s, double *g
#define PMEWALD_UNIT_PASS n, js, xi, yi, zi, k, x, y, z, alpha, s, g
// ---- end of potentials ----


using SelectFn = int (*)(const NeighbourQuery&, int, int, int*, int, int*, int&);

// select_within: distances of 8 (AVX-512) or 4 (AVX2) consecutive atoms at
// once, the hits appended with a register compress (AVX-512) or a 16-entry
// shuffle table (AVX2); the exclusion screen and the owned-ghost rule are
// integer compares on the same lanes. A row's tail is one more masked step
// (masked loads never touch the lanes past the end): rows are short (about 27
// candidates in water with a 10 A cutoff), and a scalar tail loop made the
// selection about 1.3x slower. The baseline uses the scalar loop (branch-free
// append).
PMEWALD_INLINE int select_scalar(const NeighbourQuery& qr, int j, int je, int* __restrict list, int n,
                                 int* __restrict maybe, int& n_maybe) {
  for (; j < je; ++j) {
    const double dx = qr.xi - qr.x[j], dy = qr.yi - qr.y[j], dz = qr.zi - qr.z[j];
    const bool own_j = qr.own[j] != 0.0;
    const bool hit = (dx * dx + dy * dy + dz * dz < qr.rc2) & (!qr.need_owned | own_j);
    bool screen = false;
    if (qr.ids)
      screen = qr.need_owned ? (qr.elo[j] <= qr.id_i) & (qr.ehi[j] >= qr.id_i) &
                                   ((static_cast<std::uint64_t>(qr.emask[j]) >> (qr.id_i & 63)) & 1)
                             : (qr.ids[j] >= qr.lo) & (qr.ids[j] <= qr.hi) &
                                   ((static_cast<std::uint64_t>(qr.mask) >> (qr.ids[j] & 63)) & 1);
    const bool keep = qr.need_owned ? keeps_cross_pair(qr.key[j], qr.key_i) : own_j | keeps_cross_pair(qr.key_i, qr.key[j]);
    list[n] = j;
    n += hit & !screen & keep;
    maybe[n_maybe] = j;
    n_maybe += hit & screen;
  }
  return n;
}

#if PMEWALD_X86_DISPATCH
PMEWALD_TARGET_V4 void batch_v4(PMEWALD_BATCH_ARGS) { batch<8>(PMEWALD_BATCH_PASS); }
PMEWALD_TARGET_V3 void batch_v3(PMEWALD_BATCH_ARGS) { batch<4>(PMEWALD_BATCH_PASS); }
PMEWALD_TARGET_V4 void block_v4(PMEWALD_BLOCK_ARGS) { block<8>(PMEWALD_BLOCK_PASS); }
PMEWALD_TARGET_V3 void block_v3(PMEWALD_BLOCK_ARGS) { block<4>(PMEWALD_BLOCK_PASS); }
PMEWALD_TARGET_V4 void unit_v4(PMEWALD_UNIT_ARGS) { unit_batch<8>(PMEWALD_UNIT_PASS); }
PMEWALD_TARGET_V3 void unit_v3(PMEWALD_UNIT_ARGS) { unit_batch<4>(PMEWALD_UNIT_PASS); }

// One 8-lane step of select_v4 on sorted atoms [j, j + 8) under `live` (the
// tail's lanes past je are masked off, and masked loads do not touch them).
// kGhost: i is a ghost (hits must be owned); kScreen: exclusion screen on.
template <bool kGhost, bool kScreen>
PMEWALD_TARGET_V4 PMEWALD_INLINE void select8(
    __mmask8 live, int j, __m512d vx, __m512d vy, __m512d vz, __m512d vrc2, __m512i vkey, __m512i vid,
    __m512i vlo, __m512i vhi, const double* __restrict x, const double* __restrict y,
    const double* __restrict z, const double* __restrict own, const std::int64_t* __restrict key,
    const std::int64_t* __restrict ids, const std::int64_t* __restrict elo, const std::int64_t* __restrict ehi,
    const std::int64_t* __restrict emask, __m512i vmask, int* __restrict list, int& n, int* __restrict maybe,
    int& n_maybe) {
  const __m512i one = _mm512_set1_epi64(1), low6 = _mm512_set1_epi64(63);
  const __m512d dx = _mm512_sub_pd(vx, _mm512_maskz_loadu_pd(live, x + j));
  const __m512d dy = _mm512_sub_pd(vy, _mm512_maskz_loadu_pd(live, y + j));
  const __m512d dz = _mm512_sub_pd(vz, _mm512_maskz_loadu_pd(live, z + j));
  const __m512d r2 = _mm512_fmadd_pd(dz, dz, _mm512_fmadd_pd(dy, dy, _mm512_mul_pd(dx, dx)));
  __mmask8 m = _mm512_mask_cmp_pd_mask(live, r2, vrc2, _CMP_LT_OQ);
  const __mmask8 own_j = _mm512_cmp_pd_mask(_mm512_maskz_loadu_pd(live, own + j), _mm512_setzero_pd(), _CMP_NEQ_UQ);
  if (kGhost) m &= own_j;
  // keeps_cross_pair on 8 lanes: odd(key_o ^ key_g) != (key_o < key_g).
  const __m512i kj = _mm512_maskz_loadu_epi64(live, key + j);
  const __mmask8 odd = _mm512_test_epi64_mask(_mm512_xor_si512(kj, vkey), one);
  const __mmask8 keep = kGhost ? static_cast<__mmask8>(odd ^ _mm512_cmp_epi64_mask(kj, vkey, _MM_CMPINT_LT))
                               : static_cast<__mmask8>(own_j | (odd ^ _mm512_cmp_epi64_mask(vkey, kj, _MM_CMPINT_LT)));
  const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32(j), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  if (kScreen) {
    __mmask8 sc;
    // In the partner-id range and the partner's bit (id mod 64) set in the mask.
    if (kGhost) {
      sc = _mm512_cmp_epi64_mask(_mm512_maskz_loadu_epi64(live, elo + j), vid, _MM_CMPINT_LE) &
           _mm512_cmp_epi64_mask(_mm512_maskz_loadu_epi64(live, ehi + j), vid, _MM_CMPINT_NLT) &
           _mm512_test_epi64_mask(_mm512_srlv_epi64(_mm512_maskz_loadu_epi64(live, emask + j), _mm512_and_si512(vid, low6)), one);
    } else {
      const __m512i idj = _mm512_maskz_loadu_epi64(live, ids + j);
      sc = _mm512_cmp_epi64_mask(idj, vlo, _MM_CMPINT_NLT) & _mm512_cmp_epi64_mask(idj, vhi, _MM_CMPINT_LE) &
           _mm512_test_epi64_mask(_mm512_srlv_epi64(vmask, _mm512_and_si512(idj, low6)), one);
    }
    sc &= m;
    m &= static_cast<__mmask8>(~sc);
    if (sc) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(maybe + n_maybe), _mm256_maskz_compress_epi32(sc, idx));
      n_maybe += __builtin_popcount(sc);
    }
  }
  m &= keep;
  // Compress in a register, then a plain store (the memory form of
  // vpcompressd is microcoded and slow on AMD Zen 4).
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(list + n), _mm256_maskz_compress_epi32(m, idx));
  n += __builtin_popcount(m);
}

template <bool kGhost, bool kScreen>
PMEWALD_TARGET_V4 int select_v4_loop(const NeighbourQuery& qr, int jb, int je,
                                                              int* __restrict list, int n, int* __restrict maybe,
                                                              int& n_maybe_out) {
  const __m512d vx = _mm512_set1_pd(qr.xi), vy = _mm512_set1_pd(qr.yi), vz = _mm512_set1_pd(qr.zi);
  const __m512d vrc2 = _mm512_set1_pd(qr.rc2);
  const __m512i vid = _mm512_set1_epi64(qr.id_i), vlo = _mm512_set1_epi64(qr.lo), vhi = _mm512_set1_epi64(qr.hi);
  const __m512i vkey = _mm512_set1_epi64(qr.key_i);
  // Locals, so the stores into the lists cannot be taken to alias the query.
  const double *x = qr.x, *y = qr.y, *z = qr.z, *own = qr.own;
  const std::int64_t *key = qr.key, *ids = qr.ids, *elo = qr.elo, *ehi = qr.ehi, *emask = qr.emask;
  const __m512i vmask = _mm512_set1_epi64(qr.mask);
  int n_maybe = n_maybe_out;
  int j = jb;
  for (; j + 8 <= je; j += 8)
    select8<kGhost, kScreen>(0xff, j, vx, vy, vz, vrc2, vkey, vid, vlo, vhi, x, y, z, own, key, ids, elo, ehi,
                             emask, vmask, list, n, maybe, n_maybe);
  if (j < je)
    select8<kGhost, kScreen>(static_cast<__mmask8>((1u << (je - j)) - 1), j, vx, vy, vz, vrc2, vkey, vid, vlo,
                             vhi, x, y, z, own, key, ids, elo, ehi, emask, vmask, list, n, maybe, n_maybe);
  n_maybe_out = n_maybe;
  return n;
}

PMEWALD_TARGET_V4 int select_v4(const NeighbourQuery& qr, int jb, int je, int* list,
                                                         int n, int* maybe, int& n_maybe) {
  if (qr.ids)
    return qr.need_owned ? select_v4_loop<true, true>(qr, jb, je, list, n, maybe, n_maybe)
                         : select_v4_loop<false, true>(qr, jb, je, list, n, maybe, n_maybe);
  return qr.need_owned ? select_v4_loop<true, false>(qr, jb, je, list, n, maybe, n_maybe)
                       : select_v4_loop<false, false>(qr, jb, je, list, n, maybe, n_maybe);
}

struct CompressTable {
  alignas(16) int idx[16][4];
  CompressTable() {
    for (int m = 0; m < 16; ++m) {
      int k = 0;
      for (int l = 0; l < 4; ++l)
        if (m & (1 << l)) idx[m][k++] = l;
      for (; k < 4; ++k) idx[m][k] = 0;
    }
  }
};
const CompressTable kCompress;

// The AVX2 form of select8: 4 lanes, masked loads for the tail, the hits
// appended through the 16-entry shuffle table.
template <bool kGhost, bool kScreen>
PMEWALD_TARGET_V3 PMEWALD_INLINE void select4(
    int live, int j, __m256d vx, __m256d vy, __m256d vz, __m256d vrc2, __m256i vkey, __m256i vid, __m256i vlo,
    __m256i vhi, const double* __restrict x, const double* __restrict y, const double* __restrict z,
    const double* __restrict own, const std::int64_t* __restrict key, const std::int64_t* __restrict ids,
    const std::int64_t* __restrict elo, const std::int64_t* __restrict ehi, const std::int64_t* __restrict emask,
    __m256i vmask, int* __restrict list, int& n, int* __restrict maybe, int& n_maybe) {
  const __m256i one = _mm256_set1_epi64x(1), low6 = _mm256_set1_epi64x(63);
  const __m256i lanes = _mm256_setr_epi64x(1, 2, 4, 8);
  const __m256i lm = _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x(live), lanes), lanes);
#define ld(p) _mm256_maskload_pd((p) + j, lm)
#define ldi(p) _mm256_maskload_epi64(reinterpret_cast<const long long*>((p) + j), lm)
#define bits(v) _mm256_movemask_pd(_mm256_castsi256_pd(v))
  const __m256d dx = _mm256_sub_pd(vx, ld(x));
  const __m256d dy = _mm256_sub_pd(vy, ld(y));
  const __m256d dz = _mm256_sub_pd(vz, ld(z));
  const __m256d r2 = _mm256_fmadd_pd(dz, dz, _mm256_fmadd_pd(dy, dy, _mm256_mul_pd(dx, dx)));
  int m = live & _mm256_movemask_pd(_mm256_cmp_pd(r2, vrc2, _CMP_LT_OQ));
  const int own_j = _mm256_movemask_pd(_mm256_cmp_pd(ld(own), _mm256_setzero_pd(), _CMP_NEQ_UQ));
  if (kGhost) m &= own_j;
  const __m256i kj = ldi(key);
  const int odd = bits(_mm256_cmpeq_epi64(_mm256_and_si256(_mm256_xor_si256(kj, vkey), one), one));
  const int keep = kGhost ? odd ^ bits(_mm256_cmpgt_epi64(vkey, kj)) : own_j | (odd ^ bits(_mm256_cmpgt_epi64(kj, vkey)));
  const __m128i base = _mm_set1_epi32(j);
  if (kScreen) {
    // Lanes screened out: outside the partner-id range (a > b with (a, b) = (lo, id) or
    // (id, hi)), or the partner's bit (id mod 64) clear in the mask.
    __m256i out, bit;
    if (kGhost) {
      out = _mm256_or_si256(_mm256_cmpgt_epi64(ldi(elo), vid), _mm256_cmpgt_epi64(vid, ldi(ehi)));
      bit = _mm256_srlv_epi64(ldi(emask), _mm256_and_si256(vid, low6));
    } else {
      const __m256i id = ldi(ids);
      out = _mm256_or_si256(_mm256_cmpgt_epi64(vlo, id), _mm256_cmpgt_epi64(id, vhi));
      bit = _mm256_srlv_epi64(vmask, _mm256_and_si256(id, low6));
    }
    out = _mm256_or_si256(out, _mm256_cmpeq_epi64(_mm256_and_si256(bit, one), _mm256_setzero_si256()));
    const int sc = m & ~bits(out);
    m &= ~sc;
    if (sc) {
      const __m128i sidx = _mm_load_si128(reinterpret_cast<const __m128i*>(kCompress.idx[sc]));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(maybe + n_maybe), _mm_add_epi32(base, sidx));
      n_maybe += __builtin_popcount(static_cast<unsigned>(sc));
    }
  }
#undef ld
#undef ldi
#undef bits
  m &= keep;
  const __m128i idx = _mm_load_si128(reinterpret_cast<const __m128i*>(kCompress.idx[m]));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(list + n), _mm_add_epi32(base, idx));
  n += __builtin_popcount(static_cast<unsigned>(m));
}

template <bool kGhost, bool kScreen>
PMEWALD_TARGET_V3 int select_v3_loop(const NeighbourQuery& qr, int jb, int je,
                                                              int* __restrict list, int n, int* __restrict maybe,
                                                              int& n_maybe_out) {
  const __m256d vx = _mm256_set1_pd(qr.xi), vy = _mm256_set1_pd(qr.yi), vz = _mm256_set1_pd(qr.zi);
  const __m256d vrc2 = _mm256_set1_pd(qr.rc2);
  const __m256i vid = _mm256_set1_epi64x(qr.id_i), vlo = _mm256_set1_epi64x(qr.lo), vhi = _mm256_set1_epi64x(qr.hi);
  const __m256i vkey = _mm256_set1_epi64x(qr.key_i);
  const double *x = qr.x, *y = qr.y, *z = qr.z, *own = qr.own;
  const std::int64_t *key = qr.key, *ids = qr.ids, *elo = qr.elo, *ehi = qr.ehi, *emask = qr.emask;
  const __m256i vmask = _mm256_set1_epi64x(qr.mask);
  int n_maybe = n_maybe_out;
  int j = jb;
  for (; j + 4 <= je; j += 4)
    select4<kGhost, kScreen>(0xf, j, vx, vy, vz, vrc2, vkey, vid, vlo, vhi, x, y, z, own, key, ids, elo, ehi, emask,
                             vmask, list, n, maybe, n_maybe);
  if (j < je)
    select4<kGhost, kScreen>((1 << (je - j)) - 1, j, vx, vy, vz, vrc2, vkey, vid, vlo, vhi, x, y, z, own, key, ids,
                             elo, ehi, emask, vmask, list, n, maybe, n_maybe);
  n_maybe_out = n_maybe;
  return n;
}

PMEWALD_TARGET_V3 int select_v3(const NeighbourQuery& qr, int jb, int je, int* list,
                                                         int n, int* maybe, int& n_maybe) {
  if (qr.ids)
    return qr.need_owned ? select_v3_loop<true, true>(qr, jb, je, list, n, maybe, n_maybe)
                         : select_v3_loop<false, true>(qr, jb, je, list, n, maybe, n_maybe);
  return qr.need_owned ? select_v3_loop<true, false>(qr, jb, je, list, n, maybe, n_maybe)
                       : select_v3_loop<false, false>(qr, jb, je, list, n, maybe, n_maybe);
}
#endif

void batch_base(PMEWALD_BATCH_ARGS) { batch<2>(PMEWALD_BATCH_PASS); }
void block_base(PMEWALD_BLOCK_ARGS) { block<2>(PMEWALD_BLOCK_PASS); }
void unit_base(PMEWALD_UNIT_ARGS) { unit_batch<2>(PMEWALD_UNIT_PASS); }
int select_base(const NeighbourQuery& qr, int jb, int je, int* list, int n, int* maybe, int& n_maybe) {
  return select_scalar(qr, jb, je, list, n, maybe, n_maybe);
}

struct Dispatch {
  BatchFn fn = simd::choose<BatchFn>(PMEWALD_SIMD_VERSIONS(batch_v4, batch_v3, batch_base));
  SelectFn sel = simd::choose<SelectFn>(PMEWALD_SIMD_VERSIONS(select_v4, select_v3, select_base));
  BlockFn blk = simd::choose<BlockFn>(PMEWALD_SIMD_VERSIONS(block_v4, block_v3, block_base));
  UnitFn unit = simd::choose<UnitFn>(PMEWALD_SIMD_VERSIONS(unit_v4, unit_v3, unit_base));
};

const Dispatch& dispatch() {
  static const Dispatch d;
  return d;
}

}  // namespace

void erfc_pair_batch(PMEWALD_BATCH_ARGS) { dispatch().fn(PMEWALD_BATCH_PASS); }

void erfc_pair_block(PMEWALD_BLOCK_ARGS) { dispatch().blk(PMEWALD_BLOCK_PASS); }
void erfc_unit_batch(PMEWALD_UNIT_ARGS) { dispatch().unit(PMEWALD_UNIT_PASS); }

int select_within(const NeighbourQuery& qr, int jb, int je, int* list, int n, int* maybe, int& n_maybe) {
  return dispatch().sel(qr, jb, je, list, n, maybe, n_maybe);
}

void erfc_pair_batch_scalar(PMEWALD_BATCH_ARGS) {
  const double* coef = ErfcTable::instance().coefficients();
  const double a_tsp = alpha * kTwoOverSqrtPi;
  const double tiny2 = coincident2(alpha);
  for (int b = 0; b < n; ++b) {
    const int j = js[b];
    const double dx = xi - x[j], dy = yi - y[j], dz = zi - z[j];
    const double r2 = dx * dx + dy * dy + dz * dz;
    const double inv_r = 1.0 / std::sqrt(r2 - tiny2);  // NaN for a coincident pair
    double erfc_ar, exp_mar2;
    ErfcTable::eval(coef, alpha * r2 * inv_r, erfc_ar, exp_mar2);
    const double kqq = kqi * q[j];
    const double epair = kqq * erfc_ar * inv_r;
    const double fr = (epair + kqq * a_tsp * exp_mar2) * inv_r * inv_r;
    double f[3];
    PairBatchAcc::add_pair(1.0, fr, dx, dy, dz, acc, f);
    acc[0] += epair;
    fx[b] = f[0];
    fy[b] = f[1];
    fz[b] = f[2];
  }
}

const char* pair_kernel_isa() { return simd::isa_name(); }

const char* precision_name(PairPrecision p) { return p == PairPrecision::Mixed ? "mixed" : "double"; }

PairKernels pair_kernels(PairPrecision precision, double alpha_cutoff) {
  const bool vector = alpha_cutoff < kMaxAlphaR;
  if (precision == PairPrecision::Mixed) {
    if (!vector) throw std::invalid_argument("the mixed-precision pair kernel needs alpha * cutoff < 8");
    return {erfc_pair_batch_mixed, erfc_pair_block_mixed};
  }
  if (!vector) return {erfc_pair_batch_scalar, nullptr};
  return {erfc_pair_batch, erfc_pair_block};
}

}  // namespace realspace
}  // namespace pmewald
