#include "base/kokkos_runtime.hpp"

#include <Kokkos_Core.hpp>
#ifdef PMEWALD_FFTW_OPENMP
#include "base/fftw_planner.hpp"
#endif

#include <atomic>
#include <mutex>
#include <stdexcept>

#include "base/threads.hpp"

#if defined(KOKKOS_ENABLE_OPENMP) && KOKKOS_VERSION < 40000
#define PMEWALD_ATTACH_OPENMP_THREADS 1
#include <omp.h>

namespace pmewald::detail {
struct AttachOpenMPThread {};  // tag: the specialisation below, nothing else
}  // namespace pmewald::detail

// Kokkos 3.x's OpenMPExec (an instance: its pool size and per-thread scratch) can be
// made only by its friend Kokkos::OpenMP. An explicit specialisation of that class's
// member template partition_master, for pmewald's own tag type, is a member of the
// friend, so it can do for the calling thread what partition_master does for each of
// its masters (Kokkos_OpenMP_Exec.hpp): `pool_size` > 0 attaches an instance of that
// many threads to this thread, 0 releases it. Nothing else calls it.
namespace Kokkos {
template <>
void OpenMP::partition_master<pmewald::detail::AttachOpenMPThread>(
    pmewald::detail::AttachOpenMPThread const&, int pool_size, int /*unused*/) {
  using Exec = Impl::OpenMPExec;
  OpenMP::memory_space space;
  if (pool_size > 0) {
    void* ptr = space.allocate(sizeof(Exec));
    Impl::t_openmp_instance = new (ptr) Exec(pool_size);
    // The scratch sizes partition_master gives a partition of this size.
    Impl::t_openmp_instance->resize_thread_data(32 * pool_size, 32 * pool_size, 1024 * pool_size, 1024);
    // Each thread of this thread's OpenMP team its own hardware id, as Kokkos's
    // initialisation gives the initial team's: UniqueToken (and so every duplicated
    // ScatterView, the pair loop's forces) picks its copy by it, and a team whose
    // threads all kept the default 0 wrote one copy from two threads (found in CI:
    // one force in 360 off by 2e-4 relative on 1 rank x 2 threads). libgomp keeps a
    // master's team threads for its later regions of the same size, as Kokkos
    // relies on for the initial team.
#pragma omp parallel num_threads(pool_size)
    { Impl::t_openmp_hardware_id = omp_get_thread_num(); }
  } else if (Impl::t_openmp_instance) {
    Impl::t_openmp_instance->~Exec();
    space.deallocate(Impl::t_openmp_instance, sizeof(Exec));
    Impl::t_openmp_instance = nullptr;
  }
}
}  // namespace Kokkos
#endif

namespace pmewald {
inline namespace base {

namespace {
int g_fftw_threads = 0;  // 0 until ensure_kokkos_initialized() has run
std::atomic<int> g_pool_size{0};  // the initialising thread's OpenMP pool (0: not known)

// This thread's own OpenMP instance, if it was given one; released when the thread ends.
struct ThreadInstance {
  bool checked = false;
  bool attached = false;
  ~ThreadInstance() {
#ifdef PMEWALD_ATTACH_OPENMP_THREADS
    if (attached && Kokkos::is_initialized())
      Kokkos::OpenMP::partition_master(detail::AttachOpenMPThread{}, 0, 0);
#endif
  }
};
thread_local ThreadInstance t_instance;

void attach_this_thread() {
  t_instance.checked = true;
#ifdef PMEWALD_ATTACH_OPENMP_THREADS
  // Kokkos's instance is non-null only on a master thread; inside someone's OpenMP
  // region the kernels run as Kokkos runs them there (serially on that thread).
  if (Kokkos::Impl::t_openmp_instance == nullptr && omp_get_level() == 0) {
    const int pool = g_pool_size.load();
    if (pool > 0) {
      Kokkos::OpenMP::partition_master(detail::AttachOpenMPThread{}, pool, 0);
      t_instance.attached = true;
    }
  }
#endif
}
}  // namespace

void ensure_kokkos_initialized() {
  if (t_instance.checked && Kokkos::is_initialized()) return;
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
#ifdef PMEWALD_ATTACH_OPENMP_THREADS
  // The pool size as the thread that initialised Kokkos sees it (elsewhere
  // OpenMP::impl_thread_pool_size() is that of the caller's OpenMP team). A program
  // that initialised Kokkos itself on another thread: Kokkos's default pool,
  // omp_get_max_threads().
  if (g_pool_size.load() == 0)
    g_pool_size.store(Kokkos::Impl::t_openmp_instance != nullptr ? Kokkos::OpenMP::impl_thread_pool_size()
                                                                 : omp_get_max_threads());
#endif
  attach_this_thread();  // before kernel_threads(), which asks this thread's instance
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
