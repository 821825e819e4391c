#include "fft/fftw_plans.hpp"

#include "base/timers.hpp"

namespace pmewald {
inline namespace fft {
namespace detail {

fftw_plan plan_dft_axes(const Box3& box, const Order3& order, int first, int last, Complex* data, Complex* out,
                        int sign, unsigned flags) {
  const std::lock_guard<std::mutex> lock(fftw_planner_mutex());
  const auto st = strides_of(box, order);
  fftw_complex* p = as_fftw(data);
  fftw_complex* q = as_fftw(out);
  if (first == last && order[2] == first) {
    const int n = box.size(first);
    const int lines = static_cast<int>(box.volume() / n);
    return fftw_plan_many_dft(1, &n, lines, p, nullptr, 1, n, q, nullptr, 1, n, sign, flags);
  }
  fftw_iodim64 dims[3], many[3];
  int nd = 0, nm = 0;
  for (int pos = 0; pos < 3; ++pos) {  // slowest first, as FFTW prefers
    const int a = order[pos];
    const fftw_iodim64 d{box.size(a), st[a], st[a]};
    if (a >= first && a <= last)
      dims[nd++] = d;
    else
      many[nm++] = d;
  }
  return fftw_plan_guru64_dft(nd, dims, nm, many, p, q, sign, flags);
}

fftw_plan plan_real_axes(const Int3& n, const std::array<std::int64_t, 3>& rs, const std::array<std::int64_t, 3>& cs,
                         int last, int halved, double* real, Complex* cplx, bool forward, unsigned flags) {
  const std::lock_guard<std::mutex> lock(fftw_planner_mutex());
  const int h = n[0] / 2 + 1;
  if (last == 0 && halved == 0 && rs[0] == 1 && cs[0] == 1) {
    // Contiguous lines along x: the batched interface, with one batch stride when
    // the other two axes are dense (y and z lines back to back).
    const std::int64_t ny = n[1], nz = n[2];
    const bool z_inner = rs[2] == n[0] && cs[2] == h && rs[1] == n[0] * nz && cs[1] == h * nz;
    const bool y_inner = rs[1] == n[0] && cs[1] == h && rs[2] == n[0] * ny && cs[2] == h * ny;
    if (z_inner || y_inner) {
      const int lines = static_cast<int>(ny * nz);
      return forward ? fftw_plan_many_dft_r2c(1, &n[0], lines, real, nullptr, 1, n[0], as_fftw(cplx), nullptr, 1, h,
                                              flags)
                     : fftw_plan_many_dft_c2r(1, &n[0], lines, as_fftw(cplx), nullptr, 1, h, real, nullptr, 1, n[0],
                                              flags);
    }
  }
  // Guru: the halved axis must come last among the transform dimensions.
  fftw_iodim64 dims[3], many[3];
  int nd = 0, nm = 0;
  auto dim = [&](int a) { return forward ? fftw_iodim64{n[a], rs[a], cs[a]} : fftw_iodim64{n[a], cs[a], rs[a]}; };
  for (int a = 0; a < 3; ++a) {
    if (a == halved) continue;
    if (a <= last)
      dims[nd++] = dim(a);
    else
      many[nm++] = dim(a);
  }
  dims[nd++] = dim(halved);
  return forward ? fftw_plan_guru64_dft_r2c(nd, dims, nm, many, real, as_fftw(cplx), flags)
                 : fftw_plan_guru64_dft_c2r(nd, dims, nm, many, as_fftw(cplx), real, flags);
}

void execute_in_place(fftw_plan in_place, Complex* data, double& seconds) {
  if (!in_place) return;
  ScopedTimer timer(seconds);
  fftw_execute_dft(in_place, as_fftw(data), as_fftw(data));
}

void execute_out_of_place(fftw_plan in_place, fftw_plan out_of_place, bool aligned, const Complex* src,
                          Complex* dst, std::int64_t n, Complex* const buffers[2], double& seconds) {
  if (n == 0) return;
  if (out_of_place && src != dst && aligned) {
    ScopedTimer timer(seconds);
    // FFTW's out-of-place complex transforms preserve their input by default.
    fftw_execute_dft(out_of_place, as_fftw(src), as_fftw(dst));
    return;
  }
  auto ours = [&](const Complex* q) { return q == buffers[0] || q == buffers[1]; };
  Complex* work = ours(dst) ? dst : (ours(src) ? const_cast<Complex*>(src) : buffers[0]);
  copy_elements(src, work, n);
  execute_in_place(in_place, work, seconds);
  copy_elements(work, dst, n);
}

}  // namespace detail
}  // namespace fft
}  // namespace pmewald
