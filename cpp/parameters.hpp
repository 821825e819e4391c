// Error estimates and parameter selection for smooth PME. Everything here is in
// ABSOLUTE terms: RMS force error per atom, sqrt(<|F_i - F_i^exact|^2>), in the
// caller's units (forces carry coulomb_constant k_e). The solver converts a
// user's RELATIVE tolerance into an absolute target (e.g. times a measured
// RMS force) before calling choose_parameters. No MPI.
//
// Real space (Kolafa & Perram, Mol. Sim. 9, 351 (1992)):
//   dF_real = 2 k_e sum_q2 / sqrt(N r_c V) exp(-alpha^2 r_c^2).
//
// Reciprocal space: the Hockney-Eastwood / Deserno-Holm error functional for a
// mesh method with an arbitrary influence function (written for SPME by
// Ballenegger, Cerda & Holm, JCTC 8, 936 (2012)), evaluated numerically over
// the mesh. SPME in P3M language: assignment function U(k) = prod_d
// sinc^p(pi x_d / K_d) (x = m + j K, integer frequency incl. alias j),
// influence function g(m) = f(k_m) B(m) with f(k) = 4 pi exp(-k^2/4alpha^2)/k^2,
// B = the Euler-spline moduli product, and k_j = 2 pi recip @ (m + j K).
// For unit charges the pair error functional is (1/V^2) sum_m S(m), with
//   ik: S = sum_j k_j^2 f_j^2 - 2 g k'.sum_j U_j^2 k_j f_j + |k'|^2 g^2 (sum_j U_j^2)^2
//   ad: S = sum_j k_j^2 f_j^2 - 2 g sum_j U_j^2 k_j^2 f_j + g^2 (sum_j k_j^2 U_j^2)(sum_j U_j^2)
// (k' = principal k with Nyquist components zeroed, as the ik solver uses).
// Sums with f_j use aliases |j_d| <= 1; sums of U^2 alone are factorised per
// axis and use |j_d| <= 30. Random uncorrelated charges then give
//   dF_rec^2 = k_e^2 [ (sum_q2^2 - sum_q4) sum_m S(m) / V^2 + sum_q4 <|F_self|^2> ] / N,
// where the self force of a unit charge at r, F_self(r) = sum_n c_n exp(i 2pi (recip@(n K)).r),
// has mean square sum_{n != 0} |c_n|^2 (|n_d| <= 1), with
//   ik: c_n = (-i/V) sum_m k' g prod_d T0_d(m_d, n_d)
//   ad: c_n = (-i/V) sum_m g sum_d 2 pi recip[:,d] T1_d prod_{e!=d} T0_e
//   T0_d(m, n) = sum_j u_d(j) u_d(j-n),  T1_d = sum_j (m + jK_d) u_d(j) u_d(j-n).
// sum_q4 defaults to sum_q2^2 / N (equal |q|).
#pragma once

#include "extent.hpp"
#include "kspace_common.hpp"

namespace pmewald::kernels {

// Smallest n' >= max(n, 1) whose only prime factors are 2, 3 and 5.
int fft_friendly(int n);

double real_space_error(double alpha, double cutoff, double sum_q2, int n_atoms, double volume,
                        double coulomb_constant);

double reciprocal_error(const Mat3& box, double alpha, const Int3& mesh, int order,
                        Differentiation diff, double sum_q2, int n_atoms,
                        double coulomb_constant, double sum_q4 = -1.0);

struct Parameters {
  double alpha = 0;
  Int3 mesh{0, 0, 0};
  int order = 0;
  double est_real = 0;   // absolute RMS force error estimates
  double est_recip = 0;
  double est_total = 0;  // sqrt(real^2 + recip^2)
};

// Choose (alpha, mesh, order) for a cutoff and an ABSOLUTE RMS force error
// target. alpha > 0, all mesh > 0, order > 0 override the choice.
//  - alpha: real-space error = target / sqrt(2) (alpha >= 1/r_c).
//  - mesh: K_d = fft_friendly(ceil(s * h_d)) (h_d plane spacings, so triclinic
//    cells get meshes by heights), at least `order`, with s the smallest
//    density (found by extrapolation + bisection to 2%) whose reciprocal estimate is within the
//    remaining budget sqrt(target^2 - est_real^2) (at least target/sqrt 2).
//  - order: order <= 0 picks among 4..7 by a cost model
//    (FFT ~ N_mesh log N_mesh, spread+gather ~ n p^3); the default is order 5
//    (pass 5).
// Throws ValueError when no mesh up to 512 per axis meets the target.
Parameters choose_parameters(const Mat3& box, double cutoff, double target, double sum_q2,
                             int n_atoms, Differentiation diff, double coulomb_constant,
                             double alpha = 0.0, const Int3& mesh = Int3{0, 0, 0},
                             int order = 5, double sum_q4 = -1.0);

}  // namespace pmewald::kernels
