// Kokkos types shared by every kernel.
//
// FFTW works on host memory, so the mesh data and everything the kernels touch
// live in the default *host* execution space (Serial with Debian's Kokkos,
// OpenMP or Threads with a user's own Kokkos build). Kernels are written once
// against ExecSpace and never assume a particular backend.
#pragma once

#include <Kokkos_Complex.hpp>
#include <Kokkos_Core.hpp>

#include <mutex>
#include <utility>

namespace pmewald {
inline namespace base {

using ExecSpace = Kokkos::DefaultHostExecutionSpace;
using MemSpace = ExecSpace::memory_space;
using Complex = Kokkos::complex<double>;

template <class T>
using View1 = Kokkos::View<T*, Kokkos::LayoutRight, MemSpace>;
template <class T>
using View2 = Kokkos::View<T**, Kokkos::LayoutRight, MemSpace>;
template <class T>
using View3 = Kokkos::View<T***, Kokkos::LayoutRight, MemSpace>;

using Range = Kokkos::RangePolicy<ExecSpace>;

// Held around every Kokkos::parallel_reduce. Kokkos's Serial backend reduces
// through one process-wide scratch buffer (serial_get_thread_team_data), so
// two host threads (two objects used from two Python threads, the GIL
// released) must not reduce at the same time. A reduction never spans an MPI
// call, so holding this lock cannot deadlock ranks against each other.
inline std::mutex& reduction_mutex() {
  static std::mutex m;
  return m;
}

// Kokkos::parallel_reduce under reduction_mutex(): what every reduction uses.
template <class... Args>
void parallel_reduce_locked(Args&&... args) {
  const std::lock_guard<std::mutex> lock(reduction_mutex());
  Kokkos::parallel_reduce(std::forward<Args>(args)...);
}

// Device-callable math across Kokkos versions (3.x keeps it in Experimental).
KOKKOS_INLINE_FUNCTION double kfloor(double x) {
#if KOKKOS_VERSION >= 30700
  return Kokkos::floor(x);
#else
  return Kokkos::Experimental::floor(x);
#endif
}
KOKKOS_INLINE_FUNCTION double kexp(double x) {
#if KOKKOS_VERSION >= 30700
  return Kokkos::exp(x);
#else
  return Kokkos::Experimental::exp(x);
#endif
}

}  // namespace base
}  // namespace pmewald
