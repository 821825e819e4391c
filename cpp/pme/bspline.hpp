// Cardinal B-splines M_p of order p (support [0, p], piecewise degree p-1) for
// smooth PME (Essmann et al., J. Chem. Phys. 103, 8577 (1995)).
//
//   M_2(x) = 1 - |x - 1| on [0, 2],
//   M_n(x) = x/(n-1) M_{n-1}(x) + (n-x)/(n-1) M_{n-1}(x-1),
//   M_n'(x) = M_{n-1}(x) - M_{n-1}(x-1).
//
// An atom at scaled fractional coordinate u (per axis) spreads onto the p mesh
// points k_j = floor(u) - p + 1 + j, j = 0..p-1, with weight M_p(u - k_j)
// = M_p(w + p - 1 - j), w = u - floor(u).
#pragma once

#include <type_traits>

#include <Kokkos_Core.hpp>
#include <vector>

namespace pmewald {
inline namespace pme {

constexpr int kMinOrder = 3;
constexpr int kMaxOrder = 10;

// Calls f(std::integral_constant<int, P>{}) with P = order (kMinOrder..kMaxOrder),
// so stencil loops get compile-time trip counts (unrolled, vectorised).
template <class F>
inline void with_order(int order, F&& f) {
  switch (order) {
    case 3: f(std::integral_constant<int, 3>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 5: f(std::integral_constant<int, 5>{}); break;
    case 6: f(std::integral_constant<int, 6>{}); break;
    case 7: f(std::integral_constant<int, 7>{}); break;
    case 8: f(std::integral_constant<int, 8>{}); break;
    case 9: f(std::integral_constant<int, 9>{}); break;
    case 10: f(std::integral_constant<int, 10>{}); break;
    default: break;  // callers validate the order first
  }
}

// Weights M[j] = M_p(w + p-1-j) and (if dM != nullptr) their derivatives with
// respect to u, dM[j] = M_p'(w + p-1-j), for j = 0..p-1; 0 <= w < 1, 2 <= p <= kMaxOrder.
// Partition of unity: sum_j M[j] = 1, sum_j dM[j] = 0.
KOKKOS_INLINE_FUNCTION void bspline_weights(int p, double w, double* M, double* dM) {
  double a[kMaxOrder];  // a[i] = M_n(w + i), i = 0..n-1
  double d[kMaxOrder];
  a[0] = w;
  a[1] = 1.0 - w;
  if (p == 2 && dM) { d[0] = 1.0; d[1] = -1.0; }
  for (int n = 3; n <= p; ++n) {
    if (n == p && dM) {
      d[0] = a[0];
      for (int i = 1; i < n - 1; ++i) d[i] = a[i] - a[i - 1];
      d[n - 1] = -a[n - 2];
    }
    const double inv = 1.0 / (n - 1);
    a[n - 1] = (1.0 - w) * a[n - 2] * inv;
    for (int i = n - 2; i >= 1; --i) a[i] = ((w + i) * a[i] + (n - w - i) * a[i - 1]) * inv;
    a[0] = w * a[0] * inv;
  }
  for (int j = 0; j < p; ++j) M[j] = a[p - 1 - j];
  if (dM)
    for (int j = 0; j < p; ++j) dM[j] = d[p - 1 - j];
}

// bspline_weights with the order P a compile-time constant (fully unrolled,
// constant reciprocals): what the stencil computation uses.
template <int P, bool kDerivatives>
KOKKOS_INLINE_FUNCTION void bspline_weights_fixed(double w, double* M, double* dM) {
  static_assert(P >= 3 && P <= kMaxOrder, "order out of range");
  double a[P];  // a[i] = M_n(w + i), i = 0..n-1
  a[0] = w;
  a[1] = 1.0 - w;
#pragma GCC unroll 10
  for (int n = 3; n <= P; ++n) {
    if (kDerivatives && n == P) {
      dM[P - 1] = a[0];
      for (int i = 1; i < n - 1; ++i) dM[P - 1 - i] = a[i] - a[i - 1];
      dM[0] = -a[n - 2];
    }
    const double inv = 1.0 / (n - 1);
    a[n - 1] = (1.0 - w) * a[n - 2] * inv;
#pragma GCC unroll 10
    for (int i = n - 2; i >= 1; --i) a[i] = ((w + i) * a[i] + (n - w - i) * a[i - 1]) * inv;
    a[0] = w * a[0] * inv;
  }
  for (int j = 0; j < P; ++j) M[j] = a[P - 1 - j];
}

// Value of M_p at x (0 outside [0, p]); host convenience for tests.
double bspline_value(int p, double x);

// Euler exponential-spline moduli |b(m)|^2, m = 0..K-1, of one axis:
//   |b(m)|^2 = 1 / |sum_{k=0}^{p-2} M_p(k+1) exp(2 pi i m k / K)|^2.
// For odd p and even K the denominator vanishes at m = K/2; there (and wherever
// it is < 1e-7) the denominator is replaced by the mean of its neighbours
// (the standard fix used by GROMACS/OpenMM). Throws ValueError for p out of
// [kMinOrder, kMaxOrder] or K < 1.
std::vector<double> bspline_moduli(int K, int p);

}  // namespace pme
}  // namespace pmewald
