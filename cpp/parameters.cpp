#include "parameters.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "bspline.hpp"
#include "errors.hpp"
#include "kokkos_types.hpp"

namespace pmewald::kernels {

int fft_friendly(int n) {
  if (n < 1) n = 1;
  for (int m = n;; ++m) {
    int r = m;
    for (int f : {2, 3, 5})
      while (r % f == 0) r /= f;
    if (r == 1) return m;
  }
}

double real_space_error(double alpha, double cutoff, double sum_q2, int n_atoms, double volume,
                        double coulomb_constant) {
  if (n_atoms <= 0 || !(cutoff > 0) || !(volume > 0)) return 0.0;
  return 2.0 * std::fabs(coulomb_constant) * sum_q2 /
         std::sqrt(static_cast<double>(n_atoms) * cutoff * volume) *
         std::exp(-alpha * alpha * cutoff * cutoff);
}

namespace {

inline double sinc_pow(double x, int p) {  // (sin(pi x)/(pi x))^p
  if (x == 0.0) return 1.0;
  const double a = M_PI * x;
  return std::pow(std::sin(a) / a, p);
}

constexpr int kJ = 30;  // aliases for the U^2-only sums (polynomial decay)

struct Acc19 {
  double v[19];
  Acc19() {
    for (double& x : v) x = 0;
  }
  Acc19& operator+=(const Acc19& o) {
    for (int i = 0; i < 19; ++i) v[i] += o.v[i];
    return *this;
  }
  void operator+=(const volatile Acc19& o) volatile {
    for (int i = 0; i < 19; ++i) v[i] += o.v[i];
  }
};

}  // namespace
}  // namespace pmewald::kernels

namespace Kokkos {
template <>
struct reduction_identity<pmewald::kernels::Acc19> {
  static pmewald::kernels::Acc19 sum() { return pmewald::kernels::Acc19(); }
};
}  // namespace Kokkos

namespace pmewald::kernels {

double reciprocal_error(const Mat3& box, double alpha, const Int3& K, int p,
                        Differentiation diff, double sum_q2, int n_atoms,
                        double coulomb_constant, double sum_q4) {
  if (n_atoms <= 0 || sum_q2 <= 0) return 0.0;
  if (p < kMinOrder || p > kMaxOrder) throw ValueError("order must be in [3, 10]");
  for (int d = 0; d < 3; ++d)
    if (K[d] < p) throw ValueError("mesh smaller than the order");
  if (!(alpha > 0)) throw ValueError("alpha must be positive");
  if (sum_q4 < 0) sum_q4 = sum_q2 * sum_q2 / n_atoms;
  const Mat3 R = reciprocal_of(box);
  const double V = volume_of(box);
  const double two_pi = 2.0 * M_PI, inv4a2 = 1.0 / (4.0 * alpha * alpha);
  // metric of the frequency space: |2 pi R x|^2 = 4 pi^2 x^T Gm x
  double Gm[3][3];
  for (int d = 0; d < 3; ++d)
    for (int e = 0; e < 3; ++e) {
      double s = 0;
      for (int r = 0; r < 3; ++r) s += R[3 * r + d] * R[3 * r + e];
      Gm[d][e] = s;
    }
  // Per-axis tables, index g in [0, K) <-> signed m. The principal (j = 0)
  // alias is kept apart from the sums over j != 0 so that S(m), a small
  // difference of large terms, is assembled from non-cancelling pieces:
  //   S = sum_{j != j'} |D g U_j U_j'|^2 + sum_j |D_j g U_j^2 - R_j|^2.
  struct Axis {
    std::vector<int> m;
    std::vector<double> u0, B, r1;         // u(j=0), moduli, u0^2 B - 1
    std::vector<double> a[3], b[3];        // sum_{j!=0} x^k u^2 and x^k u^4, k = 0,1,2
    std::vector<double> u1, T0, T1;        // u at j = -1,0,1; self-force tables (n = -1,0,1)
  } ax[3];
  for (int d = 0; d < 3; ++d) {
    const int Kd = K[d];
    Axis& A = ax[d];
    A.m.assign(Kd, 0);
    A.u0.assign(Kd, 0);
    A.r1.assign(Kd, 0);
    for (int k = 0; k < 3; ++k) {
      A.a[k].assign(Kd, 0);
      A.b[k].assign(Kd, 0);
    }
    A.u1.assign(3 * Kd, 0);
    A.T0.assign(3 * Kd, 0);
    A.T1.assign(3 * Kd, 0);
    A.B = bspline_moduli(Kd, p);
    std::vector<double> u(2 * kJ + 3);
    for (int g = 0; g < Kd; ++g) {
      const int m = (2 * g > Kd) ? g - Kd : g;
      A.m[g] = m;
      for (int j = -kJ - 1; j <= kJ + 1; ++j)
        u[j + kJ + 1] = sinc_pow(static_cast<double>(m + j * Kd) / Kd, p);
      for (int j = -kJ; j <= kJ; ++j) {
        const double x = m + static_cast<double>(j) * Kd, uu = u[j + kJ + 1];
        if (j != 0) {
          const double u2 = uu * uu, u4 = u2 * u2;
          A.a[0][g] += u2;
          A.a[1][g] += x * u2;
          A.a[2][g] += x * x * u2;
          A.b[0][g] += u4;
          A.b[1][g] += x * u4;
          A.b[2][g] += x * x * u4;
        }
        for (int n = -1; n <= 1; ++n) {
          const double v = uu * u[j - n + kJ + 1];
          A.T0[3 * g + n + 1] += v;
          A.T1[3 * g + n + 1] += x * v;
        }
      }
      A.u0[g] = u[kJ + 1];
      A.r1[g] = A.u0[g] * A.u0[g] * A.B[g] - 1.0;
      for (int j = -1; j <= 1; ++j) A.u1[3 * g + j + 1] = u[j + kJ + 1];
    }
  }
  // prod_d (base_d + ex_d) - prod_d base_d, expanded over non-empty subsets
  auto excess3 = [](const double* base, const double* ex) {
    return ex[0] * base[1] * base[2] + base[0] * ex[1] * base[2] + base[0] * base[1] * ex[2] +
           ex[0] * ex[1] * base[2] + ex[0] * base[1] * ex[2] + base[0] * ex[1] * ex[2] +
           ex[0] * ex[1] * ex[2];
  };
  // sum_{j != 0} |2 pi recip (m + jK)|^2 U_j^q for q = 2 (pw = 1) or q = 4 (pw = 2)
  auto k2_moment = [&](const int* gg, const double* x0, int pw) {
    double tot = 0;
    for (int d = 0; d < 3; ++d)
      for (int e = 0; e < 3; ++e) {
        double base[3], ex[3];
        for (int c = 0; c < 3; ++c) {
          const double u0 = ax[c].u0[gg[c]];
          const double u0q = pw == 1 ? u0 * u0 : u0 * u0 * u0 * u0;
          const auto& tab = pw == 1 ? ax[c].a : ax[c].b;
          const int k = (c == d) + (c == e);  // power of x on this axis
          double xk = 1.0;
          for (int i = 0; i < k; ++i) xk *= x0[c];
          base[c] = xk * u0q;
          ex[c] = tab[k][gg[c]];
        }
        tot += Gm[d][e] * excess3(base, ex);
      }
    return 4.0 * M_PI * M_PI * tot;
  };
  // Sum over the mesh, using S(-m) = S(m): only one point of each pair
  // (m, -m) is visited (weight 2; self-conjugate points weight 1). The
  // self-force coefficients obey contrib(-m, n) = -contrib(m, -n).
  // Any alias j != 0 has |x_d| >= K_d/2 on some axis, and x_d = a_d . k / (2 pi),
  // so |k_j| >= min_d pi K_d / |a_d|.
  double kmin = 1e300;
  for (int d = 0; d < 3; ++d) {
    const double ad = std::sqrt(box[3 * d] * box[3 * d] + box[3 * d + 1] * box[3 * d + 1] +
                                box[3 * d + 2] * box[3 * d + 2]);
    kmin = std::fmin(kmin, M_PI * K[d] / ad);
  }
  const bool aliases_negligible = kmin * kmin * inv4a2 > 60.0;
  Acc19 tot;
  Kokkos::parallel_reduce(
      "pmewald::reciprocal_error", Kokkos::RangePolicy<ExecSpace>(0, K[0]),
      [&](const int g0, Acc19& acc) {
    for (int g1 = 0; g1 < K[1]; ++g1)
      for (int g2 = 0; g2 < K[2]; ++g2) {
        const int c0 = (K[0] - g0) % K[0], c1 = (K[1] - g1) % K[1], c2 = (K[2] - g2) % K[2];
        if (g0 > c0 || (g0 == c0 && (g1 > c1 || (g1 == c1 && g2 > c2)))) continue;
        const bool selfconj = (g0 == c0 && g1 == c1 && g2 == c2);
        const double wgt = selfconj ? 1.0 : 2.0;
        const int gg[3] = {g0, g1, g2};
        const int m[3] = {ax[0].m[g0], ax[1].m[g1], ax[2].m[g2]};
        const double x0[3] = {double(m[0]), double(m[1]), double(m[2])};
        const bool zero = (m[0] == 0 && m[1] == 0 && m[2] == 0);
        double k0[3], kp[3];
        for (int r = 0; r < 3; ++r) {
          k0[r] = two_pi * (R[3 * r] * m[0] + R[3 * r + 1] * m[1] + R[3 * r + 2] * m[2]);
          kp[r] = two_pi * (R[3 * r] * (2 * m[0] == K[0] ? 0 : m[0]) +
                            R[3 * r + 1] * (2 * m[1] == K[1] ? 0 : m[1]) +
                            R[3 * r + 2] * (2 * m[2] == K[2] ? 0 : m[2]));
        }
        const double k02 = k0[0] * k0[0] + k0[1] * k0[1] + k0[2] * k0[2];
        const double kp2 = kp[0] * kp[0] + kp[1] * kp[1] + kp[2] * kp[2];
        const bool nyq = kp2 != k02;
        const double B = ax[0].B[g0] * ax[1].B[g1] * ax[2].B[g2];
        const double f0 = zero ? 0.0 : 4.0 * M_PI * std::exp(-k02 * inv4a2) / k02;
        const double gi = f0 * B;
        double U0sq[3], a0[3], b0[3], U0q[3], ones[3] = {1, 1, 1}, r1[3];
        for (int d = 0; d < 3; ++d) {
          const double u0 = ax[d].u0[gg[d]];
          U0sq[d] = u0 * u0;
          U0q[d] = U0sq[d] * U0sq[d];
          a0[d] = ax[d].a[0][gg[d]];
          b0[d] = ax[d].b[0][gg[d]];
          r1[d] = ax[d].r1[gg[d]];
        }
        const double U02 = U0sq[0] * U0sq[1] * U0sq[2];
        const double D1 = excess3(U0sq, a0);       // sum_{j!=0} U_j^2
        const double D4 = excess3(U0q, b0);        // sum_{j!=0} U_j^4
        const double BU0m1 = excess3(ones, r1);    // B U_0^2 - 1
        // j = 0 diagonal term and the off-diagonal (j != j') terms
        double KU4 = 0;
        double S = 0;
        if (!zero) {
          if (diff == Differentiation::IK) {
            const double cross = 2.0 * U02 * D1 + (D1 * D1 - D4);
            S += kp2 * gi * gi * cross;
            if (!nyq) {
              S += k02 * f0 * f0 * BU0m1 * BU0m1;
            } else {
              for (int r = 0; r < 3; ++r) {
                const double v = kp[r] * gi * U02 - k0[r] * f0;
                S += v * v;
              }
            }
          } else {
            const double KU1 = k2_moment(gg, x0, 1);  // sum_{j!=0} k_j^2 U_j^2
            KU4 = k2_moment(gg, x0, 2);  // sum_{j!=0} k_j^2 U_j^4
            const double bracket = k02 * U02 * D1 + KU1 * (U02 + D1) - KU4;
            S += gi * gi * bracket + k02 * f0 * f0 * BU0m1 * BU0m1;
          }
        }
        // j != 0 diagonal terms, sum_{j!=0} |D_j g U_j^2 - R_j|^2, split as
        //   ik: |k'|^2 g^2 sum_{j!=0} U_j^4 + sum_{j!=0} (k_j^2 f_j^2 - 2 g U_j^2 f_j k'.k_j)
        //   ad: g^2 sum_{j!=0} k_j^2 U_j^4 + sum_{j!=0} (k_j^2 f_j^2 - 2 g U_j^2 f_j k_j^2):
        // the first part uses the factorised alias sums (|j_d| <= 30), the
        // second only aliases whose Gaussian matters (|j_d| <= 1, skipped
        // altogether when the nearest alias is beyond exp(-60)).
        if (!zero) {
          if (diff == Differentiation::IK) S += kp2 * gi * gi * D4;
          else S += gi * gi * KU4;
        }
        if (!aliases_negligible) {
          for (int j0 = -1; j0 <= 1; ++j0)
            for (int j1 = -1; j1 <= 1; ++j1)
              for (int j2 = -1; j2 <= 1; ++j2) {
                if (j0 == 0 && j1 == 0 && j2 == 0) continue;
                const double x[3] = {m[0] + static_cast<double>(j0) * K[0],
                                     m[1] + static_cast<double>(j1) * K[1],
                                     m[2] + static_cast<double>(j2) * K[2]};
                double kj[3];
                for (int r = 0; r < 3; ++r)
                  kj[r] = two_pi * (R[3 * r] * x[0] + R[3 * r + 1] * x[1] + R[3 * r + 2] * x[2]);
                const double kj2 = kj[0] * kj[0] + kj[1] * kj[1] + kj[2] * kj[2];
                const double ex = kj2 * inv4a2;
                if (ex > 60.0) continue;  // negligible next to g U_j^2
                const double fj = 4.0 * M_PI * std::exp(-ex) / kj2;
                const double uj = ax[0].u1[3 * g0 + j0 + 1] * ax[1].u1[3 * g1 + j1 + 1] *
                                  ax[2].u1[3 * g2 + j2 + 1];
                const double Uj2 = uj * uj;
                const double kdot = diff == Differentiation::IK
                                        ? kp[0] * kj[0] + kp[1] * kj[1] + kp[2] * kj[2]
                                        : kj2;
                S += kj2 * fj * fj - 2.0 * gi * Uj2 * fj * kdot;
              }
        }
        acc.v[0] += wgt * S;
        if (gi == 0.0) continue;
        // self-force Fourier coefficients (up to the common factor -i/V);
        // only the six n = +-e_d: the other n != 0 are products of two or
        // three first-order-small T0 factors (second order, negligible)
        double contr[6][3];
        for (int face = 0; face < 6; ++face) {
          int nn[3] = {0, 0, 0};
          nn[face / 2] = (face % 2) ? 1 : -1;
          double t0[3], t1[3];
          for (int d = 0; d < 3; ++d) {
            t0[d] = ax[d].T0[3 * gg[d] + nn[d] + 1];
            t1[d] = ax[d].T1[3 * gg[d] + nn[d] + 1];
          }
          double* c = contr[face];
          if (diff == Differentiation::IK) {
            const double t = gi * t0[0] * t0[1] * t0[2];
            for (int r = 0; r < 3; ++r) c[r] = kp[r] * t;
          } else {
            const double w0 = t1[0] * t0[1] * t0[2], w1 = t0[0] * t1[1] * t0[2],
                         w2 = t0[0] * t0[1] * t1[2];
            for (int r = 0; r < 3; ++r)
              c[r] = gi * two_pi * (R[3 * r] * w0 + R[3 * r + 1] * w1 + R[3 * r + 2] * w2);
          }
        }
        for (int face = 0; face < 6; ++face) {
          const int other = face ^ 1;  // -n
          for (int r = 0; r < 3; ++r)
            acc.v[1 + 3 * face + r] +=
                selfconj ? contr[face][r] : contr[face][r] - contr[other][r];
        }
      }
      },
      Kokkos::Sum<Acc19>(tot));
  const double S_sum = tot.v[0];
  double self2 = 0;
  for (int i = 1; i < 19; ++i) self2 += tot.v[i] * tot.v[i];
  self2 /= V * V;
  const double pair = (sum_q2 * sum_q2 - sum_q4) * std::fmax(S_sum, 0.0) / (V * V);
  const double var = (pair + sum_q4 * self2) / n_atoms;
  return std::fabs(coulomb_constant) * std::sqrt(std::fmax(var, 0.0));
}

namespace {

Int3 mesh_for_density(double s, const std::array<double, 3>& h, int p) {
  Int3 K;
  for (int d = 0; d < 3; ++d) {
    const double want = std::ceil(s * h[d] - 1e-9);
    const int k = want > 4096 ? 4097 : static_cast<int>(want);
    K[d] = fft_friendly(std::max(k, p));
  }
  return K;
}

struct MeshChoice {
  Int3 mesh;
  double err;
};

MeshChoice smallest_mesh(const Mat3& box, double alpha, int p, Differentiation diff,
                         double sum_q2, int n, double kc, double sum_q4, double goal) {
  // K_d(s) = fft_friendly(ceil(s h_d)), s = mesh points per unit height.
  // Phase 1 brackets the smallest s meeting the goal by power-law
  // extrapolation of the estimate (error ~ s^-slope); phase 2 bisects in
  // log s down to 2% so the returned mesh is the smallest on that grid.
  constexpr int kMaxMesh = 512;
  const auto h = heights_of(box);
  const double hmin = std::fmin(h[0], std::fmin(h[1], h[2]));
  const double hmax = std::fmax(h[0], std::fmax(h[1], h[2]));
  const double s_cap = kMaxMesh / hmax;
  auto eval = [&](double s, Int3& K) {
    K = mesh_for_density(s, h, p);
    return reciprocal_error(box, alpha, K, p, diff, sum_q2, n, kc, sum_q4);
  };
  auto fail = [&]() {
    return ValueError("no mesh up to " + std::to_string(kMaxMesh) +
                      " points per axis reaches the requested accuracy with order " +
                      std::to_string(p) + "; loosen the tolerance or raise the order/cutoff");
  };
  double s_lo = 0, s = p / hmin * 0.999, e_lo = 0;
  Int3 K;
  double e = eval(s, K);
  if (e <= goal) return {K, e};
  for (int it = 0; it < 60; ++it) {
    double slope = p;
    if (s_lo > 0 && e_lo > e) slope = std::fmax(std::log(e_lo / e) / std::log(s / s_lo), 1.0);
    double s_new = s * std::pow(e / goal, 1.0 / slope) * 0.97;
    s_new = std::fmin(std::fmax(s_new, 1.08 * s), 3.0 * s);
    if (s >= s_cap) throw fail();
    // give up early when even an optimistic power law (slope >= p) predicts
    // the error at the largest allowed mesh to stay well above the goal
    if (e * std::pow(s / s_cap, std::fmax(slope, static_cast<double>(p))) > 4.0 * goal)
      throw fail();
    s_new = std::fmin(s_new, s_cap);
    s_lo = s;
    e_lo = e;
    s = s_new;
    Int3 Kn;
    e = eval(s, Kn);
    if (e <= goal) {
      // bisect (s_lo, s]
      MeshChoice best{Kn, e};
      double lo = s_lo, hi = s;
      Int3 Klo = mesh_for_density(lo, h, p);
      while (hi / lo > 1.02) {
        const double mid = std::sqrt(lo * hi);
        Int3 Km;
        const double em = eval(mid, Km);
        if (Km == Klo) { lo = mid; continue; }
        if (em <= goal) {
          hi = mid;
          best = {Km, em};
        } else {
          lo = mid;
          Klo = Km;
        }
        if (Km == best.mesh && em > goal) break;
      }
      return best;
    }
  }
  throw fail();
}

}  // namespace

Parameters choose_parameters(const Mat3& box, double cutoff, double target, double sum_q2,
                             int n_atoms, Differentiation diff, double kc, double alpha,
                             const Int3& mesh, int order, double sum_q4) {
  if (!(target > 0) || !std::isfinite(target)) throw ValueError("target error must be positive");
  if (!(cutoff > 0) || !std::isfinite(cutoff)) throw ValueError("cutoff must be positive");
  if (order > 0 && (order < kMinOrder || order > kMaxOrder))
    throw ValueError("order must be in [3, 10], got " + std::to_string(order));
  const double V = volume_of(box);
  const int n = std::max(n_atoms, 1);
  Parameters P;
  if (alpha > 0) {
    P.alpha = alpha;
  } else {
    const double arg = 2.0 * std::sqrt(2.0) * std::fabs(kc) * sum_q2 /
                       (target * std::sqrt(static_cast<double>(n) * cutoff * V));
    P.alpha = std::sqrt(std::fmax(std::log(std::fmax(arg, 1.0)), 1.0)) / cutoff;
  }
  P.est_real = real_space_error(P.alpha, cutoff, sum_q2, n, V, kc);
  double goal = target / std::sqrt(2.0);
  if (P.est_real < target) goal = std::fmax(goal, std::sqrt(target * target - P.est_real * P.est_real));
  const bool fixed_mesh = mesh[0] > 0 && mesh[1] > 0 && mesh[2] > 0;
  auto finish = [&](const Int3& K, int p) {
    P.mesh = K;
    P.order = p;
    P.est_recip = reciprocal_error(box, P.alpha, K, p, diff, sum_q2, n, kc, sum_q4);
    P.est_total = std::sqrt(P.est_real * P.est_real + P.est_recip * P.est_recip);
    return P;
  };
  if (order > 0) {
    if (fixed_mesh) return finish(mesh, order);
    const MeshChoice c = smallest_mesh(box, P.alpha, order, diff, sum_q2, n, kc, sum_q4, goal);
    return finish(c.mesh, order);
  }
  // choose the order by a simple cost model
  double best_cost = -1;
  Int3 bestK{0, 0, 0};
  int bestp = 5;
  for (int p = 4; p <= 7; ++p) {
    Int3 K = mesh;
    if (!fixed_mesh) {
      try {
        K = smallest_mesh(box, P.alpha, p, diff, sum_q2, n, kc, sum_q4, goal).mesh;
      } catch (const ValueError&) {
        continue;
      }
    } else if (K[0] < p || K[1] < p || K[2] < p) {
      continue;
    }
    const double Nm = static_cast<double>(K[0]) * K[1] * K[2];
    const double nfft = diff == Differentiation::IK ? 4.0 : 2.0;
    const double cost = nfft * 2.5 * Nm * std::log2(Nm) + 2.0 * n * p * p * p;
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      bestK = K;
      bestp = p;
    }
  }
  if (best_cost < 0)
    throw ValueError("no order in 4..7 with a mesh up to 512 per axis reaches the target");
  return finish(bestK, bestp);
}

}  // namespace pmewald::kernels
