// Distributed 3-D complex FFT over MPI: remaps (exchange.hpp / remap.hpp) plus
// batched 1-D FFTW transforms.
//
// Stages (s = 0..4) and the remaps between them (t = 0..3, from stage t to t+1):
//
//   0 inbox (C order) --in->x--> 1 x-pencils --x->y--> 2 y-pencils --y->z-->
//   3 z-pencils (C order) --z->out--> 4 outbox (C order)
//
// with 1-D FFTs along x at stage 1, y at stage 2 and z at stage 3. A pencil stage
// is stored with its FFT axis fastest (x-pencils as [y][z][x], y-pencils as
// [z][x][y], z-pencils as [x][y][z]) so each batch of 1-D FFTs is contiguous,
// except that when a rank's x- or y-pencil box equals its previous box, the data
// stays where and as it is (no copy). Stages joined by such skipped remaps form a
// group whose axes FFTW transforms with one multi-dimensional plan (on one rank:
// a single 3-D plan).
// z-pencils are always C order, so a k-space solve can work there directly.
// A remap that moves nothing on this rank (same box, same order) is skipped; with
// outbox == z_pencil_box(...) the last remap disappears.
//
// backward() runs the stages in reverse (each remap's exchange reversed) and
// scales by 1/N, so backward(forward(a)) == a. Plans, FFTW plans and buffers are
// made in the constructor; forward() and backward() allocate nothing.
#pragma once

#include <fftw3.h>
#include <mpi.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "comm/mpi_helpers.hpp"
#include "comm/exchange.hpp"
#include "geometry/index_box.hpp"
#include "base/kokkos_types.hpp"
#include "fft/remap.hpp"

namespace pmewald {
inline namespace fft {

class FFT3d {
 public:
  static constexpr int kStages = 5;
  static constexpr int kRemaps = 4;

  // Collective over `comm` (duplicated internally). `inbox` and `outbox` are this
  // rank's boxes; over all ranks each set must tile the mesh exactly (checked
  // collectively: ValueError on every rank otherwise; likewise when mesh, mode or
  // flags differ between ranks). `fftw_flags`: FFTW_ESTIMATE, FFTW_MEASURE, ...
  // `collective_self_via_mpi`: see CollectiveExecutor (measurement knob).
  FFT3d(MPI_Comm comm, const Int3& mesh, const Box3& inbox, const Box3& outbox,
        CommMode mode = CommMode::Nonblocking, unsigned fftw_flags = FFTW_MEASURE,
        bool collective_self_via_mpi = kCollectiveSelfViaMpi);
  ~FFT3d();
  FFT3d(const FFT3d&) = delete;
  FFT3d& operator=(const FFT3d&) = delete;

  // Pencil boxes of `rank` of `nranks` (decomposition.hpp's pencil_box).
  static Box3 x_pencil_box(const Int3& mesh, int nranks, int rank);
  static Box3 y_pencil_box(const Int3& mesh, int nranks, int rank);
  static Box3 z_pencil_box(const Int3& mesh, int nranks, int rank);

  // Collective. `in` holds inbox().volume() elements in C order, `out` receives
  // outbox().volume() (forward); backward the other way round. in and out may be
  // the same array when inbox() == outbox().
  void forward(const Complex* in, Complex* out);
  void backward(const Complex* in, Complex* out);

  MPI_Comm comm() const { return comm_.get(); }
  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  const Int3& mesh() const { return mesh_; }
  CommMode mode() const { return mode_; }
  unsigned fftw_flags() const { return flags_; }
  const Box3& inbox() const { return box_[0]; }
  const Box3& outbox() const { return box_[4]; }
  const Box3& x_pencil() const { return box_[1]; }
  const Box3& y_pencil() const { return box_[2]; }
  const Box3& z_pencil() const { return box_[3]; }
  const Box3& stage_box(int s) const { return box_.at(s); }
  const Order3& stage_order(int s) const { return order_.at(s); }

  // Remap t (0..3): "in->x", "x->y", "y->z", "z->out" forward; the backward
  // transform runs them reversed as "x->in", "y->x", "z->y", "out->z".
  static std::string remap_name(int t, Direction d);
  // Whether this rank moves data in remap t (false: skipped here).
  bool remap_active(int t) const { return !remaps_.at(t)->identity(); }
  // Exchange counters of remap t in direction d (zeros when no exchange was built).
  const ExchangeStats& remap_stats(int t, Direction d) const;
  const RemapPlan& remap_plan(int t) const { return *remaps_.at(t); }
  double fft_seconds(Direction d) const { return fft_seconds_[static_cast<int>(d)]; }
  std::int64_t executions(Direction d) const { return executions_[static_cast<int>(d)]; }
  void reset_stats();
  // The FFT groups on this rank, e.g. "xyz" (one rank: one 3-D FFTW plan) or "xy,z".
  std::string fft_groups() const;

 private:
  void fft_in_place(int stage, Complex* data, Direction d);
  // Transforms stage `stage` from src into dst (dst != src may be a caller's
  // array): FFTW out of place when alignments allow, else copy + in place.
  void fft_out_of_place(int stage, const Complex* src, Complex* dst, Direction d);
  bool fftw_aligned(const void* p) const;
  Complex* other_buffer(const Complex* p) const { return p == buf_[0] ? buf_[1] : buf_[0]; }

  Comm comm_;
  Int3 mesh_;
  CommMode mode_;
  unsigned flags_;
  std::array<Box3, kStages> box_;
  std::array<Order3, kStages> order_;
  std::array<std::shared_ptr<RemapPlan>, kRemaps> remaps_;
  std::array<std::unique_ptr<ExchangeExecutor<Complex>>, kRemaps> exec_;
  // FFTW plans per FFT stage (1..3) and direction, in place on buf_[0]; null when
  // the stage is empty on this rank. oop_: out of place (buf_[0] -> buf_[1]) for
  // the stages whose input comes from, or output goes to, the caller's array.
  std::array<std::array<fftw_plan, 2>, kStages> plans_{};
  std::array<std::array<fftw_plan, 2>, kStages> oop_{};
  // FFT stages joined by skipped remaps share one plan, stored at the group's
  // first stage: group_first_[s] / group_last_[s] for s = 1..3.
  std::array<int, kStages> group_first_{}, group_last_{};
  Complex* buf_[2] = {nullptr, nullptr};
  std::int64_t buf_size_ = 0;
  std::array<double, 2> fft_seconds_{0, 0};
  std::array<std::int64_t, 2> executions_{0, 0};
  ExchangeStats zero_stats_;
};

}  // namespace fft
}  // namespace pmewald
