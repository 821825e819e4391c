// Small MPI helpers shared by every stage that talks to other ranks.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>
#include <vector>

#include "base/errors.hpp"

namespace pmewald {
inline namespace comm {

// Throws if an MPI call failed.
void check_mpi(int err, const char* what);

// Collective: every rank passes its own error message ("" when fine). If any
// rank has one, every rank throws a ValueError carrying the message of the
// lowest failing rank (prefixed by that rank), so no rank is left waiting in a
// later collective. Returns normally on every rank when all are fine.
void agree_or_throw(MPI_Comm comm, const std::string& local_error);

// Collective, agree_or_throw's second half: `first` is the lowest failing rank
// (every rank knows it); its message goes to every rank, which throws ValueError.
[[noreturn]] void throw_error_of_rank(MPI_Comm comm, int first, const std::string& local_error);

// Collective, one MPI_Allreduce: `sums` summed and `maxima` maximised over the
// ranks, in place (a user-defined operation over one buffer; the sums' order of
// addition is the library's, as with MPI_SUM). Calls that need both pay one
// latency-bound reduction instead of two: at 1,024 ranks each costs ~15 us.
void allreduce_sums_and_maxima(MPI_Comm comm, std::vector<double>& sums, std::vector<double>& maxima);

// Collective: true on every rank when `value` is identical on all ranks.
bool same_on_all_ranks(MPI_Comm comm, const std::vector<double>& value);

// Collective: the measured choices' decision. `mine` holds this rank's seconds per
// candidate; `slowest` receives the slowest rank's (MPI_MAX, one MPI_Allreduce), and the
// index of the least of them is returned (a tie: the first), the same on every rank.
std::size_t fastest_on_the_slowest_rank(MPI_Comm comm, const std::vector<double>& mine, std::vector<double>& slowest);

}  // namespace comm
}  // namespace pmewald
