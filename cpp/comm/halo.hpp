// Ghost layers of a brick: reduce (ghost contributions summed into their owners)
// and fill (owners' values copied into every ghost copy), over the same three
// communication strategies as the FFT remaps.
//
// Every rank's brick B = [lo, hi) carries `ghost` extra layers on the LOW side of
// each axis: the extended box E = [lo - ghost, hi), stored C order [x][y][z].
// (B-spline stencils of order p reach p-1 points below the owning point.) A
// ghost point x of E belongs, after periodic wrap, to the brick of some rank s:
// x - n*K lies in B_s for exactly one shift n in {-1, 0}^3 (ghost < K per axis).
// The halo is one ExchangePlan whose Forward direction carries owners' brick
// values to ghost points (fill, Assign) and whose Reverse direction carries ghost
// values back to their owners (reduce, Add). Ranks with an empty brick hold no
// ghosts. The geometry is computed from the deterministic brick layout, so
// building the plan needs no communication beyond the plan's own check.
#pragma once

#include <memory>

#include "comm/exchange.hpp"
#include "geometry/index_box.hpp"

namespace pmewald {
inline namespace comm {

// Extended box of a brick (empty when the brick is empty).
Box3 halo_extended_box(const Box3& brick, int ghost);

// The explicit exchange lists of the halo of `me` among `bricks` (one per rank).
// Pure function (no MPI): tested for virtual rank counts.
ExchangeLists halo_lists(const std::vector<Box3>& bricks, const Int3& mesh, int ghost, int me);

class Halo {
 public:
  // Collective over `comm`. bricks[r] is rank r's brick.
  Halo(MPI_Comm comm, const std::vector<Box3>& bricks, const Int3& mesh, int ghost, CommMode mode);

  const Box3& brick() const { return brick_; }
  const Box3& extended() const { return extended_; }
  int ghost() const { return ghost_; }

  // grid: the extended box's values (extended().volume() elements).
  void reduce(double* grid);  // ghosts added into owners' brick points
  void fill(double* grid);    // owners' brick values copied into every ghost point

  const ExchangeExecutor<double>& executor() const { return *exec_; }
  void reset_stats() { exec_->reset_stats(); }

 private:
  Box3 brick_, extended_;
  int ghost_;
  std::shared_ptr<const ExchangePlan> plan_;
  std::unique_ptr<ExchangeExecutor<double>> exec_;
};

}  // namespace comm
}  // namespace pmewald
