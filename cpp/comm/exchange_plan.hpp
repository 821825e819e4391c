// Generic data exchange between ranks, the plan: who sends what to whom (the
// executors that move data along a plan are in exchange.hpp).
//
// An ExchangePlan is pure bookkeeping, built once: the partner ranks, the element
// index lists that say which source elements go into each outgoing message (in
// message order) and where each incoming element lands, and the piece a rank keeps
// for itself. It knows nothing about boxes or FFTs: the remap layer (remap.hpp)
// builds it from box intersections, and a ghost-layer halo can build it from index
// lists with periodic wrap.
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
#include <string>
#include <vector>

#include "base/kokkos_types.hpp"
#include "comm/tags.hpp"

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
  // and its executors. `tag` (comm/tags.hpp) is used for every point-to-point message.
  ExchangePlan(MPI_Comm comm, ExchangeLists lists, int tag = tags::kExchange);

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
  // Collective over comm(): the smallest rank of the connected component of the
  // exchange graph (edges = any message either way) holding this rank; every member
  // gets the same. Found by min-label propagation between partners (rounds as many as
  // the component's diameter, each a neighbour exchange and one Allreduce), on the
  // first call; cached. The collective executor's sub-communicator is that component.
  int component_root() const;

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1, tag_ = 0;
  ExchangeSide send_, recv_;
  View1<Index> self_src_, self_dst_, self_run_pos_, self_run_len_;
  std::int64_t src_size_ = 0, dst_size_ = 0;
  std::array<bool, 2> repeats_{false, false};
  mutable int component_root_ = -1;
};

}  // namespace comm
}  // namespace pmewald
