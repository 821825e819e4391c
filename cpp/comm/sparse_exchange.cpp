#include "comm/sparse_exchange.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "comm/mpi_helpers.hpp"

namespace pmewald {
inline namespace comm {

void SparseExchange::exchange(const std::vector<int>& dests,
                              const std::vector<std::vector<char>>& sendbufs,
                              std::vector<int>& srcs, std::vector<std::vector<char>>& recvbufs) {
  int me = 0;
  MPI_Comm_rank(comm_, &me);
  const int tag = base_tag_ + parity_;
  parity_ ^= 1;

  // Keep previously received buffers' capacity for reuse.
  std::vector<std::vector<char>> spare;
  spare.swap(recvbufs);
  incoming_.clear();
  auto take_buffer = [&spare]() {
    std::vector<char> b;
    if (!spare.empty()) {
      b.swap(spare.back());
      spare.pop_back();
      b.clear();
    }
    return b;
  };

  reqs_.clear();
  for (std::size_t k = 0; k < dests.size(); ++k) {
    if (dests[k] == me) {
      std::vector<char> b = take_buffer();
      b.assign(sendbufs[k].begin(), sendbufs[k].end());
      incoming_.emplace_back(me, std::move(b));
      continue;
    }
    if (sendbufs[k].size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::runtime_error("SparseExchange: message larger than 2 GiB");
    reqs_.emplace_back();
    check_mpi(MPI_Issend(sendbufs[k].data(), static_cast<int>(sendbufs[k].size()), MPI_BYTE,
                         dests[k], tag, comm_, &reqs_.back()),
              "MPI_Issend");
  }

  MPI_Request barrier = MPI_REQUEST_NULL;
  bool barrier_active = false;
  for (;;) {
    int flag = 0;
    MPI_Status st;
    check_mpi(MPI_Iprobe(MPI_ANY_SOURCE, tag, comm_, &flag, &st), "MPI_Iprobe");
    if (flag) {
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      std::vector<char> b = take_buffer();
      b.resize(static_cast<std::size_t>(count));
      check_mpi(MPI_Recv(b.data(), count, MPI_BYTE, st.MPI_SOURCE, tag, comm_, MPI_STATUS_IGNORE),
                "MPI_Recv");
      incoming_.emplace_back(st.MPI_SOURCE, std::move(b));
      continue;
    }
    if (!barrier_active) {
      int done = 1;
      if (!reqs_.empty())
        check_mpi(MPI_Testall(static_cast<int>(reqs_.size()), reqs_.data(), &done,
                              MPI_STATUSES_IGNORE),
                  "MPI_Testall");
      if (done) {
        check_mpi(MPI_Ibarrier(comm_, &barrier), "MPI_Ibarrier");
        barrier_active = true;
      }
    } else {
      int done = 0;
      check_mpi(MPI_Test(&barrier, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) break;
    }
  }

  std::stable_sort(incoming_.begin(), incoming_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  srcs.clear();
  recvbufs.clear();
  for (auto& m : incoming_) {
    srcs.push_back(m.first);
    recvbufs.push_back(std::move(m.second));
  }
  incoming_.clear();
}

}  // namespace comm
}  // namespace pmewald
