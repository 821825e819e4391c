// Exchange of variable-size byte messages between KNOWN partners (the sibling of
// comm/sparse_exchange.hpp, whose NBX serves ranks that cannot know who sends to them).
//
// Both sides know the partner sets in advance (geometry/neighborhood.hpp computes them
// from the decomposition alone): this rank may send to the ranks of `send_to`
// and receives from every rank of `recv_from`, where r is in my recv_from
// exactly when I am in r's send_to. Each exchange sends the byte count of every
// message (one int64 to each rank of send_to, 0 where nothing goes) and, at the
// same time, the non-empty messages; a receiver posts the receive of a message
// as soon as its count has arrived. Every wait blocks (MPI_Waitany,
// MPI_Waitall): no probing or polling. (Polling loops, MPI_Iprobe / MPI_Test
// until done, cost a scheduling round per call under a simulator such as SMPI.)
// Cost per rank: at most two messages per partner, no O(P) data.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

namespace pmewald {
inline namespace comm {

class NeighborExchange {
 public:
  // Uses `tag` (counts) and `tag + 1` (data).
  NeighborExchange(MPI_Comm comm, int tag) : comm_(comm), tag_(tag) {}

  // The partner sets (sorted, without this rank); kept until changed.
  void set_partners(std::vector<int> send_to, std::vector<int> recv_from);
  const std::vector<int>& send_to() const { return send_to_; }
  const std::vector<int>& recv_from() const { return recv_from_; }

  // Collective over the partners (every rank of the communicator calls it, each
  // with its own partner sets). Sends sendbufs[k] to dests[k] (distinct ranks of
  // send_to, or this rank: that message is copied); throws std::logic_error for a
  // destination outside send_to (the geometry promised it cannot happen). On
  // return srcs / recvbufs hold every non-empty message addressed to this rank,
  // ordered by source rank, as SparseExchange::exchange returns them. recvbufs
  // keeps its inner capacity between calls.
  void exchange(const std::vector<int>& dests, const std::vector<std::vector<char>>& sendbufs,
                std::vector<int>& srcs, std::vector<std::vector<char>>& recvbufs);

  // Point-to-point messages this rank sent (both rounds) and their bytes, summed
  // over exchanges since the last reset.
  std::int64_t messages_sent() const { return messages_; }
  std::int64_t bytes_sent() const { return bytes_; }
  void reset_stats() { messages_ = bytes_ = 0; }

 private:
  MPI_Comm comm_;
  int tag_;
  std::vector<int> send_to_, recv_from_;
  std::vector<std::int64_t> out_size_, in_size_;
  std::vector<int> slot_;    // per send_to partner: index into dests, or -1
  std::vector<MPI_Request> size_reqs_, reqs_;
  std::vector<std::vector<char>> incoming_;  // per recv_from partner
  std::int64_t messages_ = 0, bytes_ = 0;
};

}  // namespace comm
}  // namespace pmewald
