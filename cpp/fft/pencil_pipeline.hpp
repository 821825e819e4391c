// The pencil pipeline shared by the distributed FFTs: the complex remaps and the
// complex FFT stage groups of one rank (stage_plan.hpp), their executors, FFTW plans
// and two work buffers, and the data flow through them forward and backward.
//
// FFT3d (complex) runs all of it, from stage 0 (the caller's input) to stage 4 (the
// caller's output). RealFFT3d runs its own real stage first (remap 0 of doubles, the
// r2c of stage 1) and hands the pipeline the spectrum's x-pencil: the pipeline then
// starts at remap 1 and its first FFT group is stage 2's. Backward it returns where
// stage 1's data is, for the real FFT's c2r.
//
// Data flow: the current stage's data is the caller's array or one of the two
// buffers. Remaps write into the other buffer (or the caller's output); each group
// of FFT stages runs once, in place on a buffer, or out of place when it reads the
// caller's input or writes the caller's output (FFTW's out-of-place plan when the
// arrays are aligned as planned, else through a buffer). Plans, FFTW plans and
// buffers are made in the constructor; forward() and backward() allocate nothing.
#pragma once

#include <fftw3.h>
#include <mpi.h>

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/kokkos_types.hpp"
#include "comm/exchange.hpp"
#include "comm/overlap.hpp"
#include "fft/remap.hpp"
#include "fft/stage_plan.hpp"
#include "geometry/index_box.hpp"

namespace pmewald {
inline namespace fft {

// The options of a distributed FFT (RealFFTOptions adds the real FFT's own).
struct FFTOptions {
  CommMode mode = CommMode::Nonblocking;  // of every remap
  unsigned fftw_flags = FFTW_MEASURE;     // FFTW_ESTIMATE, FFTW_MEASURE, ...
  // Collective mode only: the self piece through MPI (see CollectiveExecutor).
  bool collective_self_via_mpi = kCollectiveSelfViaMpi;
};

// Collective: the mesh is positive and small enough for 32-bit local indices, and
// mesh, mode and flags agree between ranks (ValueError on every rank otherwise).
void check_mesh_and_options(MPI_Comm comm, const Int3& mesh, const FFTOptions& options);

// Collective (one MPI_Allgather): every rank's inbox and outbox, normalised (empty
// boxes hi = lo); ValueError on every rank unless the inboxes tile `in_mesh` and the
// outboxes `out_mesh` exactly. The only MPI of planning besides the ExchangePlans.
std::pair<std::vector<Box3>, std::vector<Box3>> gather_boxes(MPI_Comm comm, const Box3& inbox, const Int3& in_mesh,
                                                              const Box3& outbox, const Int3& out_mesh);

class PencilPipeline {
 public:
  // Collective over `comm` (the remaps' ExchangePlans and the FFTW planning's error
  // agreement). `stages`: every rank's (plan_stages); the pipeline is this rank's,
  // from remap `first_remap` (0: complex FFT; 1: after the real stage) to stage 4.
  PencilPipeline(MPI_Comm comm, const FFTStages& stages, int first_remap, const FFTOptions& options);
  ~PencilPipeline();
  PencilPipeline(const PencilPipeline&) = delete;
  PencilPipeline& operator=(const PencilPipeline&) = delete;

  // Stage first_remap's data `in` (the caller's array when `in_is_caller`, else a
  // buffer(), which may be overwritten) through to stage 4's, written to `out`.
  // With an `overlap`, its work runs while each remap is in flight.
  void forward(const Complex* in, bool in_is_caller, Complex* out, Overlap* overlap = nullptr);
  // The caller's stage-4 data `in` (preserved) backward. Complex FFT: down to stage
  // 0, written to `out` (unscaled). After the real stage: down to stage 1, whose
  // data is returned, with whether that pointer is the caller's `in` (`out` unused).
  std::pair<Complex*, bool> backward(const Complex* in, Complex* out, Overlap* overlap = nullptr);
  // Rebuilds the remaps' executors for another mode (collective over the
  // communicator, as the constructor); plans and buffers stay.
  void set_mode(CommMode mode);

  const RankStages& stages() const { return s_; }
  int first_remap() const { return t0_; }
  bool remap_identity(int t) const { return s_.identity.at(t); }
  const RemapPlan& remap(int t) const { return *remaps_.at(t); }
  // Exchange counters of remap t in direction d (zeros when no exchange was built).
  const ExchangeStats& remap_stats(int t, Direction d) const;
  // The two fftw_malloc'd work buffers (each holds any stage's data).
  Complex* buffer(int i) const { return buf_[i]; }
  std::int64_t buffer_size() const { return buf_size_; }
  // Seconds inside FFTW by direction; the real stage adds its r2c / c2r here too.
  double& fft_seconds(Direction d) { return fft_seconds_[static_cast<int>(d)]; }
  double fft_seconds(Direction d) const { return fft_seconds_[static_cast<int>(d)]; }
  void reset_stats();
  // Whether p is aligned as the buffers are (FFTW plans are alignment specific).
  bool aligned_like_buffers(const void* p) const;

 private:
  void remap_step(int t, Direction d, bool last, Complex* out, const Complex*& cur, bool& user, Overlap* overlap);
  void group_step(int g, Direction d, bool to_out, Complex* out, const Complex*& cur, bool& user);
  void release();  // the FFTW plans and buffers (destructor; a constructor that fails)
  void fft_in_place(int stage, Complex* data, Direction d);
  void fft_out_of_place(int stage, const Complex* src, Complex* dst, Direction d);
  Complex* other_buffer(const Complex* p) const { return p == buf_[0] ? buf_[1] : buf_[0]; }

  RankStages s_;
  int t0_ = 0;  // first remap; the first FFT group is stage t0_ + 1's
  FFTOptions options_;
  std::array<std::shared_ptr<RemapPlan>, 4> remaps_;
  std::array<std::unique_ptr<ExchangeExecutor<Complex>>, 4> exec_;
  // FFTW plans per FFT stage group (at its first stage) and direction, in place on
  // buf_[0]; null when the stage is empty on this rank. oop_: out of place
  // (buf_[0] -> buf_[1]) for the groups that read the caller's input or write the
  // caller's output.
  std::array<std::array<fftw_plan, 2>, 5> plans_{};
  std::array<std::array<fftw_plan, 2>, 5> oop_{};
  Complex* buf_[2] = {nullptr, nullptr};
  std::int64_t buf_size_ = 0;
  std::array<double, 2> fft_seconds_{0, 0};
  ExchangeStats zero_stats_;
};

}  // namespace fft
}  // namespace pmewald
