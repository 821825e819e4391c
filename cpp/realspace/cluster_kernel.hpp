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
// The virial comes from the force sums (sum_i F_i r_i - sum_j G_j r_j per row and
// block), not per pair.
// Padding slots (charge 0) never have a mask bit.
#pragma once

#include <cstdint>

#include "realspace/pair_kernel.hpp"

namespace pmewald {
inline namespace realspace {

struct ClusterBlockSums {
  // Energy, virial (Virial's order), sum |f_pair|^2 (mixed only), pairs evaluated.
  double e = 0, w[6] = {0, 0, 0, 0, 0, 0}, f2 = 0, evaluated = 0;
};

// i-cluster ci against j-clusters cj[0..n) with masks mask[0..n):
//   fi[3 * li + d] += force on slot li of ci (d = x, y, z);
//   fj[12 * p + 3 * lj + d] = force on slot lj of j-cluster cj[p] (set, not added);
//   sums += the blocks' energy, virial, sum |f|^2 and count.
// kqi: the Coulomb constant k (charges come from the data). Pairs not closer
// than the cutoff contribute nothing; a coincident pair makes the sums NaN
// (as pair_kernel.hpp). Needs alpha * cutoff < kMaxAlphaR.
struct ClusterRowArgs {
  int ci = 0, n = 0;
  const int* cj = nullptr;
  const std::uint16_t* mask = nullptr;
  double k = 0, alpha = 0, rc2 = 0;
};
void cluster_row_double(const ClusterRowArgs& a, const double* data, double* fi, double* fj, ClusterBlockSums& sums);
void cluster_row_mixed(const ClusterRowArgs& a, const double* centres, const float* data, double* fi, double* fj,
                       ClusterBlockSums& sums);

}  // namespace realspace
}  // namespace pmewald
