// The job's threads and cores per node, and the warning when ranks x threads
// exceed the cores (base/threads.hpp has why that placement goes badly wrong).
// PMESolver and the FFTs check the placement when they are built, and rank 0
// prints one warning per process.
#pragma once

#include <mpi.h>

#include <string>

namespace pmewald {
inline namespace comm {

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

}  // namespace comm
}  // namespace pmewald
