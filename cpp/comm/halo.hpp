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
// building the plan needs no communication beyond the plan's own check, and the
// lists of any rank can be built without MPI (HaloLayout + halo_lists: what the
// tests check for virtual rank counts).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/exchange.hpp"
#include "comm/overlap.hpp"
#include "geometry/box_index.hpp"
#include "geometry/index_box.hpp"

namespace pmewald {
inline namespace comm {

// Extended box of a brick (empty when the brick is empty).
Box3 halo_extended_box(const Box3& brick, int ghost);

// Every rank's brick and extended box, indexed once (BoxIndex) so that each rank's
// lists cost O(its partners + the points it moves). Throws ValueError when the
// ghost width is not smaller than the mesh along every axis.
struct HaloLayout {
  HaloLayout(const std::vector<Box3>& bricks, const Int3& mesh, int ghost);
  Int3 mesh;
  int ghost;
  BoxIndex bricks;    // rank r's brick is bricks.boxes()[r]
  BoxIndex extended;  // its extended box (halo_extended_box)
  int size() const { return bricks.size(); }
};

// The explicit exchange lists of the halo of rank `me`: messages in ring order from
// me + 1, the self piece (periodic images of a rank's own brick) apart. Pure: no
// MPI. `examined` (optional) is increased by the candidate boxes looked at.
ExchangeLists halo_lists(const HaloLayout& layout, int me, std::int64_t* examined = nullptr);
ExchangeLists halo_lists(const std::vector<Box3>& bricks, const Int3& mesh, int ghost, int me);

class Halo {
 public:
  // Collective over `comm`. bricks[r] is rank r's brick.
  Halo(MPI_Comm comm, const std::vector<Box3>& bricks, const Int3& mesh, int ghost, CommMode mode);

  const Box3& brick() const { return brick_; }
  const Box3& extended() const { return extended_; }
  int ghost() const { return ghost_; }

  // grid: the extended box's values (extended().volume() elements). With an
  // `overlap`, its work runs while the exchange is in flight.
  void reduce(double* grid, Overlap* overlap = nullptr);  // ghosts added into owners' brick points
  void fill(double* grid, Overlap* overlap = nullptr);    // owners' brick values copied into every ghost point
  // Rebuilds the executor for another mode (collective, as the constructor).
  void set_mode(CommMode mode);

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
