// comm_mode "auto": which of the three communication modes moves one solver's data
// fastest, measured on its own plans (the idea of FFTW's MEASURE).
#pragma once

#include <mpi.h>

#include <array>
#include <functional>

#include "comm/exchange_plan.hpp"

namespace pmewald {
inline namespace solver {

struct ModeMeasurement {
  // Seconds of one run in each mode (index: CommMode), the slowest rank's.
  std::array<double, 3> seconds{0, 0, 0};
  CommMode best = CommMode::Nonblocking;
  bool measured = false;  // false: one rank, nothing to measure (best is the default)
};

// Collective over `comm`. For each mode in turn: use(mode), one warm-up run(), then
// `reps` runs, each after a barrier; a mode's time is this rank's fastest run, and
// the slowest rank's time decides (MPI_MAX), so every rank sees the same numbers and
// picks the same winner (a tie goes to the mode listed first: pt2pt, nonblocking,
// collective). Leaves the winner in use. On one rank nothing is measured.
ModeMeasurement measure_modes(MPI_Comm comm, const std::function<void(CommMode)>& use,
                              const std::function<void()>& run, int reps = 3);

}  // namespace solver
}  // namespace pmewald
