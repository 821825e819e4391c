#include "comm/mpi_helpers.hpp"

#include <algorithm>
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
  throw_error_of_rank(comm, first, local_error);
}

void throw_error_of_rank(MPI_Comm comm, int first, const std::string& local_error) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int len = rank == first ? static_cast<int>(local_error.size()) : 0;
  MPI_Bcast(&len, 1, MPI_INT, first, comm);
  std::string msg(static_cast<size_t>(len), '\0');
  if (rank == first) msg = local_error;
  if (len > 0) MPI_Bcast(&msg[0], len, MPI_CHAR, first, comm);
  if (size > 1) msg += " (reported by rank " + std::to_string(first) + ")";
  throw ValueError(msg);
}

namespace {
// One element of the reduction is the whole buffer (a contiguous type of n
// doubles, so the library cannot split it): the sums, then the maxima, then the
// maxima's count (the same on every rank, kept as it is).
void sum_then_max(void* in, void* inout, int* len, MPI_Datatype* type) {
  int bytes = 0;
  MPI_Type_size(*type, &bytes);
  const int n = bytes / static_cast<int>(sizeof(double));
  for (int e = 0; e < *len; ++e) {
    const double* a = static_cast<const double*>(in) + static_cast<std::ptrdiff_t>(e) * n;
    double* b = static_cast<double*>(inout) + static_cast<std::ptrdiff_t>(e) * n;
    const int m = static_cast<int>(b[n - 1]);
    for (int i = 0; i < n - 1 - m; ++i) b[i] += a[i];
    for (int i = n - 1 - m; i < n - 1; ++i) b[i] = std::max(b[i], a[i]);
  }
}
}  // namespace

void allreduce_sums_and_maxima(MPI_Comm comm, std::vector<double>& sums, std::vector<double>& maxima) {
  static const MPI_Op op = [] {  // once per process (per simulated rank under SMPI)
    MPI_Op o = MPI_OP_NULL;
    check_mpi(MPI_Op_create(&sum_then_max, 1, &o), "MPI_Op_create");
    return o;
  }();
  const std::size_t ns = sums.size(), nm = maxima.size();
  std::vector<double> buf(ns + nm + 1);
  std::copy(sums.begin(), sums.end(), buf.begin());
  std::copy(maxima.begin(), maxima.end(), buf.begin() + static_cast<std::ptrdiff_t>(ns));
  buf.back() = static_cast<double>(nm);
  MPI_Datatype whole = MPI_DATATYPE_NULL;
  check_mpi(MPI_Type_contiguous(static_cast<int>(buf.size()), MPI_DOUBLE, &whole), "MPI_Type_contiguous");
  check_mpi(MPI_Type_commit(&whole), "MPI_Type_commit");
  const int err = MPI_Allreduce(MPI_IN_PLACE, buf.data(), 1, whole, op, comm);
  MPI_Type_free(&whole);
  check_mpi(err, "MPI_Allreduce");
  std::copy(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(ns), sums.begin());
  std::copy(buf.begin() + static_cast<std::ptrdiff_t>(ns), buf.end() - 1, maxima.begin());
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
