// The core's one clock and its timers.
//
// Every timing in the core reads MPI_Wtime (wall_seconds): under SimGrid's SMPI, which
// runs the unchanged library on simulated ranks and networks, MPI_Wtime is the
// simulated time, where std::chrono would read the host's. So no file of the core
// reads another clock.
#pragma once

#include <mpi.h>

#include <map>
#include <string>

namespace pmewald {
inline namespace base {

// Seconds since an arbitrary origin (MPI_Wtime).
inline double wall_seconds() { return MPI_Wtime(); }

// Adds the seconds from its construction to its destruction (or to stop(), the
// earlier) to `total`.
class ScopedTimer {
 public:
  explicit ScopedTimer(double& total) : total_(&total), start_(wall_seconds()) {}
  ~ScopedTimer() { stop(); }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;
  void stop() {
    if (!total_) return;
    *total_ += wall_seconds() - start_;
    total_ = nullptr;
  }

 private:
  double* total_;
  double start_;
};

// Seconds (and counts) by phase name, e.g. the solver's "spread", "fft", "gather".
class PhaseTimers {
 public:
  // Adds the time since `start` (a wall_seconds() value) to `phase`; returns now,
  // the start of the next phase (for a chain of consecutive phases).
  double lap(const std::string& phase, double start) {
    const double now = wall_seconds();
    seconds_[phase] += now - start;
    return now;
  }
  // Times the rest of the caller's scope as `phase`.
  ScopedTimer scoped(const std::string& phase) { return ScopedTimer(seconds_[phase]); }
  void add(const std::string& phase, double s) { seconds_[phase] += s; }
  void count(const std::string& what, double n = 1) { seconds_[what] += n; }
  const std::map<std::string, double>& all() const { return seconds_; }
  void reset() { seconds_.clear(); }

 private:
  std::map<std::string, double> seconds_;
};

}  // namespace base
}  // namespace pmewald
