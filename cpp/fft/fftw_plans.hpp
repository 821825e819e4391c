// FFTW for the distributed FFTs (pencil_pipeline.hpp, rfft3d.hpp): planning the
// transforms of a run of axes of a box stored in some order, executing them in or
// out of place, and element copies.
#pragma once

#include <fftw3.h>

#include <array>
#include <cstdint>

#include "geometry/index_box.hpp"
#include "base/fftw_planner.hpp"
#include "base/kokkos_types.hpp"
#include "fft/remap.hpp"

namespace pmewald {
inline namespace fft {
namespace detail {

inline fftw_complex* as_fftw(Complex* p) { return reinterpret_cast<fftw_complex*>(p); }
inline fftw_complex* as_fftw(const Complex* p) { return reinterpret_cast<fftw_complex*>(const_cast<Complex*>(p)); }

// Complex plan of the transforms along axes first..last (a run of stages that share
// one box and storage order) of `box` stored in `order`, from `data` to `out` (the
// same pointer: in place). A single contiguous axis uses fftw_plan_many_dft;
// anything else one guru64 plan (several axes at once: FFTW's own multi-
// dimensional algorithms, which beat separate strided passes).
fftw_plan plan_dft_axes(const Box3& box, const Order3& order, int first, int last, Complex* data, Complex* out,
                        int sign, unsigned flags);

// Real-to-complex (forward) or complex-to-real (backward) plan along axes
// 0..last, halving axis `halved` (<= last: real_shape[halved] real points,
// real_shape[halved]/2 + 1 complex ones); the other axes are batched. Element
// strides per axis: `rs` of the real array, `cs` of the complex array. Always out
// of place. c2r plans overwrite their complex input (FFTW's default for c2r).
fftw_plan plan_real_axes(const Int3& real_shape, const std::array<std::int64_t, 3>& rs,
                         const std::array<std::int64_t, 3>& cs, int last, int halved, double* real, Complex* cplx,
                         bool forward, unsigned flags);

// A group of complex FFT stages in place on `data` with its plan (nothing
// without one: the stage is empty on this rank); wall time added to `seconds`.
void execute_in_place(fftw_plan in_place, Complex* data, double& seconds);

// The same group from src to dst (n elements): FFTW's out-of-place plan directly
// when there is one, src != dst and `aligned` (both arrays aligned as planned);
// otherwise copy into a work buffer (dst or src when it is one of `buffers`,
// else buffers[0]), transform in place there and copy out. src is preserved.
void execute_out_of_place(fftw_plan in_place, fftw_plan out_of_place, bool aligned, const Complex* src,
                          Complex* dst, std::int64_t n, Complex* const buffers[2], double& seconds);

template <class T>
void copy_elements(const T* src, T* dst, std::int64_t n) {
  if (n <= 0 || src == dst) return;
  Kokkos::parallel_for(Range(0, n), [=](const std::int64_t i) { dst[i] = src[i]; });
}

template <class T>
void scale_elements(T* data, std::int64_t n, double s) {
  if (n <= 0) return;
  Kokkos::parallel_for(Range(0, n), [=](const std::int64_t i) { data[i] *= s; });
}

}  // namespace detail
}  // namespace fft
}  // namespace pmewald
