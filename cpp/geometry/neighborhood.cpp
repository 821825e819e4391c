#include "geometry/neighborhood.hpp"

#include <algorithm>
#include <cmath>

#include "geometry/decomposition.hpp"

namespace pmewald {
inline namespace geometry {

namespace {
constexpr double kEps = 1e-6;  // index units; rounding of K * s is ~1e-12 for K <= 4096
}  // namespace

bool slab_reaches(int K, int p, int from, int to, double reach) {
  const auto a = split_range(K, p, from);
  const auto b = split_range(K, p, to);
  if (a[0] == a[1] || b[0] == b[1]) return false;
  // Images n with the reach interval touching [0, K): |n| <= 1 + reach / K.
  const int nmax = 1 + static_cast<int>(std::ceil(reach / K));
  for (int n = -nmax; n <= nmax; ++n) {
    const double shift = static_cast<double>(n) * K;
    const double lo = std::floor(a[0] + shift - reach - kEps);
    const double hi = std::floor(a[1] + shift + reach + kEps);
    // [lo, hi] meets [b0, b1 - 1] (which lies inside [0, K), so clipping changes nothing)?
    if (lo <= b[1] - 1 && hi >= b[0]) return true;
  }
  return false;
}

Neighborhood brick_neighborhood(const Int3& grid, const Int3& mesh, int rank, const std::array<double, 3>& reach) {
  const Int3 g = grid_coords(grid, rank);
  Neighborhood out;
  // Per axis: the grid coordinates my slab reaches, and those that reach mine.
  std::array<std::vector<int>, 3> to, from;
  for (int d = 0; d < 3; ++d)
    for (int c = 0; c < grid[d]; ++c) {
      if (slab_reaches(mesh[d], grid[d], g[d], c, reach[d])) to[d].push_back(c);
      if (slab_reaches(mesh[d], grid[d], c, g[d], reach[d])) from[d].push_back(c);
    }
  auto product = [&](const std::array<std::vector<int>, 3>& s, std::vector<int>& ranks) {
    for (int z : s[2])
      for (int y : s[1])
        for (int x : s[0]) {
          const int r = x + grid[0] * (y + grid[1] * z);
          if (r != rank) ranks.push_back(r);
        }
    std::sort(ranks.begin(), ranks.end());
  };
  product(to, out.send);
  product(from, out.recv);
  return out;
}

}  // namespace geometry
}  // namespace pmewald
