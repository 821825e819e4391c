#include "comm/communicators.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "comm/mpi_helpers.hpp"

namespace pmewald {
inline namespace comm {

namespace {

std::mutex creation_lock;  // held only while this process creates a communicator
std::atomic<std::uint64_t> n_created{0}, n_retries{0};

// Random back-off before the next attempt: up to 50 us x 2^attempt (at most ~13 ms),
// so two groups of threads that keep colliding drift apart.
void back_off(int attempt) {
  thread_local std::minstd_rand rng(static_cast<unsigned>(std::hash<std::thread::id>{}(std::this_thread::get_id())));
  const int shift = attempt < 8 ? attempt : 8;
  std::uniform_int_distribution<int> us(0, 50 << shift);
  std::this_thread::sleep_for(std::chrono::microseconds(us(rng)));
}

// Collective over `parent`: runs `create` while every member rank holds its
// creation lock (communicators.hpp has why).
MPI_Comm create_guarded(MPI_Comm parent, const char* what, const std::function<int(MPI_Comm*)>& create) {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_MULTIPLE) {  // no other thread may be in MPI meanwhile
    MPI_Comm out = MPI_COMM_NULL;
    check_mpi(create(&out), what);
    n_created.fetch_add(1, std::memory_order_relaxed);
    return out;
  }
  // Everyone here first: the lock is then held for one agreement, not for as long
  // as the slowest member takes to arrive.
  check_mpi(MPI_Barrier(parent), "MPI_Barrier");
  for (int attempt = 0;; ++attempt) {
    const int mine = creation_lock.try_lock() ? 1 : 0;
    int all = 0;
    const int err = MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, parent);
    if (err != MPI_SUCCESS) {
      if (mine) creation_lock.unlock();
      check_mpi(err, "MPI_Allreduce");
    }
    if (all) {
      std::lock_guard<std::mutex> held(creation_lock, std::adopt_lock);
      MPI_Comm out = MPI_COMM_NULL;
      check_mpi(create(&out), what);
      n_created.fetch_add(1, std::memory_order_relaxed);
      return out;
    }
    if (mine) creation_lock.unlock();
    n_retries.fetch_add(1, std::memory_order_relaxed);
    back_off(attempt);
  }
}

}  // namespace

MPI_Comm duplicate_communicator(MPI_Comm parent) {
  return create_guarded(parent, "MPI_Comm_dup", [&](MPI_Comm* out) { return MPI_Comm_dup(parent, out); });
}

MPI_Comm split_communicator(MPI_Comm parent, int color, int key) {
  return create_guarded(parent, "MPI_Comm_split",
                        [&](MPI_Comm* out) { return MPI_Comm_split(parent, color, key, out); });
}

MPI_Comm node_communicator(MPI_Comm parent) {
  return create_guarded(parent, "MPI_Comm_split_type", [&](MPI_Comm* out) {
    return MPI_Comm_split_type(parent, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, out);
  });
}

void free_comm(MPI_Comm& comm) {
  if (comm == MPI_COMM_NULL || comm == MPI_COMM_WORLD || comm == MPI_COMM_SELF) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm);
  comm = MPI_COMM_NULL;
}

CreationStats communicator_creation_stats() {
  CreationStats s;
  s.created = n_created.load(std::memory_order_relaxed);
  s.retries = n_retries.load(std::memory_order_relaxed);
  return s;
}

Comm::Comm(MPI_Comm parent) : comm_(duplicate_communicator(parent)) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

Comm::~Comm() { free_comm(comm_); }

}  // namespace comm
}  // namespace pmewald
