// From an accuracy target to PME parameters: choose_parameters (a given order or
// differentiation) and choose_cheapest (the cheapest of all, by the cost model),
// both from the error estimates of error_estimates.hpp (choose_cheapest is defined in
// cheapest_choice.cpp). No MPI.
#pragma once

#include <vector>

#include "geometry/index_box.hpp"
#include "geometry/lattice.hpp"
#include "pme/differentiation.hpp"
#include "tuning/charge_correlation.hpp"
#include "tuning/cost_model.hpp"

namespace pmewald {
inline namespace tuning {

// Smallest n' >= max(n, 1) whose only prime factors are 2, 3 and 5.
int fft_friendly(int n);

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
                             int order = 5, double sum_q4 = -1.0,
                             const ChargeCorrelation* correlation = nullptr);

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
// their alpha (smallest FFT-friendly mesh near the predicted one), up to six, until no
// unchecked prediction is within 25% of the cheapest checked one. Deterministic: no timing.
// mesh_target > 0 adds a bound on the mesh itself, whatever the differentiation: the ad
// reciprocal estimate of (alpha, order, mesh) must not exceed it. The energy does not
// depend on the differentiation and its error scales about like that estimate, so this
// is how the solver passes on an energy requirement (ik then needs as fine a mesh as ad).
// correlation: the estimates weigh the charges' structure factor (charge_correlation.hpp);
// the tables then carry it from alpha_t by the uncorrelated scaling, which is approximate,
// and the exact check at the candidate's alpha corrects the mesh.
// real_volume > 0: the volume the atoms fill, for the real-space estimate's density (a slab
// in a box extended by vacuum: its own volume); 0: the box's.
// cross in [-1, 1]: the correlation of the real-space and mesh force errors (measured on a
// sample of the atoms, pmewald.pme.tuning); the total is then
// sqrt(real^2 + recip^2 + 2 cross real recip) and the reciprocal budget of an alpha the
// largest recip that keeps it within target (reciprocal_budget). 0: independent errors.
// recip_factor > 0: the reciprocal estimates are this times the model's (the ratio of the
// mesh error measured on a sample to the model's, pmewald.pme.tuning); the mesh bound is not
// scaled (it is an energy requirement on the model's estimate).
// Throws ValueError when no candidate reaches the target with a mesh up to 512 per axis.
Choice choose_cheapest(const Mat3& box, double cutoff, double target, double sum_q2, int n_atoms,
                       double coulomb_constant, double alpha, const std::vector<Differentiation>& diffs,
                       int order_lo, int order_hi, const CostModel& cost, double sum_q4 = -1.0,
                       double mesh_target = 0.0, const ChargeCorrelation* correlation = nullptr,
                       double real_volume = 0.0, double cross = 0.0, double recip_factor = 1.0);

// The largest reciprocal error k with real^2 + k^2 + 2 cross real k <= target^2 (real < target):
// -cross real + sqrt(cross^2 real^2 + target^2 - real^2); 0 when real >= target.
double reciprocal_budget(double target, double real, double cross);
// sqrt(real^2 + recip^2 + 2 cross real recip), never below |real - recip| (cross >= -1).
double combined_error(double real, double recip, double cross);

}  // namespace tuning
}  // namespace pmewald
