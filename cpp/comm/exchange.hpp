// Generic data exchange between ranks: one plan, three small executor strategies.
//
// An ExchangePlan is pure bookkeeping, built once: the partner ranks, the element
// index lists that say which source elements go into each outgoing message (in
// message order) and where each incoming element lands, and the piece a rank keeps
// for itself. It knows nothing about boxes or FFTs: the remap layer (remap.hpp)
// builds it from box intersections, and a ghost-layer halo can build it from index
// lists with periodic wrap.
//
// An executor (Pt2PtExecutor, NonblockingExecutor, CollectiveExecutor) moves typed
// data (double or Complex) along one plan. Executors allocate every buffer and MPI
// request array in their constructor; execute() allocates nothing (checked through
// buffer_allocations()).
//
// Directions. Every plan can run both ways: Direction::Forward sends the plan's
// send lists and receives into its receive lists; Direction::Reverse is the exact
// transpose (what was received is sent back to where it came from, landing at the
// original source indices). A halo uses Forward with UnpackOp::Assign to fill ghost
// layers and Reverse with UnpackOp::Add to reduce them into their owners; the FFT
// runs a remap forward for the forward transform and reversed for the backward one.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/kokkos_types.hpp"

namespace pmewald {
inline namespace comm {

// Element index into a rank-local array (elements, not bytes).
using Index = std::int32_t;

enum class CommMode : int { Pt2Pt = 0, Nonblocking = 1, Collective = 2 };

// "pt2pt", "nonblocking", "collective"; anything else throws ValueError.
CommMode comm_mode_from_string(const std::string& name);
const char* comm_mode_name(CommMode mode);

enum class Direction : int { Forward = 0, Reverse = 1 };
enum class UnpackOp : int { Assign = 0, Add = 1 };

// Process-wide count of buffer allocations made by the exchange, remap and FFT
// layers (every buffer they allocate goes through count_buffer_allocation()).
// Tests read it before and after repeated executions to show they allocate nothing.
std::int64_t buffer_allocations();
void count_buffer_allocation(std::int64_t n = 1);

// What a rank passes to build a plan: explicit per-partner index lists.
//   send_ranks[m]     rank (in the plan's communicator) that message m goes to
//   send_indices[m]   source-array element of each element of message m, in order
//   recv_ranks[m]     rank that incoming message m comes from
//   recv_indices[m]   destination-array element where each element of it lands
//   self_src/self_dst the piece this rank keeps: dst[self_dst[i]] <- src[self_src[i]]
//   src_size/dst_size element counts of the source and destination arrays
// A partner appears at most once per list and never equals this rank (the self
// piece is separate). Empty messages are dropped. The lists must agree between
// partners (what r sends to s is exactly as long as what s receives from r); the
// constructor checks this collectively and throws ValueError on every rank if not.
// Partner order is the order messages are packed and sent (ring order from rank+1
// is what remap.cpp uses).
struct ExchangeLists {
  std::vector<int> send_ranks;
  std::vector<std::vector<Index>> send_indices;
  std::vector<int> recv_ranks;
  std::vector<std::vector<Index>> recv_indices;
  std::vector<Index> self_src;
  std::vector<Index> self_dst;
  std::int64_t src_size = 0;
  std::int64_t dst_size = 0;
};

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
  void reset() { *this = ExchangeStats{}; }
};

// One side of a plan in one direction: partners, message offsets (size n+1) into
// a concatenated index list, and that list.
//
// Runs: maximal stretches of a message whose indices are consecutive (run r
// covers list positions [run_pos[r], run_pos[r] + run_len[r]); message m owns
// runs [run_offsets[m], run_offsets[m+1])). Kernels copy run by run (contiguous
// on both sides) when runs are long enough on average, element by element
// otherwise.
struct ExchangeSide {
  std::vector<int> ranks;
  std::vector<std::int64_t> offsets;
  View1<Index> indices;
  std::vector<std::int64_t> run_offsets;
  View1<Index> run_pos, run_len;
  int count() const { return static_cast<int>(ranks.size()); }
  std::int64_t length(int m) const { return offsets[m + 1] - offsets[m]; }
  std::int64_t total() const { return offsets.empty() ? 0 : offsets.back(); }
  std::int64_t largest() const;
};

class ExchangePlan {
 public:
  // Collective over `comm` (every rank of it must call, with its own lists). The
  // plan keeps `comm` but does not own or duplicate it: it must outlive the plan
  // and its executors. `tag` is used for every point-to-point message.
  ExchangePlan(MPI_Comm comm, ExchangeLists lists, int tag = 7301);

  MPI_Comm comm() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  int tag() const { return tag_; }

  // Forward: outgoing = send lists, incoming = recv lists. Reverse: swapped.
  const ExchangeSide& outgoing(Direction d) const { return d == Direction::Forward ? send_ : recv_; }
  const ExchangeSide& incoming(Direction d) const { return d == Direction::Forward ? recv_ : send_; }
  // Self piece: dst[self_to(d)[i]] <- src[self_from(d)[i]].
  const View1<Index>& self_from(Direction d) const { return d == Direction::Forward ? self_src_ : self_dst_; }
  const View1<Index>& self_to(Direction d) const { return d == Direction::Forward ? self_dst_ : self_src_; }
  std::int64_t self_count() const { return static_cast<std::int64_t>(self_src_.extent(0)); }
  // Runs of the self piece (consecutive on both sides), as in ExchangeSide.
  const View1<Index>& self_run_pos() const { return self_run_pos_; }
  const View1<Index>& self_run_len() const { return self_run_len_; }
  // Element counts of the arrays execute() reads from and writes to.
  std::int64_t source_size(Direction d) const { return d == Direction::Forward ? src_size_ : dst_size_; }
  std::int64_t destination_size(Direction d) const { return d == Direction::Forward ? dst_size_ : src_size_; }
  // True when some unpack list (one message, or the self piece) of direction d
  // names an element twice: UnpackOp::Add then uses atomic adds on threaded backends.
  bool unpack_repeats(Direction d) const { return repeats_[static_cast<int>(d)]; }
  // Sorted ranks of the connected component of the exchange graph (edges = any
  // message either way) holding this rank. Every member computes the same set.
  const std::vector<int>& component() const { return component_; }

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1, tag_ = 0;
  ExchangeSide send_, recv_;
  View1<Index> self_src_, self_dst_, self_run_pos_, self_run_len_;
  std::int64_t src_size_ = 0, dst_size_ = 0;
  std::array<bool, 2> repeats_{false, false};
  std::vector<int> component_;
};

// Base of the three strategies. T is double or Complex.
template <class T>
class ExchangeExecutor {
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

  const ExchangePlan& plan() const { return *plan_; }
  const ExchangeStats& stats(Direction d) const { return stats_[static_cast<int>(d)]; }
  void reset_stats() { stats_[0].reset(); stats_[1].reset(); }

 protected:
  virtual void run(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st) = 0;

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

  std::shared_ptr<const ExchangePlan> plan_;
  std::array<ExchangeStats, 2> stats_;
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
  void run(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st) override;
  View1<T> send_buf_, recv_buf_;
  std::vector<MPI_Request> requests_;
};

// Post every receive; pack every outgoing piece into its own slot and MPI_Isend
// it; copy the self piece; unpack receives as they complete; MPI_Waitall sends.
template <class T>
class NonblockingExecutor final : public ExchangeExecutor<T> {
 public:
  explicit NonblockingExecutor(std::shared_ptr<const ExchangePlan> plan);
  CommMode mode() const override { return CommMode::Nonblocking; }

 private:
  void run(const T* src, T* dst, Direction dir, UnpackOp op, ExchangeStats& st) override;
  View1<T> send_buf_, recv_buf_;
  std::vector<MPI_Request> recv_requests_, send_requests_;
};

// One MPI_Alltoallv on a sub-communicator holding only the connected component of
// the exchange graph that contains this rank (MPI_Comm_split, colour = smallest
// rank of the component). Count and displacement arrays (per direction) and the
// send/receive buffers are built in the constructor, which is collective over the
// plan's whole communicator. A rank without partners does not call MPI.
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
  bool self_via_mpi_;
  MPI_Comm subcomm_ = MPI_COMM_NULL;
  int sub_rank_ = 0;
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
