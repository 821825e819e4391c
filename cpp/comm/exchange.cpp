#include "comm/exchange.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <sstream>

#include "comm/mpi_helpers.hpp"
#include "base/errors.hpp"

namespace pmewald {
inline namespace comm {

namespace {

std::atomic<std::int64_t> g_allocations{0};

double now() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

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

// ---------------------------------------------------------------------------
// Executor base
// ---------------------------------------------------------------------------

template <class T>
ExchangeExecutor<T>::ExchangeExecutor(std::shared_ptr<const ExchangePlan> plan) : plan_(std::move(plan)) {
  if (!plan_) throw std::invalid_argument("ExchangeExecutor: null plan");
}

template <class T>
MPI_Datatype ExchangeExecutor<T>::mpi_type() {
  if constexpr (std::is_same_v<T, double>) {
    return MPI_DOUBLE;
  } else {
    static_assert(sizeof(T) == 2 * sizeof(double), "Complex must be two doubles");
    return MPI_C_DOUBLE_COMPLEX;
  }
}

template <class T>
T* ExchangeExecutor<T>::allocate(View1<T>& view, const char* label, std::int64_t n) {
  view = View1<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), std::max<std::int64_t>(n, 1));
  count_buffer_allocation();
  return view.data();
}

namespace {
// Run-wise copies pay off once runs average this many elements.
constexpr std::int64_t kMinAverageRun = 4;
}  // namespace

template <class T>
void ExchangeExecutor<T>::gather(const T* src, const Index* idx, std::int64_t n, T* buf) {
  if (n <= 0) return;
  Kokkos::parallel_for(Range(0, n), [=](const std::int64_t i) { buf[i] = src[idx[i]]; });
}

template <class T>
void ExchangeExecutor<T>::scatter(const T* buf, const Index* idx, std::int64_t n, T* dst, Direction dir,
                                  UnpackOp op) const {
  if (n <= 0) return;
  if (op == UnpackOp::Assign) {
    Kokkos::parallel_for(Range(0, n), [=](const std::int64_t i) { dst[idx[i]] = buf[i]; });
  } else if (plan_->unpack_repeats(dir) && ExecSpace().concurrency() > 1) {
    Kokkos::parallel_for(Range(0, n), [=](const std::int64_t i) { Kokkos::atomic_add(&dst[idx[i]], buf[i]); });
  } else {
    Kokkos::parallel_for(Range(0, n), [=](const std::int64_t i) { dst[idx[i]] += buf[i]; });
  }
}

template <class T>
void ExchangeExecutor<T>::pack(const T* src, const ExchangeSide& side, int m0, int m1, T* buf) {
  if (m1 <= m0) return;
  const std::int64_t base = side.offsets[m0], n = side.offsets[m1] - base;
  const std::int64_t r0 = side.run_offsets[m0], nr = side.run_offsets[m1] - r0;
  const Index* idx = side.indices.data();
  if (nr * kMinAverageRun > n) {
    gather(src, idx + base, n, buf);
    return;
  }
  const Index* pos = side.run_pos.data() + r0;
  const Index* len = side.run_len.data() + r0;
  Kokkos::parallel_for(Range(0, nr), [=](const std::int64_t r) {
    const std::int64_t p = pos[r];
    const T* from = src + idx[p];
    T* to = buf + (p - base);
    for (Index k = 0; k < len[r]; ++k) to[k] = from[k];
  });
}

template <class T>
void ExchangeExecutor<T>::unpack(const T* buf, const ExchangeSide& side, int m0, int m1, T* dst, Direction dir,
                                 UnpackOp op) const {
  if (m1 <= m0) return;
  const std::int64_t base = side.offsets[m0], n = side.offsets[m1] - base;
  const std::int64_t r0 = side.run_offsets[m0], nr = side.run_offsets[m1] - r0;
  const Index* idx = side.indices.data();
  // Runs never repeat an element, so run-wise adds need no atomics.
  if (nr * kMinAverageRun > n || (op == UnpackOp::Add && plan_->unpack_repeats(dir))) {
    scatter(buf, idx + base, n, dst, dir, op);
    return;
  }
  const Index* pos = side.run_pos.data() + r0;
  const Index* len = side.run_len.data() + r0;
  if (op == UnpackOp::Assign) {
    Kokkos::parallel_for(Range(0, nr), [=](const std::int64_t r) {
      const std::int64_t p = pos[r];
      const T* from = buf + (p - base);
      T* to = dst + idx[p];
      for (Index k = 0; k < len[r]; ++k) to[k] = from[k];
    });
  } else {
    Kokkos::parallel_for(Range(0, nr), [=](const std::int64_t r) {
      const std::int64_t p = pos[r];
      const T* from = buf + (p - base);
      T* to = dst + idx[p];
      for (Index k = 0; k < len[r]; ++k) to[k] += from[k];
    });
  }
}

template <class T>
void ExchangeExecutor<T>::copy_self(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st) const {
  const std::int64_t n = plan_->self_count();
  if (n == 0) return;
  const double t0 = now();
  const Index* from = plan_->self_from(dir).data();
  const Index* to = plan_->self_to(dir).data();
  const std::int64_t nr = static_cast<std::int64_t>(plan_->self_run_pos().extent(0));
  const bool repeats = plan_->unpack_repeats(dir);
  if (nr * kMinAverageRun <= n && !(op == UnpackOp::Add && repeats)) {
    const Index* pos = plan_->self_run_pos().data();
    const Index* len = plan_->self_run_len().data();
    if (op == UnpackOp::Assign) {
      Kokkos::parallel_for(Range(0, nr), [=](const std::int64_t r) {
        const T* a = src + from[pos[r]];
        T* b = dst + to[pos[r]];
        for (Index k = 0; k < len[r]; ++k) b[k] = a[k];
      });
    } else {
      Kokkos::parallel_for(Range(0, nr), [=](const std::int64_t r) {
        const T* a = src + from[pos[r]];
        T* b = dst + to[pos[r]];
        for (Index k = 0; k < len[r]; ++k) b[k] += a[k];
      });
    }
  } else if (op == UnpackOp::Assign) {
    Kokkos::parallel_for(Range(0, n), [=](const std::int64_t i) { dst[to[i]] = src[from[i]]; });
  } else if (repeats && ExecSpace().concurrency() > 1) {
    Kokkos::parallel_for(Range(0, n), [=](const std::int64_t i) { Kokkos::atomic_add(&dst[to[i]], src[from[i]]); });
  } else {
    Kokkos::parallel_for(Range(0, n), [=](const std::int64_t i) { dst[to[i]] += src[from[i]]; });
  }
  st.self_seconds += now() - t0;
}

template <class T>
void ExchangeExecutor<T>::execute(const T* src, T* dst, Direction dir, UnpackOp op) {
  ExchangeStats& st = stats_[static_cast<int>(dir)];
  const ExchangeSide& out = plan_->outgoing(dir);
  const ExchangeSide& in = plan_->incoming(dir);
  run(src, dst, dir, op, st);
  st.executions += 1;
  st.messages_sent += out.count();
  st.messages_received += in.count();
  st.bytes_sent += out.total() * static_cast<std::int64_t>(sizeof(T));
  st.bytes_received += in.total() * static_cast<std::int64_t>(sizeof(T));
  st.self_bytes += plan_->self_count() * static_cast<std::int64_t>(sizeof(T));
}

// ---------------------------------------------------------------------------
// pt2pt
// ---------------------------------------------------------------------------

template <class T>
Pt2PtExecutor<T>::Pt2PtExecutor(std::shared_ptr<const ExchangePlan> plan) : ExchangeExecutor<T>(std::move(plan)) {
  const ExchangePlan& p = *this->plan_;
  std::int64_t send = 0, recv = 0;
  int nreq = 0;
  for (Direction d : {Direction::Forward, Direction::Reverse}) {
    send = std::max(send, p.outgoing(d).largest());
    recv = std::max(recv, p.incoming(d).total());
    nreq = std::max(nreq, p.incoming(d).count());
  }
  this->allocate(send_buf_, "pmewald::pt2pt::send", send);
  this->allocate(recv_buf_, "pmewald::pt2pt::recv", recv);
  requests_.assign(static_cast<size_t>(nreq) + 1, MPI_REQUEST_NULL);
  count_buffer_allocation();
}

template <class T>
void Pt2PtExecutor<T>::run(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st) {
  const ExchangePlan& p = *this->plan_;
  const ExchangeSide& out = p.outgoing(dir);
  const ExchangeSide& in = p.incoming(dir);
  const MPI_Datatype type = this->mpi_type();
  T* rbuf = recv_buf_.data();
  double t0 = now();
  for (int m = 0; m < in.count(); ++m)
    MPI_Irecv(rbuf + in.offsets[m], static_cast<int>(in.length(m)), type, in.ranks[m], p.tag(), p.comm(),
              &requests_[m]);
  double t1 = now();
  st.wait_seconds += t1 - t0;
  T* sbuf = send_buf_.data();
  for (int m = 0; m < out.count(); ++m) {
    t0 = now();
    this->pack(src, out, m, m + 1, sbuf);
    t1 = now();
    MPI_Send(sbuf, static_cast<int>(out.length(m)), type, out.ranks[m], p.tag(), p.comm());
    const double t2 = now();
    st.pack_seconds += t1 - t0;
    st.wait_seconds += t2 - t1;
  }
  this->copy_self(src, dst, dir, op, st);
  for (int k = 0; k < in.count(); ++k) {
    int m = MPI_UNDEFINED;
    t0 = now();
    MPI_Waitany(in.count(), requests_.data(), &m, MPI_STATUS_IGNORE);
    t1 = now();
    this->unpack(rbuf + in.offsets[m], in, m, m + 1, dst, dir, op);
    st.wait_seconds += t1 - t0;
    st.unpack_seconds += now() - t1;
  }
}

// ---------------------------------------------------------------------------
// nonblocking
// ---------------------------------------------------------------------------

template <class T>
NonblockingExecutor<T>::NonblockingExecutor(std::shared_ptr<const ExchangePlan> plan)
    : ExchangeExecutor<T>(std::move(plan)) {
  const ExchangePlan& p = *this->plan_;
  std::int64_t send = 0, recv = 0;
  int nr = 0, ns = 0;
  for (Direction d : {Direction::Forward, Direction::Reverse}) {
    send = std::max(send, p.outgoing(d).total());
    recv = std::max(recv, p.incoming(d).total());
    nr = std::max(nr, p.incoming(d).count());
    ns = std::max(ns, p.outgoing(d).count());
  }
  this->allocate(send_buf_, "pmewald::nonblocking::send", send);
  this->allocate(recv_buf_, "pmewald::nonblocking::recv", recv);
  recv_requests_.assign(static_cast<size_t>(nr) + 1, MPI_REQUEST_NULL);
  send_requests_.assign(static_cast<size_t>(ns) + 1, MPI_REQUEST_NULL);
  count_buffer_allocation(2);
}

template <class T>
void NonblockingExecutor<T>::run(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st) {
  const ExchangePlan& p = *this->plan_;
  const ExchangeSide& out = p.outgoing(dir);
  const ExchangeSide& in = p.incoming(dir);
  const MPI_Datatype type = this->mpi_type();
  T* rbuf = recv_buf_.data();
  T* sbuf = send_buf_.data();
  double t0 = now();
  for (int m = 0; m < in.count(); ++m)
    MPI_Irecv(rbuf + in.offsets[m], static_cast<int>(in.length(m)), type, in.ranks[m], p.tag(), p.comm(),
              &recv_requests_[m]);
  double t1 = now();
  st.wait_seconds += t1 - t0;
  for (int m = 0; m < out.count(); ++m) {
    t0 = now();
    this->pack(src, out, m, m + 1, sbuf + out.offsets[m]);
    t1 = now();
    MPI_Isend(sbuf + out.offsets[m], static_cast<int>(out.length(m)), type, out.ranks[m], p.tag(), p.comm(),
              &send_requests_[m]);
    st.pack_seconds += t1 - t0;
    st.wait_seconds += now() - t1;
  }
  this->copy_self(src, dst, dir, op, st);
  for (int k = 0; k < in.count(); ++k) {
    int m = MPI_UNDEFINED;
    t0 = now();
    MPI_Waitany(in.count(), recv_requests_.data(), &m, MPI_STATUS_IGNORE);
    t1 = now();
    this->unpack(rbuf + in.offsets[m], in, m, m + 1, dst, dir, op);
    st.wait_seconds += t1 - t0;
    st.unpack_seconds += now() - t1;
  }
  t0 = now();
  if (out.count() > 0) MPI_Waitall(out.count(), send_requests_.data(), MPI_STATUSES_IGNORE);
  st.wait_seconds += now() - t0;
}

// ---------------------------------------------------------------------------
// collective
// ---------------------------------------------------------------------------

template <class T>
CollectiveExecutor<T>::CollectiveExecutor(std::shared_ptr<const ExchangePlan> plan, bool self_via_mpi)
    : ExchangeExecutor<T>(std::move(plan)), self_via_mpi_(self_via_mpi) {
  const ExchangePlan& p = *this->plan_;
  const std::vector<int>& comp = p.component();
  // Collective over the whole communicator: every rank calls, each with the
  // colour of its own component (its smallest rank), so members agree.
  check_mpi(MPI_Comm_split(p.comm(), comp.front(), p.rank(), &subcomm_), "MPI_Comm_split");
  MPI_Comm_rank(subcomm_, &sub_rank_);
  // Sub-communicator ranks follow the parent ranks (key = parent rank), so the
  // sub rank of a partner is its position in the sorted component.
  auto sub = [&](int r) {
    return static_cast<int>(std::lower_bound(comp.begin(), comp.end(), r) - comp.begin());
  };
  const int n = static_cast<int>(comp.size());
  std::int64_t send = 0, recv = 0;
  for (Direction d : {Direction::Forward, Direction::Reverse}) {
    const int k = static_cast<int>(d);
    const ExchangeSide& out = p.outgoing(d);
    const ExchangeSide& in = p.incoming(d);
    send_counts_[k].assign(n, 0);
    send_displs_[k].assign(n, 0);
    recv_counts_[k].assign(n, 0);
    recv_displs_[k].assign(n, 0);
    for (int m = 0; m < out.count(); ++m) {
      send_counts_[k][sub(out.ranks[m])] = static_cast<int>(out.length(m));
      send_displs_[k][sub(out.ranks[m])] = static_cast<int>(out.offsets[m]);
    }
    for (int m = 0; m < in.count(); ++m) {
      recv_counts_[k][sub(in.ranks[m])] = static_cast<int>(in.length(m));
      recv_displs_[k][sub(in.ranks[m])] = static_cast<int>(in.offsets[m]);
    }
    self_send_offset_[k] = out.total();
    self_recv_offset_[k] = in.total();
    const std::int64_t self = self_via_mpi_ ? p.self_count() : 0;
    send_counts_[k][sub_rank_] = static_cast<int>(self);
    send_displs_[k][sub_rank_] = static_cast<int>(out.total());
    recv_counts_[k][sub_rank_] = static_cast<int>(self);
    recv_displs_[k][sub_rank_] = static_cast<int>(in.total());
    send = std::max(send, out.total() + self);
    recv = std::max(recv, in.total() + self);
  }
  this->allocate(send_buf_, "pmewald::collective::send", send);
  this->allocate(recv_buf_, "pmewald::collective::recv", recv);
  count_buffer_allocation(4);
}

template <class T>
CollectiveExecutor<T>::~CollectiveExecutor() {
  free_comm(subcomm_);
}

template <class T>
void CollectiveExecutor<T>::run(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st) {
  const ExchangePlan& p = *this->plan_;
  const int k = static_cast<int>(dir);
  const ExchangeSide& out = p.outgoing(dir);
  const ExchangeSide& in = p.incoming(dir);
  if (p.component().size() == 1) {  // nobody to talk to
    this->copy_self(src, dst, dir, op, st);
    return;
  }
  T* sbuf = send_buf_.data();
  T* rbuf = recv_buf_.data();
  double t0 = now();
  this->pack(src, out, 0, out.count(), sbuf);
  double t1 = now();
  st.pack_seconds += t1 - t0;
  const std::int64_t nself = p.self_count();
  if (self_via_mpi_) {
    this->gather(src, p.self_from(dir).data(), nself, sbuf + self_send_offset_[k]);
    st.self_seconds += now() - t1;
  } else {
    this->copy_self(src, dst, dir, op, st);
  }
  t0 = now();
  const MPI_Datatype type = this->mpi_type();
  check_mpi(MPI_Alltoallv(sbuf, send_counts_[k].data(), send_displs_[k].data(), type, rbuf, recv_counts_[k].data(),
                          recv_displs_[k].data(), type, subcomm_),
            "MPI_Alltoallv");
  t1 = now();
  st.wait_seconds += t1 - t0;
  this->unpack(rbuf, in, 0, in.count(), dst, dir, op);
  const double t2 = now();
  st.unpack_seconds += t2 - t1;
  if (self_via_mpi_) {
    this->scatter(rbuf + self_recv_offset_[k], p.self_to(dir).data(), nself, dst, dir, op);
    st.self_seconds += now() - t2;
  }
}

template <class T>
std::unique_ptr<ExchangeExecutor<T>> make_executor(CommMode mode, std::shared_ptr<const ExchangePlan> plan,
                                                   bool collective_self_via_mpi) {
  switch (mode) {
    case CommMode::Pt2Pt: return std::make_unique<Pt2PtExecutor<T>>(std::move(plan));
    case CommMode::Nonblocking: return std::make_unique<NonblockingExecutor<T>>(std::move(plan));
    case CommMode::Collective: return std::make_unique<CollectiveExecutor<T>>(std::move(plan), collective_self_via_mpi);
  }
  throw ValueError("unknown communication mode");
}

template class ExchangeExecutor<double>;
template class ExchangeExecutor<Complex>;
template class Pt2PtExecutor<double>;
template class Pt2PtExecutor<Complex>;
template class NonblockingExecutor<double>;
template class NonblockingExecutor<Complex>;
template class CollectiveExecutor<double>;
template class CollectiveExecutor<Complex>;
template std::unique_ptr<ExchangeExecutor<double>> make_executor<double>(CommMode, std::shared_ptr<const ExchangePlan>,
                                                                                  bool);
template std::unique_ptr<ExchangeExecutor<Complex>> make_executor<Complex>(CommMode,
                                                                           std::shared_ptr<const ExchangePlan>, bool);

}  // namespace comm
}  // namespace pmewald
