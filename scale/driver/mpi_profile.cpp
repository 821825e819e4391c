#include "mpi_profile.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#ifdef PMEWALD_SMPI
#include <smpi/smpi.h>
#endif

namespace pmewald_scale {

namespace {
MpiProfile g_profile;  // per simulated rank under SMPI (privatised executable globals)
double g_progress_seconds = 0;  // set_progress_call_seconds

// One progress call's modelled cost (inside the call's Timed scope: MPI time).
void charge_progress_call() {
#ifdef PMEWALD_SMPI
  if (g_progress_seconds > 0) smpi_execute_benched(g_progress_seconds);
#endif
}

// Counts one call and the time until it returns.
class Timed {
 public:
  explicit Timed(MpiCall c) : t0_(PMPI_Wtime()) { ++g_profile.calls[c]; }
  ~Timed() { g_profile.seconds += PMPI_Wtime() - t0_; }

 private:
  double t0_;
};

void count_send(int count, MPI_Datatype type) {
  int size = 0;
  PMPI_Type_size(type, &size);
  ++g_profile.messages;
  g_profile.bytes += static_cast<std::int64_t>(count) * size;
}
}  // namespace

const char* mpi_call_name(int c) {
  static const char* names[kNumCalls] = {"Send",      "Isend",     "Irecv",     "Recv",      "Issend",
                                         "Iprobe",    "Test",      "Testall",   "Wait",      "Waitany",
                                         "Waitall",   "Ibarrier",  "Barrier",   "Allreduce", "Allgather",
                                         "Allgatherv", "Alltoallv", "Bcast",    "Comm_split", "Comm_dup",
                                         "Testsome", "Ialltoallv"};
  return c >= 0 && c < kNumCalls ? names[c] : "?";
}

MpiProfile& mpi_profile() { return g_profile; }

void set_progress_call_seconds(double seconds) { g_progress_seconds = seconds; }

namespace {
// What both alltoallv schedules do first: the communicator's rank and size, the
// types' extents, and the local piece copied (contiguous types, as the library uses).
struct A2av {
  int rank = 0, size = 1;
  MPI_Aint sext = 0, rext = 0;
};
A2av alltoallv_local(const void* sendbuf, const int* sendcounts, const int* sdispls, MPI_Datatype sendtype,
                     void* recvbuf, const int* rdispls, MPI_Datatype recvtype, MPI_Comm comm) {
  A2av a;
  PMPI_Comm_rank(comm, &a.rank);
  PMPI_Comm_size(comm, &a.size);
  MPI_Aint lb = 0;
  PMPI_Type_get_extent(sendtype, &lb, &a.sext);
  PMPI_Type_get_extent(recvtype, &lb, &a.rext);
  int ssize = 0;
  PMPI_Type_size(sendtype, &ssize);
  if (sendcounts[a.rank] > 0)
    std::memcpy(static_cast<char*>(recvbuf) + rdispls[a.rank] * a.rext,
                static_cast<const char*>(sendbuf) + sdispls[a.rank] * a.sext,
                static_cast<std::size_t>(sendcounts[a.rank]) * static_cast<std::size_t>(ssize));
  return a;
}
}  // namespace

int alltoallv_scattered(const void* sendbuf, const int* sendcounts, const int* sdispls, MPI_Datatype sendtype,
                        void* recvbuf, const int* recvcounts, const int* rdispls, MPI_Datatype recvtype,
                        MPI_Comm comm) {
  constexpr int kThrottle = 32;   // MPICH's MPIR_CVAR_ALLTOALL_THROTTLE default
  constexpr int kTag = 0x7a2b;    // on the communicator the caller gave (the library's own duplicate)
  const auto [rank, size, sext, rext] =
      alltoallv_local(sendbuf, sendcounts, sdispls, sendtype, recvbuf, rdispls, recvtype, comm);
  std::vector<MPI_Request> reqs;
  reqs.reserve(2 * kThrottle);
  for (int ii = 0; ii < size; ii += kThrottle) {
    reqs.clear();
    const int ss = std::min(kThrottle, size - ii);
    for (int i = 0; i < ss; ++i) {
      const int src = (rank + i + ii) % size;
      if (src == rank || recvcounts[src] == 0) continue;
      reqs.emplace_back();
      PMPI_Irecv(static_cast<char*>(recvbuf) + rdispls[src] * rext, recvcounts[src], recvtype, src, kTag, comm,
                 &reqs.back());
    }
    for (int i = 0; i < ss; ++i) {
      const int dst = (rank - i - ii + size) % size;
      if (dst == rank || sendcounts[dst] == 0) continue;
      reqs.emplace_back();
      count_send(sendcounts[dst], sendtype);
      PMPI_Isend(static_cast<const char*>(sendbuf) + sdispls[dst] * sext, sendcounts[dst], sendtype, dst, kTag,
                 comm, &reqs.back());
    }
    if (!reqs.empty()) PMPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  }
  return MPI_SUCCESS;
}

// The requests of one ialltoallv_linear, behind the handle it returned.
namespace {
struct NbcAlltoallv {
  std::vector<MPI_Request> reqs;
};
std::vector<NbcAlltoallv*> g_live;  // this rank's handles not yet completed

NbcAlltoallv* live_handle(MPI_Request r) {
  if (g_live.empty()) return nullptr;
  for (NbcAlltoallv* h : g_live)
    if (reinterpret_cast<MPI_Request>(h) == r) return h;
  return nullptr;
}

void release(MPI_Request* r, NbcAlltoallv* h) {
  g_live.erase(std::find(g_live.begin(), g_live.end(), h));
  delete h;
  *r = MPI_REQUEST_NULL;
}
}  // namespace

int ialltoallv_linear(const void* sendbuf, const int* sendcounts, const int* sdispls, MPI_Datatype sendtype,
                      void* recvbuf, const int* recvcounts, const int* rdispls, MPI_Datatype recvtype, MPI_Comm comm,
                      MPI_Request* request) {
  constexpr int kTag = 0x7a2c;  // not the blocking one's: both may share a communicator
  const auto [rank, size, sext, rext] =
      alltoallv_local(sendbuf, sendcounts, sdispls, sendtype, recvbuf, rdispls, recvtype, comm);
  auto* h = new NbcAlltoallv;
  for (int i = 0; i < size; ++i) {
    if (i == rank) continue;
    if (sendcounts[i] > 0) {
      h->reqs.emplace_back();
      count_send(sendcounts[i], sendtype);
      PMPI_Isend(static_cast<const char*>(sendbuf) + sdispls[i] * sext, sendcounts[i], sendtype, i, kTag, comm,
                 &h->reqs.back());
    }
    if (recvcounts[i] > 0) {
      h->reqs.emplace_back();
      PMPI_Irecv(static_cast<char*>(recvbuf) + rdispls[i] * rext, recvcounts[i], recvtype, i, kTag, comm,
                 &h->reqs.back());
    }
  }
  if (h->reqs.empty()) {  // the local piece was all: complete already
    delete h;
    *request = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
  }
  g_live.push_back(h);
  *request = reinterpret_cast<MPI_Request>(h);
  return MPI_SUCCESS;
}

bool test_or_wait_linear(MPI_Request* r, int* flag, bool wait) {
  NbcAlltoallv* h = live_handle(*r);
  if (!h) return false;
  const int n = static_cast<int>(h->reqs.size());
  int done = 1;
  if (wait)
    PMPI_Waitall(n, h->reqs.data(), MPI_STATUSES_IGNORE);
  else
    PMPI_Testall(n, h->reqs.data(), &done, MPI_STATUSES_IGNORE);
  if (flag) *flag = done;
  if (done) release(r, h);
  return true;
}

void forbid_linear_in(int n, const MPI_Request* r, const char* call) {
  for (int i = 0; i < n && !g_live.empty(); ++i)
    if (live_handle(r[i])) {
      std::fprintf(stderr, "pmewald_scale: %s on an MPI_Ialltoallv request (only MPI_Test and MPI_Wait take one)\n",
                   call);
      std::abort();
    }
}

}  // namespace pmewald_scale

using pmewald_scale::count_send;
using pmewald_scale::MpiCall;
using pmewald_scale::Timed;

extern "C" {

int MPI_Send(const void* b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm) {
  Timed x(pmewald_scale::kSend);
  count_send(c, t);
  return PMPI_Send(b, c, t, d, tag, comm);
}
int MPI_Isend(const void* b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm, MPI_Request* r) {
  Timed x(pmewald_scale::kIsend);
  count_send(c, t);
  return PMPI_Isend(b, c, t, d, tag, comm, r);
}
int MPI_Issend(const void* b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm, MPI_Request* r) {
  Timed x(pmewald_scale::kIssend);
  count_send(c, t);
  return PMPI_Issend(b, c, t, d, tag, comm, r);
}
int MPI_Irecv(void* b, int c, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Request* r) {
  Timed x(pmewald_scale::kIrecv);
  return PMPI_Irecv(b, c, t, s, tag, comm, r);
}
int MPI_Recv(void* b, int c, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Status* st) {
  Timed x(pmewald_scale::kRecv);
  return PMPI_Recv(b, c, t, s, tag, comm, st);
}
int MPI_Iprobe(int s, int tag, MPI_Comm comm, int* f, MPI_Status* st) {
  Timed x(pmewald_scale::kIprobe);
  return PMPI_Iprobe(s, tag, comm, f, st);
}
int MPI_Test(MPI_Request* r, int* f, MPI_Status* st) {
  Timed x(pmewald_scale::kTest);
  int rc = MPI_SUCCESS;
  if (!pmewald_scale::test_or_wait_linear(r, f, false)) rc = PMPI_Test(r, f, st);
  pmewald_scale::charge_progress_call();
  return rc;
}
int MPI_Testall(int n, MPI_Request* r, int* f, MPI_Status* st) {
  Timed x(pmewald_scale::kTestall);
  pmewald_scale::forbid_linear_in(n, r, "MPI_Testall");
  const int rc = PMPI_Testall(n, r, f, st);
  pmewald_scale::charge_progress_call();
  return rc;
}
int MPI_Testsome(int n, MPI_Request* r, int* k, int* idx, MPI_Status* st) {
  Timed x(pmewald_scale::kTestsome);
  pmewald_scale::forbid_linear_in(n, r, "MPI_Testsome");
  const int rc = PMPI_Testsome(n, r, k, idx, st);
  pmewald_scale::charge_progress_call();
  return rc;
}
int MPI_Wait(MPI_Request* r, MPI_Status* st) {
  Timed x(pmewald_scale::kWait);
  if (pmewald_scale::test_or_wait_linear(r, nullptr, true)) return MPI_SUCCESS;
  return PMPI_Wait(r, st);
}
int MPI_Waitany(int n, MPI_Request* r, int* i, MPI_Status* st) {
  Timed x(pmewald_scale::kWaitany);
  pmewald_scale::forbid_linear_in(n, r, "MPI_Waitany");
  return PMPI_Waitany(n, r, i, st);
}
int MPI_Waitall(int n, MPI_Request* r, MPI_Status* st) {
  Timed x(pmewald_scale::kWaitall);
  pmewald_scale::forbid_linear_in(n, r, "MPI_Waitall");
  return PMPI_Waitall(n, r, st);
}
int MPI_Ibarrier(MPI_Comm comm, MPI_Request* r) {
  Timed x(pmewald_scale::kIbarrier);
  return PMPI_Ibarrier(comm, r);
}
int MPI_Barrier(MPI_Comm comm) {
  Timed x(pmewald_scale::kBarrier);
  return PMPI_Barrier(comm);
}
int MPI_Allreduce(const void* a, void* b, int c, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
  Timed x(pmewald_scale::kAllreduce);
  return PMPI_Allreduce(a, b, c, t, op, comm);
}
int MPI_Allgather(const void* a, int c, MPI_Datatype t, void* b, int c2, MPI_Datatype t2, MPI_Comm comm) {
  Timed x(pmewald_scale::kAllgather);
  return PMPI_Allgather(a, c, t, b, c2, t2, comm);
}
int MPI_Allgatherv(const void* a, int c, MPI_Datatype t, void* b, const int* c2, const int* d2, MPI_Datatype t2,
                   MPI_Comm comm) {
  Timed x(pmewald_scale::kAllgatherv);
  return PMPI_Allgatherv(a, c, t, b, c2, d2, t2, comm);
}
int MPI_Alltoallv(const void* a, const int* c, const int* d, MPI_Datatype t, void* b, const int* c2, const int* d2,
                  MPI_Datatype t2, MPI_Comm comm) {
  Timed x(pmewald_scale::kAlltoallv);
#ifdef PMEWALD_SMPI
  return pmewald_scale::alltoallv_scattered(a, c, d, t, b, c2, d2, t2, comm);
#else
  return PMPI_Alltoallv(a, c, d, t, b, c2, d2, t2, comm);
#endif
}
int MPI_Ialltoallv(const void* a, const int* c, const int* d, MPI_Datatype t, void* b, const int* c2, const int* d2,
                   MPI_Datatype t2, MPI_Comm comm, MPI_Request* r) {
  Timed x(pmewald_scale::kIalltoallv);
#ifdef PMEWALD_SMPI
  return pmewald_scale::ialltoallv_linear(a, c, d, t, b, c2, d2, t2, comm, r);
#else
  return PMPI_Ialltoallv(a, c, d, t, b, c2, d2, t2, comm, r);
#endif
}
int MPI_Bcast(void* b, int c, MPI_Datatype t, int root, MPI_Comm comm) {
  Timed x(pmewald_scale::kBcast);
  return PMPI_Bcast(b, c, t, root, comm);
}
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* out) {
  Timed x(pmewald_scale::kCommSplit);
  return PMPI_Comm_split(comm, color, key, out);
}
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* out) {
  Timed x(pmewald_scale::kCommDup);
  return PMPI_Comm_dup(comm, out);
}

}  // extern "C"
