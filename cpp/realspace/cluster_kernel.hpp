// The cluster-pair kernels (cluster_layout.hpp): one i-cluster of 4 atoms
// against its j-clusters, every 4 x 4 block evaluated whole, the pairs masked
// by the block's mask and the cutoff (no gather, no selection per pair). Same
// pair terms as pair_kernel.hpp (e = k q_i q_j erfc(alpha r) / r, the force
// fr d, its virial), compiled for several instruction sets and chosen at run
// time (base/simd.hpp).
//
// Cluster data, 16 values per cluster: x of its 4 slots, then y, z, and q.
//   Double: positions as they are, in double (4 lanes AVX2, 8 AVX-512).
//   Mixed:  each cluster's positions relative to its centre (float) and the
//           centres in double; a block's separation is the centres' difference
//           (double, rounded once to float) plus the local difference (float):
//           everything per lane in float on twice the lanes (8 AVX2, 16
//           AVX-512), a row's sums (at most 64 blocks per call) in float, then
//           in double. A close pair's relative error grows with the cluster's
//           extent over r: the error model's constant is measured for this kernel
//           (pme/tuning.py _MIXED_C_CLUSTERS, docs/realspace.md).
// No virial here: the caller forms it from the forces on the clusters' atoms
// (sum_a F_a r_a over the rank's owned and ghost atoms is the pairs' virial).
// Padding slots (charge 0) never have a mask bit.
#pragma once

#include <cstdint>

#include "realspace/pair_kernel.hpp"

namespace pmewald {
inline namespace realspace {

struct ClusterBlockSums {
  // Energy, sum |f_pair|^2 (mixed only), pairs evaluated.
  double e = 0, f2 = 0, evaluated = 0;
};

// i-cluster ci against j-clusters cj[0..n) with masks mask[0..n):
//   fi[4 * d + li] += force on slot li of ci (d = x, y, z: the clusters' data layout);
//   cforce[12 * cj[p] + 4 * d + lj] += force on slot lj of j-cluster cj[p] (the
//   per-cluster forces, 12 per cluster in the clusters' data layout);
//   sums += the blocks' energy, sum |f|^2 and count.
// kqi: the Coulomb constant k (charges come from the data). Pairs not closer
// than the cutoff contribute nothing; a coincident pair makes the sums NaN
// (as pair_kernel.hpp). Needs alpha * cutoff < kMaxAlphaR.
struct ClusterRowArgs {
  int ci = 0, n = 0;
  const int* cj = nullptr;
  const std::uint16_t* mask = nullptr;
  double k = 0, alpha = 0, rc2 = 0;
};
void cluster_row_double(const ClusterRowArgs& a, const double* data, double* fi, double* cforce,
                        ClusterBlockSums& sums);
// Mixed: when alpha^2 rc2 <= 25 (alpha rc <= 5, the fits' range) the rational Ewald
// corrections of pair_math.hpp (no exp, no erfcx; a float 1 / r's absolute error), else
// erfcx and exp as the atom kernels.
void cluster_row_mixed(const ClusterRowArgs& a, const double* centres, const float* data, double* fi,
                       double* cforce, ClusterBlockSums& sums);

// For tests: the float kernel's F(z) and V(z) (pair_math.hpp, vewald_corr_f) at z[0..n),
// z in [0, kEwaldCorrMaxZ] (pair_kernel.hpp).
void ewald_corrections_float(int n, const double* z, double* f, double* v);

}  // namespace realspace
}  // namespace pmewald
