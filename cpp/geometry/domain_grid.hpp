// The domains of the particle decomposition: a 3-D grid of ranks over the
// periodic unit cell, cut along each axis at planes of constant fractional
// coordinate.
//
// Along axis d the unit interval is resolved into K_d index points; the cuts
// 0 = c_d[0] <= c_d[1] <= ... <= c_d[p_d] = K_d give grid coordinate g the
// index range [c_d[g], c_d[g+1]) (empty when equal), i.e. the fractional slab
// [c_d[g]/K_d, c_d[g+1]/K_d). A point with fractional coordinate s in [0, 1)
// has index floor(K_d s) and belongs to the coordinate whose range holds it.
// Domains are products of slabs: parallelepipeds in a triclinic cell.
//
// Two kinds of cuts:
//   - the mesh's bricks (bricks()): K_d = the mesh, c_d[g] = floor(g K_d / p_d)
//     (decomposition.hpp's split_range), so an atom's domain is the brick that
//     holds the mesh point below it (the reciprocal part's ownership);
//   - balanced cuts (with_cuts()): any monotone cuts on a fine resolution, as
//     the real-space load balancer places them (particles/balance.hpp).
//
// Staged ghost exchange (particles/staged_ghosts.hpp) sends, along each axis
// in turn, to the two neighbouring coordinates only, forwarding in later pulses
// what earlier pulses brought: `pulses` says how many pulses an axis needs for
// a ghost margin of R index points (every domain within R of another along the
// axis, however many domains lie between, is reached).
//
// Pure geometry: no MPI, the same answer on every rank, any virtual rank count.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "geometry/index_box.hpp"

namespace pmewald {
inline namespace geometry {

class DomainGrid {
 public:
  DomainGrid() = default;

  // The mesh's bricks for the processor grid `grid` (decomposition.hpp).
  static DomainGrid bricks(const Int3& grid, const Int3& mesh);
  // Explicit cuts: cuts[d] has grid[d] + 1 non-decreasing entries from 0 to
  // resolution[d]; throws std::invalid_argument otherwise.
  static DomainGrid with_cuts(const Int3& grid, const Int3& resolution, std::array<std::vector<int>, 3> cuts);

  const Int3& grid() const { return grid_; }
  const Int3& resolution() const { return res_; }
  const std::vector<int>& cuts(int d) const { return cuts_[d]; }
  int ranks() const { return grid_[0] * grid_[1] * grid_[2]; }

  int lo(int d, int g) const { return cuts_[d][g]; }
  int hi(int d, int g) const { return cuts_[d][g + 1]; }
  bool empty(int d, int g) const { return cuts_[d][g] == cuts_[d][g + 1]; }
  // The grid coordinate along d whose range holds index m (0 <= m < K_d): the
  // largest g with c_d[g] <= m. (Inline: the migration asks for every atom.)
  int coord_of(int d, int m) const {
    if (uniform_[d]) {
      // split_range(K, p, g) = [g*K/p, (g+1)*K/p): g owns m iff floor(g*K/p) <= m,
      // i.e. g*K < (m+1)*p; the largest such g.
      const std::int64_t p = grid_[d], K = res_[d];
      return static_cast<int>(((static_cast<std::int64_t>(m) + 1) * p - 1) / K);
    }
    return coord_by_search(d, m);
  }
  // Rank <-> grid coordinates (x fastest).
  int rank_of(int gx, int gy, int gz) const { return gx + grid_[0] * (gy + grid_[1] * gz); }
  Int3 coords(int rank) const;
  // The index box of `rank`'s domain.
  Box3 box(int rank) const;
  // Fractional extent of coordinate g along d.
  double frac_lo(int d, int g) const { return double(cuts_[d][g]) / res_[d]; }
  double frac_hi(int d, int g) const { return double(cuts_[d][g + 1]) / res_[d]; }

  // Along axis d, the number of pulses a staged exchange needs so that every
  // domain receives the images of every domain within `reach` index points of
  // it, going in either direction (at least 1 when p_d > 1 or when the margin
  // reaches a periodic image of the rank's own slab; 0 when nothing is needed).
  // Hop h in the + direction from coordinate g is coordinate (g + h) mod p_d,
  // displaced by floor((g + h) / p_d) periods.
  int pulses(int d, double reach) const;

  bool operator==(const DomainGrid& o) const { return grid_ == o.grid_ && res_ == o.res_ && cuts_ == o.cuts_; }
  bool operator!=(const DomainGrid& o) const { return !(*this == o); }

 private:
  Int3 grid_{1, 1, 1}, res_{1, 1, 1};
  std::array<std::vector<int>, 3> cuts_{std::vector<int>{0, 1}, std::vector<int>{0, 1}, std::vector<int>{0, 1}};
  bool uniform_[3] = {true, true, true};  // cuts are split_range's: coord_of by formula
  int coord_by_search(int d, int m) const;
};

// The messages per rank and exchange of each way, for a domain grid and ghost
// reach (index points per axis) on a grid without empty slabs: the direct
// exchange sends one message to every domain within reach (prod over the axes of
// min(p_d, 2 pulses_d + 1), less the rank itself); the staged one 2 per pulse
// along every axis with more than one rank. Pure geometry.
struct GhostMessageCounts {
  int direct = 0, staged = 0;
};
GhostMessageCounts ghost_message_counts(const DomainGrid& domains, const std::array<double, 3>& reach);
// The automatic choice: staged when the direct exchange would send more than
// twice as many messages (its single round against the staged exchange's 3 x
// pulses rounds one after the other; docs/scaling.md has the measurements).
bool staged_preferred(const DomainGrid& domains, const std::array<double, 3>& reach);

}  // namespace geometry
}  // namespace pmewald
