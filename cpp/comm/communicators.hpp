// Every communicator the library creates, created safely while other threads of
// the process create theirs (tests/structure/test_layout.py checks that no other
// file calls MPI's communicator constructors).
//
// Why: Open MPI 4.1 deadlocks when two threads of one process create communicators
// at the same time, whatever their parents (open-mpi/ompi#2025: its context-id
// agreement assumes one creation at a time per process). Measured here: two
// threads, each duplicating its own communicator 500 times on 2 ranks, hung in
// 10 of 10 runs (C, no Python involved). A process-wide lock alone cannot
// serialise creation either: rank 0's thread A holding it while it waits for
// rank 1's A, whose lock rank 1's B holds while it waits for rank 0's B, is a
// deadlock across ranks.
//
// The rule: a communicator is created only while every member rank of its parent
// holds its process's creation lock at the same time. Each member tries the lock
// without blocking and the members agree (one MPI_Allreduce on the parent) whether
// all got it; if one did not, those that did release it and all try again after a
// random back-off. No thread ever blocks waiting for the lock, so no wait can close
// a cycle across ranks; the agreement runs on the parent, which only the creating
// thread uses (MPI's rule for collectives), so it needs no lock of its own.
// Below MPI_THREAD_MULTIPLE no other thread can be in MPI meanwhile, and the
// communicator is created directly (the SMPI driver, single-threaded programs).
#pragma once

#include <mpi.h>

#include <cstdint>

namespace pmewald {
inline namespace comm {

// Collective over `parent`: MPI_Comm_dup.
MPI_Comm duplicate_communicator(MPI_Comm parent);
// Collective over `parent`: MPI_Comm_split (color MPI_UNDEFINED gives MPI_COMM_NULL).
MPI_Comm split_communicator(MPI_Comm parent, int color, int key);
// Collective over `parent`: the ranks of `parent` that share this rank's node
// (MPI_Comm_split_type, MPI_COMM_TYPE_SHARED).
MPI_Comm node_communicator(MPI_Comm parent);

// Frees a communicator if it is valid and MPI is still running (local in Open MPI:
// no context id is agreed, so it needs no lock).
void free_comm(MPI_Comm& comm);

// Process-wide counts, for tests and diagnostics: communicators created, and
// attempts that found the lock taken on some member rank and tried again.
struct CreationStats {
  std::uint64_t created = 0;
  std::uint64_t retries = 0;
};
CreationStats communicator_creation_stats();

// Owns a duplicate of a caller's communicator, so the library's messages never
// mix with the caller's. Freed on destruction unless MPI is already finalized.
class Comm {
 public:
  explicit Comm(MPI_Comm parent);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  MPI_Comm get() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace comm
}  // namespace pmewald
