#include "tuning/real_space_tail.hpp"

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>

#include "base/errors.hpp"
#include "base/kokkos_types.hpp"

namespace pmewald {
inline namespace tuning {

double tail_radius(double alpha, double cutoff) {
  return std::sqrt(cutoff * cutoff + kTailExponent / (alpha * alpha));
}

std::vector<double> local_tail_fields(const Mat3& box, double cutoff, const std::vector<double>& alphas,
                                      const double* samples, std::size_t n_samples, const double* positions,
                                      const double* charges, std::size_t n) {
  if (!(cutoff > 0) || !std::isfinite(cutoff)) throw ValueError("cutoff must be positive and finite");
  double rmax = 0;
  for (double a : alphas) {
    if (!(a > 0) || !std::isfinite(a)) throw ValueError("alphas must be positive and finite");
    rmax = std::max(rmax, tail_radius(a, cutoff));
  }
  const std::size_t na = alphas.size();
  std::vector<double> out(na * n_samples * 3, 0.0);
  if (na == 0 || n_samples == 0 || n == 0) return out;
  const Mat3 R = reciprocal_of(box);
  const std::array<double, 3> h = heights_of(box);
  // fractional coordinates of the atoms and the samples
  auto fractional = [&](const double* p, std::size_t m) {
    std::vector<double> f(3 * m);
    for (std::size_t a = 0; a < m; ++a)
      for (int d = 0; d < 3; ++d) {
        double s = 0;
        for (int r = 0; r < 3; ++r) s += R[3 * r + d] * p[3 * a + r];
        f[3 * a + d] = s - std::floor(s);
      }
    return f;
  };
  const std::vector<double> fa = fractional(positions, n), fs = fractional(samples, n_samples);
  // |f_d + n_d| h_d < rmax with |f_d| <= 1/2 bounds the images
  int nmax[3];
  for (int d = 0; d < 3; ++d) nmax[d] = static_cast<int>(std::floor(rmax / h[d] + 0.5));
  std::vector<double> r2max(na), a2(na), c2(na);
  for (std::size_t k = 0; k < na; ++k) {
    const double r = tail_radius(alphas[k], cutoff);
    r2max[k] = r * r;
    a2[k] = alphas[k] * alphas[k];
    c2[k] = 2.0 * alphas[k] / std::sqrt(M_PI);
  }
  const double rc2 = cutoff * cutoff, rmax2 = rmax * rmax;
  const double* fap = fa.data();
  const double* fsp = fs.data();
  double* op = out.data();
  const double* A = alphas.data();
  const double *r2p = r2max.data(), *a2p = a2.data(), *c2p = c2.data();
  const Mat3 B = box;
  // One sample point per iteration: it writes only its own field entries.
  Kokkos::parallel_for(
      "pmewald::tail_fields", Range(0, static_cast<int>(n_samples)), [=](const int s) {
        for (std::size_t j = 0; j < n; ++j) {
          double f0[3];
          for (int d = 0; d < 3; ++d) {
            double x = fsp[3 * s + d] - fap[3 * j + d];
            f0[d] = x - std::floor(x + 0.5);
          }
          for (int i0 = -nmax[0]; i0 <= nmax[0]; ++i0) {
            const double g0 = f0[0] + i0;
            if (std::fabs(g0) * h[0] >= rmax) continue;
            for (int i1 = -nmax[1]; i1 <= nmax[1]; ++i1) {
              const double g1 = f0[1] + i1;
              if (std::fabs(g1) * h[1] >= rmax) continue;
              for (int i2 = -nmax[2]; i2 <= nmax[2]; ++i2) {
                const double g2 = f0[2] + i2;
                if (std::fabs(g2) * h[2] >= rmax) continue;
                double d[3];
                for (int c = 0; c < 3; ++c) d[c] = g0 * B[c] + g1 * B[3 + c] + g2 * B[6 + c];
                const double r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
                if (r2 <= rc2 || r2 >= rmax2) continue;
                const double r = std::sqrt(r2);
                for (std::size_t k = 0; k < na; ++k) {
                  if (r2 >= r2p[k]) continue;
                  // erfc(x) = t P(t) exp(-x^2), t = 1 / (1 + 0.3275911 x) (Abramowitz & Stegun
                  // 7.1.26, relative error of the force term below 1e-4 for x >= 1: its error grows where
                  // erfc is a small part of g): one exponential per pair and alpha
                  const double x = A[k] * r, e = std::exp(-a2p[k] * r2), t = 1.0 / (1.0 + 0.3275911 * x);
                  const double erfc_x =
                      t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))) *
                      e;
                  const double g = (erfc_x / r + c2p[k] * e) / r2;
                  const double w = charges[j] * g;
                  double* o = op + 3 * (k * n_samples + static_cast<std::size_t>(s));
                  for (int c = 0; c < 3; ++c) o[c] += w * d[c];
                }
              }
            }
          }
        }
      });
  Kokkos::fence();
  return out;
}

}  // namespace tuning
}  // namespace pmewald
