#include "realspace/pair_kernel.hpp"

#include <cmath>
#include <stdexcept>

#include "realspace/erfc_table.hpp"
#include "realspace/pair_math.hpp"
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

using namespace lanes;  // pair_lanes.hpp, pair_math.hpp: constants, splat, gather, pad, PairSums, erfcx, exp

// The kernel on partners already contiguous in bx, by, bz, bq (room for n rounded
// up to L: the lanes past n are padded here with a zero charge 1 / alpha away,
// which contributes nothing, whatever the units), so the vector loop only does
// whole-register loads and stores.
template <int L, bool Virial = true>
PMEWALD_INLINE void block(int n, double* __restrict bx, double* __restrict by, double* __restrict bz,
                          double* __restrict bq, double xi, double yi, double zi, double kqi, double alpha,
                          double* __restrict fx, double* __restrict fy, double* __restrict fz,
                          double* __restrict acc) {
  using V = typename Vec<L>::D;
  using VL = typename Vec<L>::I;
  const double a_tsp = alpha * kTwoOverSqrtPi;
  const double tiny2 = coincident2(alpha);
  lanes::PairSums<V, L, Virial> sums;
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


#if PMEWALD_X86_DISPATCH
PMEWALD_TARGET_V4 void batch_v4(PMEWALD_BATCH_ARGS) { batch<8>(PMEWALD_BATCH_PASS); }
PMEWALD_TARGET_V3 void batch_v3(PMEWALD_BATCH_ARGS) { batch<4>(PMEWALD_BATCH_PASS); }
PMEWALD_TARGET_V4 void block_v4(PMEWALD_BLOCK_ARGS) { block<8>(PMEWALD_BLOCK_PASS); }
PMEWALD_TARGET_V3 void block_v3(PMEWALD_BLOCK_ARGS) { block<4>(PMEWALD_BLOCK_PASS); }
PMEWALD_TARGET_V4 void block_nv_v4(PMEWALD_BLOCK_ARGS) { block<8, false>(PMEWALD_BLOCK_PASS); }
PMEWALD_TARGET_V3 void block_nv_v3(PMEWALD_BLOCK_ARGS) { block<4, false>(PMEWALD_BLOCK_PASS); }
PMEWALD_TARGET_V4 void unit_v4(PMEWALD_UNIT_ARGS) { unit_batch<8>(PMEWALD_UNIT_PASS); }
PMEWALD_TARGET_V3 void unit_v3(PMEWALD_UNIT_ARGS) { unit_batch<4>(PMEWALD_UNIT_PASS); }

#endif

void batch_base(PMEWALD_BATCH_ARGS) { batch<2>(PMEWALD_BATCH_PASS); }
void block_base(PMEWALD_BLOCK_ARGS) { block<2>(PMEWALD_BLOCK_PASS); }
void block_nv_base(PMEWALD_BLOCK_ARGS) { block<2, false>(PMEWALD_BLOCK_PASS); }
void unit_base(PMEWALD_UNIT_ARGS) { unit_batch<2>(PMEWALD_UNIT_PASS); }

struct Dispatch {
  BatchFn fn = simd::choose<BatchFn>(PMEWALD_SIMD_VERSIONS(batch_v4, batch_v3, batch_base));
  BlockFn blk = simd::choose<BlockFn>(PMEWALD_SIMD_VERSIONS(block_v4, block_v3, block_base));
  BlockFn blk_nv = simd::choose<BlockFn>(PMEWALD_SIMD_VERSIONS(block_nv_v4, block_nv_v3, block_nv_base));
  UnitFn unit = simd::choose<UnitFn>(PMEWALD_SIMD_VERSIONS(unit_v4, unit_v3, unit_base));
};

const Dispatch& dispatch() {
  static const Dispatch d;
  return d;
}

}  // namespace

void erfc_pair_batch(PMEWALD_BATCH_ARGS) { dispatch().fn(PMEWALD_BATCH_PASS); }

void erfc_pair_block(PMEWALD_BLOCK_ARGS) { dispatch().blk(PMEWALD_BLOCK_PASS); }
void erfc_pair_block_no_virial(PMEWALD_BLOCK_ARGS) { dispatch().blk_nv(PMEWALD_BLOCK_PASS); }
void erfc_unit_batch(PMEWALD_UNIT_ARGS) { dispatch().unit(PMEWALD_UNIT_PASS); }

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
    return {erfc_pair_batch_mixed, erfc_pair_block_mixed, erfc_pair_block_mixed_no_virial};
  }
  if (!vector) return {erfc_pair_batch_scalar, nullptr};
  return {erfc_pair_batch, erfc_pair_block, erfc_pair_block_no_virial};
}

}  // namespace realspace
}  // namespace pmewald
