// What the complex FFT3d and the real-to-complex RealFFT3d share: the duplicated
// communicator, the mesh and options, this rank's pencil pipeline, and the accessors
// of their stages and counters. Only the two front ends construct it.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "base/kokkos_runtime.hpp"
#include "base/threads.hpp"
#include "comm/thread_placement.hpp"
#include "comm/communicators.hpp"
#include "comm/mpi_helpers.hpp"
#include "fft/pencil_pipeline.hpp"
#include "fft/stage_plan.hpp"

namespace pmewald {
inline namespace fft {

class PencilFFT {
 public:
  static constexpr int kStages = 5;
  static constexpr int kRemaps = 4;

  PencilFFT(const PencilFFT&) = delete;
  PencilFFT& operator=(const PencilFFT&) = delete;

  MPI_Comm comm() const { return comm_.get(); }
  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  const Int3& mesh() const { return mesh_; }
  CommMode mode() const { return options_.mode; }
  unsigned fftw_flags() const { return options_.fftw_flags; }

  // Stage s's box and storage order on this rank (stage_plan.hpp); for the real FFT
  // stage 0 is the real inbox and 1..4 are boxes of the spectrum.
  const Box3& stage_box(int s) const { return pipeline_->stages().box.at(s); }
  const Order3& stage_order(int s) const { return pipeline_->stages().order.at(s); }
  const Box3& inbox() const { return stage_box(0); }
  const Box3& outbox() const { return stage_box(4); }
  const Box3& x_pencil() const { return stage_box(1); }
  const Box3& y_pencil() const { return stage_box(2); }
  const Box3& z_pencil() const { return stage_box(3); }

  // Remap names: see stage_plan.hpp's remap_name.
  static std::string remap_name(int t, Direction d) { return fft::remap_name(t, d); }
  // Whether this rank moves data in remap t (false: skipped here).
  bool remap_active(int t) const { return !pipeline_->stages().identity.at(t); }
  double fft_seconds(Direction d) const { return pipeline_->fft_seconds(d); }
  std::int64_t executions(Direction d) const { return executions_[static_cast<int>(d)]; }
  // The FFT groups on this rank, e.g. "xyz" (one rank: one 3-D FFTW plan) or "xy,z".
  std::string fft_groups() const { return pipeline_->stages().groups(); }

 protected:
  PencilFFT(MPI_Comm comm, const Int3& mesh, const FFTOptions& options)
      : comm_(comm), mesh_(mesh), options_(options) {
    ensure_kokkos_initialized();
    warn_if_oversubscribed(comm_.get());  // once per process, rank 0 (comm/thread_placement.hpp)
  }
  ~PencilFFT() = default;
  void reset_counters() {
    pipeline_->reset_stats();
    executions_ = {0, 0};
  }

  Comm comm_;
  Int3 mesh_;
  FFTOptions options_;
  std::unique_ptr<PencilPipeline> pipeline_;  // made by the front end once it has planned
  std::array<std::int64_t, 2> executions_{0, 0};
};

}  // namespace fft
}  // namespace pmewald
