#include "comm/exchange.hpp"

#include <algorithm>
#include <stdexcept>

#include "base/compute_model.hpp"
#include "base/errors.hpp"
#include "base/timers.hpp"
#include "comm/communicators.hpp"
#include "comm/mpi_helpers.hpp"

namespace pmewald {
inline namespace comm {

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
  charge(Work::Pack, static_cast<double>(n * static_cast<std::int64_t>(sizeof(T))));
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
  charge(Work::Pack, static_cast<double>(n * static_cast<std::int64_t>(sizeof(T))));
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
  ScopedTimer timer(st.self_seconds);
  charge(Work::Pack, static_cast<double>(n * static_cast<std::int64_t>(sizeof(T))));
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
}

template <class T>
void ExchangeExecutor<T>::count(Direction dir) {
  ExchangeStats& st = stats_[static_cast<int>(dir)];
  const ExchangeSide& out = plan_->outgoing(dir);
  const ExchangeSide& in = plan_->incoming(dir);
  st.executions += 1;
  st.messages_sent += out.count();
  st.messages_received += in.count();
  st.bytes_sent += out.total() * static_cast<std::int64_t>(sizeof(T));
  st.bytes_received += in.total() * static_cast<std::int64_t>(sizeof(T));
  st.self_bytes += plan_->self_count() * static_cast<std::int64_t>(sizeof(T));
}

template <class T>
void ExchangeExecutor<T>::execute(const T* src, T* dst, Direction dir, UnpackOp op) {
  if (flight_.active) throw std::logic_error("ExchangeExecutor::execute: an exchange is in flight");
  run(src, dst, dir, op, stats_[static_cast<int>(dir)]);
  count(dir);
}

template <class T>
void ExchangeExecutor<T>::run(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st) {
  flight_ = Flight{dst, dir, op, true, 0};
  arrived_.assign(static_cast<std::size_t>(plan_->incoming(dir).count()), 0);
  post(src, dst, dir, op, st);
  complete(st);
  flight_.active = false;
}

template <class T>
void ExchangeExecutor<T>::start(const T* src, T* dst, Direction dir, UnpackOp op) {
  if (flight_.active) throw std::logic_error("ExchangeExecutor::start: an exchange is in flight");
  flight_ = Flight{dst, dir, op, true, 0};
  arrived_.assign(static_cast<std::size_t>(plan_->incoming(dir).count()), 0);
  post(src, dst, dir, op, stats_[static_cast<int>(dir)]);
  count(dir);
}

template <class T>
bool ExchangeExecutor<T>::test() {
  if (!flight_.active) return true;
  ExchangeStats& st = stats_[static_cast<int>(flight_.dir)];
  st.tests += 1;
  if (poll(st)) flight_.active = false;
  return !flight_.active;
}

template <class T>
void ExchangeExecutor<T>::finish() {
  if (!flight_.active) return;
  complete(stats_[static_cast<int>(flight_.dir)]);
  flight_.active = false;
}

template <class T>
bool ExchangeExecutor<T>::unpack_arrived(MPI_Request* requests, const T* rbuf, std::vector<int>& done,
                                         ExchangeStats& st) {
  Flight& f = flight_;
  const ExchangeSide& in = plan_->incoming(f.dir);
  if (f.unpacked == in.count()) return true;
  int k = 0;
  {
    ScopedTimer timer(st.test_seconds);
    MPI_Testsome(in.count(), requests, &k, done.data(), MPI_STATUSES_IGNORE);
  }
  if (k == MPI_UNDEFINED) k = 0;
  const double t0 = wall_seconds();
  if (f.op == UnpackOp::Add) {
    // Sums in message order whatever the arrival order (the same bits every run):
    // the arrived prefix is added now, the rest waits for its predecessors.
    for (int i = 0; i < k; ++i) arrived_[static_cast<std::size_t>(done[i])] = 1;
    for (; f.unpacked < in.count() && arrived_[static_cast<std::size_t>(f.unpacked)]; ++f.unpacked)
      unpack(rbuf + in.offsets[f.unpacked], in, f.unpacked, f.unpacked + 1, f.dst, f.dir, f.op);
  } else {
    for (int i = 0; i < k; ++i) unpack(rbuf + in.offsets[done[i]], in, done[i], done[i] + 1, f.dst, f.dir, f.op);
    f.unpacked += k;
  }
  st.unpack_seconds += wall_seconds() - t0;
  return f.unpacked == in.count();
}

template <class T>
void ExchangeExecutor<T>::unpack_remaining(MPI_Request* requests, const T* rbuf, ExchangeStats& st) {
  Flight& f = flight_;
  const ExchangeSide& in = plan_->incoming(f.dir);
  for (; f.unpacked < in.count(); ++f.unpacked) {
    int m = f.unpacked;
    const double t0 = wall_seconds();
    if (f.op != UnpackOp::Add)
      MPI_Waitany(in.count(), requests, &m, MPI_STATUS_IGNORE);  // copies: any order
    else if (!arrived_[static_cast<std::size_t>(m)])
      MPI_Wait(&requests[m], MPI_STATUS_IGNORE);  // sums: in message order
    const double t1 = wall_seconds();
    unpack(rbuf + in.offsets[m], in, m, m + 1, f.dst, f.dir, f.op);
    st.wait_seconds += t1 - t0;
    st.unpack_seconds += wall_seconds() - t1;
  }
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
  done_.assign(static_cast<size_t>(nreq) + 1, 0);
  count_buffer_allocation();
}

template <class T>
void Pt2PtExecutor<T>::post(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st) {
  const ExchangePlan& p = *this->plan_;
  const ExchangeSide& out = p.outgoing(dir);
  const ExchangeSide& in = p.incoming(dir);
  const MPI_Datatype type = this->mpi_type();
  T* rbuf = recv_buf_.data();
  double t0 = wall_seconds();
  for (int m = 0; m < in.count(); ++m)
    MPI_Irecv(rbuf + in.offsets[m], static_cast<int>(in.length(m)), type, in.ranks[m], p.tag(), p.comm(),
              &requests_[m]);
  double t1 = wall_seconds();
  st.wait_seconds += t1 - t0;
  T* sbuf = send_buf_.data();
  for (int m = 0; m < out.count(); ++m) {
    t0 = wall_seconds();
    this->pack(src, out, m, m + 1, sbuf);
    t1 = wall_seconds();
    MPI_Send(sbuf, static_cast<int>(out.length(m)), type, out.ranks[m], p.tag(), p.comm());
    const double t2 = wall_seconds();
    st.pack_seconds += t1 - t0;
    st.wait_seconds += t2 - t1;
  }
  this->copy_self(src, dst, dir, op, st);
}

template <class T>
bool Pt2PtExecutor<T>::poll(ExchangeStats& st) {
  return this->unpack_arrived(requests_.data(), recv_buf_.data(), done_, st);
}

template <class T>
void Pt2PtExecutor<T>::complete(ExchangeStats& st) {
  this->unpack_remaining(requests_.data(), recv_buf_.data(), st);
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
  done_.assign(static_cast<size_t>(nr) + 1, 0);
  count_buffer_allocation(2);
}

template <class T>
void NonblockingExecutor<T>::post(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st) {
  const ExchangePlan& p = *this->plan_;
  const ExchangeSide& out = p.outgoing(dir);
  const ExchangeSide& in = p.incoming(dir);
  const MPI_Datatype type = this->mpi_type();
  T* rbuf = recv_buf_.data();
  T* sbuf = send_buf_.data();
  double t0 = wall_seconds();
  for (int m = 0; m < in.count(); ++m)
    MPI_Irecv(rbuf + in.offsets[m], static_cast<int>(in.length(m)), type, in.ranks[m], p.tag(), p.comm(),
              &recv_requests_[m]);
  double t1 = wall_seconds();
  st.wait_seconds += t1 - t0;
  for (int m = 0; m < out.count(); ++m) {
    t0 = wall_seconds();
    this->pack(src, out, m, m + 1, sbuf + out.offsets[m]);
    t1 = wall_seconds();
    MPI_Isend(sbuf + out.offsets[m], static_cast<int>(out.length(m)), type, out.ranks[m], p.tag(), p.comm(),
              &send_requests_[m]);
    st.pack_seconds += t1 - t0;
    st.wait_seconds += wall_seconds() - t1;
  }
  sends_done_ = out.count() == 0;
  this->copy_self(src, dst, dir, op, st);
}

template <class T>
bool NonblockingExecutor<T>::poll(ExchangeStats& st) {
  auto& f = this->flight_;
  const bool received = this->unpack_arrived(recv_requests_.data(), recv_buf_.data(), done_, st);
  if (!sends_done_) {
    ScopedTimer timer(st.test_seconds);
    int flag = 0;
    MPI_Testall(this->plan_->outgoing(f.dir).count(), send_requests_.data(), &flag, MPI_STATUSES_IGNORE);
    sends_done_ = flag != 0;
  }
  return received && sends_done_;
}

template <class T>
void NonblockingExecutor<T>::complete(ExchangeStats& st) {
  auto& f = this->flight_;
  this->unpack_remaining(recv_requests_.data(), recv_buf_.data(), st);
  if (!sends_done_) {
    const double t0 = wall_seconds();
    MPI_Waitall(this->plan_->outgoing(f.dir).count(), send_requests_.data(), MPI_STATUSES_IGNORE);
    st.wait_seconds += wall_seconds() - t0;
    sends_done_ = true;
  }
}

// ---------------------------------------------------------------------------
// collective
// ---------------------------------------------------------------------------

template <class T>
CollectiveExecutor<T>::CollectiveExecutor(std::shared_ptr<const ExchangePlan> plan, bool self_via_mpi)
    : ExchangeExecutor<T>(std::move(plan)), self_via_mpi_(self_via_mpi) {
  const ExchangePlan& p = *this->plan_;
  // Collective over the whole communicator: every rank calls, each with the
  // colour of its own component (its smallest rank), so members agree.
  subcomm_ = split_communicator(p.comm(), p.component_root(), p.rank());
  MPI_Comm_rank(subcomm_, &sub_rank_);
  MPI_Comm_size(subcomm_, &sub_size_);
  // Sub-communicator ranks of the partners (O(partners): no list of the component).
  std::vector<int> parent, child;
  for (Direction d : {Direction::Forward, Direction::Reverse})
    for (const ExchangeSide* side : {&p.outgoing(d), &p.incoming(d)})
      parent.insert(parent.end(), side->ranks.begin(), side->ranks.end());
  std::sort(parent.begin(), parent.end());
  parent.erase(std::unique(parent.begin(), parent.end()), parent.end());
  child.resize(parent.size());
  MPI_Group g_parent, g_sub;
  check_mpi(MPI_Comm_group(p.comm(), &g_parent), "MPI_Comm_group");
  check_mpi(MPI_Comm_group(subcomm_, &g_sub), "MPI_Comm_group");
  if (!parent.empty())
    check_mpi(MPI_Group_translate_ranks(g_parent, static_cast<int>(parent.size()), parent.data(), g_sub, child.data()),
              "MPI_Group_translate_ranks");
  MPI_Group_free(&g_parent);
  MPI_Group_free(&g_sub);
  auto sub = [&](int r) {
    return child[static_cast<std::size_t>(std::lower_bound(parent.begin(), parent.end(), r) - parent.begin())];
  };
  const int n = sub_size_;
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

// Pack every message (and the self piece: into its slot, or copied directly).
template <class T>
void CollectiveExecutor<T>::pack_all(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st) {
  const ExchangePlan& p = *this->plan_;
  const int k = static_cast<int>(dir);
  const ExchangeSide& out = p.outgoing(dir);
  T* sbuf = send_buf_.data();
  const double t0 = wall_seconds();
  this->pack(src, out, 0, out.count(), sbuf);
  const double t1 = wall_seconds();
  st.pack_seconds += t1 - t0;
  if (self_via_mpi_) {
    this->gather(src, p.self_from(dir).data(), p.self_count(), sbuf + self_send_offset_[k]);
    charge(Work::Pack, static_cast<double>(p.self_count() * static_cast<std::int64_t>(sizeof(T))));
    st.self_seconds += wall_seconds() - t1;
  } else {
    this->copy_self(src, dst, dir, op, st);
  }
}

template <class T>
void CollectiveExecutor<T>::unpack_all(T* dst, Direction dir, UnpackOp op, ExchangeStats& st) {
  const ExchangePlan& p = *this->plan_;
  const int k = static_cast<int>(dir);
  T* rbuf = recv_buf_.data();
  const double t1 = wall_seconds();
  this->unpack(rbuf, p.incoming(dir), 0, p.incoming(dir).count(), dst, dir, op);
  const double t2 = wall_seconds();
  st.unpack_seconds += t2 - t1;
  if (self_via_mpi_) {
    this->scatter(rbuf + self_recv_offset_[k], p.self_to(dir).data(), p.self_count(), dst, dir, op);
    charge(Work::Pack, static_cast<double>(p.self_count() * static_cast<std::int64_t>(sizeof(T))));
    st.self_seconds += wall_seconds() - t2;
  }
}

template <class T>
void CollectiveExecutor<T>::run(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st) {
  const int k = static_cast<int>(dir);
  if (sub_size_ == 1) {  // nobody to talk to
    this->copy_self(src, dst, dir, op, st);
    return;
  }
  pack_all(src, dst, dir, op, st);
  const double t0 = wall_seconds();
  const MPI_Datatype type = this->mpi_type();
  check_mpi(MPI_Alltoallv(send_buf_.data(), send_counts_[k].data(), send_displs_[k].data(), type, recv_buf_.data(),
                          recv_counts_[k].data(), recv_displs_[k].data(), type, subcomm_),
            "MPI_Alltoallv");
  st.wait_seconds += wall_seconds() - t0;
  unpack_all(dst, dir, op, st);
}

template <class T>
void CollectiveExecutor<T>::post(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st) {
  const int k = static_cast<int>(dir);
  request_ = MPI_REQUEST_NULL;
  if (sub_size_ == 1) {
    this->copy_self(src, dst, dir, op, st);
    return;
  }
  pack_all(src, dst, dir, op, st);
  const double t0 = wall_seconds();
  const MPI_Datatype type = this->mpi_type();
  check_mpi(MPI_Ialltoallv(send_buf_.data(), send_counts_[k].data(), send_displs_[k].data(), type, recv_buf_.data(),
                           recv_counts_[k].data(), recv_displs_[k].data(), type, subcomm_, &request_),
            "MPI_Ialltoallv");
  st.wait_seconds += wall_seconds() - t0;
}

template <class T>
bool CollectiveExecutor<T>::poll(ExchangeStats& st) {
  if (request_ == MPI_REQUEST_NULL) return true;  // no partners: the self copy was all
  int flag = 0;
  {
    ScopedTimer timer(st.test_seconds);
    MPI_Test(&request_, &flag, MPI_STATUS_IGNORE);
  }
  if (flag) unpack_all(this->flight_.dst, this->flight_.dir, this->flight_.op, st);
  return flag != 0;
}

template <class T>
void CollectiveExecutor<T>::complete(ExchangeStats& st) {
  if (request_ == MPI_REQUEST_NULL) return;
  const double t0 = wall_seconds();
  check_mpi(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait");
  st.wait_seconds += wall_seconds() - t0;
  unpack_all(this->flight_.dst, this->flight_.dir, this->flight_.op, st);
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
