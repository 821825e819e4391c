// The cluster-pair layout of a pair list (GROMACS's nbnxm scheme, Páll & Hess,
// CPC 184:2641, 2013): the sorted atoms in spatial clusters of 4, and the
// list's pairs as cluster pairs, each with a 16-bit mask of which of its 4 x 4
// atom pairs are in the list. The pair kernel then evaluates whole 4 x 4 blocks
// (cluster_kernel.hpp) with no per-pair gather or selection; the cutoff and the
// list's choices (which rank evaluates a pair, half-list order, exclusions) are
// masks.
//
// The layout is derived from a PairTable (pair_list.hpp), after its search:
// exactly the table's pairs are set in the masks, so a cluster evaluation has
// the same pairs as the atom-by-atom one, in another summation order. Pure
// geometry and bookkeeping: no MPI, no Kokkos.
#pragma once

#include <cstdint>
#include <vector>

namespace pmewald {
inline namespace realspace {

struct PairTable;

struct ClusterTable {
  static constexpr int kSize = 4;  // atoms per cluster (i and j)
  int clusters = 0;
  // kSize per cluster: the sorted atom in each slot, -1 for padding (the last cluster).
  std::vector<int> atom;
  // CSR over i-clusters: cluster pairs [pair_off[c], pair_off[c + 1]) have i-cluster c;
  // each pair's j-cluster (>= c, ascending) and mask (bit kSize * li + lj: the atom
  // pair (slot li of c, slot lj of cj) is in the table).
  std::vector<int> pair_off, cj;
  std::vector<std::uint16_t> mask;
  std::vector<int> row_pairs;  // per i-cluster: the set bits of its masks (its pairs of the table)
  double pairs = 0;             // set bits: the table's pairs
  // Cluster pairs x 16 / pairs: the lanes the kernel runs per pair of the list.
  double lanes_per_pair() const { return pairs > 0 ? 16.0 * static_cast<double>(cj.size()) / pairs : 0.0; }
};

// Orders the table's sorted atoms into clusters and converts its pairs to
// cluster pairs. x, y, z: the sorted atoms' positions (table.rows of them).
// The atoms are split in halves along their widest extent, at a multiple of
// kSize, recursively (a k-d tree whose leaves are the clusters), so a cluster's
// atoms are close together. (Clusters within the search's cells were worse: in
// orthorhombic boxes those cells are thin slabs along x. Measured on 30k water,
// cutoff 9 + skin 1: 2.37 lanes per listed pair by cells, 2.23 by bisection; about
// the geometric limit of 4 x 4 blocks of ~3.4 A clusters at that radius.)
void build_cluster_table(const PairTable& table, const double* x, const double* y, const double* z,
                         ClusterTable& out);

}  // namespace realspace
}  // namespace pmewald
