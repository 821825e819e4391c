// Error estimates of smooth PME. Everything here is in
// ABSOLUTE terms: RMS force error per atom, sqrt(<|F_i - F_i^exact|^2>), in the
// caller's units (forces carry coulomb_constant k_e). The solver converts a
// user's RELATIVE tolerance into an absolute target (e.g. times a measured
// RMS force) before choosing parameters (parameter_choice.hpp). No MPI.
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
//
// Correlated charges (charge_correlation.hpp): with a ChargeCorrelation table c(x) the pair
// part becomes (sum_q2^2 - sum_q4) sum_m sum_b W_b(m) c(m + b K) / V^2, W_b(m) the terms of
// S(m) that see the charges of alias b,
//   W_b = g^2 U_b^2 sum_a |D_a|^2 U_a^2 - 2 g U_b^2 D_b.k_b f_b + k_b^2 f_b^2
// (D_a = k' for ik, k_a for ad), evaluated for the aliases |b_d| <= 1 inside the table
// (c = 1 elsewhere). The self force is reduced by the part of it that the position-
// dependent pair errors of the neighbours cancel (chi; kSelfCancellation in the .cpp).
#pragma once

#include "geometry/index_box.hpp"
#include "geometry/lattice.hpp"
#include "pme/differentiation.hpp"
#include "tuning/charge_correlation.hpp"

namespace pmewald {
inline namespace tuning {

double real_space_error(double alpha, double cutoff, double sum_q2, int n_atoms, double volume,
                        double coulomb_constant);

double reciprocal_error(const Mat3& box, double alpha, const Int3& mesh, int order,
                        Differentiation diff, double sum_q2, int n_atoms,
                        double coulomb_constant, double sum_q4 = -1.0,
                        const ChargeCorrelation* correlation = nullptr);

// The two parts of the reciprocal variance, before the factor k_e^2 / N:
//   reciprocal_error = k_e sqrt((pair + self) / N).
// pair = (sum_q2^2 - sum_q4) sum_m S(m) / V^2 and self = sum_q4 <|F_self|^2>. In the
// continuum limit (alpha |a_d| >~ 5) they scale as pair ~ alpha P(alpha h) and
// self ~ alpha^4 Q(alpha h) with h the mesh spacing, which choose_cheapest uses to
// carry one table of estimates over to every alpha it considers.
struct ReciprocalErrorParts {
  double pair = 0;
  double self = 0;
};
ReciprocalErrorParts reciprocal_error_parts(const Mat3& box, double alpha, const Int3& mesh, int order,
                                            Differentiation diff, double sum_q2, int n_atoms,
                                            double sum_q4 = -1.0,
                                            const ChargeCorrelation* correlation = nullptr);

}  // namespace tuning
}  // namespace pmewald
