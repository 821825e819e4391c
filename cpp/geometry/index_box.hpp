// Integer index boxes: half-open [lo, hi) per axis, in global mesh indices.
// Pure geometry: no MPI, no Kokkos. Unit-testable for any virtual rank count.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

namespace pmewald {
inline namespace geometry {

using Int3 = std::array<int, 3>;

struct Box3 {
  Int3 lo{0, 0, 0};
  Int3 hi{0, 0, 0};

  int size(int axis) const { return std::max(0, hi[axis] - lo[axis]); }
  Int3 shape() const { return {size(0), size(1), size(2)}; }
  std::int64_t volume() const {
    return static_cast<std::int64_t>(size(0)) * size(1) * size(2);
  }
  bool empty() const { return volume() == 0; }
  bool contains(const Int3& p) const {
    for (int d = 0; d < 3; ++d)
      if (p[d] < lo[d] || p[d] >= hi[d]) return false;
    return true;
  }
  bool operator==(const Box3& o) const {
    // All empty boxes compare equal: an empty box owns nothing, wherever it sits.
    if (empty() && o.empty()) return true;
    return lo == o.lo && hi == o.hi;
  }
  bool operator!=(const Box3& o) const { return !(*this == o); }
  std::string str() const;
};

// The overlap of two boxes; empty (volume 0) when they do not overlap.
Box3 intersect(const Box3& a, const Box3& b);

// True when `inner` is empty or lies entirely inside `outer`.
bool contains(const Box3& outer, const Box3& inner);

// The box with an empty box's hi moved to its lo, so that every rank describes an
// empty box the same way (what plans gather and compare).
inline Box3 normalised(Box3 b) {
  if (b.empty()) b.hi = b.lo;
  return b;
}

// The whole mesh as a box.
inline Box3 full_box(const Int3& mesh) { return Box3{{0, 0, 0}, mesh}; }

}  // namespace geometry
}  // namespace pmewald
