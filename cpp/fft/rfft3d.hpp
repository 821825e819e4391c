// Distributed 3-D real-to-complex FFT over MPI (the sibling of fft3d.hpp's complex
// FFT3d: the same stage plan and pencil pipeline plus its real stage): forward takes
// a real K_x x K_y x K_z mesh to the half spectrum of (K_x/2 + 1) x K_y x K_z complex
// values (the r2c halves axis x, the first one transformed); backward is the
// inverse (c2r).
//
// Stages (stage_plan.hpp):
//
//   0 real inbox (C order, inside its storage box) --in->x (real)--> 1 x-pencils:
//     r2c along x; the x-pencil becomes a complex x-pencil of the spectrum mesh
//   --x->y--> 2 y-pencils --y->z--> 3 z-pencils (C order) --z->out--> 4 outbox (C order)
//
// This class does remap in->x (doubles, real x-pencil stored [y][z][x]) and the
// r2c / c2r of stage 1's group; the pencil pipeline does the rest, moving the half
// spectrum, so every remap after the first carries half the bytes of the complex
// FFT3d's. As in FFT3d a remap that moves nothing on this rank is skipped, and stages
// joined by skipped remaps are one FFTW plan: on one rank a single 3-D r2c plan that
// reads the caller's real array and writes the caller's spectrum (with outbox ==
// z_pencil_box(...)).
//
// The inbox may sit inside a larger C-order array (`in_storage`, e.g. a brick with
// ghost layers): forward reads, and backward writes, only the inbox's elements of
// it, so a PME solver transforms its ghosted charge grid in place, without a copy.
//
// Halved axis: x, as above, is the general case. On a single rank (no remaps:
// the whole transform is one FFTW plan) another axis may be halved instead
// (`halved_axis`); z is what FFTW's own r2c halves, and on C-order data it is
// measured 1.3-2x faster than halving the strided x (docs/fft.md). The spectrum
// mesh is then K with K_h -> K_h/2 + 1.
//
// backward() scales by 1/N when asked (backward(forward(a)) == a); unscaled,
// backward(forward(a)) == N a, which lets a caller fold 1/N into its own factors.
// Plans, FFTW plans and buffers are made in the constructor; forward() and
// backward() allocate nothing.
#pragma once

#include <fftw3.h>
#include <mpi.h>

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/kokkos_types.hpp"
#include "comm/exchange.hpp"
#include "comm/mpi_helpers.hpp"
#include "fft/pencil_pipeline.hpp"
#include "fft/remap.hpp"
#include "fft/stage_plan.hpp"
#include "geometry/index_box.hpp"

namespace pmewald {
inline namespace fft {

// The real FFT's options: FFTOptions and its own.
struct RealFFTOptions : FFTOptions {
  // The box of the caller's real arrays (C order), holding the inbox; default the inbox.
  std::optional<Box3> in_storage;
  // 0 (x), or 1 / 2 on a single rank only.
  int halved_axis = 0;
};

class RealFFT3d {
 public:
  static constexpr int kStages = 5;
  static constexpr int kRemaps = 4;

  // Collective over `comm` (duplicated internally). `inbox` is this rank's box of
  // the real mesh, `outbox` its box of the spectrum mesh (spectrum_mesh(mesh));
  // over all ranks each set must tile its mesh exactly (checked collectively:
  // ValueError on every rank otherwise; likewise when mesh, mode or flags differ
  // between ranks, or in_storage does not contain the inbox, or a halved axis
  // other than 0 is asked for on more than one rank).
  RealFFT3d(MPI_Comm comm, const Int3& mesh, const Box3& inbox, const Box3& outbox,
            const RealFFTOptions& options = RealFFTOptions{});
  ~RealFFT3d();
  RealFFT3d(const RealFFT3d&) = delete;
  RealFFT3d& operator=(const RealFFT3d&) = delete;

  // The mesh of the half spectrum: (K_x/2 + 1, K_y, K_z) for halved axis x.
  static Int3 spectrum_mesh(const Int3& mesh, int halved_axis = 0) { return fft::spectrum_mesh(mesh, halved_axis); }
  // Pencil boxes of `rank` of `nranks`: x of the real mesh, y and z of the spectrum mesh.
  static Box3 x_pencil_box(const Int3& mesh, int nranks, int rank);
  static Box3 y_pencil_box(const Int3& mesh, int nranks, int rank, int halved_axis = 0);
  static Box3 z_pencil_box(const Int3& mesh, int nranks, int rank, int halved_axis = 0);

  // Collective. `in` holds in_storage().volume() doubles (C order); `out` receives
  // outbox().volume() complex values (C order). `in` is not modified.
  void forward(const double* in, Complex* out);
  // Collective. The inverse: `in` holds outbox().volume() values, the inbox's
  // elements of `out` (in_storage() layout) are written and no others. Scaled by
  // 1/N when `normalise`. `in` is preserved (an internal copy where FFTW's c2r
  // would overwrite it).
  void backward(const Complex* in, double* out, bool normalise = true);
  // As backward, but `in` may be overwritten (saves that copy on one rank).
  void backward_destroying_input(Complex* in, double* out, bool normalise = true);

  MPI_Comm comm() const { return comm_.get(); }
  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  const Int3& mesh() const { return mesh_; }
  const Int3& spectrum_mesh() const { return cmesh_; }
  int halved_axis() const { return options_.halved_axis; }
  CommMode mode() const { return options_.mode; }
  unsigned fftw_flags() const { return options_.fftw_flags; }
  const RealFFTOptions& options() const { return options_; }
  const Box3& inbox() const { return stages().box[0]; }
  const Box3& in_storage() const { return storage_; }
  const Box3& outbox() const { return stages().box[4]; }
  // The real x-pencil (real mesh) and the spectrum's x-, y- and z-pencils.
  const Box3& real_x_pencil() const { return stages().real_x; }
  const Box3& x_pencil() const { return stages().box[1]; }
  const Box3& y_pencil() const { return stages().box[2]; }
  const Box3& z_pencil() const { return stages().box[3]; }
  // Stage 0 is the real inbox (C order), stages 1..4 the spectrum's.
  const Box3& stage_box(int s) const { return stages().box.at(s); }
  const Order3& stage_order(int s) const { return stages().order.at(s); }
  const Order3& real_x_order() const { return stages().real_x_order; }

  // Names as FFT3d::remap_name; remap 0 moves doubles, 1..3 complex values.
  static std::string remap_name(int t, Direction d) { return fft::remap_name(t, d); }
  bool remap_active(int t) const { return !stages().identity.at(t); }
  const ExchangeStats& remap_stats(int t, Direction d) const;
  double fft_seconds(Direction d) const { return pipeline_->fft_seconds(d); }
  std::int64_t executions(Direction d) const { return executions_[static_cast<int>(d)]; }
  // Transforms that went through an internal copy because a caller's array was not
  // aligned like the planning buffers (FFTW plans are alignment specific).
  std::int64_t unaligned_copies() const { return unaligned_copies_; }
  void reset_stats();
  // The FFT groups on this rank, e.g. "xyz" (one rank: one 3-D r2c plan) or "xy,z".
  std::string fft_groups() const { return stages().groups(); }

 private:
  const RankStages& stages() const { return pipeline_->stages(); }
  void backward_impl(const Complex* in, double* out, bool normalise, bool may_destroy);
  // The real group (stage 1 and the stages joined to it).
  void r2c(const double* src, bool src_is_storage, Complex* dst);
  void c2r(Complex* src, double* dst, bool dst_is_storage);
  // Copy (or scale) the inbox's elements of a storage-shaped array.
  void copy_inbox(const double* src, double* dst) const;
  void scale_inbox(double* data, double s) const;

  Comm comm_;
  Int3 mesh_, cmesh_;
  RealFFTOptions options_;
  Box3 storage_;
  std::int64_t in_offset_ = 0;  // element offset of the inbox's first point in storage
  // The real stage: remap in->x of doubles and the r2c / c2r plans between rbuf_
  // (+ in_offset_ when the group reads the caller's storage) and the pipeline's
  // first buffer; rbuf_ holds the real x-pencil, or a storage-shaped scratch copy of
  // the caller's array when in->x is skipped.
  std::shared_ptr<RemapPlan> remap0_;
  std::unique_ptr<ExchangeExecutor<double>> exec0_;
  std::array<fftw_plan, 2> real_plans_{};
  double* rbuf_ = nullptr;
  // The spectrum's stages 1..4 (remaps 1..3, FFT groups of stages 2..3).
  std::unique_ptr<PencilPipeline> pipeline_;
  std::array<std::int64_t, 2> executions_{0, 0};
  std::int64_t unaligned_copies_ = 0;
  ExchangeStats zero_stats_;
};

}  // namespace fft
}  // namespace pmewald
