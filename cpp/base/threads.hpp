// Threads and cores: how many threads the kernels and FFTW run on, and which
// cores this process may run on.
//
// ranks x threads beyond the cores is the one placement that goes badly wrong:
// OpenMP threads and MPI progress spin while they wait, so a spinning thread
// keeps a core from the thread it waits for (measured here: 2 threads x 3
// ranks on 2 cores ran two FFT tests 25x slower). The job-wide census of that
// (collective) is comm/thread_placement.hpp; this file has the local facts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pmewald {
inline namespace base {

// Threads of the host execution space (1 on Serial; OpenMP: its thread pool).
// Kokkos must be initialised (ensure_kokkos_initialized).
int kernel_threads();

// Cores this process may run on (its affinity mask; hardware threads count).
int affinity_cores();

// This process's affinity mask as 64-bit words (all online cores when unknown),
// and the number of bits set in n such words.
std::vector<std::uint64_t> affinity_words();
int count_bits(const std::uint64_t* words, std::size_t n);

}  // namespace base
}  // namespace pmewald
