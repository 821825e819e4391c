// The k-space step of smooth PME on this rank's piece of the transformed mesh.
// Pure local kernel: no MPI (the caller sums energies and virials over ranks).
//
// With Q the charge mesh, Q^ = fftn(Q) (forward, exp(-2 pi i m.j/K), unnormalised),
// m~ = recip @ m, V the cell volume, k_e the Coulomb constant and
// B(m) = prod_d |b_d(m_d)|^2 (Euler exponential-spline moduli, bspline_moduli):
//
//   G(m)  = k_e / (2 pi V) * exp(-pi^2 |m~|^2 / alpha^2) / |m~|^2 * B(m),  G(0) = 0
//   E_rec = sum_m G(m) |Q^(m)|^2        (every m of the full c2c spectrum once)
//   W_ab  = sum_m G(m)|Q^(m)|^2 (delta_ab - 2 (1 + pi^2 |m~|^2/alpha^2) m~_a m~_b / |m~|^2)
//
// W is the virial W = -dE/d(eps) under the strain r -> (1+eps) r of positions
// and box rows (for the total Coulomb energy trace W = E), ADDED to a Virial
// (base/virial.hpp).
//
// Storage: the rank holds the sub-box kbox (global indices in [0, K), any
// sub-box of the full mesh) stored with axis storage_order[0] slowest and
// storage_order[2] fastest (default {0,1,2}: C order [x][y][z]).
//
// Half spectrum (SpectrumLayout::half_axis = h, the output of rfft3d.hpp's
// RealFFT3d): the mesh is the r2c spectrum of a real Q halved along axis h,
// m_h = 0..K_h/2 (kbox inside [0, K_h/2 + 1) along h). Q^(-m) = conj Q^(m), so
// every plane 0 < m_h < K_h/2 stands for itself and its mirror: it counts twice
// in E and W (weight 2), the planes m_h = 0 and (K_h even) m_h = K_h/2 once.
#pragma once

#include <vector>

#include "geometry/index_box.hpp"
#include "base/kokkos_types.hpp"
#include "base/virial.hpp"
#include "geometry/lattice.hpp"

namespace pmewald {
inline namespace pme {

struct Influence;

// What the spectrum handed to the solver is, and what the caller does with it.
struct SpectrumLayout {
  // The r2c half spectrum halved along this axis (see above); -1: the full c2c spectrum.
  int half_axis = -1;
  // The caller's backward transform is unnormalised (exp(+2 pi i ...) without the
  // 1/N): the outputs are scaled by 2 G instead of 2 N G (the 1/N folded in here).
  bool unnormalised_backward = false;
};

class KSpaceSolver {
 public:
  KSpaceSolver(const Mat3& box, const Int3& mesh, double alpha, int order,
               double coulomb_constant, const Box3& kbox,
               const Int3& storage_order = Int3{0, 1, 2},
               const SpectrumLayout& layout = SpectrumLayout{});

  // New box (NPT): recomputes the influence factors; the B-spline moduli
  // (which depend only on the mesh and order) are kept.
  void set_box(const Mat3& box);

  // AD: data <- 2 N G(m) data in place (N = K1 K2 K3), so that the caller's
  // backward FFT (exp(+2 pi i ...)/N) yields phi = dE_rec/dQ on the mesh
  // (2 G data with layout().unnormalised_backward; likewise for ik below).
  // Returns this rank's share of E_rec (computed from the input data) and
  // adds this rank's share of the virial (if virial != nullptr).
  double apply_ad(Complex* data, Virial* virial) const;

  // ik: e_a(m) = -i k'_a 2 N G(m) data(m), k' = 2 pi recip @ m' where m' is m
  // with Nyquist components (m_d = K_d/2, K_d even) set to 0 (so the fields are
  // real). Backward FFTs of e_x, e_y, e_z give the field E = -grad phi on the mesh.
  // data is not modified. Returns the energy share, adds the virial share.
  double apply_ik(const Complex* data, Complex* ex, Complex* ey, Complex* ez,
                  Virial* virial) const;

  // Energy share (and virial share) only; data untouched.
  double energy(const Complex* data, Virial* virial) const;

  const Box3& kbox() const { return kbox_; }
  const SpectrumLayout& layout() const { return layout_; }
  const Int3& mesh() const { return mesh_; }
  double alpha() const { return alpha_; }
  int order() const { return order_; }
  // Influence factors G(m) over kbox in storage order (for tests/inspection); on
  // a half spectrum (G(m) + G(m*))/2, m* the stored representative of -m.
  View1<double> influence() const { return g_; }

 private:
  Influence influence_fn() const;
  template <int Mode>
  double run(Complex* data, const Complex* in, Complex* ex, Complex* ey, Complex* ez,
             Virial* virial) const;

  Mat3 box_{}, recip_{};
  Int3 mesh_{};
  double alpha_ = 0, kc_ = 1;
  int order_ = 0;
  Box3 kbox_;
  Int3 perm_{0, 1, 2};
  SpectrumLayout layout_;
  View1<double> bmod_[3];  // |b_d(m)|^2, m = 0..K_d-1
  View1<double> g_;        // G(m) over kbox, storage order
  View1<double> vc_;       // 2 (1 + pi^2 |m~|^2/alpha^2) / |m~|^2 over kbox (0 at m = 0)
};

}  // namespace pme
}  // namespace pmewald
