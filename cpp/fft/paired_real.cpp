#include "fft/paired_real.hpp"

#include "base/fftw_planner.hpp"
#include "fft/fftw_plans.hpp"

namespace pmewald {
inline namespace fft {

using detail::as_fftw;

namespace {

// Row (kx, y) of both half spectra: D[2j] = (Z_j + conj W_j) / 2 and
// D[2j + 1] = (Z_j - conj W_j) / 2i, complex values as (re, im) doubles, D's
// elements `stride` complex values apart (Stride: 1 fixed, 0 run-time).
template <int Stride>
inline void separate_row(const double* Z, const double* W, double* D, int J, std::int64_t stride) {
  const std::int64_t s = 2 * (Stride ? Stride : stride);
  for (int j = 0; j < J; ++j) {
    const double zr = Z[2 * j], zi = Z[2 * j + 1], wr = W[2 * j], wi = -W[2 * j + 1];
    double* e = D + 2 * j * s;
    double* o = e + s;
    e[0] = 0.5 * (zr + wr);
    e[1] = 0.5 * (zi + wi);
    o[0] = 0.5 * (zi - wi);
    o[1] = -0.5 * (zr - wr);
  }
}

// Row (kx, y) of C from the two half spectra's row S (D_j = S[2j] + i S[2j + 1]);
// Conj: from the mirrored point (D_j = conj S[2j] + i conj S[2j + 1]).
template <int Stride, bool Conj>
inline void combine_row(const double* S, double* D, int J, std::int64_t stride) {
  const std::int64_t s = 2 * (Stride ? Stride : stride);
  const double c = Conj ? -1.0 : 1.0;
  for (int j = 0; j < J; ++j) {
    const double* e = S + 2 * j * s;
    const double* f = e + s;
    D[2 * j] = e[0] - c * f[1];
    D[2 * j + 1] = c * e[1] + f[0];
  }
}

}  // namespace

bool PairedRealTransform::applies(const Int3& n, int group_axes) {
  return n[0] > 0 && n[1] > 0 && n[2] > 0 && n[2] % 2 == 0 && (group_axes == 1 || group_axes == 2);
}

PairedRealTransform::PairedRealTransform(const Int3& n, bool with_y, const std::array<std::int64_t, 3>& rs,
                                         const std::array<std::int64_t, 3>& cs, double* work, unsigned fftw_flags)
    : n_(n), with_y_(with_y), rs_(rs), cs_(cs), work_(reinterpret_cast<Complex*>(work)) {
  // The packed array [x][y][j], j = 0 .. n_z/2 - 1 fastest, transformed in place along
  // x (and y); j (and y when it is not transformed) batched.
  Box3 packed;
  packed.hi = {n[0], n[1], n[2] / 2};
  for (int d = 0; d < 2; ++d)
    plans_[d] = detail::plan_dft_axes(packed, kCOrder, 0, with_y ? 1 : 0, work_, work_,
                                      d == 0 ? FFTW_FORWARD : FFTW_BACKWARD, fftw_flags);
}

PairedRealTransform::~PairedRealTransform() {
  for (auto& p : plans_) destroy_fftw_plan(p);
}

void PairedRealTransform::forward(const double* in, Complex* out) const {
  const int nx = n_[0], ny = n_[1], nz = n_[2], J = nz / 2, h = nx / 2 + 1;
  const std::int64_t rx = rs_[0], ry = rs_[1], c0 = cs_[0], c1 = cs_[1], c2 = cs_[2];
  const bool wy = with_y_;
  Complex* const c = work_;
  double* const w = reinterpret_cast<double*>(work_);
  // Pack: the caller's z lines back to back (c[x][y][j] = a[x][y][2j] + i a[x][y][2j+1]).
  Kokkos::parallel_for(Range(0, std::int64_t(nx) * ny), [=](const std::int64_t r) {
    const double* s = in + (r / ny) * rx + (r % ny) * ry;
    double* d = w + r * nz;
    for (int z = 0; z < nz; ++z) d[z] = s[z];
  });
  fftw_execute_dft(plans_[0], as_fftw(c), as_fftw(c));
  // Separate: row (kx, y) of both half spectra from C(k) and conj C(-k).
  Kokkos::parallel_for(Range(0, std::int64_t(h) * ny), [=](const std::int64_t r) {
    const int kx = static_cast<int>(r / ny), y = static_cast<int>(r % ny);
    const int mx = kx == 0 ? 0 : nx - kx, my = wy && y != 0 ? ny - y : y;
    const double* Z = reinterpret_cast<const double*>(c + (std::int64_t(kx) * ny + y) * J);
    const double* W = reinterpret_cast<const double*>(c + (std::int64_t(mx) * ny + my) * J);
    double* D = reinterpret_cast<double*>(out + kx * c0 + y * c1);
    if (c2 == 1)
      separate_row<1>(Z, W, D, J, 1);
    else
      separate_row<0>(Z, W, D, J, c2);
  });
}

void PairedRealTransform::backward(const Complex* in, double* out) const {
  const int nx = n_[0], ny = n_[1], nz = n_[2], J = nz / 2, h = nx / 2 + 1;
  const std::int64_t rx = rs_[0], ry = rs_[1], c0 = cs_[0], c1 = cs_[1], c2 = cs_[2];
  const bool wy = with_y_;
  Complex* const c = work_;
  const double* const w = reinterpret_cast<const double*>(work_);
  // Combine: C(k) = A_2j(k) + i A_2j+1(k) over the whole x range.
  Kokkos::parallel_for(Range(0, std::int64_t(nx) * ny), [=](const std::int64_t r) {
    const int kx = static_cast<int>(r / ny), y = static_cast<int>(r % ny);
    const int my = wy && y != 0 ? ny - y : y;
    double* D = reinterpret_cast<double*>(c + r * J);
    if (kx >= h || (kx != 0 && 2 * kx != nx)) {  // past K_x/2: from the mirrored point, conj A(-k)
      const bool mirrored = kx >= h;
      const double* S = reinterpret_cast<const double*>(mirrored ? in + (nx - kx) * c0 + my * c1 : in + kx * c0 + y * c1);
      if (c2 == 1)
        mirrored ? combine_row<1, true>(S, D, J, 1) : combine_row<1, false>(S, D, J, 1);
      else
        mirrored ? combine_row<0, true>(S, D, J, c2) : combine_row<0, false>(S, D, J, c2);
    } else {  // kx = 0 or K_x/2: the Hermitian part, as FFTW's c2r keeps it
      const Complex* S = in + kx * c0 + y * c1;
      const Complex* M = in + kx * c0 + my * c1;
      for (int j = 0; j < J; ++j) {
        const Complex s = S[2 * j * c2], m = M[2 * j * c2], t = S[(2 * j + 1) * c2], u = M[(2 * j + 1) * c2];
        const double er = 0.5 * (s.real() + m.real()), ei = 0.5 * (s.imag() - m.imag());
        const double fr = 0.5 * (t.real() + u.real()), fi = 0.5 * (t.imag() - u.imag());
        D[2 * j] = er - fi;
        D[2 * j + 1] = ei + fr;
      }
    }
  });
  fftw_execute_dft(plans_[1], as_fftw(c), as_fftw(c));
  // Unpack: the real lines back into the caller's storage.
  Kokkos::parallel_for(Range(0, std::int64_t(nx) * ny), [=](const std::int64_t r) {
    const double* s = w + r * nz;
    double* d = out + (r / ny) * rx + (r % ny) * ry;
    for (int z = 0; z < nz; ++z) d[z] = s[z];
  });
}

}  // namespace fft
}  // namespace pmewald
