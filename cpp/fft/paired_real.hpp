// The real group's r2c / c2r as complex transforms of paired real lines (RealFFT3d's
// stage 1 where it reads the caller's C-order storage in place, x halved).
//
// There x is the slowest, strided axis, and FFTW's r2c over it (rdft2 along a large
// stride, no SIMD codelets, internal buffer copies) costs as much on two ranks'
// half meshes as the single rank's whole 3-D r2c (docs/fft.md). Instead, the two
// real z lines 2j and 2j+1 of each (x, y) become one complex line, c = a_2j + i a_2j+1
// (a contiguous copy: z is the fastest axis), the group's complex transforms run on
// it in place (x, and y when it is in the group; j the contiguous vector axis, what
// FFTW's SIMD codelets want), and the half spectra of both real lines follow from
// the one complex spectrum by its symmetry (real a: A(-k) = conj A(k)):
//
//   A_2j(k) = (C(k) + conj C(-k)) / 2,   A_2j+1(k) = (C(k) - conj C(-k)) / (2i)
//
// for kx = 0 .. K_x/2, -k taken over the transformed axes. Backward builds C over the
// whole x range from the half spectrum (C(k) = A_2j(k) + i A_2j+1(k); past K_x/2 from
// the mirrored point), its inverse transform gives the two real lines back. On the
// planes kx = 0 and kx = K_x/2 (even K_x) it uses the Hermitian part of the given
// spectrum, (A(k) + conj A(-k)) / 2, which is what FFTW's c2r keeps there: the same
// real result for any input, Hermitian or not. Same flops as the r2c; measured
// 2.1x (80^3) to 3.7x (96^3) faster on a two-rank brick (docs/fft.md).
//
// Needs an even number of z points in the inbox. Pure FFTW and Kokkos: no MPI.
#pragma once

#include <fftw3.h>

#include <array>
#include <cstdint>

#include "base/kokkos_types.hpp"
#include "geometry/index_box.hpp"

namespace pmewald {
inline namespace fft {

class PairedRealTransform {
 public:
  // Whether the paired transform can run the real group of an inbox of this shape:
  // a non-empty inbox with an even number of z points, the group x (or x and y).
  static bool applies(const Int3& inbox_shape, int group_axes);

  // `n`: the inbox's shape (n[2] even); `with_y`: y is in the group (else x only);
  // `rs`: element strides of the caller's storage (C order); `cs`: of the stage-1
  // spectrum box (shape n[0]/2 + 1, n[1], n[2]) in its order. `work`: fftw_malloc'd
  // room for n[0] n[1] n[2] doubles, planned on (FFTW_MEASURE overwrites it) and
  // used by every transform. ok() is false when FFTW could not plan.
  PairedRealTransform(const Int3& n, bool with_y, const std::array<std::int64_t, 3>& rs,
                      const std::array<std::int64_t, 3>& cs, double* work, unsigned fftw_flags);
  ~PairedRealTransform();
  PairedRealTransform(const PairedRealTransform&) = delete;
  PairedRealTransform& operator=(const PairedRealTransform&) = delete;

  bool ok() const { return plans_[0] && plans_[1]; }
  // `in`: the inbox's first point in the caller's storage; `out`: the stage-1
  // spectrum box. `in` is not modified.
  void forward(const double* in, Complex* out) const;
  // `in` (preserved) to the inbox's points of the caller's storage at `out`.
  void backward(const Complex* in, double* out) const;

 private:
  Int3 n_;
  bool with_y_;
  std::array<std::int64_t, 3> rs_, cs_;
  Complex* work_;
  std::array<fftw_plan, 2> plans_{};  // forward, backward; in place on work_
};

}  // namespace fft
}  // namespace pmewald
