#include "fft/pencil_pipeline.hpp"

#include <algorithm>
#include <new>
#include <string>

#include "base/compute_model.hpp"
#include "base/errors.hpp"
#include "base/timers.hpp"
#include "comm/mpi_helpers.hpp"
#include "fft/fftw_plans.hpp"

namespace pmewald {
inline namespace fft {

using detail::copy_elements;

void check_mesh_and_options(MPI_Comm c, const Int3& mesh, const FFTOptions& o) {
  std::string err;
  for (int d = 0; d < 3; ++d)
    if (mesh[d] < 1) err = "mesh dimensions must be positive";
  // The global volume may exceed 2^31 (sizes are 64-bit); the 32-bit limit is per
  // rank, on each box a rank stores (checked by RemapPlan and ExchangePlan).
  agree_or_throw(c, err);
  if (!same_on_all_ranks(c, {double(mesh[0]), double(mesh[1]), double(mesh[2]), double(static_cast<int>(o.mode)),
                             double(o.fftw_flags)}))
    agree_or_throw(c, "the mesh, comm_mode and FFTW flags must be the same on every rank");
}

std::pair<std::vector<Box3>, std::vector<Box3>> gather_boxes(MPI_Comm c, const Box3& inbox, const Int3& in_mesh,
                                                              const Box3& outbox, const Int3& out_mesh) {
  int me = 0, P = 1;
  MPI_Comm_rank(c, &me);
  MPI_Comm_size(c, &P);
  const Box3 in = normalised(inbox), out = normalised(outbox);
  int mine[12];
  for (int d = 0; d < 3; ++d) {
    mine[d] = in.lo[d];
    mine[3 + d] = in.hi[d];
    mine[6 + d] = out.lo[d];
    mine[9 + d] = out.hi[d];
  }
  std::vector<int> all(static_cast<size_t>(12) * P);
  check_mpi(MPI_Allgather(mine, 12, MPI_INT, all.data(), 12, MPI_INT, c), "MPI_Allgather");
  std::vector<Box3> ins(static_cast<size_t>(P)), outs(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r)
    for (int d = 0; d < 3; ++d) {
      ins[r].lo[d] = all[12 * r + d];
      ins[r].hi[d] = all[12 * r + 3 + d];
      outs[r].lo[d] = all[12 * r + 6 + d];
      outs[r].hi[d] = all[12 * r + 9 + d];
    }
  // Every rank would judge the same gathered boxes alike: rank 0 judges (an O(P^2)
  // check, so not P times over), and every rank raises its verdict.
  agree_or_throw(c, me == 0 ? tiling_problem(ins, in_mesh, outs, out_mesh) : std::string());
  return {std::move(ins), std::move(outs)};
}

PencilPipeline::PencilPipeline(MPI_Comm comm, const FFTStages& all, int first_remap, const FFTOptions& opt)
    : t0_(first_remap), options_(opt) {
  int me = 0;
  MPI_Comm_rank(comm, &me);
  s_ = all.ranks.at(static_cast<size_t>(me));
  for (int t = t0_; t < 4; ++t) {
    remaps_[t] = std::make_shared<RemapPlan>(comm, all.remap_layout(t));
    if (!remaps_[t]->all_identity())
      exec_[t] = make_executor<Complex>(opt.mode, remaps_[t]->exchange(), opt.collective_self_via_mpi);
  }
  for (int st = t0_; st < 5; ++st) buf_size_ = std::max(buf_size_, s_.box[st].volume());
  buf_size_ = std::max<std::int64_t>(buf_size_, 1);
  // Out of memory on one rank must not leave the others in the agreement below:
  // it becomes this rank's error (planning is skipped).
  std::string err;
  for (auto& b : buf_) {
    b = reinterpret_cast<Complex*>(fftw_malloc(sizeof(Complex) * static_cast<size_t>(buf_size_)));
    if (!b) {
      err = "out of memory: could not allocate the FFT work buffers (" +
            std::to_string(sizeof(Complex) * static_cast<std::uint64_t>(buf_size_)) + " bytes each)";
      break;
    }
    count_buffer_allocation();
  }
  // Plans are made on buf_[0] (a scratch array: FFTW_MEASURE overwrites it) and
  // executed with fftw_execute_dft on whichever buffer holds the stage; both
  // buffers come from fftw_malloc, so their alignment matches. A group reads the
  // caller's input (forward) / writes the caller's output (backward) when in->x is
  // skipped in a complex FFT, likewise at the z end. Out-of-place plans serve those
  // cases, except a single strided axis, where FFTW out of place is slow (measured:
  // 4x at 128^3): copy + in place is used there.
  for (int st = t0_ + 1; st <= 3 && err.empty(); ++st) {
    if (s_.group_first[st] != st || s_.box[st].empty()) continue;
    const int last = s_.group_last[st];
    const bool edge = (st == 1 && s_.identity[0]) || (last == 3 && s_.identity[3]);
    const bool oop_ok = last > st || s_.order[st][2] == st - 1;
    for (int d = 0; d < 2; ++d) {
      const int sign = d == 0 ? FFTW_FORWARD : FFTW_BACKWARD;
      plans_[st][d] = detail::plan_dft_axes(s_.box[st], s_.order[st], st - 1, last - 1, buf_[0], buf_[0], sign,
                                            opt.fftw_flags);
      if (!plans_[st][d]) err = "FFTW could not plan the 1-D transforms";
      if (edge && oop_ok) {
        oop_[st][d] = detail::plan_dft_axes(s_.box[st], s_.order[st], st - 1, last - 1, buf_[0], buf_[1], sign,
                                            opt.fftw_flags);
        if (!oop_[st][d]) err = "FFTW could not plan the 1-D transforms";
      }
    }
  }
  try {
    agree_or_throw(comm, err);
  } catch (...) {
    release();  // a constructor that throws runs no destructor
    throw;
  }
}

PencilPipeline::~PencilPipeline() { release(); }

void PencilPipeline::release() {
  for (auto* set : {&plans_, &oop_})
    for (auto& pp : *set)
      for (auto& p : pp) destroy_fftw_plan(p);  // nulls p
  for (auto& b : buf_) {
    if (b) fftw_free(b);
    b = nullptr;
  }
}

const ExchangeStats& PencilPipeline::remap_stats(int t, Direction d) const {
  return exec_.at(t) ? exec_[t]->stats(d) : zero_stats_;
}

void PencilPipeline::reset_stats() {
  for (auto& e : exec_)
    if (e) e->reset_stats();
  fft_seconds_ = {0, 0};
}

bool PencilPipeline::aligned_like_buffers(const void* p) const {
  return fftw_alignment_of(reinterpret_cast<double*>(const_cast<void*>(p))) ==
         fftw_alignment_of(reinterpret_cast<double*>(buf_[0]));
}

void PencilPipeline::fft_in_place(int stage, Complex* data, Direction d) {
  detail::execute_in_place(plans_[stage][static_cast<int>(d)], data, fft_seconds_[static_cast<int>(d)]);
}

void PencilPipeline::fft_out_of_place(int stage, const Complex* src, Complex* dst, Direction d) {
  const int k = static_cast<int>(d);
  detail::execute_out_of_place(plans_[stage][k], oop_[stage][k], aligned_like_buffers(src) && aligned_like_buffers(dst),
                               src, dst, s_.box[stage].volume(), buf_, fft_seconds_[k]);
}

// Remap t of the current data in direction d: into the caller's `out` when it is the
// last step, else into a buffer; an identity here moves nothing (but the last step
// still leaves the result in `out`).
void PencilPipeline::remap_step(int t, Direction d, bool last, Complex* out, const Complex*& cur, bool& user,
                                Overlap* overlap) {
  if (!s_.identity[t]) {
    Complex* next = last ? out : (user ? buf_[0] : other_buffer(cur));
    exchange(*exec_[t], cur, next, d, UnpackOp::Assign, overlap);
    cur = next;
    user = last;
  } else if (last && cur != out) {
    copy_elements(cur, out, s_.box[d == Direction::Forward ? 4 : 0].volume());
    cur = out;
  }
}

// The FFT group whose plans live at stage g, in direction d: out of place into the
// caller's `out` (to_out) or out of the caller's array into a buffer, else in place.
void PencilPipeline::group_step(int g, Direction d, bool to_out, Complex* out, const Complex*& cur, bool& user) {
  {
    // The group's work: its points once per axis it transforms (base/compute_model.hpp),
    // inside the 1-D transforms' timer (modelled time is spent in the charge).
    ScopedTimer timer(fft_seconds_[static_cast<int>(d)]);
    charge(Work::FFT, static_cast<double>(s_.box[g].volume()) * (s_.group_last[g] - s_.group_first[g] + 1));
  }
  if (user || to_out) {
    Complex* dst = to_out ? out : (user ? buf_[0] : other_buffer(cur));
    fft_out_of_place(g, cur, dst, d);
    cur = dst;
    user = to_out;
  } else {
    fft_in_place(g, const_cast<Complex*>(cur), d);
  }
}

void PencilPipeline::set_mode(CommMode mode) {
  options_.mode = mode;
  for (int t = t0_; t < 4; ++t) {
    if (!exec_[t] || exec_[t]->mode() == mode) continue;
    exec_[t].reset();
    exec_[t] = make_executor<Complex>(mode, remaps_[t]->exchange(), options_.collective_self_via_mpi);
  }
}

void PencilPipeline::forward(const Complex* in, bool in_is_caller, Complex* out, Overlap* overlap) {
  const Complex* cur = in;
  bool user = in_is_caller;
  for (int t = t0_; t < 4; ++t) {
    const bool last = t == 3;
    remap_step(t, Direction::Forward, last, out, cur, user, overlap);
    if (last) break;
    const int s = t + 1;
    if (s_.group_first[s] != s) continue;  // transformed with its group already
    group_step(s, Direction::Forward, s_.group_last[s] == 3 && s_.identity[3], out, cur, user);
  }
}

std::pair<Complex*, bool> PencilPipeline::backward(const Complex* in, Complex* out, Overlap* overlap) {
  const Complex* cur = in;
  bool user = true;
  for (int t = 3; t >= t0_; --t) {
    const bool last = t == 0;  // only a complex FFT's remap 0 writes the caller's output
    remap_step(t, Direction::Reverse, last, out, cur, user, overlap);
    if (last) break;
    if (s_.group_last[t] != t) continue;  // transformed with its group already
    const int g = s_.group_first[t];      // plans live at the group's first stage
    if (g <= t0_) break;                  // the real stage's group: the caller's
    group_step(g, Direction::Reverse, g == 1 && s_.identity[0], out, cur, user);
  }
  return {const_cast<Complex*>(cur), user};
}

}  // namespace fft
}  // namespace pmewald
