#include "fft/rfft3d.hpp"

#include <algorithm>

#include "geometry/decomposition.hpp"
#include "base/compute_model.hpp"
#include "base/errors.hpp"
#include "base/kokkos_runtime.hpp"
#include "base/timers.hpp"
#include "fft/fftw_plans.hpp"

namespace pmewald {
inline namespace fft {

namespace {

bool aligned_like(const void* p, const void* planned) {
  return fftw_alignment_of(reinterpret_cast<double*>(const_cast<void*>(p))) ==
         fftw_alignment_of(reinterpret_cast<double*>(const_cast<void*>(planned)));
}

}  // namespace

using detail::as_fftw;
using detail::copy_elements;

Box3 RealFFT3d::x_pencil_box(const Int3& mesh, int nranks, int rank) { return pencil_box(0, nranks, mesh, rank); }
Box3 RealFFT3d::y_pencil_box(const Int3& mesh, int nranks, int rank, int halved_axis) {
  return pencil_box(1, nranks, spectrum_mesh(mesh, halved_axis), rank);
}
Box3 RealFFT3d::z_pencil_box(const Int3& mesh, int nranks, int rank, int halved_axis) {
  return pencil_box(2, nranks, spectrum_mesh(mesh, halved_axis), rank);
}

RealFFT3d::RealFFT3d(MPI_Comm comm, const Int3& mesh, const Box3& inbox, const Box3& outbox,
                     const RealFFTOptions& options)
    : PencilFFT(comm, mesh, options), real_options_(options) {
  const MPI_Comm c = comm_.get();
  const int P = comm_.size();
  const int halved_axis = options.halved_axis;
  check_mesh_and_options(c, mesh, options);
  if (!same_on_all_ranks(c, {double(halved_axis), options.contiguous_real_x ? 1.0 : 0.0}))
    throw ValueError("the halved axis and contiguous_real_x must be the same on every rank");
  // (Every rank sees the same size, so every rank raises the same error.)
  if (halved_axis < 0 || halved_axis > 2)
    throw ValueError("halved_axis must be 0, 1 or 2, not " + std::to_string(halved_axis));
  if (halved_axis != 0 && P != 1)
    throw ValueError("halving axis " + std::to_string(halved_axis) +
                     " needs a single rank (across ranks the r2c runs in the first pencil stage, along x)");
  cmesh_ = fft::spectrum_mesh(mesh, halved_axis);
  const auto boxes = gather_boxes(c, inbox, mesh_, outbox, cmesh_);
  const FFTStages stages =
      plan_stages(FFTKind::RealToComplex, mesh_, halved_axis, boxes.first, boxes.second, options.contiguous_real_x);
  const RankStages& mine = stages.ranks[static_cast<size_t>(comm_.rank())];
  const Box3& in = mine.box[0];
  storage_ = options.in_storage ? *options.in_storage : in;
  std::string err;
  if (!contains(storage_, in))
    err = "in_storage " + storage_.str() + " does not contain the inbox " + in.str();
  else if (storage_.volume() > INT32_MAX)
    err = "in_storage too large for 32-bit local indices";
  agree_or_throw(c, err);
  if (!in.empty()) {
    const auto st = strides_of(storage_, kCOrder);
    for (int d = 0; d < 3; ++d) in_offset_ += (in.lo[d] - storage_.lo[d]) * st[d];
  }

  // The real stage's remap, then the pipeline of the spectrum's stages.
  remap0_ = std::make_shared<RemapPlan>(c, stages.remap_layout(0), storage_);
  if (!remap0_->all_identity())
    exec0_ = make_executor<double>(options.mode, remap0_->exchange(), options.collective_self_via_mpi);
  pipeline_ = std::make_unique<PencilPipeline>(c, stages, 1, options);

  // rbuf_ holds the real x-pencil, or a storage-shaped scratch copy of the caller's
  // array when in->x is skipped.
  const Box3& rx = mine.real_x;
  real_work_ = static_cast<double>(mine.box[1].volume()) * mine.group_last[1];
  const std::int64_t rsize = std::max<std::int64_t>(rx.volume(), remap0_->identity() ? storage_.volume() : 0);
  // Out of memory on one rank must not leave the others in the agreement at the
  // end: it becomes this rank's error (planning is skipped).
  rbuf_ = fftw_alloc_real(static_cast<size_t>(std::max<std::int64_t>(rsize, 1)));
  if (rbuf_)
    count_buffer_allocation();
  else
    err = "out of memory: could not allocate the real FFT work buffer (" +
          std::to_string(8 * static_cast<std::uint64_t>(std::max<std::int64_t>(rsize, 1))) + " bytes)";

  // Plans are made on our buffers (scratch: FFTW_MEASURE overwrites them) and run
  // on whichever arrays hold the stage when their alignment matches (else through
  // an internal copy). The real group's real side is the caller's storage layout
  // (at in_offset_) when in->x is skipped, else the [y][z][x] x-pencil.
  if (!rx.empty() && err.empty()) {
    const bool storage = remap0_->identity();
    const auto rs = storage ? strides_of(storage_, kCOrder) : strides_of(rx, mine.real_x_order);
    const auto cs = strides_of(mine.box[1], mine.order[1]);
    double* r = rbuf_ + (storage ? in_offset_ : 0);
    // In place with x halved (the strided axis): paired z lines where they apply
    // (rbuf_, at least the storage's size, holds the packed inbox).
    if (storage && halved_axis == 0 && options.pair_real_lines &&
        PairedRealTransform::applies(rx.shape(), mine.group_last[1])) {
      paired_ = std::make_unique<PairedRealTransform>(rx.shape(), mine.group_last[1] == 2, rs, cs, rbuf_,
                                                      options.fftw_flags);
      if (!paired_->ok()) err = "FFTW could not plan the paired real transforms";
    }
    for (int d = 0; d < 2 && !paired_; ++d) {
      real_plans_[d] = detail::plan_real_axes(rx.shape(), rs, cs, mine.group_last[1] - 1, halved_axis, r,
                                              pipeline_->buffer(0), d == 0, options.fftw_flags);
      if (!real_plans_[d]) err = "FFTW could not plan the real-to-complex transforms";
    }
  }
  agree_or_throw(c, err);
}

RealFFT3d::~RealFFT3d() {
  for (auto& p : real_plans_) destroy_fftw_plan(p);
  if (rbuf_) fftw_free(rbuf_);
}

const ExchangeStats& RealFFT3d::remap_stats(int t, Direction d) const {
  if (t == 0) return exec0_ ? exec0_->stats(d) : zero_stats_;
  return pipeline_->remap_stats(t, d);
}

void RealFFT3d::reset_stats() {
  if (exec0_) exec0_->reset_stats();
  reset_counters();
  unaligned_copies_ = 0;
}

void RealFFT3d::copy_inbox(const double* src, double* dst) const {
  const Box3& in = inbox();
  if (in.empty() || src == dst) return;
  const auto st = strides_of(storage_, kCOrder);
  const std::int64_t off = in_offset_, sx = st[0], sy = st[1];
  const int ny = in.size(1), nz = in.size(2);
  Kokkos::parallel_for(Range(0, in.volume()), [=](const std::int64_t i) {
    const std::int64_t z = i % nz, y = (i / nz) % ny, x = i / (std::int64_t(nz) * ny);
    const std::int64_t k = off + x * sx + y * sy + z;
    dst[k] = src[k];
  });
}

void RealFFT3d::scale_inbox(double* data, double s) const {
  const Box3& in = inbox();
  if (in.empty()) return;
  if (storage_ == in) return detail::scale_elements(data, in.volume(), s);
  const auto st = strides_of(storage_, kCOrder);
  const std::int64_t off = in_offset_, sx = st[0], sy = st[1];
  const int ny = in.size(1), nz = in.size(2);
  Kokkos::parallel_for(Range(0, in.volume()), [=](const std::int64_t i) {
    const std::int64_t z = i % nz, y = (i / nz) % ny, x = i / (std::int64_t(nz) * ny);
    data[off + x * sx + y * sy + z] *= s;
  });
}

void RealFFT3d::r2c(const double* src, bool from_storage, Complex* dst) {
  if (paired_) {  // any alignment: it reads and writes through its own loops
    ScopedTimer timer(pipeline_->fft_seconds(Direction::Forward));
    paired_->forward(src, dst);
    charge(Work::FFT, real_work_);
    return;
  }
  const fftw_plan p = real_plans_[0];
  if (!p) return;
  Complex* const work = pipeline_->buffer(0);
  double* planned = rbuf_ + (from_storage ? in_offset_ : 0);
  const double* s = src;
  if (!aligned_like(s, planned)) {  // only a caller's array can be misaligned
    copy_inbox(src - in_offset_, rbuf_);
    s = planned;
    ++unaligned_copies_;
  }
  const bool dst_ok = aligned_like(dst, work);
  Complex* d = dst_ok ? dst : work;
  {
    ScopedTimer timer(pipeline_->fft_seconds(Direction::Forward));
    // r2c out of place preserves its input (FFTW's default for r2c).
    fftw_execute_dft_r2c(p, const_cast<double*>(s), as_fftw(d));
    charge(Work::FFT, real_work_);
  }
  if (!dst_ok) {
    copy_elements(work, dst, x_pencil().volume());
    ++unaligned_copies_;
  }
}

void RealFFT3d::c2r(Complex* src, double* dst, bool to_storage) {
  if (paired_) {  // preserves src
    ScopedTimer timer(pipeline_->fft_seconds(Direction::Reverse));
    paired_->backward(src, dst);
    charge(Work::FFT, real_work_);
    return;
  }
  const fftw_plan p = real_plans_[1];
  if (!p) return;
  Complex* const work = pipeline_->buffer(0);
  double* planned = rbuf_ + (to_storage ? in_offset_ : 0);
  Complex* s = src;
  if (!aligned_like(s, work)) {
    copy_elements(src, work, x_pencil().volume());
    s = work;
    ++unaligned_copies_;
  }
  const bool dst_ok = aligned_like(dst, planned);
  double* d = dst_ok ? dst : planned;
  {
    ScopedTimer timer(pipeline_->fft_seconds(Direction::Reverse));
    fftw_execute_dft_c2r(p, as_fftw(s), d);  // overwrites s
    charge(Work::FFT, real_work_);
  }
  if (!dst_ok) {
    copy_inbox(rbuf_, dst - in_offset_);
    ++unaligned_copies_;
  }
}

// The real stage, then the pipeline (which writes the caller's output).
void RealFFT3d::set_mode(CommMode mode) {
  real_options_.mode = mode;
  options_.mode = mode;
  if (exec0_ && exec0_->mode() != mode) {
    exec0_.reset();
    exec0_ = make_executor<double>(mode, remap0_->exchange(), real_options_.collective_self_via_mpi);
  }
  pipeline_->set_mode(mode);
}

void RealFFT3d::forward(const double* in, Complex* out, Overlap* overlap) {
  ensure_kokkos_initialized();  // this thread may run kernels (base/kokkos_runtime.hpp)
  const double* rsrc = in + in_offset_;
  const bool from_storage = remap0_->identity();
  if (!from_storage) {
    exchange(*exec0_, in, rbuf_, Direction::Forward, UnpackOp::Assign, overlap);
    rsrc = rbuf_;
  }
  const RankStages& s = pipeline_->stages();
  Complex* dst = (s.group_last[1] == 3 && s.identity[3]) ? out : pipeline_->buffer(0);
  r2c(rsrc, from_storage, dst);
  pipeline_->forward(dst, false, out, overlap);
  executions_[0] += 1;
}

void RealFFT3d::backward(const Complex* in, double* out, bool normalise) {
  backward_impl(in, out, normalise, false, nullptr);
}

void RealFFT3d::backward_destroying_input(Complex* in, double* out, bool normalise, Overlap* overlap) {
  backward_impl(in, out, normalise, true, overlap);
}

// The pipeline down to stage 1, then the real stage.
void RealFFT3d::backward_impl(const Complex* in, double* out, bool normalise, bool may_destroy,
                              Overlap* overlap) {
  ensure_kokkos_initialized();  // this thread may run kernels (base/kokkos_runtime.hpp)
  const auto [cur, user] = pipeline_->backward(in, nullptr, overlap);
  // FFTW's c2r overwrites its input: the caller's array only when allowed (the
  // paired transform preserves it).
  Complex* src = cur;
  if (user && !may_destroy && !paired_) {
    copy_elements(cur, pipeline_->buffer(0), x_pencil().volume());
    src = pipeline_->buffer(0);
  }
  const bool to_storage = remap0_->identity();
  c2r(src, to_storage ? out + in_offset_ : rbuf_, to_storage);
  if (!to_storage) exchange(*exec0_, static_cast<const double*>(rbuf_), out, Direction::Reverse, UnpackOp::Assign, overlap);
  if (normalise) scale_inbox(out, 1.0 / (static_cast<double>(mesh_[0]) * mesh_[1] * mesh_[2]));
  executions_[1] += 1;
}

}  // namespace fft
}  // namespace pmewald
