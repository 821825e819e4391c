#include "fft/fftw_serial.hpp"

#include <stdexcept>

#include "base/timers.hpp"

namespace pmewald {
inline namespace fft {

FFTWSerial3d::FFTWSerial3d(const Int3& mesh, unsigned flags) {
  n_ = static_cast<size_t>(mesh[0]) * mesh[1] * mesh[2];
  a_ = fftw_alloc_complex(n_);
  b_ = fftw_alloc_complex(n_);
  f_ = fftw_plan_dft_3d(mesh[0], mesh[1], mesh[2], a_, b_, FFTW_FORWARD, flags);
  g_ = fftw_plan_dft_3d(mesh[0], mesh[1], mesh[2], b_, a_, FFTW_BACKWARD, flags);
  if (!a_ || !b_ || !f_ || !g_) throw std::runtime_error("FFTW could not plan the serial 3-D transform");
  for (size_t i = 0; i < n_; ++i) {
    a_[i][0] = static_cast<double>(i % 17) - 8.0;
    a_[i][1] = static_cast<double>(i % 5) - 2.0;
  }
}

FFTWSerial3d::~FFTWSerial3d() {
  if (f_) fftw_destroy_plan(f_);
  if (g_) fftw_destroy_plan(g_);
  fftw_free(a_);
  fftw_free(b_);
}

double FFTWSerial3d::pair_seconds() {
  const double t0 = wall_seconds();
  fftw_execute(f_);
  fftw_execute(g_);
  const double t = wall_seconds() - t0;
  const double s = 1.0 / static_cast<double>(n_);  // keep values bounded (not timed)
  for (size_t i = 0; i < n_; ++i) {
    a_[i][0] *= s;
    a_[i][1] *= s;
  }
  return t;
}

std::vector<double> fftw_serial_pair_times(const Int3& mesh, int repeats, unsigned flags) {
  FFTWSerial3d ref(mesh, flags);
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) times.push_back(ref.pair_seconds());
  return times;
}

FFTWSerialReal3d::FFTWSerialReal3d(const Int3& mesh, unsigned flags) {
  n_ = static_cast<size_t>(mesh[0]) * mesh[1] * mesh[2];
  nc_ = static_cast<size_t>(mesh[0]) * mesh[1] * (mesh[2] / 2 + 1);
  a_ = fftw_alloc_real(n_);
  b_ = fftw_alloc_complex(nc_);
  if (a_ && b_) {
    f_ = fftw_plan_dft_r2c_3d(mesh[0], mesh[1], mesh[2], a_, b_, flags);
    g_ = fftw_plan_dft_c2r_3d(mesh[0], mesh[1], mesh[2], b_, a_, flags);
  }
  if (!a_ || !b_ || !f_ || !g_) {
    if (f_) fftw_destroy_plan(f_);
    if (g_) fftw_destroy_plan(g_);
    fftw_free(a_);
    fftw_free(b_);
    throw std::runtime_error("FFTW could not plan the serial 3-D real transform");
  }
  for (size_t i = 0; i < n_; ++i) a_[i] = static_cast<double>(i % 17) - 8.0;
}

FFTWSerialReal3d::~FFTWSerialReal3d() {
  fftw_destroy_plan(f_);
  fftw_destroy_plan(g_);
  fftw_free(a_);
  fftw_free(b_);
}

double FFTWSerialReal3d::pair_seconds() {
  const double t0 = wall_seconds();
  fftw_execute(f_);
  fftw_execute(g_);
  const double t = wall_seconds() - t0;
  const double s = 1.0 / static_cast<double>(n_);  // keep values bounded (not timed)
  for (size_t i = 0; i < n_; ++i) a_[i] *= s;
  return t;
}

std::vector<double> fftw_serial_r2c_pair_times(const Int3& mesh, int repeats, unsigned flags) {
  FFTWSerialReal3d ref(mesh, flags);
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) times.push_back(ref.pair_seconds());
  return times;
}

}  // namespace fft
}  // namespace pmewald
