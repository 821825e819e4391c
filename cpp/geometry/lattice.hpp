// The periodic lattice: 3x3 cell algebra for the mesh kernels (Mat3) and the
// PeriodicCell that migration and the real-space sum wrap positions with.
// Pure geometry: no MPI, no Kokkos.
//
// Conventions (fixed for the whole project):
//   box   : 3x3 row-major, ROWS are the lattice vectors a_1, a_2, a_3.
//   recip : inv(box); its COLUMNS a*_d satisfy a_i . a*_j = delta_ij.
//   s = r @ recip (fractional), u_d = K_d (s_d - floor(s_d)) in [0, K_d).
//   m~ = recip @ m (reciprocal vector of the signed integer frequency m),
//   k = 2 pi m~.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "base/errors.hpp"
#include "geometry/index_box.hpp"

namespace pmewald {
inline namespace geometry {

// Row-major 3x3 matrix: m[3*i + j] is row i, column j.
using Mat3 = std::array<double, 9>;

inline double det3(const Mat3& a) {
  return a[0] * (a[4] * a[8] - a[5] * a[7]) - a[1] * (a[3] * a[8] - a[5] * a[6]) +
         a[2] * (a[3] * a[7] - a[4] * a[6]);
}

// Cell volume |det(box)|.
inline double volume_of(const Mat3& box) { return std::fabs(det3(box)); }

// inv(box); throws ValueError for a degenerate (or non-finite) box.
inline Mat3 reciprocal_of(const Mat3& a) {
  const double d = det3(a);
  double scale = 0;
  for (double v : a) scale = std::fmax(scale, std::fabs(v));
  if (!std::isfinite(d) || !(std::fabs(d) > 1e-12 * scale * scale * scale))
    throw ValueError("degenerate box: the lattice vectors are (nearly) linearly dependent");
  const double id = 1.0 / d;
  Mat3 r;
  r[0] = (a[4] * a[8] - a[5] * a[7]) * id;
  r[1] = (a[2] * a[7] - a[1] * a[8]) * id;
  r[2] = (a[1] * a[5] - a[2] * a[4]) * id;
  r[3] = (a[5] * a[6] - a[3] * a[8]) * id;
  r[4] = (a[0] * a[8] - a[2] * a[6]) * id;
  r[5] = (a[2] * a[3] - a[0] * a[5]) * id;
  r[6] = (a[3] * a[7] - a[4] * a[6]) * id;
  r[7] = (a[1] * a[6] - a[0] * a[7]) * id;
  r[8] = (a[0] * a[4] - a[1] * a[3]) * id;
  return r;
}

// Plane spacings (heights) of the cell: h_d = 1 / |a*_d| (column d of recip).
inline std::array<double, 3> heights_of(const Mat3& box) {
  const Mat3 r = reciprocal_of(box);
  std::array<double, 3> h;
  for (int d = 0; d < 3; ++d)
    h[d] = 1.0 / std::sqrt(r[d] * r[d] + r[3 + d] * r[3 + d] + r[6 + d] * r[6 + d]);
  return h;
}

// The periodic cell: rows of `box` are the lattice vectors a, b, c.
// (Its inverse divides the cofactors by det(box), reciprocal_of multiplies them by
// 1/det: the two differ in the last bit, and each is what its callers' results
// were computed with, so they are kept apart.)
struct PeriodicCell {
  double box[3][3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
  double recip[3][3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}};  // inv(box): s = r @ recip
  double volume = 0;                                        // |det(box)|
  double height[3] = {0, 0, 0};  // plane spacing along each axis: V / |a_e x a_f|

  PeriodicCell() = default;
  // rows9: row-major 3x3. Throws ValueError if not finite or degenerate.
  explicit PeriodicCell(const double* rows9);
  // "" when the box is usable, otherwise the reason (non-finite, degenerate).
  static std::string check(const double* rows9);
  double min_height() const { return std::min(height[0], std::min(height[1], height[2])); }
};

}  // namespace geometry
}  // namespace pmewald
