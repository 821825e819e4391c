#include "geometry/index_box.hpp"

#include <sstream>

namespace pmewald {
inline namespace geometry {

std::string Box3::str() const {
  std::ostringstream s;
  s << "[(" << lo[0] << ", " << lo[1] << ", " << lo[2] << "), (" << hi[0] << ", " << hi[1]
    << ", " << hi[2] << "))";
  return s.str();
}

Box3 intersect(const Box3& a, const Box3& b) {
  Box3 r;
  for (int d = 0; d < 3; ++d) {
    r.lo[d] = std::max(a.lo[d], b.lo[d]);
    r.hi[d] = std::max(r.lo[d], std::min(a.hi[d], b.hi[d]));
  }
  return r;
}

bool contains(const Box3& outer, const Box3& inner) {
  if (inner.empty()) return true;
  for (int d = 0; d < 3; ++d)
    if (inner.lo[d] < outer.lo[d] || inner.hi[d] > outer.hi[d]) return false;
  return true;
}

}  // namespace geometry
}  // namespace pmewald
