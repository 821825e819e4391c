// FFTW's planner is not thread-safe: one process-wide lock for every pmewald
// call that plans or destroys an FFTW plan (the distributed FFTs' plans in
// fft/fftw_plans.cpp, the serial ones in fft/fftw_serial.cpp, the correlated error
// model's structure factors in tuning/charge_correlation.cpp and
// pme/serial_reference.cpp). Execution (fftw_execute_dft) is thread-safe and
// does not take it. Planning never makes MPI calls, so the lock cannot deadlock
// ranks against each other.
#pragma once

#include <fftw3.h>

#include <mutex>

namespace pmewald {
inline namespace base {

inline std::mutex& fftw_planner_mutex() {
  static std::mutex m;
  return m;
}

// fftw_destroy_plan under fftw_planner_mutex(); null plans are skipped and p is reset.
inline void destroy_fftw_plan(fftw_plan& p) {
  if (!p) return;
  const std::lock_guard<std::mutex> lock(fftw_planner_mutex());
  fftw_destroy_plan(p);
  p = nullptr;
}

}  // namespace base
}  // namespace pmewald
