#include "fft3d.hpp"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "decomposition.hpp"
#include "errors.hpp"

namespace pmewald {

namespace {

double now() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

fftw_complex* as_fftw(Complex* p) { return reinterpret_cast<fftw_complex*>(p); }

void copy_elements(const Complex* src, Complex* dst, std::int64_t n) {
  if (n <= 0 || src == dst) return;
  Kokkos::parallel_for(Range(0, n), [=](const std::int64_t i) { dst[i] = src[i]; });
}

void scale_elements(Complex* data, std::int64_t n, double s) {
  if (n <= 0) return;
  Kokkos::parallel_for(Range(0, n), [=](const std::int64_t i) { data[i] *= s; });
}

Box3 normalised(Box3 b) {
  if (b.empty()) b.hi = b.lo;
  return b;
}

// In-place plan of the 1-D transforms along `axis` of `box` stored in `order` on
// `data`: fftw_plan_many_dft when the lines are contiguous, guru64 otherwise.
fftw_plan plan_axis(const Box3& box, const Order3& order, int axis, Complex* data, int sign, unsigned flags) {
  const auto st = strides_of(box, order);
  const int n = box.size(axis);
  const std::int64_t lines = box.volume() / n;
  fftw_complex* p = as_fftw(data);
  if (order[2] == axis) {
    return fftw_plan_many_dft(1, &n, static_cast<int>(lines), p, nullptr, 1, n, p, nullptr, 1, n, sign, flags);
  }
  fftw_iodim64 dim{n, st[axis], st[axis]};
  fftw_iodim64 many[2];
  int k = 0;
  for (int pos = 0; pos < 3; ++pos) {  // slowest first
    const int a = order[pos];
    if (a == axis) continue;
    many[k++] = fftw_iodim64{box.size(a), st[a], st[a]};
  }
  return fftw_plan_guru64_dft(1, &dim, 2, many, p, p, sign, flags);
}

}  // namespace

Box3 FFT3d::x_pencil_box(const Int3& mesh, int nranks, int rank) { return pencil_box(0, nranks, mesh, rank); }
Box3 FFT3d::y_pencil_box(const Int3& mesh, int nranks, int rank) { return pencil_box(1, nranks, mesh, rank); }
Box3 FFT3d::z_pencil_box(const Int3& mesh, int nranks, int rank) { return pencil_box(2, nranks, mesh, rank); }

std::string FFT3d::remap_name(int t, Direction d) {
  static const char* names[2][kRemaps] = {{"in->x", "x->y", "y->z", "z->out"}, {"x->in", "y->x", "z->y", "out->z"}};
  return names[static_cast<int>(d)][t];
}

FFT3d::FFT3d(MPI_Comm comm, const Int3& mesh, const Box3& inbox, const Box3& outbox, CommMode mode,
             unsigned fftw_flags)
    : comm_(comm), mesh_(mesh), mode_(mode), flags_(fftw_flags) {
  const MPI_Comm c = comm_.get();
  const int me = comm_.rank(), P = comm_.size();
  std::string err;
  for (int d = 0; d < 3; ++d)
    if (mesh[d] < 1) err = "mesh dimensions must be positive";
  if (err.empty() && static_cast<std::int64_t>(mesh[0]) * mesh[1] * mesh[2] > INT32_MAX)
    err = "mesh too large for 32-bit local indices";
  agree_or_throw(c, err);
  if (!same_on_all_ranks(c, {double(mesh[0]), double(mesh[1]), double(mesh[2]), double(static_cast<int>(mode)),
                             double(fftw_flags)}))
    agree_or_throw(c, "the mesh, comm_mode and FFTW flags must be the same on every rank");

  // Tilings, checked together so every rank raises the same error.
  box_[0] = normalised(inbox);
  box_[4] = normalised(outbox);
  {
    int mine[12];
    for (int d = 0; d < 3; ++d) {
      mine[d] = box_[0].lo[d];
      mine[3 + d] = box_[0].hi[d];
      mine[6 + d] = box_[4].lo[d];
      mine[9 + d] = box_[4].hi[d];
    }
    std::vector<int> all(static_cast<size_t>(12) * P);
    check_mpi(MPI_Allgather(mine, 12, MPI_INT, all.data(), 12, MPI_INT, c), "MPI_Allgather");
    std::vector<Box3> ins(P), outs(P);
    for (int r = 0; r < P; ++r)
      for (int d = 0; d < 3; ++d) {
        ins[r].lo[d] = all[12 * r + d];
        ins[r].hi[d] = all[12 * r + 3 + d];
        outs[r].lo[d] = all[12 * r + 6 + d];
        outs[r].hi[d] = all[12 * r + 9 + d];
      }
    std::string why;
    if (!tiles_exactly(ins, mesh, &why))
      err = "inbox boxes do not tile the mesh: " + why;
    else if (!tiles_exactly(outs, mesh, &why))
      err = "outbox boxes do not tile the mesh: " + why;
    // Same verdict on every rank (all ranks judged the same gathered boxes); agree anyway.
    agree_or_throw(c, me == 0 ? err : std::string());
  }

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
    if (!remaps_[t]->all_identity()) exec_[t] = make_executor<Complex>(mode, remaps_[t]->exchange());
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
  for (int s = 1; s <= 3; ++s) {
    if (box_[s].empty()) continue;
    plans_[s][0] = plan_axis(box_[s], order_[s], s - 1, buf_[0], FFTW_FORWARD, flags_);
    plans_[s][1] = plan_axis(box_[s], order_[s], s - 1, buf_[0], FFTW_BACKWARD, flags_);
    if (!plans_[s][0] || !plans_[s][1]) err = "FFTW could not plan the 1-D transforms";
  }
  agree_or_throw(c, err);
}

FFT3d::~FFT3d() {
  for (auto& pp : plans_)
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

void FFT3d::run_ffts(int stage, Complex* data, Direction d) {
  const fftw_plan p = plans_[stage][static_cast<int>(d)];
  if (!p) return;
  const double t0 = now();
  fftw_execute_dft(p, as_fftw(data), as_fftw(data));
  fft_seconds_[static_cast<int>(d)] += now() - t0;
}

void FFT3d::forward(const Complex* in, Complex* out) {
  const Complex* cur = in;  // where stage t's data lives
  bool in_user = true;
  for (int t = 0; t < kRemaps; ++t) {
    const bool last = t == kRemaps - 1;
    Complex* next = last ? out : (cur == buf_[0] ? buf_[1] : buf_[0]);
    if (!remaps_[t]->identity()) {
      exec_[t]->execute(cur, next, Direction::Forward);
      cur = next;
      in_user = last;
    } else if (last || in_user) {
      // Nothing moves between ranks, but the data must leave the caller's input
      // (FFTs run in our buffers) or reach the caller's output.
      copy_elements(cur, next, box_[t + 1].volume());
      cur = next;
      in_user = last;
    }
    if (!last) run_ffts(t + 1, const_cast<Complex*>(cur), Direction::Forward);
  }
  executions_[0] += 1;
}

void FFT3d::backward(const Complex* in, Complex* out) {
  const Complex* cur = in;
  bool in_user = true;
  for (int t = kRemaps - 1; t >= 0; --t) {
    const bool last = t == 0;
    Complex* next = last ? out : (cur == buf_[0] ? buf_[1] : buf_[0]);
    if (!remaps_[t]->identity()) {
      exec_[t]->execute(cur, next, Direction::Reverse);
      cur = next;
      in_user = last;
    } else if (last || in_user) {
      copy_elements(cur, next, box_[t].volume());
      cur = next;
      in_user = last;
    }
    if (!last) run_ffts(t, const_cast<Complex*>(cur), Direction::Reverse);
  }
  scale_elements(out, box_[0].volume(), 1.0 / (static_cast<double>(mesh_[0]) * mesh_[1] * mesh_[2]));
  executions_[1] += 1;
}

std::vector<double> fftw_serial_pair_times(const Int3& mesh, int repeats, unsigned flags) {
  const size_t n = static_cast<size_t>(mesh[0]) * mesh[1] * mesh[2];
  fftw_complex* a = fftw_alloc_complex(n);
  fftw_complex* b = fftw_alloc_complex(n);
  fftw_plan f = fftw_plan_dft_3d(mesh[0], mesh[1], mesh[2], a, b, FFTW_FORWARD, flags);
  fftw_plan g = fftw_plan_dft_3d(mesh[0], mesh[1], mesh[2], b, a, FFTW_BACKWARD, flags);
  for (size_t i = 0; i < n; ++i) {
    a[i][0] = static_cast<double>(i % 17) - 8.0;
    a[i][1] = static_cast<double>(i % 5) - 2.0;
  }
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = now();
    fftw_execute(f);
    fftw_execute(g);
    times.push_back(now() - t0);
    const double s = 1.0 / static_cast<double>(n);  // keep values bounded (not timed)
    for (size_t i = 0; i < n; ++i) {
      a[i][0] *= s;
      a[i][1] *= s;
    }
  }
  fftw_destroy_plan(f);
  fftw_destroy_plan(g);
  fftw_free(a);
  fftw_free(b);
  return times;
}

}  // namespace pmewald
