// FFTW's own serial 3-D transforms, planned once and timed: the references the
// benchmarks compare the distributed FFTs with (docs/benchmarks.md).
#pragma once

#include <fftw3.h>

#include <cstddef>
#include <vector>

#include "geometry/index_box.hpp"

namespace pmewald {
inline namespace fft {

// FFTW's own serial 3-D transform pair of `mesh` on this rank alone, planned once
// (out of place, `flags`): the references the benchmarks compare with.
// pair_seconds() times one forward + backward pair, then rescales the data by 1/N
// (untimed) so that repeated pairs stay bounded.
class FFTWSerialPair {
 public:
  FFTWSerialPair(const FFTWSerialPair&) = delete;
  FFTWSerialPair& operator=(const FFTWSerialPair&) = delete;
  double pair_seconds();

 protected:
  FFTWSerialPair() = default;
  ~FFTWSerialPair();
  // Frees what was made and throws unless the arrays and both plans exist.
  void check(const char* what);

  std::size_t n_ = 0;         // mesh points
  std::size_t doubles_ = 0;   // doubles of the input array (rescaled after each pair)
  double* a_ = nullptr;       // input (real or interleaved complex)
  fftw_complex* b_ = nullptr; // spectrum
  fftw_plan f_ = nullptr, g_ = nullptr;
};

// fftw_plan_dft_3d forward and backward (complex).
class FFTWSerial3d : public FFTWSerialPair {
 public:
  explicit FFTWSerial3d(const Int3& mesh, unsigned flags = FFTW_MEASURE);
};

// fftw_plan_dft_r2c_3d / c2r_3d (FFTW halves the last axis, its natural layout).
class FFTWSerialReal3d : public FFTWSerialPair {
 public:
  explicit FFTWSerialReal3d(const Int3& mesh, unsigned flags = FFTW_MEASURE);
};

// Wall seconds of each of `repeats` pairs of FFTWSerial3d / FFTWSerialReal3d.
std::vector<double> fftw_serial_pair_times(const Int3& mesh, int repeats, unsigned flags = FFTW_MEASURE);
std::vector<double> fftw_serial_r2c_pair_times(const Int3& mesh, int repeats, unsigned flags = FFTW_MEASURE);

}  // namespace fft
}  // namespace pmewald
