// Which boxes of a set (one per rank) overlap a given box, without scanning the set.
//
// The plan geometry (remap and halo partners) asks this once per rank and stage. A
// scan of every rank's box would make planning O(P) per rank, O(P^2) for a model of
// all ranks; the index answers in time proportional to the boxes it returns for the
// decompositions the library builds. Pure geometry: no MPI.
//
// How: the distinct lower and upper faces of the set's non-empty boxes cut each axis
// into intervals, and the product of the intervals into buckets; each bucket lists
// the boxes that cover it. For a set cut by planes through the whole mesh (bricks of
// a processor grid, pencils) every box is exactly one bucket, so a query touches only
// the buckets it overlaps and every box listed there overlaps it. For irregular sets,
// where the cuts would make more than kMaxBucketsPerBox buckets per box, the cuts
// are thinned (every k-th kept): still exact, a few more boxes looked at.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "geometry/index_box.hpp"

namespace pmewald {
inline namespace geometry {

class BoxIndex {
 public:
  static constexpr int kMaxBucketsPerBox = 8;

  BoxIndex() = default;
  explicit BoxIndex(std::vector<Box3> boxes);

  // Indices (ascending) of the non-empty boxes of the set that overlap `query`.
  // `examined`, when given, is increased by the number of candidate boxes looked at
  // (what the tests check the cost with).
  std::vector<int> overlapping(const Box3& query, std::int64_t* examined = nullptr) const;

  const std::vector<Box3>& boxes() const { return boxes_; }
  int size() const { return static_cast<int>(boxes_.size()); }

 private:
  std::vector<Box3> boxes_;
  std::array<std::vector<int>, 3> cuts_;  // sorted bucket boundaries per axis
  std::vector<std::int64_t> start_;       // bucket b lists members_[start_[b] .. start_[b+1])
  std::vector<int> members_;
};

}  // namespace geometry
}  // namespace pmewald
