// FFTW's planner is not thread-safe: one process-wide lock for every pmewald
// call that plans or destroys an FFTW plan (the distributed FFTs' plans in
// fft/fftw_plans.cpp, the serial ones in fft/fftw_serial.cpp, the correlated error
// model's structure factors in tuning/charge_correlation.cpp and
// pme/serial_reference.cpp). Execution (fftw_execute_dft) is thread-safe and
// does not take it. Planning never makes MPI calls, so the lock cannot deadlock
// ranks against each other.
#pragma once

#include <fftw3.h>

#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>

#include "base/errors.hpp"

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

// FFTW's planning rigour by name: "estimate", "measure", "patient" or
// "exhaustive" (nothing for any other name). pmewald.fft's planner argument and
// PMEWALD_FFTW_PLANNER both take these names.
inline std::optional<unsigned> fftw_flags_from_name(const std::string& name) {
  if (name == "estimate") return FFTW_ESTIMATE;
  if (name == "measure") return FFTW_MEASURE;
  if (name == "patient") return FFTW_PATIENT;
  if (name == "exhaustive") return FFTW_EXHAUSTIVE;
  return std::nullopt;
}

// fftw_flags_from_name, or ValueError naming the four.
inline unsigned fftw_flags_or_throw(const std::string& name) {
  if (const auto flags = fftw_flags_from_name(name)) return *flags;
  throw ValueError("planner must be one of 'estimate', 'measure', 'patient', 'exhaustive', not '" + name + "'");
}

// The name of FFTW planning flags (those four), "" for others.
inline std::string fftw_planner_name(unsigned flags) {
  for (const char* name : {"estimate", "measure", "patient", "exhaustive"})
    if (fftw_flags_from_name(name) == flags) return name;
  return "";
}

// The PME solver's FFTW planning rigour: FFTW_MEASURE unless the environment
// variable PMEWALD_FFTW_PLANNER names another (ValueError for an unknown name).
// A measured plan is the fastest one FFTW timed, so two runs may pick different
// algorithms and differ in the last bits; "estimate" plans without timing, the
// same plan every run (runs reproducible bit for bit, like GROMACS's mdrun
// -reprod; docs/reliability.md, Reproducible runs).
inline unsigned fftw_planner_flags() {
  const char* env = std::getenv("PMEWALD_FFTW_PLANNER");
  const std::string s = env ? env : "measure";
  if (const auto flags = fftw_flags_from_name(s)) return *flags;
  throw ValueError("PMEWALD_FFTW_PLANNER must be one of 'estimate', 'measure', 'patient', 'exhaustive', not '" +
                   s + "'");
}

}  // namespace base
}  // namespace pmewald
