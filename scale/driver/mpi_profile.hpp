// Per-rank MPI accounting for the scale driver, through the MPI profiling interface:
// the driver defines the MPI functions the library calls (MPI_Isend, MPI_Waitany,
// MPI_Alltoallv, ...); each counts the call, the bytes of point-to-point sends and
// the (under SMPI: simulated) seconds spent inside MPI, then calls PMPI_<name>.
// Under SMPI the executable's globals are private to each simulated rank (SMPI's
// privatisation), so these counters are per rank; the pmewald library is linked
// into the executable for the same reason.
//
// Collective mode under SMPI: SimGrid 3.32's MPI_Alltoallv (every selector) posts a
// message to every rank of the communicator, zero-sized ones included, while MPICH
// (and Cray MPICH, on Slingshot machines) skips zero counts. The driver's
// MPI_Alltoallv therefore runs MPICH's "scattered" algorithm on SMPI's
// point-to-point layer (pmewald_scale::alltoallv_scattered): receives and sends
// posted for the non-zero counts of 32 ranks at a time (MPIR_CVAR_ALLTOALL_THROTTLE),
// each block completed by MPI_Waitall, the local piece copied. So the simulated
// collective mode costs what it would under MPICH. With a real MPI the library's
// MPI_Alltoallv is used as it is.
//
// The same holds for MPI_Ialltoallv (the collective mode with overlap): SimGrid 4.1's
// posts a receive and a send for every other rank of the communicator, zero counts
// included, while Open MPI's libnbc (a2av_sched_linear) and MPICH skip them. Under
// SMPI the driver's MPI_Ialltoallv posts libnbc's linear schedule on the
// point-to-point layer (pmewald_scale::ialltoallv_linear: the non-zero counts'
// receives and sends at once, the local piece copied) behind a handle of its own,
// which the driver's MPI_Test and MPI_Wait complete (MPI_Testall over its requests,
// one progress call's charge). The zero-sized messages cost latency in the network
// model and, at 1,024 ranks, made the simulator's flow solver ~10x slower than the
// nonblocking mode's (docs/scaling.md). The library passes such a request to
// MPI_Test and MPI_Wait only; the array calls abort if handed one.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>

namespace pmewald_scale {

enum MpiCall : int {
  kSend, kIsend, kIrecv, kRecv, kIssend, kIprobe, kTest, kTestall, kWait, kWaitany, kWaitall,
  kIbarrier, kBarrier, kAllreduce, kAllgather, kAllgatherv, kAlltoallv, kBcast, kCommSplit, kCommDup,
  kTestsome, kIalltoallv, kNumCalls
};
const char* mpi_call_name(int call);

struct MpiProfile {
  std::array<std::int64_t, kNumCalls> calls{};
  std::int64_t messages = 0;    // point-to-point messages sent (Send, Isend, Issend)
  std::int64_t bytes = 0;       // their bytes
  double seconds = 0;           // time inside MPI (MPI_Wtime: simulated under SMPI)
};

// This rank's counters (zeroed at start; reset by the caller between phases).
MpiProfile& mpi_profile();

// The cost of one progress call (MPI_Test, MPI_Testsome, MPI_Testall) in simulated
// seconds, charged once per call under SMPI (0: none; the default). SimGrid's own
// charge, smpi/test, is made per request tested (MPI_Testsome over n receives costs
// n times it, MPI_Test on an MPI_Ialltoallv once per message inside it), while a
// real MPI library makes one progress pass per call and the completion of each
// request costs next to nothing (docs/scaling.md, "What a progress call costs").
// The studies that set this set smpi/test to 1 ns.
void set_progress_call_seconds(double seconds);

// MPICH's scattered MPI_Alltoallv on point-to-point calls (see above).
int alltoallv_scattered(const void* sendbuf, const int* sendcounts, const int* sdispls, MPI_Datatype sendtype,
                        void* recvbuf, const int* recvcounts, const int* rdispls, MPI_Datatype recvtype,
                        MPI_Comm comm);

// libnbc's linear MPI_Ialltoallv on point-to-point calls (see above), and its
// completion: true when *r is such a handle (then tested, or waited for, and set to
// MPI_REQUEST_NULL when complete); false for any other request.
int ialltoallv_linear(const void* sendbuf, const int* sendcounts, const int* sdispls, MPI_Datatype sendtype,
                      void* recvbuf, const int* recvcounts, const int* rdispls, MPI_Datatype recvtype, MPI_Comm comm,
                      MPI_Request* request);
bool test_or_wait_linear(MPI_Request* r, int* flag, bool wait);
// Aborts when one of r[0..n) is such a handle (the array calls do not take one).
void forbid_linear_in(int n, const MPI_Request* r, const char* call);

}  // namespace pmewald_scale
