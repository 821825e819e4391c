#include "comm/mpi_helpers.hpp"

#include <cstring>

namespace pmewald {
inline namespace comm {

void check_mpi(int err, const char* what) {
  if (err == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(err, msg, &len);
  throw std::runtime_error(std::string(what) + " failed: " + std::string(msg, len));
}

void agree_or_throw(MPI_Comm comm, const std::string& local_error) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int mine = local_error.empty() ? size : rank;
  int first = size;
  check_mpi(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  if (first == size) return;
  int len = rank == first ? static_cast<int>(local_error.size()) : 0;
  MPI_Bcast(&len, 1, MPI_INT, first, comm);
  std::string msg(static_cast<size_t>(len), '\0');
  if (rank == first) msg = local_error;
  if (len > 0) MPI_Bcast(&msg[0], len, MPI_CHAR, first, comm);
  if (size > 1) msg += " (reported by rank " + std::to_string(first) + ")";
  throw ValueError(msg);
}

bool same_on_all_ranks(MPI_Comm comm, const std::vector<double>& value) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  if (size == 1) return true;
  // Compare against rank 0's copy bit for bit.
  std::vector<double> root(value);
  int n = static_cast<int>(value.size());
  int n0 = n;
  MPI_Bcast(&n0, 1, MPI_INT, 0, comm);
  int ok = n0 == n;
  if (ok) {
    MPI_Bcast(root.data(), n, MPI_DOUBLE, 0, comm);
    ok = std::memcmp(root.data(), value.data(), sizeof(double) * value.size()) == 0;
  } else {
    // Keep the collective sequence identical on every rank.
    std::vector<double> scratch(static_cast<size_t>(n0));
    MPI_Bcast(scratch.data(), n0, MPI_DOUBLE, 0, comm);
  }
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, comm);
  return all != 0;
}

std::size_t fastest_on_the_slowest_rank(MPI_Comm comm, const std::vector<double>& mine, std::vector<double>& slowest) {
  slowest.assign(mine.size(), 0.0);
  check_mpi(MPI_Allreduce(mine.data(), slowest.data(), static_cast<int>(mine.size()), MPI_DOUBLE, MPI_MAX, comm),
            "MPI_Allreduce");
  std::size_t best = 0;
  for (std::size_t c = 1; c < slowest.size(); ++c)
    if (slowest[c] < slowest[best]) best = c;
  return best;
}

}  // namespace comm
}  // namespace pmewald
