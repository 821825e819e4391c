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
  std::vector<int> sorted(ranks);  // O(partners), not O(P)
  std::sort(sorted.begin(), sorted.end());
  for (size_t m = 0; m < ranks.size(); ++m) {
    const int r = ranks[m];
    if (r < 0 || r >= P) return std::string(what) + ": partner rank " + std::to_string(r) + " out of range";
    if (r == me) return std::string(what) + ": partner equals this rank (use the self piece)";
    const auto eq = std::equal_range(sorted.begin(), sorted.end(), r);
    if (eq.second - eq.first > 1) return std::string(what) + ": partner rank " + std::to_string(r) + " listed twice";
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

// A well-mixed 64-bit hash of one message (SplitMix64 steps).
std::uint64_t message_hash(int src, int dst, std::int64_t len) {
  std::uint64_t x = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32) ^
                    static_cast<std::uint32_t>(dst);
  for (std::uint64_t v : {x, static_cast<std::uint64_t>(len)}) {
    x ^= v + 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
  }
  return x;
}

// Collective: the first disagreement between the ranks' lists, as seen by this rank
// ("" when it sees none): everyone gathers every rank's outgoing messages. Only run
// once the hash check has found that the lists disagree somewhere.
std::string describe_disagreement(MPI_Comm comm, const ExchangeLists& L, int me, int P) {
  std::vector<long long> mine;
  for (size_t m = 0; m < L.send_ranks.size(); ++m) {
    mine.push_back(L.send_ranks[m]);
    mine.push_back(static_cast<long long>(L.send_indices[m].size()));
  }
  int n_mine = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(P)), displs(static_cast<size_t>(P) + 1, 0);
  check_mpi(MPI_Allgather(&n_mine, 1, MPI_INT, counts.data(), 1, MPI_INT, comm), "MPI_Allgather");
  for (int r = 0; r < P; ++r) displs[r + 1] = displs[r] + counts[r];
  std::vector<long long> all(static_cast<size_t>(displs[P]) + 1);
  check_mpi(MPI_Allgatherv(mine.data(), n_mine, MPI_LONG_LONG, all.data(), counts.data(), displs.data(),
                           MPI_LONG_LONG, comm),
            "MPI_Allgatherv");
  // What each rank sends me against what I expect to receive, and vice versa.
  std::vector<long long> expect(static_cast<size_t>(P), 0);
  for (size_t m = 0; m < L.recv_ranks.size(); ++m) expect[L.recv_ranks[m]] = static_cast<long long>(L.recv_indices[m].size());
  for (int r = 0; r < P; ++r)
    for (int k = displs[r]; k < displs[r + 1]; k += 2) {
      if (static_cast<int>(all[k]) != me) continue;
      const long long len = all[k + 1];
      if (expect[r] != len) {
        std::ostringstream s;
        s << "exchange lists disagree: rank " << r << " sends " << len << " elements to rank " << me
          << ", which expects " << expect[r];
        return s.str();
      }
      expect[r] = -1;  // matched
    }
  for (int r = 0; r < P; ++r)
    if (expect[r] > 0)
      return "exchange lists disagree: rank " + std::to_string(me) + " expects " + std::to_string(expect[r]) +
             " elements from rank " + std::to_string(r) + ", which sends none";
  return "";
}

}  // namespace

int ExchangePlan::component_root() const {
  if (component_root_ >= 0) return component_root_;
  // Every partner, either direction (the graph is undirected): a rank sends to s
  // exactly when s receives from it, so both ends list each other.
  std::vector<int> nb(send_.ranks);
  nb.insert(nb.end(), recv_.ranks.begin(), recv_.ranks.end());
  std::sort(nb.begin(), nb.end());
  nb.erase(std::unique(nb.begin(), nb.end()), nb.end());
  // Min-label propagation: each round every rank takes the smallest label among its
  // own and its partners'; after as many rounds as the component's diameter every
  // member holds its smallest rank, and a round that changes nothing anywhere ends it.
  int label = rank_;
  std::vector<int> in(nb.size());
  std::vector<MPI_Request> reqs(2 * nb.size());
  for (;;) {
    for (size_t k = 0; k < nb.size(); ++k) {
      check_mpi(MPI_Irecv(&in[k], 1, MPI_INT, nb[k], tags::kComponentLabels, comm_, &reqs[k]), "MPI_Irecv");
      check_mpi(MPI_Isend(&label, 1, MPI_INT, nb[k], tags::kComponentLabels, comm_, &reqs[nb.size() + k]),
                "MPI_Isend");
    }
    if (!reqs.empty())
      check_mpi(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
    int next = label;
    for (int v : in) next = std::min(next, v);
    int changed = next != label, any = 0;
    label = next;
    check_mpi(MPI_Allreduce(&changed, &any, 1, MPI_INT, MPI_LOR, comm_), "MPI_Allreduce");
    if (!any) break;
  }
  component_root_ = label;
  return label;
}

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

  // Pairing check in O(partners): a hash of every message (sender, receiver,
  // length), summed once over all ranks' send lists and once over all receive
  // lists, agrees exactly when the lists do (up to a 2^-64 chance): one Allreduce.
  // Only when the sums differ does every rank gather the whole graph to say where.
  std::uint64_t sums[2] = {0, 0}, total[2] = {0, 0};
  for (size_t m = 0; m < L.send_ranks.size(); ++m)
    sums[0] += message_hash(rank_, L.send_ranks[m], static_cast<std::int64_t>(L.send_indices[m].size()));
  for (size_t m = 0; m < L.recv_ranks.size(); ++m)
    sums[1] += message_hash(L.recv_ranks[m], rank_, static_cast<std::int64_t>(L.recv_indices[m].size()));
  check_mpi(MPI_Allreduce(sums, total, 2, MPI_UINT64_T, MPI_SUM, comm), "MPI_Allreduce");
  if (total[0] != total[1]) agree_or_throw(comm, describe_disagreement(comm, L, rank_, size_));

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
