#include "comm/neighbor_exchange.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "comm/mpi_helpers.hpp"

namespace pmewald {
inline namespace comm {

void NeighborExchange::set_partners(std::vector<int> send_to, std::vector<int> recv_from) {
  send_to_ = std::move(send_to);
  recv_from_ = std::move(recv_from);
}

void NeighborExchange::exchange(const std::vector<int>& dests, const std::vector<std::vector<char>>& sendbufs,
                                std::vector<int>& srcs, std::vector<std::vector<char>>& recvbufs) {
  int me = 0;
  MPI_Comm_rank(comm_, &me);
  const std::size_t ns = send_to_.size(), nr = recv_from_.size();
  out_size_.assign(ns, 0);
  slot_.assign(ns, -1);
  int self = -1;
  for (std::size_t k = 0; k < dests.size(); ++k) {
    if (dests[k] == me) {
      self = static_cast<int>(k);
      continue;
    }
    const auto it = std::lower_bound(send_to_.begin(), send_to_.end(), dests[k]);
    if (it == send_to_.end() || *it != dests[k])
      throw std::logic_error("NeighborExchange: rank " + std::to_string(me) + " sends to rank " +
                             std::to_string(dests[k]) + ", which is not one of its partners");
    if (sendbufs[k].size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::runtime_error("NeighborExchange: message larger than 2 GiB");
    const std::size_t i = static_cast<std::size_t>(it - send_to_.begin());
    out_size_[i] = static_cast<std::int64_t>(sendbufs[k].size());
    slot_[i] = static_cast<int>(k);
  }

  // Sizes and data go out together; a receiver posts the receive of a message as
  // soon as its size has arrived (MPI_Waitany), so the two rounds overlap.
  in_size_.assign(nr, 0);
  size_reqs_.assign(nr, MPI_REQUEST_NULL);
  for (std::size_t j = 0; j < nr; ++j)
    check_mpi(MPI_Irecv(&in_size_[j], 1, MPI_INT64_T, recv_from_[j], tag_, comm_, &size_reqs_[j]), "MPI_Irecv");
  reqs_.clear();
  for (std::size_t i = 0; i < ns; ++i) {
    reqs_.emplace_back();
    check_mpi(MPI_Isend(&out_size_[i], 1, MPI_INT64_T, send_to_[i], tag_, comm_, &reqs_.back()), "MPI_Isend");
    if (out_size_[i] == 0) continue;
    const auto& buf = sendbufs[static_cast<std::size_t>(slot_[i])];
    reqs_.emplace_back();
    check_mpi(MPI_Isend(buf.data(), static_cast<int>(buf.size()), MPI_BYTE, send_to_[i], tag_ + 1, comm_,
                        &reqs_.back()),
              "MPI_Isend");
    messages_ += 1;
    bytes_ += out_size_[i];
  }
  messages_ += static_cast<std::int64_t>(ns);
  bytes_ += static_cast<std::int64_t>(ns * sizeof(std::int64_t));

  // Incoming buffers (reusing the previous call's), one per partner in
  // recv_from order; empty ones are dropped at the end.
  std::vector<std::vector<char>> spare;
  spare.swap(recvbufs);
  incoming_.resize(nr);
  for (std::size_t j = 0; j < nr; ++j) {
    incoming_[j].clear();
    if (!spare.empty() && incoming_[j].capacity() == 0) {
      incoming_[j].swap(spare.back());
      spare.pop_back();
      incoming_[j].clear();
    }
  }
  for (std::size_t k = 0; k < nr; ++k) {
    int j = MPI_UNDEFINED;
    check_mpi(MPI_Waitany(static_cast<int>(nr), size_reqs_.data(), &j, MPI_STATUS_IGNORE), "MPI_Waitany");
    if (in_size_[j] == 0) continue;
    if (in_size_[j] > std::numeric_limits<int>::max())
      throw std::runtime_error("NeighborExchange: message larger than 2 GiB");
    incoming_[j].resize(static_cast<std::size_t>(in_size_[j]));
    reqs_.emplace_back();
    check_mpi(MPI_Irecv(incoming_[j].data(), static_cast<int>(in_size_[j]), MPI_BYTE, recv_from_[j], tag_ + 1, comm_,
                        &reqs_.back()),
              "MPI_Irecv");
  }
  if (!reqs_.empty())
    check_mpi(MPI_Waitall(static_cast<int>(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");

  // Non-empty messages in source order, this rank's own at its place.
  srcs.clear();
  recvbufs.clear();
  bool self_pending = self >= 0 && !sendbufs[static_cast<std::size_t>(self)].empty();
  for (std::size_t j = 0; j <= nr; ++j) {
    if (self_pending && (j == nr || recv_from_[j] > me)) {
      self_pending = false;
      std::vector<char> b;
      if (!spare.empty()) {
        b.swap(spare.back());
        spare.pop_back();
      }
      b.assign(sendbufs[static_cast<std::size_t>(self)].begin(), sendbufs[static_cast<std::size_t>(self)].end());
      srcs.push_back(me);
      recvbufs.push_back(std::move(b));
    }
    if (j == nr || in_size_[j] == 0) continue;
    srcs.push_back(recv_from_[j]);
    recvbufs.emplace_back();
    recvbufs.back().swap(incoming_[j]);
  }
}

}  // namespace comm
}  // namespace pmewald
