#include "comm/thread_placement.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "base/threads.hpp"
#include "comm/communicators.hpp"

namespace pmewald {
inline namespace comm {

bool ThreadPlacement::oversubscribed() const {
  return threads_on_node > cores_on_node || max_rank_threads > min_rank_cores;
}

std::string ThreadPlacement::describe() const {
  std::ostringstream os;
  os << ranks_on_node << " rank(s) x " << max_rank_threads << " thread(s) = " << threads_on_node
     << " threads on a node where they may use " << cores_on_node << " core(s)";
  if (max_rank_threads > min_rank_cores)
    os << " (a rank with " << max_rank_threads << " threads is bound to " << min_rank_cores << " core(s))";
  return os.str();
}

ThreadPlacement thread_placement(MPI_Comm comm) {
  ThreadPlacement p;
  p.threads_per_rank = kernel_threads();
  MPI_Comm node = node_communicator(comm);
  int nranks = 1;
  MPI_Comm_size(node, &nranks);
  const std::vector<std::uint64_t> mine = affinity_words();
  const int words = static_cast<int>(mine.size());
  std::vector<std::uint64_t> all(static_cast<std::size_t>(words) * nranks);
  MPI_Allgather(mine.data(), words, MPI_UINT64_T, all.data(), words, MPI_UINT64_T, node);
  std::vector<int> threads(nranks);
  MPI_Allgather(&p.threads_per_rank, 1, MPI_INT, threads.data(), 1, MPI_INT, node);
  free_comm(node);
  std::vector<std::uint64_t> all_cores(mine.size(), 0);
  int min_cores = CPU_SETSIZE, sum_threads = 0, max_threads = 0;
  for (int r = 0; r < nranks; ++r) {
    const std::uint64_t* w = all.data() + static_cast<std::size_t>(r) * words;
    for (int i = 0; i < words; ++i) all_cores[i] |= w[i];
    min_cores = std::min(min_cores, std::max(1, count_bits(w, mine.size())));
    sum_threads += threads[r];
    max_threads = std::max(max_threads, threads[r]);
  }
  p.ranks_on_node = nranks;
  p.threads_on_node = sum_threads;
  p.cores_on_node = std::max(1, count_bits(all_cores.data(), all_cores.size()));
  p.min_rank_cores = min_cores;
  p.max_rank_threads = max_threads;
  // The busiest node: the largest threads per core (then the most threads), on every rank.
  int me = 0;
  MPI_Comm_rank(comm, &me);
  struct {
    double load;
    int rank;
  } local{std::max(static_cast<double>(sum_threads) / p.cores_on_node,
                   static_cast<double>(max_threads) / min_cores) + 1e-9 * sum_threads,
          me},
      worst{};
  MPI_Allreduce(&local, &worst, 1, MPI_DOUBLE_INT, MPI_MAXLOC, comm);
  int v[6] = {p.threads_per_rank, p.ranks_on_node, p.threads_on_node, p.cores_on_node, p.min_rank_cores,
              p.max_rank_threads};
  MPI_Bcast(v + 1, 5, MPI_INT, worst.rank, comm);
  p.ranks_on_node = v[1];
  p.threads_on_node = v[2];
  p.cores_on_node = v[3];
  p.min_rank_cores = v[4];
  p.max_rank_threads = v[5];
  return p;
}

void warn_if_oversubscribed(MPI_Comm comm) {
  static std::atomic<bool> printed{false};
  const ThreadPlacement p = thread_placement(comm);
  int me = 0;
  MPI_Comm_rank(comm, &me);
  if (me != 0 || !p.oversubscribed() || printed.exchange(true)) return;
  const char* quiet = std::getenv("PMEWALD_QUIET_OVERSUBSCRIPTION");
  if (quiet && quiet[0] == '1') return;
  std::fprintf(stderr,
               "pmewald warning: %s. More threads than cores makes waiting threads spin on the cores the "
               "others need (runs 2-25x slower). Use ranks x OMP_NUM_THREADS <= cores and bind them "
               "(OMP_PROC_BIND=close OMP_PLACES=cores; mpirun --map-by slot:PE=<threads> --bind-to core), "
               "or set OMP_WAIT_POLICY=passive (docs/install.md, Threads and ranks).\n",
               p.describe().c_str());
  std::fflush(stderr);
}

}  // namespace comm
}  // namespace pmewald
