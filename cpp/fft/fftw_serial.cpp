#include "fft/fftw_serial.hpp"

#include <stdexcept>
#include <string>

#include "base/timers.hpp"
#include "base/fftw_planner.hpp"

namespace pmewald {
inline namespace fft {

namespace {

std::size_t points(const Int3& mesh) { return static_cast<std::size_t>(mesh[0]) * mesh[1] * mesh[2]; }

template <class Reference>
std::vector<double> pair_times(const Int3& mesh, int repeats, unsigned flags) {
  Reference ref(mesh, flags);
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) times.push_back(ref.pair_seconds());
  return times;
}

}  // namespace

FFTWSerialPair::~FFTWSerialPair() {
  destroy_fftw_plan(f_);
  destroy_fftw_plan(g_);
  fftw_free(a_);
  fftw_free(b_);
}

void FFTWSerialPair::check(const char* what) {
  if (a_ && b_ && f_ && g_) return;
  destroy_fftw_plan(f_);
  destroy_fftw_plan(g_);
  fftw_free(a_);
  fftw_free(b_);
  a_ = nullptr;
  b_ = nullptr;
  f_ = g_ = nullptr;
  throw std::runtime_error(std::string("FFTW could not plan the serial 3-D ") + what);
}

double FFTWSerialPair::pair_seconds() {
  const double t0 = wall_seconds();
  fftw_execute(f_);
  fftw_execute(g_);
  const double t = wall_seconds() - t0;
  const double s = 1.0 / static_cast<double>(n_);  // keep values bounded (not timed)
  for (std::size_t i = 0; i < doubles_; ++i) a_[i] *= s;
  return t;
}

FFTWSerial3d::FFTWSerial3d(const Int3& mesh, unsigned flags) {
  n_ = points(mesh);
  doubles_ = 2 * n_;
  auto* a = fftw_alloc_complex(n_);
  a_ = reinterpret_cast<double*>(a);
  b_ = fftw_alloc_complex(n_);
  if (a_ && b_) {
    const std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    f_ = fftw_plan_dft_3d(mesh[0], mesh[1], mesh[2], a, b_, FFTW_FORWARD, flags);
    g_ = fftw_plan_dft_3d(mesh[0], mesh[1], mesh[2], b_, a, FFTW_BACKWARD, flags);
  }
  check("transform");
  for (std::size_t i = 0; i < n_; ++i) {
    a[i][0] = static_cast<double>(i % 17) - 8.0;
    a[i][1] = static_cast<double>(i % 5) - 2.0;
  }
}

FFTWSerialReal3d::FFTWSerialReal3d(const Int3& mesh, unsigned flags) {
  n_ = points(mesh);
  doubles_ = n_;
  a_ = fftw_alloc_real(n_);
  b_ = fftw_alloc_complex(static_cast<std::size_t>(mesh[0]) * mesh[1] * (mesh[2] / 2 + 1));
  if (a_ && b_) {
    const std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    f_ = fftw_plan_dft_r2c_3d(mesh[0], mesh[1], mesh[2], a_, b_, flags);
    g_ = fftw_plan_dft_c2r_3d(mesh[0], mesh[1], mesh[2], b_, a_, flags);
  }
  check("real transform");
  for (std::size_t i = 0; i < n_; ++i) a_[i] = static_cast<double>(i % 17) - 8.0;
}

std::vector<double> fftw_serial_pair_times(const Int3& mesh, int repeats, unsigned flags) {
  return pair_times<FFTWSerial3d>(mesh, repeats, flags);
}

std::vector<double> fftw_serial_r2c_pair_times(const Int3& mesh, int repeats, unsigned flags) {
  return pair_times<FFTWSerialReal3d>(mesh, repeats, flags);
}

}  // namespace fft
}  // namespace pmewald
