#include "tuning/real_space_tail.hpp"

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>

#include "base/errors.hpp"
#include "base/kokkos_types.hpp"
#include "base/kokkos_runtime.hpp"

namespace pmewald {
inline namespace tuning {

double tail_radius(double alpha, double cutoff) {
  return std::sqrt(cutoff * cutoff + kTailExponent / (alpha * alpha));
}

std::vector<double> local_tail_fields(const Mat3& box, double cutoff, const std::vector<double>& alphas,
                                      const double* samples, std::size_t n_samples, const double* positions,
                                      const double* charges, std::size_t n) {
  ensure_kokkos_initialized();  // this thread may run kernels (base/kokkos_runtime.hpp)
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
  // Fractional coordinates in [0, 1) of the atoms and the samples.
  auto fractional = [&](const double* p, std::size_t m) {
    std::vector<double> f(3 * m);
    for (std::size_t a = 0; a < m; ++a)
      for (int d = 0; d < 3; ++d) {
        double s = 0;
        for (int r = 0; r < 3; ++r) s += R[3 * r + d] * p[3 * a + r];
        double w = s - std::floor(s);
        if (w >= 1.0) w -= 1.0;  // s just below an integer: s - floor(s) rounds to 1
        f[3 * a + d] = w;
      }
    return f;
  };
  const std::vector<double> fa = fractional(positions, n), fs = fractional(samples, n_samples);
  // A cell list of the atoms, cells at least rmax / 2 high (nc_d per axis, at least 1):
  // an image n of atom j within rmax of a sample s has |s_d - f_jd - n_d| h_d < rmax, so
  // its unwrapped cell index floor((f_jd + n_d) nc_d) lies in [floor((s_d - rho_d) nc_d),
  // floor((s_d + rho_d) nc_d)], rho_d = rmax / h_d; each unwrapped index names one
  // (cell, image) pair, so every image is visited once. About 15 rmax^3 of volume per
  // sample instead of the whole box (measured in docs/accuracy.md, "Cost of the sample").
  // At most ~4 cells per atom (a large, sparse box, e.g. a slab's vacuum, must not allocate
  // a fine empty grid): the finest axis is halved until that holds; coarser cells stay valid.
  int nc[3];
  double rho[3];
  for (int d = 0; d < 3; ++d) {
    const double cells = std::floor(2.0 * h[d] / rmax);
    nc[d] = cells < 1 ? 1 : cells > 1 << 20 ? 1 << 20 : static_cast<int>(cells);
    rho[d] = rmax / h[d] * (1.0 + 1e-9) + 1e-12;  // a hair wider: cell edges in rounded arithmetic
  }
  const double max_cells = 4.0 * static_cast<double>(n) + 64.0;
  while (static_cast<double>(nc[0]) * nc[1] * nc[2] > max_cells) {
    int* widest = std::max_element(nc, nc + 3);
    *widest = std::max(1, *widest / 2);
  }
  const std::size_t ncell = static_cast<std::size_t>(nc[0]) * nc[1] * nc[2];
  std::vector<int> cell_start(ncell + 1, 0), cell_atoms(n), cell_of(n);
  for (std::size_t j = 0; j < n; ++j) {
    int c[3];
    for (int d = 0; d < 3; ++d) c[d] = std::min(nc[d] - 1, static_cast<int>(fa[3 * j + d] * nc[d]));
    cell_of[j] = (c[0] * nc[1] + c[1]) * nc[2] + c[2];
    ++cell_start[static_cast<std::size_t>(cell_of[j]) + 1];
  }
  for (std::size_t c = 0; c < ncell; ++c) cell_start[c + 1] += cell_start[c];
  std::vector<int> fill(cell_start.begin(), cell_start.end() - 1);
  for (std::size_t j = 0; j < n; ++j)
    cell_atoms[static_cast<std::size_t>(fill[static_cast<std::size_t>(cell_of[j])]++)] = static_cast<int>(j);
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
  const int* cs = cell_start.data();
  const int* ca = cell_atoms.data();
  double* op = out.data();
  const double* A = alphas.data();
  const double *r2p = r2max.data(), *a2p = a2.data(), *c2p = c2.data();
  const Mat3 B = box;
  const int n0 = nc[0], n1 = nc[1], n2 = nc[2];
  const double rho0 = rho[0], rho1 = rho[1], rho2 = rho[2];
  auto floor_div = [](int c, int m) { return c >= 0 ? c / m : -((-c + m - 1) / m); };
  // One sample point per iteration: it writes only its own field entries.
  Kokkos::parallel_for(
      "pmewald::tail_fields", Range(0, static_cast<int>(n_samples)), [=](const int s) {
        const double s0 = fsp[3 * s], s1 = fsp[3 * s + 1], s2 = fsp[3 * s + 2];
        const int lo0 = static_cast<int>(std::floor((s0 - rho0) * n0)), hi0 = static_cast<int>(std::floor((s0 + rho0) * n0));
        const int lo1 = static_cast<int>(std::floor((s1 - rho1) * n1)), hi1 = static_cast<int>(std::floor((s1 + rho1) * n1));
        const int lo2 = static_cast<int>(std::floor((s2 - rho2) * n2)), hi2 = static_cast<int>(std::floor((s2 + rho2) * n2));
        for (int c0 = lo0; c0 <= hi0; ++c0) {
          const int i0 = floor_div(c0, n0), w0 = c0 - i0 * n0;
          for (int c1 = lo1; c1 <= hi1; ++c1) {
            const int i1 = floor_div(c1, n1), w1 = c1 - i1 * n1;
            for (int c2 = lo2; c2 <= hi2; ++c2) {
              const int i2 = floor_div(c2, n2), w2 = c2 - i2 * n2;
              const int cell = (w0 * n1 + w1) * n2 + w2;
              for (int b = cs[cell]; b < cs[cell + 1]; ++b) {
                const std::size_t j = static_cast<std::size_t>(ca[b]);
                const double g0 = s0 - fap[3 * j] - i0, g1 = s1 - fap[3 * j + 1] - i1, g2 = s2 - fap[3 * j + 2] - i2;
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
