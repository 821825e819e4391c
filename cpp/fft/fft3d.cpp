#include "fft/fft3d.hpp"

#include <algorithm>
#include <sstream>

#include "geometry/decomposition.hpp"
#include "base/errors.hpp"
#include "fft/fftw_plans.hpp"

namespace pmewald {
inline namespace fft {

using detail::as_fftw;
using detail::copy_elements;
using detail::execute_in_place;
using detail::execute_out_of_place;
using detail::normalised;
using detail::scale_elements;

Box3 FFT3d::x_pencil_box(const Int3& mesh, int nranks, int rank) { return pencil_box(0, nranks, mesh, rank); }
Box3 FFT3d::y_pencil_box(const Int3& mesh, int nranks, int rank) { return pencil_box(1, nranks, mesh, rank); }
Box3 FFT3d::z_pencil_box(const Int3& mesh, int nranks, int rank) { return pencil_box(2, nranks, mesh, rank); }

std::string FFT3d::remap_name(int t, Direction d) {
  static const char* names[2][kRemaps] = {{"in->x", "x->y", "y->z", "z->out"}, {"x->in", "y->x", "z->y", "out->z"}};
  return names[static_cast<int>(d)][t];
}

FFT3d::FFT3d(MPI_Comm comm, const Int3& mesh, const Box3& inbox, const Box3& outbox, CommMode mode,
             unsigned fftw_flags, bool collective_self_via_mpi)
    : comm_(comm), mesh_(mesh), mode_(mode), flags_(fftw_flags) {
  const MPI_Comm c = comm_.get();
  const int me = comm_.rank(), P = comm_.size();
  detail::check_mesh_and_options(c, mesh, mode, fftw_flags);
  // Tilings, checked together so every rank raises the same error.
  box_[0] = normalised(inbox);
  box_[4] = normalised(outbox);
  detail::check_tilings(c, mesh, box_[0], mesh, box_[4]);
  std::string err;

  box_[1] = normalised(x_pencil_box(mesh, P, me));
  box_[2] = normalised(y_pencil_box(mesh, P, me));
  box_[3] = normalised(z_pencil_box(mesh, P, me));
  order_[0] = kCOrder;
  order_[1] = box_[1] == box_[0] ? order_[0] : Order3{1, 2, 0};
  order_[2] = box_[2] == box_[1] ? order_[1] : Order3{2, 0, 1};
  order_[3] = kCOrder;
  order_[4] = kCOrder;

  for (int t = 0; t < kRemaps; ++t) {
    remaps_[t] = std::make_shared<RemapPlan>(c, box_[t], box_[t + 1], order_[t + 1], order_[t]);
    if (!remaps_[t]->all_identity()) exec_[t] = make_executor<Complex>(mode, remaps_[t]->exchange(), collective_self_via_mpi);
  }

  for (const Box3& b : box_) buf_size_ = std::max(buf_size_, b.volume());
  buf_size_ = std::max<std::int64_t>(buf_size_, 1);
  for (auto& b : buf_) {
    b = reinterpret_cast<Complex*>(fftw_malloc(sizeof(Complex) * static_cast<size_t>(buf_size_)));
    if (!b) throw std::bad_alloc();
    count_buffer_allocation();
  }
  // Plans are made on buf_[0] (a scratch array: FFTW_MEASURE overwrites it) and
  // executed with fftw_execute_dft on whichever buffer holds the stage; both
  // buffers come from fftw_malloc, so their alignment matches.
  // Runs of FFT stages joined by skipped remaps become one FFTW plan (group).
  for (int st = 1; st <= 3; ++st) {
    group_first_[st] = (st > 1 && remaps_[st - 1]->identity()) ? group_first_[st - 1] : st;
  }
  for (int st = 3; st >= 1; --st) {
    group_last_[st] = (st < 3 && remaps_[st]->identity()) ? group_last_[st + 1] : st;
  }
  for (int st = 1; st <= 3; ++st) {
    if (group_first_[st] != st || box_[st].empty()) continue;
    const int last = group_last_[st];
    // The group reads the caller's input (forward) / writes the caller's output
    // (backward) when in->x is skipped, likewise at the z end. Out-of-place plans
    // serve those cases, except a single strided axis, where FFTW out of place is
    // slow (measured: 4x at 128^3): copy + in place is used there.
    const bool edge = (st == 1 && remaps_[0]->identity()) || (last == 3 && remaps_[3]->identity());
    const bool oop_ok = last > st || order_[st][2] == st - 1;
    for (int d = 0; d < 2; ++d) {
      const int sign = d == 0 ? FFTW_FORWARD : FFTW_BACKWARD;
      plans_[st][d] = detail::plan_dft_axes(box_[st], order_[st], st - 1, last - 1, buf_[0], buf_[0], sign, flags_);
      if (!plans_[st][d]) err = "FFTW could not plan the 1-D transforms";
      if (edge && oop_ok) {
        oop_[st][d] = detail::plan_dft_axes(box_[st], order_[st], st - 1, last - 1, buf_[0], buf_[1], sign, flags_);
        if (!oop_[st][d]) err = "FFTW could not plan the 1-D transforms";
      }
    }
  }
  agree_or_throw(c, err);
}

FFT3d::~FFT3d() {
  for (auto* set : {&plans_, &oop_})
    for (auto& pp : *set)
      for (auto& p : pp)
        if (p) fftw_destroy_plan(p);
  for (auto& b : buf_)
    if (b) fftw_free(b);
}

const ExchangeStats& FFT3d::remap_stats(int t, Direction d) const {
  return exec_.at(t) ? exec_[t]->stats(d) : zero_stats_;
}

void FFT3d::reset_stats() {
  for (auto& e : exec_)
    if (e) e->reset_stats();
  fft_seconds_ = {0, 0};
  executions_ = {0, 0};
}

bool FFT3d::fftw_aligned(const void* p) const {
  return fftw_alignment_of(reinterpret_cast<double*>(const_cast<void*>(p))) ==
         fftw_alignment_of(reinterpret_cast<double*>(buf_[0]));
}

void FFT3d::fft_in_place(int stage, Complex* data, Direction d) {
  execute_in_place(plans_[stage][static_cast<int>(d)], data, fft_seconds_[static_cast<int>(d)]);
}

void FFT3d::fft_out_of_place(int stage, const Complex* src, Complex* dst, Direction d) {
  const int k = static_cast<int>(d);
  execute_out_of_place(plans_[stage][k], oop_[stage][k], fftw_aligned(src) && fftw_aligned(dst), src, dst,
                       box_[stage].volume(), buf_, fft_seconds_[k]);
}

// Data flow: `cur` points at the current stage's data, which is the caller's array
// (`user`) or one of our two buffers. Remaps write into the other buffer (or the
// caller's output). Each group of FFT stages runs once, in place on our buffers,
// or out of place when it reads the caller's input or writes the caller's output.
void FFT3d::forward(const Complex* in, Complex* out) {
  const Complex* cur = in;
  bool user = true;
  for (int t = 0; t < kRemaps; ++t) {
    const bool last = t == kRemaps - 1;
    if (!remaps_[t]->identity()) {
      Complex* next = last ? out : (user ? buf_[0] : other_buffer(cur));
      exec_[t]->execute(cur, next, Direction::Forward);
      cur = next;
      user = last;
    } else if (last && cur != out) {
      copy_elements(cur, out, box_[4].volume());
      cur = out;
    }
    if (last) break;
    const int s = t + 1;
    if (group_first_[s] != s) continue;  // transformed with its group already
    const bool to_user = group_last_[s] == 3 && remaps_[3]->identity();
    if (user || to_user) {
      Complex* dst = to_user ? out : (user ? buf_[0] : other_buffer(cur));
      fft_out_of_place(s, cur, dst, Direction::Forward);
      cur = dst;
      user = to_user;
    } else {
      fft_in_place(s, const_cast<Complex*>(cur), Direction::Forward);
    }
  }
  executions_[0] += 1;
}

void FFT3d::backward(const Complex* in, Complex* out) {
  const Complex* cur = in;
  bool user = true;
  for (int t = kRemaps - 1; t >= 0; --t) {
    const bool last = t == 0;
    if (!remaps_[t]->identity()) {
      Complex* next = last ? out : (user ? buf_[0] : other_buffer(cur));
      exec_[t]->execute(cur, next, Direction::Reverse);
      cur = next;
      user = last;
    } else if (last && cur != out) {
      copy_elements(cur, out, box_[0].volume());
      cur = out;
    }
    if (last) break;
    const int s = t;
    if (group_last_[s] != s) continue;  // transformed with its group already
    const int g = group_first_[s];      // plans live at the group's first stage
    const bool to_user = g == 1 && remaps_[0]->identity();
    if (user || to_user) {
      Complex* dst = to_user ? out : (user ? buf_[0] : other_buffer(cur));
      fft_out_of_place(g, cur, dst, Direction::Reverse);
      cur = dst;
      user = to_user;
    } else {
      fft_in_place(g, const_cast<Complex*>(cur), Direction::Reverse);
    }
  }
  scale_elements(out, box_[0].volume(), 1.0 / (static_cast<double>(mesh_[0]) * mesh_[1] * mesh_[2]));
  executions_[1] += 1;
}

std::string FFT3d::fft_groups() const {
  std::string s;
  for (int st = 1; st <= 3; ++st) {
    if (group_first_[st] != st) continue;
    if (!s.empty()) s += ",";
    for (int k = st; k <= group_last_[st]; ++k) s += "xyz"[k - 1];
  }
  return s;
}

}  // namespace fft
}  // namespace pmewald
