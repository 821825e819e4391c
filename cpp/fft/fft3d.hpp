// Distributed 3-D complex FFT over MPI: the front end of the pencil pipeline
// (pencil_pipeline.hpp) over all five stages of stage_plan.hpp:
//
//   0 inbox (C order) --in->x--> 1 x-pencils --x->y--> 2 y-pencils --y->z-->
//   3 z-pencils (C order) --z->out--> 4 outbox (C order)
//
// with 1-D FFTs along x at stage 1, y at stage 2 and z at stage 3 (stages joined by
// skipped remaps: one multi-dimensional FFTW plan; on one rank a single 3-D plan).
// z-pencils are always C order, so a k-space solve can work there directly; with
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

#include "base/kokkos_types.hpp"
#include "comm/exchange.hpp"
#include "comm/mpi_helpers.hpp"
#include "fft/pencil_fft.hpp"
#include "fft/pencil_pipeline.hpp"
#include "fft/remap.hpp"
#include "geometry/index_box.hpp"

namespace pmewald {
inline namespace fft {

class FFT3d : public PencilFFT {
 public:
  // Collective over `comm` (duplicated internally). `inbox` and `outbox` are this
  // rank's boxes; over all ranks each set must tile the mesh exactly (checked
  // collectively: ValueError on every rank otherwise; likewise when mesh, mode or
  // flags differ between ranks).
  FFT3d(MPI_Comm comm, const Int3& mesh, const Box3& inbox, const Box3& outbox,
        const FFTOptions& options = FFTOptions{});

  // Pencil boxes of `rank` of `nranks` (decomposition.hpp's pencil_box).
  static Box3 x_pencil_box(const Int3& mesh, int nranks, int rank);
  static Box3 y_pencil_box(const Int3& mesh, int nranks, int rank);
  static Box3 z_pencil_box(const Int3& mesh, int nranks, int rank);

  // Collective. `in` holds inbox().volume() elements in C order, `out` receives
  // outbox().volume() (forward); backward the other way round. in and out may be
  // the same array when inbox() == outbox().
  void forward(const Complex* in, Complex* out);
  void backward(const Complex* in, Complex* out);

  const FFTOptions& options() const { return options_; }
  // Exchange counters of remap t in direction d (zeros when no exchange was built).
  const ExchangeStats& remap_stats(int t, Direction d) const { return pipeline_->remap_stats(t, d); }
  const RemapPlan& remap_plan(int t) const { return pipeline_->remap(t); }
  void reset_stats() { reset_counters(); }
};

}  // namespace fft
}  // namespace pmewald
