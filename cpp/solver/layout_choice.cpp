#include "solver/layout_choice.hpp"

#include <algorithm>
#include <limits>

#include "comm/mpi_helpers.hpp"

namespace pmewald {
inline namespace solver {

LayoutTrial LayoutTrial::started() {
  LayoutTrial t;
  t.running_ = true;
  t.mine_.assign(2, std::numeric_limits<double>::infinity());
  return t;
}

bool LayoutTrial::record(MPI_Comm comm, double seconds) {
  if (!running_) return false;
  double& m = mine_[next() == PairLayout::Clusters ? 0 : 1];
  m = std::min(m, seconds);
  if (++pos_ < 2 * kRounds) return false;
  running_ = false;
  best_ = fastest_on_the_slowest_rank(comm, mine_, seconds_) == 1 ? PairLayout::Atoms : PairLayout::Clusters;
  measured_ = true;
  return true;
}

}  // namespace solver
}  // namespace pmewald
