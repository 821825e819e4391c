#include "base/threads.hpp"

#include <sched.h>
#include <unistd.h>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/kokkos_types.hpp"

namespace pmewald {
inline namespace base {

// This process's affinity mask as 64-bit words (all online cores when unknown).
std::vector<std::uint64_t> affinity_words() {
  constexpr int kWords = CPU_SETSIZE / 64;
  std::vector<std::uint64_t> w(kWords, 0);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) w[c / 64] |= std::uint64_t{1} << (c % 64);
  } else {
    const long n = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
    for (long c = 0; c < n && c < CPU_SETSIZE; ++c) w[c / 64] |= std::uint64_t{1} << (c % 64);
  }
  return w;
}

int count_bits(const std::uint64_t* w, std::size_t n) {
  int count = 0;
  for (std::size_t i = 0; i < n; ++i) count += __builtin_popcountll(w[i]);
  return count;
}


int kernel_threads() { return std::max(1, static_cast<int>(ExecSpace().concurrency())); }

int affinity_cores() {
  const auto w = affinity_words();
  return std::max(1, count_bits(w.data(), w.size()));
}

}  // namespace base
}  // namespace pmewald
