// Threads and cores: how many threads the kernels and FFTW run on, and whether
// the job puts more threads on a node than it has cores for them.
//
// ranks x threads beyond the cores is the one placement that goes badly wrong:
// OpenMP threads and MPI progress spin while they wait, so a spinning thread
// keeps a core from the thread it waits for (measured here: 2 threads x 3
// ranks on 2 cores ran two FFT tests 25x slower). PMESolver and the FFTs check
// the placement when they are built, and rank 0 prints one warning per process.
#pragma once

#include <mpi.h>

#include <string>

namespace pmewald {
inline namespace base {

// Threads of the host execution space (1 on Serial; OpenMP: its thread pool).
// Kokkos must be initialised (ensure_kokkos_initialized).
int kernel_threads();

// Cores this process may run on (its affinity mask; hardware threads count).
int affinity_cores();

// The job's placement on the busiest node (the one with the most threads per
// available core), the same on every rank of the communicator.
struct ThreadPlacement {
  int threads_per_rank = 1;  // this rank's kernel_threads()
  int ranks_on_node = 1;     // ranks of the communicator on that node
  int threads_on_node = 1;   // their kernel threads, summed
  int cores_on_node = 1;     // cores their affinity masks allow together
  int min_rank_cores = 1;    // fewest cores one rank there may run on
  int max_rank_threads = 1;  // most threads one rank there runs
  // threads_on_node > cores_on_node, or a rank with more threads than its own cores.
  bool oversubscribed() const;
  std::string describe() const;  // one line: the numbers and what to do
};

// Collective over comm. Throws nothing; MPI errors are fatal as elsewhere.
ThreadPlacement thread_placement(MPI_Comm comm);

// thread_placement, and when oversubscribed rank 0 of comm prints a warning to
// stderr (once per process). Collective. PMEWALD_QUIET_OVERSUBSCRIPTION=1 stops the print.
void warn_if_oversubscribed(MPI_Comm comm);

}  // namespace base
}  // namespace pmewald
