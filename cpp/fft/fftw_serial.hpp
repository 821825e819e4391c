// FFTW's own serial 3-D transforms, planned once and timed: the references the
// benchmarks compare the distributed FFTs with (docs/benchmarks.md).
#pragma once

#include <fftw3.h>

#include <cstddef>
#include <vector>

#include "geometry/index_box.hpp"

namespace pmewald {
inline namespace fft {

// Reference for benchmarks: FFTW's serial 3-D complex transform of `mesh`
// (fftw_plan_dft_3d, out of place, `flags`), planned once; pair_seconds() times
// one forward+backward pair on this rank alone.
class FFTWSerial3d {
 public:
  FFTWSerial3d(const Int3& mesh, unsigned flags = FFTW_MEASURE);
  ~FFTWSerial3d();
  FFTWSerial3d(const FFTWSerial3d&) = delete;
  FFTWSerial3d& operator=(const FFTWSerial3d&) = delete;
  double pair_seconds();

 private:
  std::size_t n_ = 0;
  fftw_complex* a_ = nullptr;
  fftw_complex* b_ = nullptr;
  fftw_plan f_ = nullptr, g_ = nullptr;
};

// Reference for benchmarks: wall seconds of each of `repeats` forward+backward
// pairs of FFTW's own serial 3-D complex transform (fftw_plan_dft_3d,
// out of place, `flags`) of `mesh`, on this rank alone.
std::vector<double> fftw_serial_pair_times(const Int3& mesh, int repeats, unsigned flags = FFTW_MEASURE);

// Reference for benchmarks: FFTW's serial 3-D real transform of `mesh`
// (fftw_plan_dft_r2c_3d / c2r_3d, out of place, `flags`; FFTW halves the last
// axis, its natural layout); pair_seconds() times one r2c+c2r pair on this rank.
class FFTWSerialReal3d {
 public:
  FFTWSerialReal3d(const Int3& mesh, unsigned flags = FFTW_MEASURE);
  ~FFTWSerialReal3d();
  FFTWSerialReal3d(const FFTWSerialReal3d&) = delete;
  FFTWSerialReal3d& operator=(const FFTWSerialReal3d&) = delete;
  double pair_seconds();

 private:
  std::size_t n_ = 0, nc_ = 0;
  double* a_ = nullptr;
  fftw_complex* b_ = nullptr;
  fftw_plan f_ = nullptr, g_ = nullptr;
};

// Wall seconds of each of `repeats` r2c+c2r pairs of FFTWSerialReal3d.
std::vector<double> fftw_serial_r2c_pair_times(const Int3& mesh, int repeats, unsigned flags = FFTW_MEASURE);

}  // namespace fft
}  // namespace pmewald
