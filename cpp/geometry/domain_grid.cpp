#include "geometry/domain_grid.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "geometry/decomposition.hpp"

namespace pmewald {
inline namespace geometry {

DomainGrid DomainGrid::bricks(const Int3& grid, const Int3& mesh) {
  DomainGrid g;
  g.grid_ = grid;
  g.res_ = mesh;
  for (int d = 0; d < 3; ++d) {
    if (grid[d] < 1 || mesh[d] < 1) throw std::invalid_argument("DomainGrid::bricks: grid and mesh must be positive");
    g.cuts_[d].resize(static_cast<std::size_t>(grid[d]) + 1);
    for (int c = 0; c < grid[d]; ++c) g.cuts_[d][c] = split_range(mesh[d], grid[d], c)[0];
    g.cuts_[d][grid[d]] = mesh[d];
    g.uniform_[d] = true;
  }
  return g;
}

DomainGrid DomainGrid::with_cuts(const Int3& grid, const Int3& resolution, std::array<std::vector<int>, 3> cuts) {
  DomainGrid g;
  g.grid_ = grid;
  g.res_ = resolution;
  for (int d = 0; d < 3; ++d) {
    const auto& c = cuts[d];
    if (grid[d] < 1 || resolution[d] < 1) throw std::invalid_argument("DomainGrid::with_cuts: grid and resolution must be positive");
    if (c.size() != static_cast<std::size_t>(grid[d]) + 1 || c.front() != 0 || c.back() != resolution[d] ||
        !std::is_sorted(c.begin(), c.end()))
      throw std::invalid_argument("DomainGrid::with_cuts: the cuts along axis " + std::to_string(d) +
                                  " must be grid+1 non-decreasing values from 0 to the resolution");
    g.uniform_[d] = false;
  }
  g.cuts_ = std::move(cuts);
  for (int d = 0; d < 3; ++d) {  // cuts that happen to be split_range's keep the formula
    bool same = true;
    for (int c = 0; c < grid[d] && same; ++c) same = g.cuts_[d][c] == split_range(resolution[d], grid[d], c)[0];
    g.uniform_[d] = same;
  }
  return g;
}

int DomainGrid::coord_by_search(int d, int m) const {
  const auto& c = cuts_[d];
  // The last g with c[g] <= m among g < p (an empty slab's range holds nothing).
  const auto it = std::upper_bound(c.begin(), c.end() - 1, m);
  return static_cast<int>(it - c.begin()) - 1;
}

Int3 DomainGrid::coords(int rank) const {
  return {rank % grid_[0], (rank / grid_[0]) % grid_[1], rank / (grid_[0] * grid_[1])};
}

Box3 DomainGrid::box(int rank) const {
  const Int3 g = coords(rank);
  Box3 b;
  for (int d = 0; d < 3; ++d) {
    b.lo[d] = lo(d, g[d]);
    b.hi[d] = hi(d, g[d]);
  }
  return b;
}

int DomainGrid::pulses(int d, double reach) const {
  if (!(reach > 0)) return 0;
  const int p = grid_[d];
  const long long K = res_[d];
  const double eps = 1e-6;
  int most = 0;
  for (int g = 0; g < p; ++g) {
    if (empty(d, g)) continue;  // needs no ghosts (it may still forward them)
    // + direction: images coming from the left, hop h from coordinate g - h
    // (unwrapped: its range displaced by floor((g - h) / p) periods). They are
    // within reach while the source's upper edge + reach passes my lower edge.
    for (int h = 1;; ++h) {
      const long long src = g - h;
      const long long q = src >= 0 ? src / p : -((-src + p - 1) / p);  // floor(src / p)
      const int s = static_cast<int>(src - q * p);
      const double hi_u = double(cuts_[d][s + 1]) + double(q) * K;
      if (!(hi_u + reach + eps > lo(d, g))) break;
      if (!empty(d, s)) most = std::max(most, h);
    }
    // - direction: images coming from the right, hop h from coordinate g + h.
    for (int h = 1;; ++h) {
      const long long src = g + h;
      const long long q = src / p;
      const int s = static_cast<int>(src - q * p);
      const double lo_u = double(cuts_[d][s]) + double(q) * K;
      if (!(lo_u - reach - eps < hi(d, g))) break;
      if (!empty(d, s)) most = std::max(most, h);
    }
  }
  return most;
}

GhostMessageCounts ghost_message_counts(const DomainGrid& domains, const std::array<double, 3>& reach) {
  GhostMessageCounts c;
  int product = 1;
  for (int d = 0; d < 3; ++d) {
    const int p = domains.grid()[d];
    if (p == 1) continue;
    const int pulses = domains.pulses(d, reach[d]);
    product *= std::min(p, 2 * pulses + 1);
    c.staged += 2 * pulses;
  }
  c.direct = product - 1;
  return c;
}

bool staged_preferred(const DomainGrid& domains, const std::array<double, 3>& reach) {
  const GhostMessageCounts c = ghost_message_counts(domains, reach);
  return c.direct > 2 * c.staged;
}

}  // namespace geometry
}  // namespace pmewald
