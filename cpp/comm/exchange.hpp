// Generic data exchange between ranks: one plan (exchange_plan.hpp), three small
// executor strategies.
//
// An executor (Pt2PtExecutor, NonblockingExecutor, CollectiveExecutor) moves typed
// data (double or Complex) along one plan. Executors allocate every buffer and MPI
// request array in their constructor; execute() allocates nothing (checked through
// buffer_allocations()).
//
// An exchange runs whole (execute()) or split (start(), then test() as often as the
// caller likes, then finish()), so that work can run while it is in flight
// (comm/overlap.hpp). Both forms give the same data: unpacks assign, or add in
// message completion order, as the whole form always did.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/kokkos_types.hpp"
#include "comm/exchange_plan.hpp"

namespace pmewald {
inline namespace comm {

// Counters of one executor in one direction. Times are wall seconds.
struct ExchangeStats {
  std::int64_t executions = 0;
  std::int64_t messages_sent = 0;      // messages to other ranks (self piece excluded)
  std::int64_t messages_received = 0;
  std::int64_t bytes_sent = 0;
  std::int64_t bytes_received = 0;
  std::int64_t self_bytes = 0;         // bytes of the self piece
  double pack_seconds = 0;             // packing outgoing messages
  double wait_seconds = 0;             // inside MPI: sends, waits, Alltoallv
  double unpack_seconds = 0;           // unpacking incoming messages
  double self_seconds = 0;             // the self piece (copy, or its pack+unpack via MPI)
  std::int64_t tests = 0;              // test() calls of split exchanges
  double test_seconds = 0;             // inside those calls' MPI_Test* (unpacks apart)
  void reset() { *this = ExchangeStats{}; }
};

// An exchange in flight, as the code that waits for it sees it (the type-free
// face of an executor between start() and finish()).
class PendingExchange {
 public:
  virtual ~PendingExchange() = default;
  // Unpacks whatever has arrived; true once the whole exchange is complete (then
  // finish() only returns). Never blocks.
  virtual bool test() = 0;
  // Waits for the rest and unpacks it. After it the destination is complete.
  virtual void finish() = 0;
};

// Base of the three strategies. T is double or Complex.
template <class T>
class ExchangeExecutor : public PendingExchange {
 public:
  explicit ExchangeExecutor(std::shared_ptr<const ExchangePlan> plan);
  virtual ~ExchangeExecutor() = default;
  ExchangeExecutor(const ExchangeExecutor&) = delete;
  ExchangeExecutor& operator=(const ExchangeExecutor&) = delete;

  virtual CommMode mode() const = 0;

  // Collective over the plan's partners (collective mode: over the component).
  // `src` holds plan().source_size(dir) elements, `dst` destination_size(dir).
  // Every element of `src` is read (packed or self-copied) before any element of
  // `dst` is written by an unpack, except that the self piece is copied directly:
  // src and dst may be the same array when the self piece's source and destination
  // index sets are disjoint. Elements of dst named by no list are left untouched.
  void execute(const T* src, T* dst, Direction dir = Direction::Forward,
               UnpackOp op = UnpackOp::Assign);

  // The split form: start() posts the receives, packs and sends (pt2pt: blocking
  // sends, as in execute) and copies the self piece; `src` may be reused once it
  // returns, `dst` must stay untouched by the caller until finish(). One exchange
  // per executor in flight at a time.
  void start(const T* src, T* dst, Direction dir = Direction::Forward, UnpackOp op = UnpackOp::Assign);
  bool test() override;
  void finish() override;
  bool in_flight() const { return flight_.active; }

  const ExchangePlan& plan() const { return *plan_; }
  const ExchangeStats& stats(Direction d) const { return stats_[static_cast<int>(d)]; }
  void reset_stats() { stats_[0].reset(); stats_[1].reset(); }

 protected:
  // The whole exchange; by default post() then complete().
  virtual void run(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st);
  // The split exchange's steps (flight_ holds dst, dir and op between them).
  virtual void post(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st) = 0;
  virtual bool poll(ExchangeStats& st) = 0;      // unpack what has arrived; true when all is done
  virtual void complete(ExchangeStats& st) = 0;  // wait for and unpack the rest

  // Kokkos kernels over ExecSpace. pack/unpack handle messages [m0, m1) of a
  // side; buf holds them back to back.
  static void pack(const T* src, const ExchangeSide& side, int m0, int m1, T* buf);
  void unpack(const T* buf, const ExchangeSide& side, int m0, int m1, T* dst, Direction dir,
              UnpackOp op) const;
  static void gather(const T* src, const Index* idx, std::int64_t n, T* buf);
  void scatter(const T* buf, const Index* idx, std::int64_t n, T* dst, Direction dir, UnpackOp op) const;
  void copy_self(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st) const;
  static MPI_Datatype mpi_type();
  static T* allocate(View1<T>& view, const char* label, std::int64_t n);

  void count(Direction dir);
  // Point-to-point receives of the flight (requests[m] for incoming message m, data
  // in rbuf at the side's offsets): unpack those MPI_Testsome finds complete (true
  // once all are), or wait for and unpack all that are left. Copies (Assign) are
  // unpacked in completion order; sums (Add) in message order, so that the same
  // inputs give the same bits whatever the order the messages arrive in.
  bool unpack_arrived(MPI_Request* requests, const T* rbuf, std::vector<int>& done, ExchangeStats& st);
  void unpack_remaining(MPI_Request* requests, const T* rbuf, ExchangeStats& st);

  // The exchange in flight between start() and finish().
  struct Flight {
    T* dst = nullptr;
    Direction dir = Direction::Forward;
    UnpackOp op = UnpackOp::Assign;
    bool active = false;
    int unpacked = 0;  // receives unpacked so far
  };

  std::shared_ptr<const ExchangePlan> plan_;
  std::array<ExchangeStats, 2> stats_;
  Flight flight_;
  std::vector<char> arrived_;  // Add flights: incoming message m has completed
};

// Post every receive; pack each outgoing piece into one reused buffer (sized for
// the largest message) and MPI_Send it; copy the self piece; unpack receives in
// MPI_Waitany completion order.
template <class T>
class Pt2PtExecutor final : public ExchangeExecutor<T> {
 public:
  explicit Pt2PtExecutor(std::shared_ptr<const ExchangePlan> plan);
  CommMode mode() const override { return CommMode::Pt2Pt; }

 private:
  void post(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st) override;
  bool poll(ExchangeStats& st) override;
  void complete(ExchangeStats& st) override;
  View1<T> send_buf_, recv_buf_;
  std::vector<MPI_Request> requests_;
  std::vector<int> done_;  // MPI_Testsome's indices
};

// Post every receive; pack every outgoing piece into its own slot and MPI_Isend
// it; copy the self piece; unpack receives as they complete; MPI_Waitall sends.
template <class T>
class NonblockingExecutor final : public ExchangeExecutor<T> {
 public:
  explicit NonblockingExecutor(std::shared_ptr<const ExchangePlan> plan);
  CommMode mode() const override { return CommMode::Nonblocking; }

 private:
  void post(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st) override;
  bool poll(ExchangeStats& st) override;
  void complete(ExchangeStats& st) override;
  View1<T> send_buf_, recv_buf_;
  std::vector<MPI_Request> recv_requests_, send_requests_;
  std::vector<int> done_;
  bool sends_done_ = false;
};

// One MPI_Alltoallv on a sub-communicator holding only the connected component of
// the exchange graph that contains this rank (MPI_Comm_split, colour = smallest
// rank of the component). Count and displacement arrays (per direction) and the
// send/receive buffers are built in the constructor, which is collective over the
// plan's whole communicator. A rank without partners does not call MPI. The
// whole form calls MPI_Alltoallv; the split form MPI_Ialltoallv (same counts and
// buffers), tested with MPI_Test, unpacked when complete.
//
// self_via_mpi: when true the self piece is packed into this rank's own slot of the
// Alltoallv and unpacked from it (what LAMMPS does); when false it is a direct copy
// and this rank's slot is empty. The default (kCollectiveSelfViaMpi) was chosen by
// measurement; see docs/fft.md.
inline constexpr bool kCollectiveSelfViaMpi = false;

template <class T>
class CollectiveExecutor final : public ExchangeExecutor<T> {
 public:
  explicit CollectiveExecutor(std::shared_ptr<const ExchangePlan> plan,
                              bool self_via_mpi = kCollectiveSelfViaMpi);
  ~CollectiveExecutor() override;
  CommMode mode() const override { return CommMode::Collective; }
  bool self_via_mpi() const { return self_via_mpi_; }
  MPI_Comm subcomm() const { return subcomm_; }

 private:
  void run(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st) override;
  void post(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st) override;
  bool poll(ExchangeStats& st) override;
  void complete(ExchangeStats& st) override;
  void pack_all(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st);
  void unpack_all(T* dst, Direction dir, UnpackOp op, ExchangeStats& st);
  bool self_via_mpi_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  MPI_Comm subcomm_ = MPI_COMM_NULL;
  int sub_rank_ = 0, sub_size_ = 1;
  std::array<std::vector<int>, 2> send_counts_, send_displs_, recv_counts_, recv_displs_;
  std::int64_t self_send_offset_[2] = {0, 0}, self_recv_offset_[2] = {0, 0};
  View1<T> send_buf_, recv_buf_;
};

// Factory: the executor of `mode` over `plan` (collective over the plan's
// communicator when mode is Collective; `collective_self_via_mpi` only matters then).
template <class T>
std::unique_ptr<ExchangeExecutor<T>> make_executor(CommMode mode, std::shared_ptr<const ExchangePlan> plan,
                                                   bool collective_self_via_mpi = kCollectiveSelfViaMpi);

extern template class ExchangeExecutor<double>;
extern template class ExchangeExecutor<Complex>;
extern template class Pt2PtExecutor<double>;
extern template class Pt2PtExecutor<Complex>;
extern template class NonblockingExecutor<double>;
extern template class NonblockingExecutor<Complex>;
extern template class CollectiveExecutor<double>;
extern template class CollectiveExecutor<Complex>;

}  // namespace comm
}  // namespace pmewald
