#include "base/kokkos_runtime.hpp"

#include <Kokkos_Core.hpp>
#ifdef PMEWALD_FFTW_OPENMP
#include "base/fftw_planner.hpp"
#endif

#include <mutex>
#include <stdexcept>

#include "base/threads.hpp"

namespace pmewald {
inline namespace base {

namespace {
int g_fftw_threads = 0;  // 0 until ensure_kokkos_initialized() has run
}

void ensure_kokkos_initialized() {
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  if (!Kokkos::is_initialized()) {
#if KOKKOS_VERSION >= 30700
    if (Kokkos::is_finalized())
      throw std::runtime_error("pmewald: Kokkos was finalized in this process; it cannot be initialized again");
#endif
#if KOKKOS_VERSION >= 40000
    Kokkos::initialize(Kokkos::InitializationSettings().set_disable_warnings(true));
#else
    Kokkos::InitArguments args;
    args.disable_warnings = true;
    Kokkos::initialize(args);
#endif
  }
  if (g_fftw_threads == 0) {
#ifdef PMEWALD_FFTW_OPENMP
    // FFTW's planner and transforms on the kernels' OpenMP threads (one pool).
    const std::lock_guard<std::mutex> planner(fftw_planner_mutex());
    g_fftw_threads = kernel_threads();
    fftw_init_threads();
    fftw_plan_with_nthreads(g_fftw_threads);
#else
    g_fftw_threads = 1;
#endif
  }
}

int fftw_threads() { return g_fftw_threads; }

}  // namespace base
}  // namespace pmewald
