// Which ranks of a brick decomposition are within reach of one another.
//
// A rank's domain is its brick of the mesh (decomposition.hpp: processor grid
// `grid` over `mesh`, x fastest). Along axis d its slab is the mesh-index range
// [lo, hi). With a reach of R mesh spacings (a real number >= 0), slab `from`
// reaches slab `to` when `to` has a mesh index in
//     [floor(lo_from + n K - R - eps), floor(hi_from + n K + R + eps)]
// for some periodic image n (clipped to [0, K)), eps = 1e-6. For a point at
// index coordinate u in [lo_from, hi_from) the indices floor(u + nK - R) ..
// floor(u + nK + R) lie in that range: every rank a point of my domain can touch
// within R spacings (its ghost images, with R = cutoff / spacing; a neighbouring
// owner, with R = 0) is in my `send` set. A domain reaches another when its slab
// reaches the other's slab along all three axes. Empty bricks reach nothing and
// are reached by nothing.
//
// `send`: the ranks my domain reaches; `recv`: the ranks whose domains reach
// mine. So r is in my recv set exactly when I am in r's send set: the two sides
// of a known-partner exchange agree without communicating. Neither set contains
// the rank itself (its own periodic images are local copies).
//
// Pure functions, no MPI: O(p_x + p_y + p_z + partners) time and memory per
// rank, so the communication model evaluates them for any virtual rank count.
#pragma once

#include <array>
#include <vector>

#include "geometry/domain_grid.hpp"
#include "geometry/index_box.hpp"

namespace pmewald {
inline namespace geometry {

struct Neighborhood {
  std::vector<int> send;  // sorted ranks
  std::vector<int> recv;  // sorted ranks
};

// Along one axis of K mesh points split over p parts (split_range): whether
// part `from` reaches part `to` within `reach` mesh spacings (see above).
bool slab_reaches(int K, int p, int from, int to, double reach);

// The same for index ranges a = [a0, a1) and b on a periodic axis of K points.
bool range_reaches(int K, const std::array<int, 2>& a, const std::array<int, 2>& b, double reach);

// The send and receive sets of `rank` in the brick decomposition `grid` x `mesh`
// for a reach of reach[d] mesh spacings along axis d.
Neighborhood brick_neighborhood(const Int3& grid, const Int3& mesh, int rank, const std::array<double, 3>& reach);

// The same for any domain grid (reach in its index points).
Neighborhood domain_neighborhood(const DomainGrid& domains, int rank, const std::array<double, 3>& reach);

}  // namespace geometry
}  // namespace pmewald
