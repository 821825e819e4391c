#include "fft/fft3d.hpp"

#include "base/kokkos_runtime.hpp"
#include "fft/fftw_plans.hpp"
#include "fft/stage_plan.hpp"
#include "geometry/decomposition.hpp"

namespace pmewald {
inline namespace fft {

Box3 FFT3d::x_pencil_box(const Int3& mesh, int nranks, int rank) { return pencil_box(0, nranks, mesh, rank); }
Box3 FFT3d::y_pencil_box(const Int3& mesh, int nranks, int rank) { return pencil_box(1, nranks, mesh, rank); }
Box3 FFT3d::z_pencil_box(const Int3& mesh, int nranks, int rank) { return pencil_box(2, nranks, mesh, rank); }

FFT3d::FFT3d(MPI_Comm comm, const Int3& mesh, const Box3& inbox, const Box3& outbox, const FFTOptions& options)
    : PencilFFT(comm, mesh, options) {
  const MPI_Comm c = comm_.get();
  check_mesh_and_options(c, mesh, options);
  const auto boxes = gather_boxes(c, inbox, mesh, outbox, mesh);
  const FFTStages stages = plan_stages(FFTKind::Complex, mesh, 0, boxes.first, boxes.second);
  pipeline_ = std::make_unique<PencilPipeline>(c, stages, 0, options);
}

void FFT3d::forward(const Complex* in, Complex* out) {
  ensure_kokkos_initialized();  // this thread may run kernels (base/kokkos_runtime.hpp)
  pipeline_->forward(in, true, out);
  executions_[0] += 1;
}

void FFT3d::backward(const Complex* in, Complex* out) {
  ensure_kokkos_initialized();  // this thread may run kernels (base/kokkos_runtime.hpp)
  pipeline_->backward(in, out);
  detail::scale_elements(out, inbox().volume(), 1.0 / (static_cast<double>(mesh_[0]) * mesh_[1] * mesh_[2]));
  executions_[1] += 1;
}

}  // namespace fft
}  // namespace pmewald
