#include "base/kokkos_runtime.hpp"

#include <Kokkos_Core.hpp>

#include <mutex>
#include <stdexcept>

namespace pmewald {
inline namespace base {

void ensure_kokkos_initialized() {
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  if (Kokkos::is_initialized()) return;
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

}  // namespace base
}  // namespace pmewald
