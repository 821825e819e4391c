// The list's evaluation by clusters (PairLayout::Clusters; docs/realspace.md,
// "Cluster pairs"): one row per i-cluster, its blocks in the cluster kernels
// (cluster_kernel.hpp), the excluded pairs of its atoms as the atom rows do.
// Internal to realspace/ (pair_list.cpp, cluster_sweep.cpp).
//
// The pair forces are summed per cluster slot (C x 12: x of the 4 slots, y, z) by
// the kernels themselves, one such array per thread (a UniqueToken names it; one
// on Serial), with no lookup per block; after the loop add_forces adds the
// threads' arrays, moves the forces to the atoms and forms the pairs' virial from
// them, sum_a F_a r_a over the rank's owned and ghost atoms (each atom of the list
// is in exactly one cluster).
#pragma once

#include <cstdint>
#include <vector>

#include <Kokkos_Core.hpp>

#include "realspace/cluster_kernel.hpp"
#include "realspace/cluster_layout.hpp"
#include "realspace/pair_list.hpp"
#include "realspace/pair_search.hpp"
#include "realspace/row_blocks.hpp"

namespace pmewald {
inline namespace realspace {
namespace detail {

struct ClusterListKernel {
  using value_type = double[];
  unsigned value_count = 12;         // as the atom rows' (the virial entries: the excluded pairs' only)
  static constexpr int kChunk = 64;  // cluster pairs per kernel call (bounds its float sums)
  HalfPairKernel kern;               // the search state: positions, exclusions, forces on atoms (exclusions)
  View3<double> cforce;              // threads x C x 12: the pair forces by cluster slot
  Kokkos::Experimental::UniqueToken<ExecSpace> token;  // which thread's array
  const int *atom = nullptr, *pair_off = nullptr, *cj = nullptr, *ex_off = nullptr, *row_pairs = nullptr;
  const std::uint16_t* mask = nullptr;
  const PairTable::Excluded* ex = nullptr;
  const double* ddata = nullptr;    // Double: 16 per cluster
  const double* centres = nullptr;  // Mixed: 3 per cluster
  const float* fdata = nullptr;     // Mixed: 16 per cluster
  double rc2 = 0;

  void operator()(int c, double* acc) const;
};

}  // namespace detail

class PairList::ClusterSweep final : public detail::RowBlocks<detail::ClusterListKernel, 12> {
 public:
  std::vector<double> data, centres;  // per cluster: 16 values (Double), or 3 centres (Mixed)
  std::vector<float> fdata;           // Mixed: 16 per cluster, positions relative to the centre
  View3<double> cforce{"cluster_forces", 0, 0, 12};

  // After the loop: the pair forces added to sforce's atoms (sorted order) and their
  // virial (Virial's order) added to w.
  void add_forces(const View2<double>& sforce, double* w);
};

}  // namespace realspace
}  // namespace pmewald
