// The real-space truncation force of a sample of atoms, for the real-space error estimate
// (docs/accuracy.md, "The real-space part: the truncated shell"). No MPI: every rank sums
// its own atoms' contributions to the field at the sample atoms (whose positions every
// rank holds), and the caller sums the fields over the ranks.
//
// The real-space sum is cut at r_c; the error it leaves on atom i is
//   dF_i = k q_i sum_{j, n: |r_ij + n| > r_c} q_j g(|r|) r / |r|,
//   g(r) = erfc(alpha r) / r^2 + 2 alpha / sqrt(pi) exp(-alpha^2 r^2) / r.
// The Kolafa-Perram estimate (error_estimates.hpp) is its RMS for uncorrelated charges;
// in a crystal the terms of a shell add coherently and in a neutral molecule's neighbourhood
// they cancel, which only the structure itself shows. g falls like exp(-alpha^2 r^2), so
// the shell r_c < r < R(alpha), R^2 = r_c^2 + kTailExponent / alpha^2, carries all but
// ~exp(-kTailExponent) of it (the rest is added by the caller as Kolafa-Perram's estimate
// at R).
#pragma once

#include <cstddef>
#include <vector>

#include "geometry/lattice.hpp"

namespace pmewald {
inline namespace tuning {

// g(r) at R is exp(-kTailExponent) of its Gaussian factor at r_c.
constexpr double kTailExponent = 6.0;

// Outer radius of the shell evaluated for alpha: sqrt(r_c^2 + kTailExponent / alpha^2).
double tail_radius(double alpha, double cutoff);

// The truncated-shell field at each sample point from the given atoms, for every alpha:
// sum over atoms j and periodic images n with r_c < |s - r_j - n| < tail_radius(alpha) of
// q_j g(r) (s - r_j - n) / r (Coulomb constant 1). Returns n_alpha x n_sample x 3 values
// (alpha-major). Positions anywhere (wrapped here); a sample point coinciding with an atom
// (r = 0 < r_c) is skipped, so the sample atoms may be among the atoms.
std::vector<double> local_tail_fields(const Mat3& box, double cutoff, const std::vector<double>& alphas,
                                      const double* samples, std::size_t n_samples, const double* positions,
                                      const double* charges, std::size_t n);

}  // namespace tuning
}  // namespace pmewald
