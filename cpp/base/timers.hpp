// Wall-clock phase timers of the solver.
#pragma once

#include <mpi.h>

#include <map>
#include <string>

namespace pmewald {
inline namespace base {

class PhaseTimers {
 public:
  // Adds the time since `start` (MPI_Wtime seconds) to `phase`; returns now.
  double lap(const std::string& phase, double start) {
    const double now = MPI_Wtime();
    seconds_[phase] += now - start;
    return now;
  }
  void add(const std::string& phase, double s) { seconds_[phase] += s; }
  void count(const std::string& what, double n = 1) { seconds_[what] += n; }
  const std::map<std::string, double>& all() const { return seconds_; }
  void reset() { seconds_.clear(); }

 private:
  std::map<std::string, double> seconds_;
};

}  // namespace base
}  // namespace pmewald
