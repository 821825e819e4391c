#include "fft/rfft3d.hpp"

#include <algorithm>

#include "geometry/decomposition.hpp"
#include "base/errors.hpp"
#include "base/timers.hpp"
#include "fft/fftw_plans.hpp"

namespace pmewald {
inline namespace fft {

using detail::as_fftw;
using detail::copy_elements;
using detail::execute_in_place;
using detail::execute_out_of_place;
using detail::normalised;

Box3 RealFFT3d::x_pencil_box(const Int3& mesh, int nranks, int rank) { return pencil_box(0, nranks, mesh, rank); }
Box3 RealFFT3d::y_pencil_box(const Int3& mesh, int nranks, int rank, int halved_axis) {
  return pencil_box(1, nranks, spectrum_mesh(mesh, halved_axis), rank);
}
Box3 RealFFT3d::z_pencil_box(const Int3& mesh, int nranks, int rank, int halved_axis) {
  return pencil_box(2, nranks, spectrum_mesh(mesh, halved_axis), rank);
}

std::string RealFFT3d::remap_name(int t, Direction d) {
  static const char* names[2][kRemaps] = {{"in->x", "x->y", "y->z", "z->out"}, {"x->in", "y->x", "z->y", "out->z"}};
  return names[static_cast<int>(d)][t];
}

RealFFT3d::RealFFT3d(MPI_Comm comm, const Int3& mesh, const Box3& inbox, const Box3& outbox, CommMode mode,
                     unsigned fftw_flags, const std::optional<Box3>& in_storage, int halved_axis,
                     bool collective_self_via_mpi)
    : comm_(comm), mesh_(mesh), half_(halved_axis), mode_(mode), flags_(fftw_flags) {
  const MPI_Comm c = comm_.get();
  const int me = comm_.rank(), P = comm_.size();
  detail::check_mesh_and_options(c, mesh, mode, fftw_flags);
  // (Every rank sees the same size, so every rank raises the same error.)
  if (halved_axis < 0 || halved_axis > 2)
    throw ValueError("halved_axis must be 0, 1 or 2, not " + std::to_string(halved_axis));
  if (halved_axis != 0 && P != 1)
    throw ValueError("halving axis " + std::to_string(halved_axis) +
                     " needs a single rank (across ranks the r2c runs in the first pencil stage, along x)");
  cmesh_ = spectrum_mesh(mesh, halved_axis);
  inbox_ = normalised(inbox);
  box_[4] = normalised(outbox);
  detail::check_tilings(c, mesh_, inbox_, cmesh_, box_[4]);
  storage_ = in_storage ? *in_storage : inbox_;
  std::string err;
  if (!contains(storage_, inbox_))
    err = "in_storage " + storage_.str() + " does not contain the inbox " + inbox_.str();
  else if (storage_.volume() > INT32_MAX)
    err = "in_storage too large for 32-bit local indices";
  agree_or_throw(c, err);
  if (!inbox_.empty()) {
    const auto st = strides_of(storage_, kCOrder);
    for (int d = 0; d < 3; ++d) in_offset_ += (inbox_.lo[d] - storage_.lo[d]) * st[d];
  }

  // Stages. The real x-pencil and the spectrum's x-pencil split y and z alike
  // (pencil_box(0, ...) does not depend on the x size; another halved axis
  // means one rank, where every box is the whole mesh).
  rx_ = normalised(x_pencil_box(mesh_, P, me));
  box_[1] = normalised(pencil_box(0, P, cmesh_, me));
  box_[2] = normalised(y_pencil_box(mesh_, P, me, half_));
  box_[3] = normalised(z_pencil_box(mesh_, P, me, half_));
  // When in->x is skipped the r2c reads the caller's C-order array; its output
  // (a fresh array either way) is C order if the y stage joins it (so the group
  // can reach the C-order z-pencils), else x fastest for the x->y remap.
  const bool in_x_skipped = rx_ == inbox_;
  rx_order_ = in_x_skipped ? kCOrder : Order3{1, 2, 0};
  order_[0] = kCOrder;
  order_[1] = (in_x_skipped && box_[2] == box_[1]) ? kCOrder : Order3{1, 2, 0};
  order_[2] = box_[2] == box_[1] ? order_[1] : Order3{2, 0, 1};
  order_[3] = kCOrder;
  order_[4] = kCOrder;

  remap0_ = std::make_shared<RemapPlan>(c, inbox_, rx_, rx_order_, kCOrder, storage_);
  if (!remap0_->all_identity()) exec0_ = make_executor<double>(mode, remap0_->exchange(), collective_self_via_mpi);
  for (int t = 1; t < kRemaps; ++t) {
    remaps_[t] = std::make_shared<RemapPlan>(c, box_[t], box_[t + 1], order_[t + 1], order_[t]);
    if (!remaps_[t]->all_identity())
      exec_[t] = make_executor<Complex>(mode, remaps_[t]->exchange(), collective_self_via_mpi);
  }

  // Buffers: rbuf_ holds the real x-pencil, or a storage-shaped scratch copy of the
  // caller's array when in->x is skipped; cbuf_ any spectrum stage.
  std::int64_t rsize = std::max<std::int64_t>(rx_.volume(), remap0_->identity() ? storage_.volume() : 0);
  std::int64_t csize = 1;
  for (int s = 1; s < kStages; ++s) csize = std::max(csize, box_[s].volume());
  rbuf_ = fftw_alloc_real(static_cast<size_t>(std::max<std::int64_t>(rsize, 1)));
  if (!rbuf_) throw std::bad_alloc();
  count_buffer_allocation();
  for (auto& b : cbuf_) {
    b = reinterpret_cast<Complex*>(fftw_malloc(sizeof(Complex) * static_cast<size_t>(csize)));
    if (!b) throw std::bad_alloc();
    count_buffer_allocation();
  }

  // Groups of stages joined by skipped remaps; stage 1's group is the real one.
  group_first_[1] = 1;
  for (int st = 2; st <= 3; ++st) group_first_[st] = remaps_[st - 1]->identity() ? group_first_[st - 1] : st;
  group_last_[3] = 3;
  for (int st = 2; st >= 1; --st) group_last_[st] = remaps_[st]->identity() ? group_last_[st + 1] : st;

  // Plans are made on our buffers (scratch: FFTW_MEASURE overwrites them) and run
  // on whichever arrays hold the stage when their alignment matches (else through
  // an internal copy). The real group's real side is the caller's storage layout
  // (at in_offset_) when in->x is skipped, else the [y][z][x] x-pencil.
  if (!rx_.empty()) {
    const bool storage = remap0_->identity();
    const auto rs = storage ? strides_of(storage_, kCOrder) : strides_of(rx_, rx_order_);
    const auto cs = strides_of(box_[1], order_[1]);
    double* r = rbuf_ + (storage ? in_offset_ : 0);
    for (int d = 0; d < 2; ++d) {
      real_plans_[d] =
          detail::plan_real_axes(rx_.shape(), rs, cs, group_last_[1] - 1, half_, r, cbuf_[0], d == 0, flags_);
      if (!real_plans_[d]) err = "FFTW could not plan the real-to-complex transforms";
    }
  }
  for (int st = 2; st <= 3; ++st) {
    if (group_first_[st] != st || box_[st].empty()) continue;
    const int last = group_last_[st];
    // Out-of-place plans for a group that writes the caller's output (forward) /
    // reads the caller's input (backward); as in FFT3d, not for a single strided axis.
    const bool edge = last == 3 && remaps_[3]->identity();
    const bool oop_ok = last > st || order_[st][2] == st - 1;
    for (int d = 0; d < 2; ++d) {
      const int sign = d == 0 ? FFTW_FORWARD : FFTW_BACKWARD;
      plans_[st][d] = detail::plan_dft_axes(box_[st], order_[st], st - 1, last - 1, cbuf_[0], cbuf_[0], sign, flags_);
      if (!plans_[st][d]) err = "FFTW could not plan the 1-D transforms";
      if (edge && oop_ok) {
        oop_[st][d] = detail::plan_dft_axes(box_[st], order_[st], st - 1, last - 1, cbuf_[0], cbuf_[1], sign, flags_);
        if (!oop_[st][d]) err = "FFTW could not plan the 1-D transforms";
      }
    }
  }
  agree_or_throw(c, err);
}

RealFFT3d::~RealFFT3d() {
  for (auto& p : real_plans_)
    if (p) fftw_destroy_plan(p);
  for (auto* set : {&plans_, &oop_})
    for (auto& pp : *set)
      for (auto& p : pp)
        if (p) fftw_destroy_plan(p);
  if (rbuf_) fftw_free(rbuf_);
  for (auto& b : cbuf_)
    if (b) fftw_free(b);
}

const ExchangeStats& RealFFT3d::remap_stats(int t, Direction d) const {
  if (t == 0) return exec0_ ? exec0_->stats(d) : zero_stats_;
  return exec_.at(t) ? exec_[t]->stats(d) : zero_stats_;
}

void RealFFT3d::reset_stats() {
  if (exec0_) exec0_->reset_stats();
  for (auto& e : exec_)
    if (e) e->reset_stats();
  fft_seconds_ = {0, 0};
  executions_ = {0, 0};
  unaligned_copies_ = 0;
}

std::string RealFFT3d::fft_groups() const {
  std::string s;
  for (int st = 1; st <= 3; ++st) {
    if (group_first_[st] != st) continue;
    if (!s.empty()) s += ",";
    for (int k = st; k <= group_last_[st]; ++k) s += "xyz"[k - 1];
  }
  return s;
}

bool RealFFT3d::aligned_like(const void* p, const void* planned) const {
  return fftw_alignment_of(reinterpret_cast<double*>(const_cast<void*>(p))) ==
         fftw_alignment_of(reinterpret_cast<double*>(const_cast<void*>(planned)));
}

void RealFFT3d::copy_inbox(const double* src, double* dst) const {
  if (inbox_.empty() || src == dst) return;
  const auto st = strides_of(storage_, kCOrder);
  const std::int64_t off = in_offset_, sx = st[0], sy = st[1];
  const int ny = inbox_.size(1), nz = inbox_.size(2);
  Kokkos::parallel_for(Range(0, inbox_.volume()), [=](const std::int64_t i) {
    const std::int64_t z = i % nz, y = (i / nz) % ny, x = i / (std::int64_t(nz) * ny);
    const std::int64_t k = off + x * sx + y * sy + z;
    dst[k] = src[k];
  });
}

void RealFFT3d::scale_inbox(double* data, double s) const {
  if (inbox_.empty()) return;
  if (storage_ == inbox_) return detail::scale_elements(data, inbox_.volume(), s);
  const auto st = strides_of(storage_, kCOrder);
  const std::int64_t off = in_offset_, sx = st[0], sy = st[1];
  const int ny = inbox_.size(1), nz = inbox_.size(2);
  Kokkos::parallel_for(Range(0, inbox_.volume()), [=](const std::int64_t i) {
    const std::int64_t z = i % nz, y = (i / nz) % ny, x = i / (std::int64_t(nz) * ny);
    data[off + x * sx + y * sy + z] *= s;
  });
}

void RealFFT3d::r2c(const double* src, bool from_storage, Complex* dst) {
  const fftw_plan p = real_plans_[0];
  if (!p) return;
  double* planned = rbuf_ + (from_storage ? in_offset_ : 0);
  const double* s = src;
  if (!aligned_like(s, planned)) {  // only a caller's array can be misaligned
    copy_inbox(src - in_offset_, rbuf_);
    s = planned;
    ++unaligned_copies_;
  }
  const bool dst_ok = aligned_like(dst, cbuf_[0]);
  Complex* d = dst_ok ? dst : cbuf_[0];
  {
    ScopedTimer timer(fft_seconds_[0]);
    // r2c out of place preserves its input (FFTW's default for r2c).
    fftw_execute_dft_r2c(p, const_cast<double*>(s), as_fftw(d));
  }
  if (!dst_ok) {
    copy_elements(cbuf_[0], dst, box_[1].volume());
    ++unaligned_copies_;
  }
}

void RealFFT3d::c2r(Complex* src, double* dst, bool to_storage) {
  const fftw_plan p = real_plans_[1];
  if (!p) return;
  double* planned = rbuf_ + (to_storage ? in_offset_ : 0);
  Complex* s = src;
  if (!aligned_like(s, cbuf_[0])) {
    copy_elements(src, cbuf_[0], box_[1].volume());
    s = cbuf_[0];
    ++unaligned_copies_;
  }
  const bool dst_ok = aligned_like(dst, planned);
  double* d = dst_ok ? dst : planned;
  {
    ScopedTimer timer(fft_seconds_[1]);
    fftw_execute_dft_c2r(p, as_fftw(s), d);  // overwrites s
  }
  if (!dst_ok) {
    copy_inbox(rbuf_, dst - in_offset_);
    ++unaligned_copies_;
  }
}

void RealFFT3d::fft_in_place(int stage, Complex* data, Direction d) {
  execute_in_place(plans_[stage][static_cast<int>(d)], data, fft_seconds_[static_cast<int>(d)]);
}

void RealFFT3d::fft_out_of_place(int stage, const Complex* src, Complex* dst, Direction d) {
  const int k = static_cast<int>(d);
  execute_out_of_place(plans_[stage][k], oop_[stage][k], aligned_like(src, cbuf_[0]) && aligned_like(dst, cbuf_[1]),
                       src, dst, box_[stage].volume(), cbuf_, fft_seconds_[k]);
}

// Data flow as in FFT3d: `cur` is the current stage's data, in one of our buffers
// or the caller's output; each group runs once, in place on our buffers or out of
// place into the caller's output.
void RealFFT3d::forward(const double* in, Complex* out) {
  const double* rsrc = in + in_offset_;
  const bool from_storage = remap0_->identity();
  if (!from_storage) {
    exec0_->execute(in, rbuf_, Direction::Forward);
    rsrc = rbuf_;
  }
  Complex* dst = (group_last_[1] == 3 && remaps_[3]->identity()) ? out : cbuf_[0];
  r2c(rsrc, from_storage, dst);
  const Complex* cur = dst;
  for (int t = 1; t < kRemaps; ++t) {
    const bool last = t == kRemaps - 1;
    if (!remaps_[t]->identity()) {
      Complex* next = last ? out : other_buffer(cur);
      exec_[t]->execute(cur, next, Direction::Forward);
      cur = next;
    } else if (last && cur != out) {
      copy_elements(cur, out, box_[4].volume());
      cur = out;
    }
    if (last) break;
    const int s = t + 1;
    if (group_first_[s] != s) continue;  // transformed with its group already
    if (group_last_[s] == 3 && remaps_[3]->identity()) {
      fft_out_of_place(s, cur, out, Direction::Forward);
      cur = out;
    } else {
      fft_in_place(s, const_cast<Complex*>(cur), Direction::Forward);
    }
  }
  executions_[0] += 1;
}

void RealFFT3d::backward(const Complex* in, double* out, bool normalise) {
  backward_impl(in, out, normalise, false);
}

void RealFFT3d::backward_destroying_input(Complex* in, double* out, bool normalise) {
  backward_impl(in, out, normalise, true);
}

void RealFFT3d::backward_impl(const Complex* in, double* out, bool normalise, bool may_destroy) {
  const Complex* cur = in;
  bool user = true;
  for (int t = kRemaps - 1; t >= 1; --t) {
    if (!remaps_[t]->identity()) {
      Complex* next = user ? cbuf_[0] : other_buffer(cur);
      exec_[t]->execute(cur, next, Direction::Reverse);
      cur = next;
      user = false;
    }
    if (group_last_[t] != t) continue;  // transformed with its group already
    const int g = group_first_[t];
    if (g == 1) break;  // the real group, below; the remaps before it are skipped
    if (user) {
      fft_out_of_place(g, cur, cbuf_[0], Direction::Reverse);
      cur = cbuf_[0];
      user = false;
    } else {
      fft_in_place(g, const_cast<Complex*>(cur), Direction::Reverse);
    }
  }
  // c2r overwrites its input: the caller's array only when allowed.
  Complex* src = const_cast<Complex*>(cur);
  if (user && !may_destroy) {
    copy_elements(cur, cbuf_[0], box_[1].volume());
    src = cbuf_[0];
  }
  const bool to_storage = remap0_->identity();
  c2r(src, to_storage ? out + in_offset_ : rbuf_, to_storage);
  if (!to_storage) exec0_->execute(rbuf_, out, Direction::Reverse);
  if (normalise) scale_inbox(out, 1.0 / (static_cast<double>(mesh_[0]) * mesh_[1] * mesh_[2]));
  executions_[1] += 1;
}

}  // namespace fft
}  // namespace pmewald
