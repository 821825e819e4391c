#include "realspace/list_gather.hpp"

#include "base/simd.hpp"
#include "realspace/pair_lanes.hpp"  // PMEWALD_INLINE

// The reused list's batch (list_gather.hpp), one source for several instruction
// sets: AVX-512 and AVX2 intrinsics in functions compiled for x86-64-v4 and -v3,
// the scalar loops for the baseline (and every version's force scatter).
//
// Why: on the LAMMPS peptide (54,108 atoms, 10 A, 1 rank) the scalar gather, the
// shell's selection and the force scatter around the block kernel took 32% of a
// call's samples (perf), more than the kernel itself (25%).

namespace pmewald {
inline namespace realspace {

namespace {

using GatherFn = int (*)(const int*, int, int, int, const double*, double, double, double, double, const ListBatch&);
using ScatterFn = void (*)(const int*, int, const double*, const double*, const double*, double*);

PMEWALD_INLINE int gather_scalar(const int* __restrict js, int c0, int cm, int c1, const double* __restrict xyzq,
                                 double xi, double yi, double zi, double rc2, const ListBatch& o) {
  int* __restrict sel = o.sel;
  double *__restrict bx = o.x, *__restrict by = o.y, *__restrict bz = o.z, *__restrict bq = o.q;
  int n = 0;
  for (int b = c0; b < cm; ++b, ++n) {
    const int j = js[b];
    const double* pj = xyzq + 4 * static_cast<long>(j);
    sel[n] = j;
    bx[n] = pj[0];
    by[n] = pj[1];
    bz[n] = pj[2];
    bq[n] = pj[3];
  }
  for (int b = cm; b < c1; ++b) {  // branch-free
    const int j = js[b];
    const double* pj = xyzq + 4 * static_cast<long>(j);
    const double xj = pj[0], yj = pj[1], zj = pj[2];
    const double dx = xi - xj, dy = yi - yj, dz = zi - zj;
    sel[n] = j;
    bx[n] = xj;
    by[n] = yj;
    bz[n] = zj;
    bq[n] = pj[3];
    n += dx * dx + dy * dy + dz * dz < rc2;
  }
  return n;
}

PMEWALD_INLINE void scatter_scalar(const int* __restrict sel, int n, const double* __restrict fx,
                                   const double* __restrict fy, const double* __restrict fz, double* __restrict f) {
  for (int b = 0; b < n; ++b) {
    double* fj = f + 3 * static_cast<long>(sel[b]);
    fj[0] -= fx[b];
    fj[1] -= fy[b];
    fj[2] -= fz[b];
  }
}

int gather_base(const int* js, int c0, int cm, int c1, const double* xyzq, double xi, double yi, double zi,
                double rc2, const ListBatch& o) {
  return gather_scalar(js, c0, cm, c1, xyzq, xi, yi, zi, rc2, o);
}
void scatter_base(const int* sel, int n, const double* fx, const double* fy, const double* fz, double* f) {
  scatter_scalar(sel, n, fx, fy, fz, f);
}

#if PMEWALD_X86_DISPATCH
// The AVX2 form of compress: for each 4-lane mask, the lanes kept moved to the
// front, as 32-bit indices of doubles (8 per register) and of ints (4).
struct CompressTables {
  alignas(32) int dbl[16][8];
  alignas(16) int one[16][4];
  CompressTables() {
    for (int m = 0; m < 16; ++m) {
      int k = 0;
      for (int l = 0; l < 4; ++l)
        if (m & (1 << l)) {
          dbl[m][2 * k] = 2 * l;
          dbl[m][2 * k + 1] = 2 * l + 1;
          one[m][k++] = l;
        }
      for (; k < 4; ++k) {
        dbl[m][2 * k] = dbl[m][2 * k + 1] = 0;
        one[m][k] = 0;
      }
    }
  }
};
const CompressTables kTables;

// Four partners' x, y, z, q (one 32-byte load each, lanes past `count` repeat the
// first partner) transposed into four registers, partner k in lane k.
PMEWALD_TARGET_V3 PMEWALD_INLINE void load4(const int* __restrict js, int count, const double* __restrict xyzq,
                                            __m128i& idx, __m256d& x, __m256d& y, __m256d& z, __m256d& q) {
  int j[4];
  for (int k = 0; k < 4; ++k) j[k] = js[k < count ? k : 0];
  idx = _mm_loadu_si128(reinterpret_cast<const __m128i*>(j));
  const __m256d r0 = _mm256_loadu_pd(xyzq + 4 * static_cast<long>(j[0]));
  const __m256d r1 = _mm256_loadu_pd(xyzq + 4 * static_cast<long>(j[1]));
  const __m256d r2 = _mm256_loadu_pd(xyzq + 4 * static_cast<long>(j[2]));
  const __m256d r3 = _mm256_loadu_pd(xyzq + 4 * static_cast<long>(j[3]));
  const __m256d xz01 = _mm256_unpacklo_pd(r0, r1), yq01 = _mm256_unpackhi_pd(r0, r1);  // [x0 x1 z0 z1], [y0 y1 q0 q1]
  const __m256d xz23 = _mm256_unpacklo_pd(r2, r3), yq23 = _mm256_unpackhi_pd(r2, r3);
  x = _mm256_permute2f128_pd(xz01, xz23, 0x20);
  z = _mm256_permute2f128_pd(xz01, xz23, 0x31);
  y = _mm256_permute2f128_pd(yq01, yq23, 0x20);
  q = _mm256_permute2f128_pd(yq01, yq23, 0x31);
}

PMEWALD_TARGET_V3 int gather_v3(const int* __restrict js, int c0, int cm, int c1, const double* __restrict xyzq,
                                double xi, double yi, double zi, double rc2, const ListBatch& o) {
  int* __restrict sel = o.sel;
  double *__restrict bx = o.x, *__restrict by = o.y, *__restrict bz = o.z, *__restrict bq = o.q;
  int n = 0;
  __m128i idx;
  __m256d x, y, z, q;
  for (int b = c0; b < cm; b += 4) {
    const int count = cm - b < 4 ? cm - b : 4;
    load4(js + b, count, xyzq, idx, x, y, z, q);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(sel + n), idx);
    _mm256_storeu_pd(bx + n, x);
    _mm256_storeu_pd(by + n, y);
    _mm256_storeu_pd(bz + n, z);
    _mm256_storeu_pd(bq + n, q);
    n += count;
  }
  const __m256d vx = _mm256_set1_pd(xi), vy = _mm256_set1_pd(yi), vz = _mm256_set1_pd(zi);
  const __m256d vrc2 = _mm256_set1_pd(rc2);
  for (int b = cm; b < c1; b += 4) {
    const int count = c1 - b < 4 ? c1 - b : 4;
    load4(js + b, count, xyzq, idx, x, y, z, q);
    const __m256d dx = _mm256_sub_pd(vx, x), dy = _mm256_sub_pd(vy, y), dz = _mm256_sub_pd(vz, z);
    const __m256d r2 = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(dx, dx), _mm256_mul_pd(dy, dy)), _mm256_mul_pd(dz, dz));
    const int m = _mm256_movemask_pd(_mm256_cmp_pd(r2, vrc2, _CMP_LT_OQ)) & ((1 << count) - 1);
    const __m256i pd = _mm256_load_si256(reinterpret_cast<const __m256i*>(kTables.dbl[m]));
    const __m128i pi = _mm_load_si128(reinterpret_cast<const __m128i*>(kTables.one[m]));
#define compress(v) _mm256_castps_pd(_mm256_permutevar8x32_ps(_mm256_castpd_ps(v), pd))
    _mm_storeu_si128(reinterpret_cast<__m128i*>(sel + n),
                     _mm_castps_si128(_mm_permutevar_ps(_mm_castsi128_ps(idx), pi)));
    _mm256_storeu_pd(bx + n, compress(x));
    _mm256_storeu_pd(by + n, compress(y));
    _mm256_storeu_pd(bz + n, compress(z));
    _mm256_storeu_pd(bq + n, compress(q));
#undef compress
    n += __builtin_popcount(static_cast<unsigned>(m));
  }
  return n;
}
PMEWALD_TARGET_V3 void scatter_v3(const int* sel, int n, const double* fx, const double* fy, const double* fz,
                                  double* f) {
  scatter_scalar(sel, n, fx, fy, fz, f);
}

// Eight partners' x, y, z, q (one 32-byte load each, lanes past `count` repeat
// the first partner) transposed into four registers, partner k in lane k.
PMEWALD_TARGET_V4 PMEWALD_INLINE void load8(const int* __restrict js, int count, const double* __restrict xyzq,
                                            __m256i& idx, __m512d& x, __m512d& y, __m512d& z, __m512d& q) {
  int j[8];
  for (int k = 0; k < 8; ++k) j[k] = js[k < count ? k : 0];
  idx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(j));
#define row(k) _mm256_loadu_pd(xyzq + 4 * static_cast<long>(j[k]))
  // t_k = partners k and k + 4: [x y z q | x y z q]
  const __m512d t0 = _mm512_insertf64x4(_mm512_castpd256_pd512(row(0)), row(4), 1);
  const __m512d t1 = _mm512_insertf64x4(_mm512_castpd256_pd512(row(1)), row(5), 1);
  const __m512d t2 = _mm512_insertf64x4(_mm512_castpd256_pd512(row(2)), row(6), 1);
  const __m512d t3 = _mm512_insertf64x4(_mm512_castpd256_pd512(row(3)), row(7), 1);
#undef row
  // [x0 x1 z0 z1 | x4 x5 z4 z5], [y0 y1 q0 q1 | y4 y5 q4 q5], and the same for 2, 3, 6, 7
  const __m512d xz01 = _mm512_unpacklo_pd(t0, t1), yq01 = _mm512_unpackhi_pd(t0, t1);
  const __m512d xz23 = _mm512_unpacklo_pd(t2, t3), yq23 = _mm512_unpackhi_pd(t2, t3);
  const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  x = _mm512_permutex2var_pd(xz01, lo, xz23);
  z = _mm512_permutex2var_pd(xz01, hi, xz23);
  y = _mm512_permutex2var_pd(yq01, lo, yq23);
  q = _mm512_permutex2var_pd(yq01, hi, yq23);
}

PMEWALD_TARGET_V4 int gather_v4(const int* __restrict js, int c0, int cm, int c1, const double* __restrict xyzq,
                                double xi, double yi, double zi, double rc2, const ListBatch& o) {
  int* __restrict sel = o.sel;
  double *__restrict bx = o.x, *__restrict by = o.y, *__restrict bz = o.z, *__restrict bq = o.q;
  int n = 0;
  __m256i idx;
  __m512d x, y, z, q;
  for (int b = c0; b < cm; b += 8) {
    const int count = cm - b < 8 ? cm - b : 8;
    load8(js + b, count, xyzq, idx, x, y, z, q);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sel + n), idx);
    _mm512_storeu_pd(bx + n, x);
    _mm512_storeu_pd(by + n, y);
    _mm512_storeu_pd(bz + n, z);
    _mm512_storeu_pd(bq + n, q);
    n += count;
  }
  const __m512d vx = _mm512_set1_pd(xi), vy = _mm512_set1_pd(yi), vz = _mm512_set1_pd(zi);
  const __m512d vrc2 = _mm512_set1_pd(rc2);
  for (int b = cm; b < c1; b += 8) {
    const int count = c1 - b < 8 ? c1 - b : 8;
    load8(js + b, count, xyzq, idx, x, y, z, q);
    const __m512d dx = _mm512_sub_pd(vx, x), dy = _mm512_sub_pd(vy, y), dz = _mm512_sub_pd(vz, z);
    // The scalar loop's dx dx + dy dy + dz dz, rounded the same way (no FMA), so every
    // version selects the same pairs.
    const __m512d r2 = _mm512_add_pd(_mm512_add_pd(_mm512_mul_pd(dx, dx), _mm512_mul_pd(dy, dy)), _mm512_mul_pd(dz, dz));
    const __mmask8 m = _mm512_cmp_pd_mask(r2, vrc2, _CMP_LT_OQ) & static_cast<__mmask8>((1u << count) - 1);
    // Compress in a register, then a plain store (the memory form is slow on AMD Zen 4).
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sel + n), _mm256_maskz_compress_epi32(m, idx));
    _mm512_storeu_pd(bx + n, _mm512_maskz_compress_pd(m, x));
    _mm512_storeu_pd(by + n, _mm512_maskz_compress_pd(m, y));
    _mm512_storeu_pd(bz + n, _mm512_maskz_compress_pd(m, z));
    _mm512_storeu_pd(bq + n, _mm512_maskz_compress_pd(m, q));
    n += __builtin_popcount(static_cast<unsigned>(m));
  }
  return n;
}

// The scatter stays scalar (the compiler pairs x and y): eight partners at a time,
// transposed into [fx fy fz 0] per partner and subtracted with masked loads and
// stores, made a peptide call 25% slower on AMD Zen 4 (130 against 104 ms).
PMEWALD_TARGET_V4 void scatter_v4(const int* sel, int n, const double* fx, const double* fy, const double* fz,
                                  double* f) {
  scatter_scalar(sel, n, fx, fy, fz, f);
}
#endif

GatherFn gather_fn() {
  static const GatherFn fn = simd::choose<GatherFn>(PMEWALD_SIMD_VERSIONS(gather_v4, gather_v3, gather_base));
  return fn;
}
ScatterFn scatter_fn() {
  static const ScatterFn fn = simd::choose<ScatterFn>(PMEWALD_SIMD_VERSIONS(scatter_v4, scatter_v3, scatter_base));
  return fn;
}

}  // namespace

int gather_listed(const int* js, int c0, int cm, int c1, const double* xyzq, double xi, double yi, double zi,
                  double rc2, const ListBatch& out) {
  return gather_fn()(js, c0, cm, c1, xyzq, xi, yi, zi, rc2, out);
}

void scatter_listed(const int* sel, int n, const double* fx, const double* fy, const double* fz, double* f) {
  scatter_fn()(sel, n, fx, fy, fz, f);
}

}  // namespace realspace
}  // namespace pmewald
