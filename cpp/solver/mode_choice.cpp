#include "solver/mode_choice.hpp"

#include <algorithm>
#include <limits>

#include "base/timers.hpp"
#include "comm/mpi_helpers.hpp"

namespace pmewald {
inline namespace solver {

ModeMeasurement measure_modes(MPI_Comm comm, const std::function<void(CommMode)>& use,
                              const std::function<void()>& run, int reps) {
  ModeMeasurement m;
  int size = 1;
  MPI_Comm_size(comm, &size);
  if (size == 1) {
    use(m.best);
    return m;
  }
  constexpr CommMode kModes[3] = {CommMode::Pt2Pt, CommMode::Nonblocking, CommMode::Collective};
  std::array<double, 3> mine{};
  for (CommMode mode : kModes) {
    use(mode);
    run();  // warm-up: first touches, lazy MPI connections
    double best = std::numeric_limits<double>::infinity();
    for (int r = 0; r < std::max(reps, 1); ++r) {
      check_mpi(MPI_Barrier(comm), "MPI_Barrier");
      const double t0 = wall_seconds();
      run();
      best = std::min(best, wall_seconds() - t0);
    }
    mine[static_cast<int>(mode)] = best;
  }
  check_mpi(MPI_Allreduce(mine.data(), m.seconds.data(), 3, MPI_DOUBLE, MPI_MAX, comm), "MPI_Allreduce");
  m.best = kModes[0];
  for (CommMode mode : kModes)
    if (m.seconds[static_cast<int>(mode)] < m.seconds[static_cast<int>(m.best)]) m.best = mode;
  m.measured = true;
  use(m.best);
  return m;
}

}  // namespace solver
}  // namespace pmewald
