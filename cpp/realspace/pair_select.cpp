#include "realspace/pair_select.hpp"

#include "base/simd.hpp"
#include "realspace/pair_lanes.hpp"  // PMEWALD_INLINE

// The selection of the neighbour search (pair_select.hpp), one source for
// several instruction sets like the pair kernel (pair_kernel.cpp): AVX-512 and
// AVX2 intrinsics inside functions compiled for x86-64-v4 and -v3, a scalar
// branch-free loop for the baseline; the best one the CPU supports is chosen
// once at run time (simd.hpp).

namespace pmewald {
inline namespace realspace {

namespace {

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

int select_base(const NeighbourQuery& qr, int jb, int je, int* list, int n, int* maybe, int& n_maybe) {
  return select_scalar(qr, jb, je, list, n, maybe, n_maybe);
}

SelectFn chosen() {
  static const SelectFn fn = simd::choose<SelectFn>(PMEWALD_SIMD_VERSIONS(select_v4, select_v3, select_base));
  return fn;
}

}  // namespace

int select_within(const NeighbourQuery& qr, int jb, int je, int* list, int n, int* maybe, int& n_maybe) {
  return chosen()(qr, jb, je, list, n, maybe, n_maybe);
}

}  // namespace realspace
}  // namespace pmewald
