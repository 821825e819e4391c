// The erfc-screened Coulomb pair kernel of the real-space sum, on a batch of
// partners of one atom: the hot loop of real space, kept apart so it can be
// compiled for several instruction sets and chosen at run time.
//
// For one atom i (position ri, k q_i) and partners j = js[b], b < n, given as
// sorted structure-of-arrays (x, y, z, q):
//
//   d = ri - rj, r = |d|, x = alpha r,  e = k q_i q_j erfc(x) / r
//   fr = (e + k q_i q_j (2 alpha / sqrt(pi)) exp(-x^2)) / r^2   (force on i: fr d)
//
// Every pair counts fully (the search hands each pair to exactly one rank).
// Writes fr d of pair b to (fx, fy, fz)[b] (the caller subtracts it from j;
// the arrays need room for n rounded up to a multiple of 8, n <= kMaxBatch)
// and ADDS to acc[0..9]: sum e, the virial sum fr d_a d_b in base/virial.hpp's
// order (xx, yy, zz, xy, xz, yz), and the force on i (fx, fy, fz); the
// mixed-precision kernels also add sum |fr d|^2 to acc[10] (the error model's
// input, below), the double ones leave it.
//
// erfc(x) = exp(-x^2) erfcx(x): exp by range reduction and a polynomial,
// erfcx by a polynomial in (x - 4)/(x + 4) (both ~1e-15 relative), valid for
// x = alpha r < kMaxAlphaR = 8: callers with alpha * cutoff >= 8 (erfc(8) =
// 1.1e-29) use erfc_pair_batch_scalar, which takes any x. No table, no branch
// and no libm call, in vectors of 8, 4 or 2 lanes chosen for the CPU at run
// time (GCC/Clang vector extensions).
#pragma once

#include <cstdint>

#include "base/virial.hpp"

namespace pmewald {
inline namespace realspace {

struct PairBatchAcc {
  // E, W xx yy zz xy xz yz (Virial's order), F_i x y z, sum |f_pair|^2 (mixed only)
  static constexpr int kSize = 11;
  static constexpr int kEnergy = 0, kVirial = 1, kForce = 7, kPairForce2 = 10;

  // One pair in the scalar paths (erfc_pair_batch_scalar, excluded pairs): its
  // force on i f = fr d, the weighted virial w f_a d_b into acc[1..6] and f into
  // acc[7..9]. The energy (acc[0]) is the caller's: excluded pairs keep theirs apart.
  static void add_pair(double w, double fr, double dx, double dy, double dz, double* acc, double f[3]) {
    f[0] = fr * dx;
    f[1] = fr * dy;
    f[2] = fr * dz;
    acc[kVirial + Virial::XX] += w * f[0] * dx;
    acc[kVirial + Virial::YY] += w * f[1] * dy;
    acc[kVirial + Virial::ZZ] += w * f[2] * dz;
    acc[kVirial + Virial::XY] += w * f[0] * dy;
    acc[kVirial + Virial::XZ] += w * f[0] * dz;
    acc[kVirial + Virial::YZ] += w * f[1] * dz;
    acc[7] += f[0];
    acc[8] += f[1];
    acc[9] += f[2];
  }
};

// Largest batch erfc_pair_batch takes (n <= kMaxBatch).
constexpr int kMaxBatch = 256;

void erfc_pair_batch(int n, const int* js, double xi, double yi, double zi, double kqi, const double* x,
                     const double* y, const double* z, const double* q, double alpha, double* fx,
                     double* fy, double* fz, double* acc);

// The same on partners already gathered: positions and charges in bx, by, bz,
// bq (b < n; room for n rounded up to a multiple of 8, the lanes past n
// overwritten with padding). The reused pair list (pair_list.cpp) gathers them
// while selecting the pairs within the cutoff.
void erfc_pair_block(int n, double* bx, double* by, double* bz, double* bq, double xi, double yi, double zi,
                     double kqi, double alpha, double* fx, double* fy, double* fz, double* acc);
// The same without the pairs' virial (acc[1..6] untouched): the reused list forms it
// from the forces on its atoms instead (pair_list.cpp), 6 multiply-adds a pair fewer.
void erfc_pair_block_no_virial(int n, double* bx, double* by, double* bz, double* bq, double xi, double yi,
                               double zi, double kqi, double alpha, double* fx, double* fy, double* fz, double* acc);

// Potentials (on request): the unit-charge terms of the same pairs, for any
// charges, s[b] = k erfc(alpha r)/r and g[b] = (s[b] + k (2 alpha/sqrt(pi))
// exp(-alpha^2 r^2)) / r^2 (so phi_i += q_j s, E_i += q_j g d), with the same
// arithmetic and contract as erfc_pair_batch (alpha r < kMaxAlphaR; s and g need
// room for n rounded up to a multiple of 8).
void erfc_unit_batch(int n, const int* js, double xi, double yi, double zi, double k, const double* x,
                     const double* y, const double* z, double alpha, double* s, double* g);

constexpr double kMaxAlphaR = 8.0;
// The range in z = (alpha r)^2 of the mixed cluster kernel's rational Ewald corrections
// (pair_math.hpp, vewald_corr_f): alpha r <= 5.
constexpr double kEwaldCorrMaxZ = 25.0;


// The same contract for any alpha r, one pair at a time with ErfcTable (the
// reference the vector kernel is tested against; fx, fy, fz need room for n).
void erfc_pair_batch_scalar(int n, const int* js, double xi, double yi, double zi, double kqi,
                            const double* x, const double* y, const double* z, const double* q,
                            double alpha, double* fx, double* fy, double* fz, double* acc);

// The instruction set the dispatcher chose for erfc_pair_batch on this CPU
// (e.g. "x86-64-v4 (AVX-512, 8 lanes)"), for show_config and benchmarks.
const char* pair_kernel_isa();

// ---- Kernel precision (a strategy chosen once per solver) ----
//
// Double: the kernels above. Mixed (pair_kernel_mixed.cpp): the same contract
// (alpha r < kMaxAlphaR; scratch for n rounded up to a multiple of 16) with the
// distances' square roots, erfc and exp in single precision on twice the lanes
// (16 AVX-512, 8 AVX2, 4 baseline) and the differences, charges, the exp's range
// reduction and every sum in double; each pair's e and f have a relative error of
// a few float ulps (u = 2^-24), so the forces' RMS error is about
// c u sqrt(2 sum_pairs |f_pair|^2 / N) with c measured (docs/realspace.md), from
// the sum the kernel adds to acc[kPairForce2]. Potentials and fields stay double.
enum class PairPrecision { Double, Mixed };
const char* precision_name(PairPrecision p);

void erfc_pair_batch_mixed(int n, const int* js, double xi, double yi, double zi, double kqi, const double* x,
                           const double* y, const double* z, const double* q, double alpha, double* fx,
                           double* fy, double* fz, double* acc);
void erfc_pair_block_mixed(int n, double* bx, double* by, double* bz, double* bq, double xi, double yi, double zi,
                           double kqi, double alpha, double* fx, double* fy, double* fz, double* acc);
void erfc_pair_block_mixed_no_virial(int n, double* bx, double* by, double* bz, double* bq, double xi, double yi,
                                     double zi, double kqi, double alpha, double* fx, double* fy, double* fz,
                                     double* acc);
// The mixed kernels' erfc(x) and exp(-x^2) for x in [0, kMaxAlphaR) (x^2 reduced
// in double, x rounded to float), for tests and the accuracy table.
void erfc_mixed(int n, const double* x, double* erfc, double* exp_mx2);

// The kernels one evaluation runs: batch (partners by index) and block (gathered
// partners; nullptr for the scalar table kernel, which takes indices only), and
// block_no_virial (block without the pairs' virial; nullptr with block).
struct PairKernels {
  using Batch = void (*)(int, const int*, double, double, double, double, const double*, const double*,
                         const double*, const double*, double, double*, double*, double*, double*);
  using Block = void (*)(int, double*, double*, double*, double*, double, double, double, double, double,
                         double*, double*, double*, double*);
  Batch batch = nullptr;
  Block block = nullptr;
  Block block_no_virial = nullptr;
};
// For alpha * cutoff: the vector kernels of `precision` below kMaxAlphaR, the
// scalar table kernel at and above it (Double only: Mixed there is refused by
// the solver's options check, std::invalid_argument here).
PairKernels pair_kernels(PairPrecision precision, double alpha_cutoff);

}  // namespace realspace
}  // namespace pmewald
