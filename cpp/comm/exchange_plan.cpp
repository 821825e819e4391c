#include "comm/exchange_plan.hpp"

#include <algorithm>
#include <atomic>
#include <deque>
#include <sstream>

#include "base/errors.hpp"
#include "base/kokkos_runtime.hpp"
#include "comm/mpi_helpers.hpp"

namespace pmewald {
inline namespace comm {

namespace {

std::atomic<std::int64_t> g_allocations{0};

View1<Index> to_view(const std::vector<Index>& v, const char* label) {
  View1<Index> out(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), v.size());
  count_buffer_allocation();
  std::copy(v.begin(), v.end(), out.data());
  return out;
}

}  // namespace

std::int64_t buffer_allocations() { return g_allocations.load(); }
void count_buffer_allocation(std::int64_t n) { g_allocations += n; }

CommMode comm_mode_from_string(const std::string& name) {
  if (name == "pt2pt") return CommMode::Pt2Pt;
  if (name == "nonblocking") return CommMode::Nonblocking;
  if (name == "collective") return CommMode::Collective;
  throw ValueError("comm_mode must be one of 'pt2pt', 'nonblocking', 'collective', not '" + name + "'");
}

const char* comm_mode_name(CommMode mode) {
  switch (mode) {
    case CommMode::Pt2Pt: return "pt2pt";
    case CommMode::Nonblocking: return "nonblocking";
    case CommMode::Collective: return "collective";
  }
  return "?";
}

std::int64_t ExchangeSide::largest() const {
  std::int64_t m = 0;
  for (int i = 0; i < count(); ++i) m = std::max(m, length(i));
  return m;
}

// ---------------------------------------------------------------------------
// Plan
// ---------------------------------------------------------------------------

namespace {

// Drops empty messages; checks local consistency. Returns an error message or "".
std::string tidy_side(std::vector<int>& ranks, std::vector<std::vector<Index>>& lists, std::int64_t limit,
                      int me, int P, const char* what) {
  if (ranks.size() != lists.size())
    return std::string(what) + ": " + std::to_string(ranks.size()) + " partner ranks but " +
           std::to_string(lists.size()) + " index lists";
  std::vector<int> r2;
  std::vector<std::vector<Index>> l2;
  std::vector<char> seen(static_cast<size_t>(P), 0);
  for (size_t m = 0; m < ranks.size(); ++m) {
    const int r = ranks[m];
    if (r < 0 || r >= P) return std::string(what) + ": partner rank " + std::to_string(r) + " out of range";
    if (r == me) return std::string(what) + ": partner equals this rank (use the self piece)";
    if (seen[r]) return std::string(what) + ": partner rank " + std::to_string(r) + " listed twice";
    seen[r] = 1;
    for (Index i : lists[m])
      if (i < 0 || i >= limit)
        return std::string(what) + ": index " + std::to_string(i) + " outside [0, " + std::to_string(limit) + ")";
    if (lists[m].empty()) continue;
    r2.push_back(r);
    l2.push_back(std::move(lists[m]));
  }
  ranks = std::move(r2);
  lists = std::move(l2);
  return "";
}

ExchangeSide make_side(const std::vector<int>& ranks, const std::vector<std::vector<Index>>& lists,
                       const char* label) {
  ExchangeSide s;
  s.ranks = ranks;
  s.offsets.assign(ranks.size() + 1, 0);
  for (size_t m = 0; m < lists.size(); ++m) s.offsets[m + 1] = s.offsets[m] + static_cast<std::int64_t>(lists[m].size());
  s.indices = View1<Index>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), s.offsets.back());
  count_buffer_allocation();
  for (size_t m = 0; m < lists.size(); ++m) std::copy(lists[m].begin(), lists[m].end(), s.indices.data() + s.offsets[m]);
  std::vector<Index> pos, len;
  s.run_offsets.assign(lists.size() + 1, 0);
  for (size_t m = 0; m < lists.size(); ++m) {
    const auto& l = lists[m];
    for (size_t i = 0; i < l.size(); ++i) {
      if (i == 0 || l[i] != l[i - 1] + 1) {
        pos.push_back(static_cast<Index>(s.offsets[m] + static_cast<std::int64_t>(i)));
        len.push_back(0);
      }
      ++len.back();
    }
    s.run_offsets[m + 1] = static_cast<std::int64_t>(pos.size());
  }
  s.run_pos = to_view(pos, "pmewald::exchange::run_pos");
  s.run_len = to_view(len, "pmewald::exchange::run_len");
  return s;
}

// True when some list (one message of `lists`, or `self`) names an element twice.
bool has_repeats(const std::vector<std::vector<Index>>& lists, const std::vector<Index>& self, std::int64_t n) {
  std::vector<int> stamp(static_cast<size_t>(n), -1);
  int id = 0;
  auto check = [&](const std::vector<Index>& l) {
    for (Index i : l) {
      if (stamp[i] == id) return true;
      stamp[i] = id;
    }
    ++id;
    return false;
  };
  for (const auto& l : lists)
    if (check(l)) return true;
  return check(self);
}

}  // namespace

ExchangePlan::ExchangePlan(MPI_Comm comm, ExchangeLists L, int tag) : comm_(comm), tag_(tag) {
  ensure_kokkos_initialized();
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
  std::string err = tidy_side(L.send_ranks, L.send_indices, L.src_size, rank_, size_, "send lists");
  if (err.empty()) err = tidy_side(L.recv_ranks, L.recv_indices, L.dst_size, rank_, size_, "receive lists");
  if (err.empty() && L.self_src.size() != L.self_dst.size()) err = "self piece: source and destination lists differ in length";
  if (err.empty())
    for (size_t i = 0; i < L.self_src.size() && err.empty(); ++i)
      if (L.self_src[i] < 0 || L.self_src[i] >= L.src_size || L.self_dst[i] < 0 || L.self_dst[i] >= L.dst_size)
        err = "self piece: index out of range";
  if (err.empty() && (L.src_size > INT32_MAX || L.dst_size > INT32_MAX)) err = "arrays too large for 32-bit indices";
  agree_or_throw(comm, err);

  // Everyone learns every rank's outgoing messages (destination, length): the
  // full exchange graph, to check the pairing and to find components.
  std::vector<long long> mine;
  for (size_t m = 0; m < L.send_ranks.size(); ++m) {
    mine.push_back(L.send_ranks[m]);
    mine.push_back(static_cast<long long>(L.send_indices[m].size()));
  }
  int n_mine = static_cast<int>(mine.size());
  std::vector<int> counts(size_), displs(size_ + 1, 0);
  check_mpi(MPI_Allgather(&n_mine, 1, MPI_INT, counts.data(), 1, MPI_INT, comm), "MPI_Allgather");
  for (int r = 0; r < size_; ++r) displs[r + 1] = displs[r] + counts[r];
  std::vector<long long> all(static_cast<size_t>(displs[size_]) + 1);
  check_mpi(MPI_Allgatherv(mine.data(), n_mine, MPI_LONG_LONG, all.data(), counts.data(), displs.data(),
                           MPI_LONG_LONG, comm),
            "MPI_Allgatherv");

  // Check: what each rank sends me is what I expect to receive, and vice versa.
  std::vector<long long> expect(static_cast<size_t>(size_), 0);
  for (size_t m = 0; m < L.recv_ranks.size(); ++m) expect[L.recv_ranks[m]] = static_cast<long long>(L.recv_indices[m].size());
  std::vector<std::vector<int>> adj(static_cast<size_t>(size_));
  for (int r = 0; r < size_ && err.empty(); ++r) {
    for (int k = displs[r]; k < displs[r + 1]; k += 2) {
      const int dest = static_cast<int>(all[k]);
      const long long len = all[k + 1];
      adj[r].push_back(dest);
      adj[dest].push_back(r);
      if (dest == rank_) {
        if (expect[r] != len) {
          std::ostringstream s;
          s << "exchange lists disagree: rank " << r << " sends " << len << " elements to rank " << rank_
            << ", which expects " << expect[r];
          err = s.str();
        }
        expect[r] = -1;  // matched
      }
    }
  }
  for (int r = 0; r < size_ && err.empty(); ++r)
    if (expect[r] > 0)
      err = "exchange lists disagree: rank " + std::to_string(rank_) + " expects " + std::to_string(expect[r]) +
            " elements from rank " + std::to_string(r) + ", which sends none";
  agree_or_throw(comm, err);

  // Connected component holding this rank (breadth-first over the graph that
  // every rank has just built identically).
  std::vector<char> seen(static_cast<size_t>(size_), 0);
  std::deque<int> queue{rank_};
  seen[rank_] = 1;
  while (!queue.empty()) {
    const int r = queue.front();
    queue.pop_front();
    component_.push_back(r);
    for (int q : adj[r])
      if (!seen[q]) {
        seen[q] = 1;
        queue.push_back(q);
      }
  }
  std::sort(component_.begin(), component_.end());

  src_size_ = L.src_size;
  dst_size_ = L.dst_size;
  repeats_[0] = has_repeats(L.recv_indices, L.self_dst, dst_size_);
  repeats_[1] = has_repeats(L.send_indices, L.self_src, src_size_);
  send_ = make_side(L.send_ranks, L.send_indices, "pmewald::exchange::send_index");
  recv_ = make_side(L.recv_ranks, L.recv_indices, "pmewald::exchange::recv_index");
  self_src_ = to_view(L.self_src, "pmewald::exchange::self_src");
  self_dst_ = to_view(L.self_dst, "pmewald::exchange::self_dst");
  std::vector<Index> pos, len;
  for (size_t i = 0; i < L.self_src.size(); ++i) {
    if (i == 0 || L.self_src[i] != L.self_src[i - 1] + 1 || L.self_dst[i] != L.self_dst[i - 1] + 1) {
      pos.push_back(static_cast<Index>(i));
      len.push_back(0);
    }
    ++len.back();
  }
  self_run_pos_ = to_view(pos, "pmewald::exchange::self_run_pos");
  self_run_len_ = to_view(len, "pmewald::exchange::self_run_len");
}

}  // namespace comm
}  // namespace pmewald
