// Sparse dynamic data exchange (NBX, Hoefler, Siebert & Lumsdaine, PPoPP 2010).
//
// Every rank knows only whom it sends to, never who sends to it. Each message
// goes out with MPI_Issend; the rank then probes for incoming messages and,
// once all its own sends have been matched (synchronous mode guarantees the
// receiver has them), enters a non-blocking barrier. When the barrier
// completes, every message of the round has been received. Cost: O(number of
// partners + log P) per rank; no O(P) arrays, no all-to-all of counts.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstring>
#include <vector>

namespace pmewald {
inline namespace comm {

class SparseExchange {
 public:
  // `base_tag` and `base_tag + 1` (comm/tags.hpp) are used (alternately, so a fast rank's next
  // round can never be mistaken for the current round by a slow rank).
  SparseExchange(MPI_Comm comm, int base_tag) : comm_(comm), base_tag_(base_tag) {}

  // Collective over the communicator. Sends sendbufs[k] (bytes) to dests[k]
  // (distinct ranks; a message to oneself is copied, not sent). On return
  // srcs / recvbufs hold every message addressed to this rank, ordered by
  // source rank (so downstream results do not depend on arrival order).
  // recvbufs keeps its inner capacity between calls.
  void exchange(const std::vector<int>& dests, const std::vector<std::vector<char>>& sendbufs,
                std::vector<int>& srcs, std::vector<std::vector<char>>& recvbufs);

  MPI_Comm comm() const { return comm_; }

 private:
  MPI_Comm comm_;
  int base_tag_;
  int parity_ = 0;
  std::vector<MPI_Request> reqs_;
  std::vector<std::pair<int, std::vector<char>>> incoming_;
};

// Helpers to move plain-old-data records through byte buffers.
template <class T>
inline void append_bytes(std::vector<char>& buf, const T& rec) {
  const std::size_t at = buf.size();
  buf.resize(at + sizeof(T));
  std::memcpy(buf.data() + at, &rec, sizeof(T));
}

template <class T>
inline std::size_t record_count(const std::vector<char>& buf) {
  return buf.size() / sizeof(T);
}

template <class T>
inline T read_record(const std::vector<char>& buf, std::size_t k) {
  T rec;
  std::memcpy(&rec, buf.data() + k * sizeof(T), sizeof(T));
  return rec;
}

}  // namespace comm
}  // namespace pmewald
