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
  return range_reaches(K, split_range(K, p, from), split_range(K, p, to), reach);
}

bool range_reaches(int K, const std::array<int, 2>& a, const std::array<int, 2>& b, double reach) {
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
  return domain_neighborhood(DomainGrid::bricks(grid, mesh), rank, reach);
}

Neighborhood domain_neighborhood(const DomainGrid& domains, int rank, const std::array<double, 3>& reach) {
  const Int3& grid = domains.grid();
  const Int3 g = domains.coords(rank);
  Neighborhood out;
  // Per axis: the grid coordinates my slab reaches, and those that reach mine.
  std::array<std::vector<int>, 3> to, from;
  for (int d = 0; d < 3; ++d) {
    const int K = domains.resolution()[d];
    const std::array<int, 2> mine{domains.lo(d, g[d]), domains.hi(d, g[d])};
    for (int c = 0; c < grid[d]; ++c) {
      const std::array<int, 2> other{domains.lo(d, c), domains.hi(d, c)};
      if (range_reaches(K, mine, other, reach[d])) to[d].push_back(c);
      if (range_reaches(K, other, mine, reach[d])) from[d].push_back(c);
    }
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
