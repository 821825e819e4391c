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
// mesh is then K with K_h -> K_h/2 + 1. Across ranks, where stage 1 reads the
// caller's storage in place (x halved, the strided axis: e.g. two ranks' bricks),
// the r2c / c2r run as complex transforms of paired z lines (paired_real.hpp).
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
#include "fft/pencil_fft.hpp"
#include "fft/paired_real.hpp"
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
  // Copy the inbox into an x-fastest x-pencil before the r2c even where it already is
  // the x-pencil (plan_stages' contiguous_real_x): the r2c then reads contiguous x lines
  // instead of C-order planes with x the slowest axis. Measured on two ranks (z split):
  // 96^3 8.2 against 13.0 ms per pair, but 8-20% slower at 80^3-128^3 and the water
  // meshes (docs/fft.md); the PME solver times both when it plans by measurement.
  bool contiguous_real_x = false;
  // Where the r2c reads the caller's storage in place (x halved, the strided axis),
  // run it as complex transforms of paired z lines (paired_real.hpp) when the inbox
  // has an even number of z points: 2.1-3.7x faster than FFTW's strided r2c on a
  // two-rank brick (docs/fft.md). Off: FFTW's r2c / c2r, as before.
  bool pair_real_lines = true;
};

class RealFFT3d : public PencilFFT {
 public:
  // Collective over `comm` (duplicated internally). `inbox` is this rank's box of
  // the real mesh, `outbox` its box of the spectrum mesh (spectrum_mesh(mesh));
  // over all ranks each set must tile its mesh exactly (checked collectively:
  // ValueError on every rank otherwise; likewise when mesh, mode or flags differ
  // between ranks, or in_storage does not contain the inbox, or a halved axis
  // other than 0 is asked for on more than one rank).
  RealFFT3d(MPI_Comm comm, const Int3& mesh, const Box3& inbox, const Box3& outbox,
            const RealFFTOptions& options = RealFFTOptions{});
  ~RealFFT3d();

  // The mesh of the half spectrum: (K_x/2 + 1, K_y, K_z) for halved axis x.
  static Int3 spectrum_mesh(const Int3& mesh, int halved_axis = 0) { return fft::spectrum_mesh(mesh, halved_axis); }
  // Pencil boxes of `rank` of `nranks`: x of the real mesh, y and z of the spectrum mesh.
  static Box3 x_pencil_box(const Int3& mesh, int nranks, int rank);
  static Box3 y_pencil_box(const Int3& mesh, int nranks, int rank, int halved_axis = 0);
  static Box3 z_pencil_box(const Int3& mesh, int nranks, int rank, int halved_axis = 0);

  // Collective. `in` holds in_storage().volume() doubles (C order); `out` receives
  // outbox().volume() complex values (C order). `in` is not modified.
  // With an `overlap`, its work runs while each remap is in flight.
  void forward(const double* in, Complex* out, Overlap* overlap = nullptr);
  // Collective. The inverse: `in` holds outbox().volume() values, the inbox's
  // elements of `out` (in_storage() layout) are written and no others. Scaled by
  // 1/N when `normalise`. `in` is preserved (an internal copy where FFTW's c2r
  // would overwrite it).
  void backward(const Complex* in, double* out, bool normalise = true);
  // As backward, but `in` may be overwritten (saves that copy on one rank).
  void backward_destroying_input(Complex* in, double* out, bool normalise = true, Overlap* overlap = nullptr);
  // Rebuilds every remap's executor for another mode (collective over the
  // communicator); plans, FFTW plans and buffers stay, results do not change.
  void set_mode(CommMode mode);

  const Int3& spectrum_mesh() const { return cmesh_; }
  int halved_axis() const { return real_options_.halved_axis; }
  const RealFFTOptions& options() const { return real_options_; }
  const Box3& in_storage() const { return storage_; }
  // The real x-pencil (real mesh); x_pencil() is the spectrum's.
  const Box3& real_x_pencil() const { return pipeline_->stages().real_x; }
  const Order3& real_x_order() const { return pipeline_->stages().real_x_order; }
  // The real group runs as complex transforms of paired z lines (pair_real_lines).
  bool paired_real_lines() const { return paired_ != nullptr; }

  // Remap 0 moves doubles, 1..3 complex values (zeros when no exchange was built).
  const ExchangeStats& remap_stats(int t, Direction d) const;
  // Transforms that went through an internal copy because a caller's array was not
  // aligned like the planning buffers (FFTW plans are alignment specific).
  std::int64_t unaligned_copies() const { return unaligned_copies_; }
  void reset_stats();

 private:
  void backward_impl(const Complex* in, double* out, bool normalise, bool may_destroy, Overlap* overlap);
  // The real group (stage 1 and the stages joined to it).
  void r2c(const double* src, bool src_is_storage, Complex* dst);
  void c2r(Complex* src, double* dst, bool dst_is_storage);
  // Copy (or scale) the inbox's elements of a storage-shaped array.
  void copy_inbox(const double* src, double* dst) const;
  void scale_inbox(double* data, double s) const;

  Int3 cmesh_;
  RealFFTOptions real_options_;
  Box3 storage_;
  std::int64_t in_offset_ = 0;  // element offset of the inbox's first point in storage
  // The real stage: remap in->x of doubles and the r2c / c2r plans between rbuf_
  // (+ in_offset_ when the group reads the caller's storage) and the pipeline's
  // first buffer; rbuf_ holds the real x-pencil, or a storage-shaped scratch copy of
  // the caller's array when in->x is skipped. The pipeline does the spectrum's
  // stages 1..4 (remaps 1..3, FFT groups of stages 2..3).
  std::shared_ptr<RemapPlan> remap0_;
  std::unique_ptr<ExchangeExecutor<double>> exec0_;
  std::array<fftw_plan, 2> real_plans_{};
  std::unique_ptr<PairedRealTransform> paired_;  // instead of real_plans_, working in rbuf_
  double real_work_ = 0;  // the real group's work: spectrum points x axes (base/compute_model.hpp)
  double* rbuf_ = nullptr;
  std::int64_t unaligned_copies_ = 0;
  ExchangeStats zero_stats_;
};

}  // namespace fft
}  // namespace pmewald
