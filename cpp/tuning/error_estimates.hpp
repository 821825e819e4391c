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

#include <vector>

#include "geometry/index_box.hpp"
#include "geometry/lattice.hpp"

namespace pmewald {
inline namespace tuning {

// Smallest n' >= max(n, 1) whose only prime factors are 2, 3 and 5.
int fft_friendly(int n);

double real_space_error(double alpha, double cutoff, double sum_q2, int n_atoms, double volume,
                        double coulomb_constant);

double reciprocal_error(const Mat3& box, double alpha, const Int3& mesh, int order,
                        Differentiation diff, double sum_q2, int n_atoms,
                        double coulomb_constant, double sum_q4 = -1.0);

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
                                            double sum_q4 = -1.0);

// ---------------------------------------------------------------------------------------
// Cost model of one reciprocal-space step on ONE rank, in seconds. THE place for its
// constants: they are measured, not derived, and go stale when the kernels change.
// Re-calibrate with
//     python -m pmewald.bench cost            (prints the body of default_cost_model())
// The model, for a mesh of N = K1 K2 K3 points, order p, n atoms:
//   t = fft * transforms(diff) * N log2 N     3-D FFTs (ad: 1 forward + 1 backward,
//                                             ik: 1 forward + 3 backward)
//     + mesh(diff) * N                        solve, grid zeroing, ghost layers, copies
//     + (atom(diff) + point(diff) p^3) * n    spreading and gathering: per stencil point,
//                                             plus a per-atom part (stencil set-up, cache
//                                             misses on meshes larger than the cache)
// The choice only depends on ratios of these constants, is the same on every rank count
// (the one-rank model is used for any), and never times anything at run time.
struct CostModel {
  double fft = 0;       // s per N log2 N per 3-D transform
  double mesh_ad = 0;   // s per mesh point, ad step
  double mesh_ik = 0;   // s per mesh point, ik step
  double atom_ad = 0;   // s per atom, ad step (spread + gather)
  double atom_ik = 0;   // s per atom, ik step
  double point_ad = 0;  // s per atom per p^3, ad step (spread + gather)
  double point_ik = 0;  // s per atom per p^3, ik step
  int transforms_ad = 2;
  int transforms_ik = 4;
};
// The calibrated constants (defined in parameters.cpp, next to the calibration record).
CostModel default_cost_model();

double reciprocal_cost(const CostModel& c, const Int3& mesh, int order, Differentiation diff,
                       int n_atoms);

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
//  - order: order <= 0 picks among 4..8 the one with the least reciprocal_cost
//    (default_cost_model()); the default is order 5 (pass 5).
// Throws ValueError when no mesh up to 512 per axis meets the target.
Parameters choose_parameters(const Mat3& box, double cutoff, double target, double sum_q2,
                             int n_atoms, Differentiation diff, double coulomb_constant,
                             double alpha = 0.0, const Int3& mesh = Int3{0, 0, 0},
                             int order = 5, double sum_q4 = -1.0);

// ---------------------------------------------------------------------------------------
// The cheapest (differentiation, order, alpha, mesh) for an ABSOLUTE RMS force error
// target, by the cost model, among the candidates whose estimated error meets it.
struct Candidate {
  Differentiation diff = Differentiation::AD;
  int order = 0;
  double alpha = 0;
  Int3 mesh{0, 0, 0};
  double cost = 0;       // modelled seconds
  double est_recip = 0;  // absolute; exact when `exact`, else from the scaled table
  bool exact = false;
};
struct Choice {
  double alpha = 0;
  Int3 mesh{0, 0, 0};
  int order = 0;
  Differentiation diff = Differentiation::AD;
  double est_real = 0, est_recip = 0, est_total = 0;
  double cost = 0;
  std::vector<Candidate> candidates;  // the best of every (diff, order) considered, cheapest first
};
// Search space: diffs (AD and/or IK), orders order_lo..order_hi, and
//  - alpha > 0: that alpha, reciprocal budget sqrt(target^2 - real^2) (at least target/sqrt 2);
//  - alpha <= 0: a scan of alpha over real-space shares of the budget from 99% down to 10%
//    (alpha rc >= 2), reciprocal budget sqrt(target^2 - real(alpha)^2): the smallest alpha
//    that the accuracy allows, which at a fixed cutoff costs nothing in real space.
// For every (diff, order) the reciprocal estimate is tabulated once, over mesh densities,
// at a small alpha_t (alpha_t (|a_1||a_2||a_3|)^(1/3) <= 8: a few milliseconds per point)
// and carried to each alpha by the continuum scaling of ReciprocalErrorParts (exact for
// alpha |a| >> 1).
// Each (diff, order) keeps its cheapest (alpha, mesh) (ties: the alpha with the smallest
// estimated total error); candidates whose spread + gather cost alone exceeds the best so
// far are skipped. The cheapest candidates are then checked with the exact estimate at
// their alpha (smallest FFT-friendly mesh near the predicted one), up to four, until no
// unchecked prediction is within 10% of the cheapest checked one. Deterministic: no timing.
// mesh_target > 0 adds a bound on the mesh itself, whatever the differentiation: the ad
// reciprocal estimate of (alpha, order, mesh) must not exceed it. The energy does not
// depend on the differentiation and its error scales about like that estimate, so this
// is how the solver passes on an energy requirement (ik then needs as fine a mesh as ad).
// Throws ValueError when no candidate reaches the target with a mesh up to 512 per axis.
Choice choose_cheapest(const Mat3& box, double cutoff, double target, double sum_q2, int n_atoms,
                       double coulomb_constant, double alpha, const std::vector<Differentiation>& diffs,
                       int order_lo, int order_hi, const CostModel& cost, double sum_q4 = -1.0,
                       double mesh_target = 0.0);

}  // namespace tuning
}  // namespace pmewald
