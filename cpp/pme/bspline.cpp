#include "pme/bspline.hpp"

#include <cmath>
#include <string>

#include "base/errors.hpp"

namespace pmewald {
inline namespace pme {

double bspline_value(int p, double x) {
  if (!(x > 0.0) || !(x < p)) return 0.0;
  const double fl = std::floor(x);
  double M[kMaxOrder];
  bspline_weights(p, x - fl, M, nullptr);
  // M[j] = M_p(w + p-1-j) -> x = w + i with i = p-1-j
  return M[p - 1 - static_cast<int>(fl)];
}

std::vector<double> bspline_moduli(int K, int p) {
  if (p < kMinOrder || p > kMaxOrder)
    throw ValueError("B-spline order must be in [3, 10], got " + std::to_string(p));
  if (K < 1) throw ValueError("mesh size must be positive");
  // M_p at the integers 1..p-1: bspline_weights at w = 0 gives M[j] = M_p(p-1-j).
  double M[kMaxOrder];
  bspline_weights(p, 0.0, M, nullptr);
  std::vector<double> den(K);
  const double two_pi = 2.0 * M_PI;
  for (int m = 0; m < K; ++m) {
    double re = 0, im = 0;
    for (int k = 0; k <= p - 2; ++k) {
      const double v = M[p - 2 - k];  // M_p(k+1)
      const double arg = two_pi * static_cast<double>(m) * k / K;
      re += v * std::cos(arg);
      im += v * std::sin(arg);
    }
    den[m] = re * re + im * im;
  }
  std::vector<double> fixed(den);
  for (int m = 0; m < K; ++m)
    if (den[m] < 1e-7) fixed[m] = 0.5 * (den[(m - 1 + K) % K] + den[(m + 1) % K]);
  std::vector<double> b(K);
  for (int m = 0; m < K; ++m) b[m] = 1.0 / fixed[m];
  return b;
}

}  // namespace pme
}  // namespace pmewald
