#include "geometry/lattice.hpp"

#include <cmath>

#include "base/errors.hpp"

namespace pmewald {
inline namespace geometry {

std::string PeriodicCell::check(const double* m) {
  for (int k = 0; k < 9; ++k)
    if (!std::isfinite(m[k])) return "box contains a non-finite entry";
  const double det = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
                     m[2] * (m[3] * m[7] - m[4] * m[6]);
  double norms = 1;
  for (int a = 0; a < 3; ++a)
    norms *= std::sqrt(m[3 * a] * m[3 * a] + m[3 * a + 1] * m[3 * a + 1] + m[3 * a + 2] * m[3 * a + 2]);
  if (!(norms > 0) || !(std::abs(det) > 1e-10 * norms))
    return "box is degenerate (its lattice vectors are (nearly) linearly dependent)";
  return "";
}

PeriodicCell::PeriodicCell(const double* m) {
  const std::string why = check(m);
  if (!why.empty()) throw ValueError(why);
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b) box[a][b] = m[3 * a + b];
  const double det = box[0][0] * (box[1][1] * box[2][2] - box[1][2] * box[2][1]) -
                     box[0][1] * (box[1][0] * box[2][2] - box[1][2] * box[2][0]) +
                     box[0][2] * (box[1][0] * box[2][1] - box[1][1] * box[2][0]);
  volume = std::abs(det);
  // Cofactor inverse.
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      const int i1 = (j + 1) % 3, i2 = (j + 2) % 3, j1 = (i + 1) % 3, j2 = (i + 2) % 3;
      recip[i][j] = (box[i1][j1] * box[i2][j2] - box[i1][j2] * box[i2][j1]) / det;
    }
  for (int d = 0; d < 3; ++d) {
    const double* e = box[(d + 1) % 3];
    const double* f = box[(d + 2) % 3];
    const double cx = e[1] * f[2] - e[2] * f[1], cy = e[2] * f[0] - e[0] * f[2],
                 cz = e[0] * f[1] - e[1] * f[0];
    height[d] = volume / std::sqrt(cx * cx + cy * cy + cz * cz);
  }
}

}  // namespace geometry
}  // namespace pmewald
