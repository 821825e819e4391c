// Charge correlations of a system on the reciprocal lattice of its box, for the
// reciprocal error estimate (error_estimates.hpp). No MPI: every rank computes the
// structure factors of its own atoms (local_structure_factors), the caller sums them over
// the ranks, and ChargeCorrelation turns the sums into the table the estimate uses.
//
// The Hockney-Eastwood/Deserno-Holm functional of error_estimates.hpp is the mesh-shift
// averaged squared force error of a system whose charges are uncorrelated. Written out for
// a real system (keeping, as the functional does, only the terms that survive the average
// over the mesh position and are diagonal in the frequency), the force error on atom i is
// q_i times the error kernel applied to the charges of the others, and the pair part of
// the variance becomes
//   sum_m sum_b W_b(m) C(k_{m,b}),   C(k) = sum_i q_i^2 |S_{-i}(k)|^2,
// with W_b the weight of alias b of mesh frequency m (the same terms as S(m) in
// error_estimates.hpp, grouped by the alias whose charges they see) and S_{-i} the
// structure factor of all charges but i:
//   C(k) = sum_q2 |S(k)|^2 - 2 Re(S(k) T(k)^*) + sum_q4,
//   S(k) = sum_j q_j exp(-i k.r_j),  T(k) = sum_j q_j^3 exp(-i k.r_j).
// Uncorrelated charges have C = sum_q2^2 - sum_q4 on average, which the functional
// assumes; neutral molecules and ion pairs have C << that at wavelengths longer than the
// molecules, which is where most of the mesh error lives.
//
// The table stores c(x) = C(k_x) / (sum_q2^2 - sum_q4) for the integer frequency vectors x
// (k_x = 2 pi recip x) with |x_d| <= half[d]; outside it c = 1 (uncorrelated).
//
// It also stores chi(x) = (Re(T(k) S(k)^*) - sum_q4) / sum_q4 = sum_i q_i^3 sum_{j != i} q_j
// cos(k.r_ij) / sum_q4 (0 outside; 0 on average for uncorrelated charges): the correlation
// of each charge with its neighbours that decides how much of its self force (the mesh
// force of a charge on itself, a function of its position in the mesh cell) the position-
// dependent part of its neighbours' pair errors cancels. An atom whose neutral group is
// much smaller than the mesh spacing sees its own mesh charge cancelled by its partners'.
//
// In real space the correlations decide how the truncated shell's terms add up (coherently
// in a crystal, cancelling around neutral molecules): real_factor holds the ratio of the
// truncation error sampled on the system (real_space_tail.hpp) to the Kolafa-Perram
// estimate, at a few alpha r_c, for the real-space estimate to multiply.
#pragma once

#include <cstdint>
#include <vector>

#include "base/kokkos_types.hpp"
#include "geometry/index_box.hpp"
#include "geometry/lattice.hpp"

namespace pmewald {
inline namespace tuning {

// Index half-widths of the table covering every |k| <= kmax: ceil(kmax |a_d| / 2 pi),
// each at most max_half.
Int3 correlation_half_widths(const Mat3& box, double kmax, int max_half);

// S(x) and T(x) of the given atoms for every x with |x_d| <= half[d], in C order over
// (x0 + half0, x1 + half1, x2 + half2); the 2M values are S then T (M points). Computed
// as a non-uniform FFT: the complex charges q + i q^3 are spread with B-splines of order 8
// onto a periodic grid of at least 4 half[d] + 2 points per axis, transformed by FFTW, and
// divided by the splines' Euler factors (relative error below 1e-3 at |x_d| <= half[d]).
std::vector<Complex> local_structure_factors(const Mat3& box, const double* positions, const double* charges,
                                             std::size_t n, const Int3& half);

class ChargeCorrelation {
 public:
  ChargeCorrelation() = default;  // empty: uncorrelated charges (c = 1 everywhere)
  // sums: the global S and T of local_structure_factors (summed over ranks).
  ChargeCorrelation(const Int3& half, const Complex* sums, double sum_q2, double sum_q4);
  bool empty() const { return c_.empty(); }
  const Int3& half() const { return half_; }
  // Which table this is: a number of its own per table made (copies share it), for the
  // reciprocal estimate's memo (error_estimates.cpp); the real-space factors, which the
  // reciprocal estimate does not read, keep it.
  std::uint64_t serial() const { return serial_; }
  // c at the integer frequency vector x (1 outside the table)
  double operator()(long x0, long x1, long x2) const {
    if (c_.empty() || x0 < -half_[0] || x0 > half_[0] || x1 < -half_[1] || x1 > half_[1] || x2 < -half_[2] ||
        x2 > half_[2])
      return 1.0;
    return c_[index(x0, x1, x2)];
  }
  // chi at x (0 outside the table)
  double chi(long x0, long x1, long x2) const {
    if (c_.empty() || x0 < -half_[0] || x0 > half_[0] || x1 < -half_[1] || x1 > half_[1] || x2 < -half_[2] ||
        x2 > half_[2])
      return 0.0;
    return chi_[index(x0, x1, x2)];
  }
  // The real-space factor: ratios at increasing alpha r_c nodes (all positive); real_factor
  // interpolates log(ratio) linearly in alpha r_c and holds the end values outside; 1 with
  // no nodes.
  void set_real_factors(const std::vector<double>& alpha_rc, const std::vector<double>& factors);
  double real_factor(double alpha_rc) const;
  const std::vector<double>& real_nodes() const { return real_x_; }
  const std::vector<double>& real_factors() const { return real_f_; }

 private:
  std::size_t index(long x0, long x1, long x2) const {
    return static_cast<std::size_t>(((x0 + half_[0]) * (2 * half_[1] + 1) + (x1 + half_[1])) * (2 * half_[2] + 1) +
                                    (x2 + half_[2]));
  }
  Int3 half_{0, 0, 0};
  std::uint64_t serial_ = 0;
  std::vector<double> c_, chi_;
  std::vector<double> real_x_, real_f_;
};

}  // namespace tuning
}  // namespace pmewald
