#include "tuning/mesh_error_sum.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "base/kokkos_runtime.hpp"
#include "base/kokkos_types.hpp"
#include "pme/bspline.hpp"

namespace pmewald {
inline namespace tuning {

namespace {

inline double sinc_pow(double x, int p) {  // (sin(pi x)/(pi x))^p
  if (x == 0.0) return 1.0;
  const double a = M_PI * x;
  return std::pow(std::sin(a) / a, p);
}

constexpr int kJ = 30;  // aliases for the U^2-only sums (polynomial decay)

// v[0]: sum of S(m); v[1..18]: the self-force coefficients of the six n = +-e_d (3
// components each); v[19..36]: the same weighted by the neighbours' correlation chi.
constexpr int kAcc = 37;
struct Acc19 {
  double v[kAcc];
  Acc19() {
    for (double& x : v) x = 0;
  }
  Acc19& operator+=(const Acc19& o) {
    for (int i = 0; i < kAcc; ++i) v[i] += o.v[i];
    return *this;
  }
  void operator+=(const volatile Acc19& o) volatile {
    for (int i = 0; i < kAcc; ++i) v[i] += o.v[i];
  }
};

}  // namespace
}  // namespace tuning
}  // namespace pmewald

namespace Kokkos {
template <>
struct reduction_identity<pmewald::tuning::Acc19> {
  static pmewald::tuning::Acc19 sum() { return pmewald::tuning::Acc19(); }
};
}  // namespace Kokkos

namespace pmewald {
inline namespace tuning {

namespace {

// Per-axis tables, index g in [0, K) <-> signed m. The principal (j = 0)
// alias is kept apart from the sums over j != 0 so that S(m), a small
// difference of large terms, is assembled from non-cancelling pieces:
//   S = sum_{j != j'} |D g U_j U_j'|^2 + sum_j |D_j g U_j^2 - R_j|^2.
struct Axis {
  std::vector<int> m;
  std::vector<double> u0, B, r1;         // u(j=0), moduli, u0^2 B - 1
  std::vector<double> a[3], b[3];        // sum_{j!=0} x^k u^2 and x^k u^4, k = 0,1,2
  std::vector<double> u1, T0, T1;        // u at j = -1,0,1; self-force tables (n = -1,0,1)
};

// The tables of one axis of Kd points, order p.
Axis axis_table(int Kd, int p) {
  Axis A;
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
  return A;
}

// axis_table of (Kd, p), remembered: it depends on nothing else, and its sinc powers (63
// per point, pow and sin) cost as much as the sum itself on the small meshes of the
// choice's tables. Bounded; cleared when full; shared by the threads.
Axis remembered_axis_table(int Kd, int p) {
  static std::mutex m;
  static std::map<std::pair<int, int>, Axis> tables;
  const std::pair<int, int> key{Kd, p};
  {
    const std::lock_guard<std::mutex> lock(m);
    const auto it = tables.find(key);
    if (it != tables.end()) return it->second;
  }
  Axis a = axis_table(Kd, p);
  const std::lock_guard<std::mutex> lock(m);
  if (tables.size() >= 512) tables.clear();
  tables.emplace(key, a);
  return a;
}

// What the sum over the mesh reads: the mesh and differentiation, the reciprocal
// lattice, the axis tables and the part of the mesh that is visited.
struct MeshSum {
  Int3 K;
  bool ik;                              // ik differentiation (else ad)
  const ChargeCorrelation* corr;        // nullptr: uncorrelated charges
  Mat3 R;                               // reciprocal_of(box)
  double two_pi, inv4a2;
  double Gm[3][3];                      // metric of the frequency space: |2 pi R x|^2 = 4 pi^2 x^T Gm x
  Axis ax[3];
  bool aliases_negligible;
  // An orthogonal reciprocal metric (orthorhombic boxes): exp(-|k|^2 / 4 alpha^2) of any alias
  // |b_d| <= 1 is then the product of per-axis factors, gauss[d][3 g + b + 1].
  bool orthogonal = false;
  std::vector<double> gauss[3];
  std::vector<double> kk[3];  // orthogonal: the axis' part of |k_b|^2, 4 pi^2 Gm_dd x_d^2, at [3 g + b + 1]
  double rm2;                           // the ellipsoid m^T Gm m <= rm2 (aliases negligible)
  int mlo[3], mhi[3];                   // the signed m visited per axis
};

// The bounds of the sum. Any alias j != 0 has |x_d| >= K_d/2 on some axis, and
// x_d = a_d . k / (2 pi), so |k_j| >= min_d pi K_d / |a_d|.
void set_bounds(MeshSum& ms, const Mat3& box, double alpha) {
  const Int3& K = ms.K;
  double kmin = 1e300;
  for (int d = 0; d < 3; ++d) {
    const double ad = std::sqrt(box[3 * d] * box[3 * d] + box[3 * d + 1] * box[3 * d + 1] +
                                box[3 * d + 2] * box[3 * d + 2]);
    kmin = std::fmin(kmin, M_PI * K[d] / ad);
  }
  ms.aliases_negligible = kmin * kmin * ms.inv4a2 > 60.0;
  // With negligible aliases every term of S(m) and of the self force carries f(k_0) (or
  // g = f(k_0) B), so the points with |k_0|^2 / 4 alpha^2 > 60 add nothing (< e^-60
  // relative): the sum then runs over the ellipsoid m^T Gm m <= 240 alpha^2 / 4 pi^2 only
  // (|m_d| <= that radius times |a_d|), which lies inside the principal zone exactly when
  // the aliases are negligible. For fine meshes this is a small part of the mesh: the cost
  // no longer grows with K (about (5 alpha |a|)^3 / 2 points).
  ms.rm2 = 240.0 * alpha * alpha / (4.0 * M_PI * M_PI);
  for (int d = 0; d < 3; ++d) {
    ms.mlo[d] = -((K[d] - 1) / 2);
    ms.mhi[d] = K[d] / 2;
    if (ms.aliases_negligible) {
      const double ad = std::sqrt(box[3 * d] * box[3 * d] + box[3 * d + 1] * box[3 * d + 1] +
                                  box[3 * d + 2] * box[3 * d + 2]);
      const int r = static_cast<int>(std::floor(std::sqrt(ms.rm2) * ad)) + 1;
      ms.mlo[d] = std::max(ms.mlo[d], -r);
      ms.mhi[d] = std::min(ms.mhi[d], r);
    }
  }
}

// prod_d (base_d + ex_d) - prod_d base_d, expanded over non-empty subsets
double excess3(const double* base, const double* ex) {
  return ex[0] * base[1] * base[2] + base[0] * ex[1] * base[2] + base[0] * base[1] * ex[2] +
         ex[0] * ex[1] * base[2] + ex[0] * base[1] * ex[2] + base[0] * ex[1] * ex[2] +
         ex[0] * ex[1] * ex[2];
}

// ku1 = sum_{j != 0} |2 pi recip (m + jK)|^2 U_j^2 and ku4 the same with U_j^4
void k2_moments(const MeshSum& ms, const int* gg, const double* x0, double& ku1, double& ku4) {
  // base[q][k][c] = x_c^k U_0c^q and ex[q][k][c] = sum_{j!=0} x^k u^q on axis c (q = 2, 4)
  double base[2][3][3], ex[2][3][3];
  for (int c = 0; c < 3; ++c) {
    const double u2 = ms.ax[c].u0[gg[c]] * ms.ax[c].u0[gg[c]];
    double xk = 1.0;
    for (int k = 0; k < 3; ++k, xk *= x0[c]) {
      base[0][k][c] = xk * u2;
      base[1][k][c] = xk * u2 * u2;
      ex[0][k][c] = ms.ax[c].a[k][gg[c]];
      ex[1][k][c] = ms.ax[c].b[k][gg[c]];
    }
  }
  double tot[2] = {0.0, 0.0};
  for (int d = 0; d < 3; ++d)
    for (int e = 0; e < 3; ++e) {
      if (ms.Gm[d][e] == 0.0) continue;  // orthogonal reciprocal axes d and e
      for (int q = 0; q < 2; ++q) {
        double bq[3], eq[3];
        for (int c = 0; c < 3; ++c) {
          const int k = (c == d) + (c == e);  // power of x on this axis
          bq[c] = base[q][k][c];
          eq[c] = ex[q][k][c];
        }
        tot[q] += ms.Gm[d][e] * excess3(bq, eq);
      }
    }
  ku1 = 4.0 * M_PI * M_PI * tot[0];
  ku4 = 4.0 * M_PI * M_PI * tot[1];
}

// exp(-ex) of the principal alias of the point with table indices gg, ex = |k_0|^2 / 4 alpha^2.
inline double principal_gauss(const MeshSum& ms, const int* gg, double ex) {
  if (!ms.orthogonal) return std::exp(-ex);
  return ms.gauss[0][3 * gg[0] + 1] * ms.gauss[1][3 * gg[1] + 1] * ms.gauss[2][3 * gg[2] + 1];
}

// One visited mesh point and what its terms share: the principal k_0 and k' (Nyquist
// components zeroed, as the ik solver uses), the influence g = f(k_0) B, the alias sums.
struct MeshPoint {
  int gg[3], m[3];                      // the table index and the signed m per axis
  double x0[3];
  bool zero, selfconj, nyq;             // m = 0; m = -m on the mesh; k' != k_0
  double k0[3], kp[3], k02, kp2;
  double f0, gi;
  double U02, D1, D4, BU0m1;            // U_0^2, sum_{j!=0} U_j^2, sum_{j!=0} U_j^4, B U_0^2 - 1
  double KU1 = 0, KU4 = 0;              // ad: sum_{j!=0} k_j^2 U_j^2 and k_j^2 U_j^4
};

MeshPoint mesh_point(const MeshSum& ms, int g0, int g1, int g2, bool selfconj) {
  const Axis* ax = ms.ax;
  const Int3& K = ms.K;
  const Mat3& R = ms.R;
  MeshPoint P;
  const int gg[3] = {g0, g1, g2};
  for (int d = 0; d < 3; ++d) {
    P.gg[d] = gg[d];
    P.m[d] = ax[d].m[gg[d]];
    P.x0[d] = double(P.m[d]);
  }
  const int* m = P.m;
  P.zero = (m[0] == 0 && m[1] == 0 && m[2] == 0);
  P.selfconj = selfconj;
  for (int r = 0; r < 3; ++r) {
    P.k0[r] = ms.two_pi * (R[3 * r] * m[0] + R[3 * r + 1] * m[1] + R[3 * r + 2] * m[2]);
    P.kp[r] = ms.two_pi * (R[3 * r] * (2 * m[0] == K[0] ? 0 : m[0]) +
                           R[3 * r + 1] * (2 * m[1] == K[1] ? 0 : m[1]) +
                           R[3 * r + 2] * (2 * m[2] == K[2] ? 0 : m[2]));
  }
  P.k02 = P.k0[0] * P.k0[0] + P.k0[1] * P.k0[1] + P.k0[2] * P.k0[2];
  P.kp2 = P.kp[0] * P.kp[0] + P.kp[1] * P.kp[1] + P.kp[2] * P.kp[2];
  P.nyq = P.kp2 != P.k02;
  const double B = ax[0].B[g0] * ax[1].B[g1] * ax[2].B[g2];
  P.f0 = P.zero ? 0.0 : 4.0 * M_PI * principal_gauss(ms, gg, P.k02 * ms.inv4a2) / P.k02;
  P.gi = P.f0 * B;
  double U0sq[3], a0[3], b0[3], U0q[3], ones[3] = {1, 1, 1}, r1[3];
  for (int d = 0; d < 3; ++d) {
    const double u0 = ax[d].u0[gg[d]];
    U0sq[d] = u0 * u0;
    U0q[d] = U0sq[d] * U0sq[d];
    a0[d] = ax[d].a[0][gg[d]];
    b0[d] = ax[d].b[0][gg[d]];
    r1[d] = ax[d].r1[gg[d]];
  }
  P.U02 = U0sq[0] * U0sq[1] * U0sq[2];
  P.D1 = excess3(U0sq, a0);       // sum_{j!=0} U_j^2
  P.D4 = excess3(U0q, b0);        // sum_{j!=0} U_j^4
  P.BU0m1 = excess3(ones, r1);    // B U_0^2 - 1
  if (!P.zero && !ms.ik) {
    k2_moments(ms, gg, P.x0, P.KU1, P.KU4);
  }
  return P;
}

// U_b of alias b = (b0, b1, b2), |b_d| <= 1, of the point with table indices gg.
inline double alias_u(const MeshSum& ms, const int* gg, int b0, int b1, int b2) {
  return ms.ax[0].u1[3 * gg[0] + b0 + 1] * ms.ax[1].u1[3 * gg[1] + b1 + 1] * ms.ax[2].u1[3 * gg[2] + b2 + 1];
}

// The Gaussian part of |D_b g U_b^2 - R_b|^2 of the aliases b of a point with |b_d| <= 1,
// T_b = k_b^2 f_b^2 - 2 g U_b^2 f_b D.k_b, at index i = 9 (b0 + 1) + 3 (b1 + 1) + b2 + 1
// (13, the principal alias: 0), which pair_term and correlation_excess share. All 0 when
// the nearest alias is beyond exp(-60) (aliases_negligible, not computed); otherwise an
// alias whose own Gaussian is (|k_b|^2 / 4 alpha^2 > 60) adds less than e^-60 of g U_b^2.
struct AliasTerms {
  double T[27];
};

// Orthogonal reciprocal axes: every factor per axis (the tables of MeshSum), no branches.
void alias_terms_orthogonal(const MeshSum& ms, const MeshPoint& P, AliasTerms& A) {
  double q[3][3], e[3][3], u[3][3], t[3][3];
  for (int d = 0; d < 3; ++d) {
    const int g = P.gg[d];
    // k'.k_b per axis (ik): 4 pi^2 Gm_dd x'_d x_d, x' the principal m with a Nyquist component zeroed
    const double xp = 2 * P.m[d] == ms.K[d] ? 0.0 : P.x0[d];
    for (int b = 0; b < 3; ++b) {
      q[d][b] = ms.kk[d][3 * g + b];
      e[d][b] = ms.gauss[d][3 * g + b];
      u[d][b] = ms.ax[d].u1[3 * g + b];
      t[d][b] = ms.ik ? 4.0 * M_PI * M_PI * ms.Gm[d][d] * xp * (P.x0[d] + (b - 1.0) * ms.K[d]) : 0.0;
    }
  }
  for (int b0 = 0, i = 0; b0 < 3; ++b0)
    for (int b1 = 0; b1 < 3; ++b1)
      for (int b2 = 0; b2 < 3; ++b2, ++i) {
        const double ub = u[0][b0] * u[1][b1] * u[2][b2];
        const double kb2 = q[0][b0] + q[1][b1] + q[2][b2];
        const double kdot = ms.ik ? t[0][b0] + t[1][b1] + t[2][b2] : kb2;
        const double fb = 4.0 * M_PI * (e[0][b0] * e[1][b1] * e[2][b2]) / (i == 13 ? 1.0 : kb2);
        A.T[i] = kb2 * fb * fb - 2.0 * P.gi * ub * ub * fb * kdot;
      }
  A.T[13] = 0.0;
}

// Any cell: k_b from the reciprocal lattice, its Gaussian by exp.
void alias_terms_general(const MeshSum& ms, const MeshPoint& P, AliasTerms& A) {
  const Int3& K = ms.K;
  const Mat3& R = ms.R;
  const int* m = P.m;
  for (int b0 = -1, i = 0; b0 <= 1; ++b0)
    for (int b1 = -1; b1 <= 1; ++b1)
      for (int b2 = -1; b2 <= 1; ++b2, ++i) {
        A.T[i] = 0.0;
        if (i == 13) continue;
        const double x[3] = {m[0] + static_cast<double>(b0) * K[0], m[1] + static_cast<double>(b1) * K[1],
                             m[2] + static_cast<double>(b2) * K[2]};
        double kb[3];
        for (int r = 0; r < 3; ++r)
          kb[r] = ms.two_pi * (R[3 * r] * x[0] + R[3 * r + 1] * x[1] + R[3 * r + 2] * x[2]);
        const double kb2 = kb[0] * kb[0] + kb[1] * kb[1] + kb[2] * kb[2];
        const double ex = kb2 * ms.inv4a2;
        if (ex > 60.0) continue;
        const double fb = 4.0 * M_PI * std::exp(-ex) / kb2;
        const double kdot = ms.ik ? P.kp[0] * kb[0] + P.kp[1] * kb[1] + P.kp[2] * kb[2] : kb2;
        const double ub = alias_u(ms, P.gg, b0, b1, b2);
        A.T[i] = kb2 * fb * fb - 2.0 * P.gi * ub * ub * fb * kdot;
      }
}

void alias_terms(const MeshSum& ms, const MeshPoint& P, AliasTerms& A) {
  if (ms.aliases_negligible)
    for (double& x : A.T) x = 0.0;
  else if (ms.orthogonal)
    alias_terms_orthogonal(ms, P, A);
  else
    alias_terms_general(ms, P, A);
}

// S(m) of uncorrelated charges, with the alias terms of the point.
//
// The j = 0 diagonal term and the off-diagonal (j != j') terms, then the j != 0 diagonal
// terms, sum_{j!=0} |D_j g U_j^2 - R_j|^2, split as
//   ik: |k'|^2 g^2 sum_{j!=0} U_j^4 + sum_{j!=0} (k_j^2 f_j^2 - 2 g U_j^2 f_j k'.k_j)
//   ad: g^2 sum_{j!=0} k_j^2 U_j^4 + sum_{j!=0} (k_j^2 f_j^2 - 2 g U_j^2 f_j k_j^2):
// the first part from the factorised alias sums (|j_d| <= 30), the second from the alias
// terms (|j_d| <= 1, where the Gaussian can matter).
double pair_term(const MeshSum& ms, const MeshPoint& P, const AliasTerms& A) {
  const double gi = P.gi, f0 = P.f0;
  double S = 0;
  if (!P.zero) {
    if (ms.ik) {
      const double cross = 2.0 * P.U02 * P.D1 + (P.D1 * P.D1 - P.D4);
      S += P.kp2 * gi * gi * cross;
      if (!P.nyq) {
        S += P.k02 * f0 * f0 * P.BU0m1 * P.BU0m1;
      } else {
        for (int r = 0; r < 3; ++r) {
          const double v = P.kp[r] * gi * P.U02 - P.k0[r] * f0;
          S += v * v;
        }
      }
      S += P.kp2 * gi * gi * P.D4;  // j != 0 diagonal, first part
    } else {
      const double bracket = P.k02 * P.U02 * P.D1 + P.KU1 * (P.U02 + P.D1) - P.KU4;
      S += gi * gi * bracket + P.k02 * f0 * f0 * P.BU0m1 * P.BU0m1;
      S += gi * gi * P.KU4;  // j != 0 diagonal, first part
    }
  }
  for (int i = 0; i < 27; ++i) S += A.T[i];  // j != 0 diagonal, second part
  return S;
}

// sum_b W_b(m) (c(m + b K) - 1), with the alias terms of the point.
double correlation_excess(const MeshSum& ms, const MeshPoint& P, const AliasTerms& A) {
  const Int3& K = ms.K;
  const int* m = P.m;
  const double k02 = P.k02, kp2 = P.kp2, f0 = P.f0, gi = P.gi, U02 = P.U02;
  const double sumDU = ms.ik ? kp2 * (U02 + P.D1) : k02 * U02 + P.KU1;  // sum_a |D_a|^2 U_a^2
  double extra = 0;
  for (int b0 = -1, i = 0; b0 <= 1; ++b0)
    for (int b1 = -1; b1 <= 1; ++b1)
      for (int b2 = -1; b2 <= 1; ++b2, ++i) {
        const double c = (*ms.corr)(m[0] + long(b0) * K[0], m[1] + long(b1) * K[1], m[2] + long(b2) * K[2]);
        if (c == 1.0) continue;
        double W;
        if (i == 13) {
          if (P.zero) continue;
          double diag;  // |D_0 g U_0^2 - k_0 f_0|^2
          if (ms.ik && P.nyq) {
            diag = 0;
            for (int r = 0; r < 3; ++r) {
              const double v = P.kp[r] * gi * U02 - P.k0[r] * f0;
              diag += v * v;
            }
          } else {
            diag = k02 * f0 * f0 * P.BU0m1 * P.BU0m1;
          }
          W = diag + gi * gi * U02 * (ms.ik ? kp2 * P.D1 : P.KU1);  // + g^2 U_0^2 sum_{a != 0} |D_a|^2 U_a^2
        } else {
          const double ub = alias_u(ms, P.gg, b0, b1, b2);
          W = gi * gi * ub * ub * sumDU + A.T[i];
        }
        extra += W * (c - 1.0);
      }
  return extra;
}

// The self-force Fourier coefficients of the point (up to the common factor -i/V) into
// acc.v[1..18]; only the six n = +-e_d: the other n != 0 are products of two or three
// first-order-small T0 factors (second order, negligible). The coefficients obey
// contrib(-m, n) = -contrib(m, -n), which adds the point -m.
void add_self_force(const MeshSum& ms, const MeshPoint& P, Acc19& acc) {
  const Mat3& R = ms.R;
  double contr[6][3];
  for (int face = 0; face < 6; ++face) {
    int nn[3] = {0, 0, 0};
    nn[face / 2] = (face % 2) ? 1 : -1;
    double t0[3], t1[3];
    for (int d = 0; d < 3; ++d) {
      t0[d] = ms.ax[d].T0[3 * P.gg[d] + nn[d] + 1];
      t1[d] = ms.ax[d].T1[3 * P.gg[d] + nn[d] + 1];
    }
    double* c = contr[face];
    if (ms.ik) {
      const double t = P.gi * t0[0] * t0[1] * t0[2];
      for (int r = 0; r < 3; ++r) c[r] = P.kp[r] * t;
    } else {
      const double w0 = t1[0] * t0[1] * t0[2], w1 = t0[0] * t1[1] * t0[2],
                   w2 = t0[0] * t0[1] * t1[2];
      for (int r = 0; r < 3; ++r)
        c[r] = P.gi * ms.two_pi * (R[3 * r] * w0 + R[3 * r + 1] * w1 + R[3 * r + 2] * w2);
    }
  }
  for (int face = 0; face < 6; ++face) {
    const int other = face ^ 1;  // -n
    for (int r = 0; r < 3; ++r)
      acc.v[1 + 3 * face + r] +=
          P.selfconj ? contr[face][r] : contr[face][r] - contr[other][r];
  }
}

// The position-dependent pair error of the neighbours, harmonic n, into acc.v[19..36]:
// the alias pairs (a, b) = (n, 0) and (0, -n) (the leading ones), weighted by chi at k_b.
void add_neighbour_errors(const MeshSum& ms, const MeshPoint& P, Acc19& acc) {
  const Int3& K = ms.K;
  const Mat3& R = ms.R;
  const int* m = P.m;
  const int* gg = P.gg;
  const double U0 = ms.ax[0].u0[gg[0]] * ms.ax[1].u0[gg[1]] * ms.ax[2].u0[gg[2]];
  const double chi0 = ms.corr->chi(m[0], m[1], m[2]);
  double dc[6][3];
  for (int face = 0; face < 6; ++face) {
    int nn[3] = {0, 0, 0};
    nn[face / 2] = (face % 2) ? 1 : -1;
    double un = 1, umn = 1;
    long xn[3], xmn[3];
    for (int d = 0; d < 3; ++d) {
      un *= ms.ax[d].u1[3 * gg[d] + nn[d] + 1];
      umn *= ms.ax[d].u1[3 * gg[d] - nn[d] + 1];
      xn[d] = m[d] + long(nn[d]) * K[d];
      xmn[d] = m[d] - long(nn[d]) * K[d];
    }
    const double chim = ms.corr->chi(xmn[0], xmn[1], xmn[2]);
    for (int r = 0; r < 3; ++r) {
      const double kn = ms.two_pi * (R[3 * r] * xn[0] + R[3 * r + 1] * xn[1] + R[3 * r + 2] * xn[2]);
      const double d1 = ms.ik ? P.kp[r] : kn, d2 = ms.ik ? P.kp[r] : P.k0[r];
      dc[face][r] = P.gi * U0 * (d1 * un * chi0 + d2 * umn * chim);
    }
  }
  for (int face = 0; face < 6; ++face) {
    const int other = face ^ 1;
    for (int r = 0; r < 3; ++r)
      acc.v[19 + 3 * face + r] += P.selfconj ? dc[face][r] : dc[face][r] - dc[other][r];
  }
}

// The sum over the mesh, using S(-m) = S(m): only one point of each pair
// (m, -m) is visited (weight 2; self-conjugate points weight 1).
Acc19 sum_over_mesh(const MeshSum& ms) {
  const Int3& K = ms.K;
  const int* mlo = ms.mlo;
  const int* mhi = ms.mhi;
  Acc19 tot;
  parallel_reduce_locked(
      "pmewald::reciprocal_error", Kokkos::RangePolicy<ExecSpace>(0, mhi[0] - mlo[0] + 1),
      [&](const int i0, Acc19& acc) {
    const int m0s = mlo[0] + i0, g0 = m0s < 0 ? m0s + K[0] : m0s;
    for (int m1s = mlo[1]; m1s <= mhi[1]; ++m1s) {
      const int g1 = m1s < 0 ? m1s + K[1] : m1s;
      int lo2 = mlo[2], hi2 = mhi[2];
      if (ms.aliases_negligible) {  // the m2 interval of the ellipsoid on this (m0, m1) line
        const auto& Gm = ms.Gm;
        const double b = Gm[0][2] * m0s + Gm[1][2] * m1s;
        const double c = Gm[0][0] * m0s * m0s + 2.0 * Gm[0][1] * m0s * m1s + Gm[1][1] * m1s * m1s;
        const double disc = b * b - Gm[2][2] * (c - ms.rm2);
        if (disc < 0) continue;
        const double w = std::sqrt(disc);
        lo2 = std::max(lo2, static_cast<int>(std::floor((-b - w) / Gm[2][2])) - 1);
        hi2 = std::min(hi2, static_cast<int>(std::ceil((-b + w) / Gm[2][2])) + 1);
      }
      for (int m2s = lo2; m2s <= hi2; ++m2s) {
        const int g2 = m2s < 0 ? m2s + K[2] : m2s;
        const int c0 = (K[0] - g0) % K[0], c1 = (K[1] - g1) % K[1], c2 = (K[2] - g2) % K[2];
        if (g0 > c0 || (g0 == c0 && (g1 > c1 || (g1 == c1 && g2 > c2)))) continue;
        const bool selfconj = (g0 == c0 && g1 == c1 && g2 == c2);
        const double wgt = selfconj ? 1.0 : 2.0;
        const MeshPoint P = mesh_point(ms, g0, g1, g2, selfconj);
        AliasTerms A;
        alias_terms(ms, P, A);
        double S = pair_term(ms, P, A);
        if (ms.corr != nullptr) S += correlation_excess(ms, P, A);
        acc.v[0] += wgt * S;
        if (P.gi == 0.0) continue;
        add_self_force(ms, P, acc);
        if (ms.corr != nullptr) add_neighbour_errors(ms, P, acc);
      }
    }
      },
      Kokkos::Sum<Acc19>(tot));
  return tot;
}

}  // namespace

MeshErrorSums mesh_error_sums(const Mat3& box, double alpha, const Int3& K, int p, Differentiation diff,
                              const ChargeCorrelation* corr) {
  // What the sum reads (lattice, metric, axis tables, bounds), then the sum.
  MeshSum ms;
  ms.K = K;
  ms.ik = diff == Differentiation::IK;
  ms.corr = corr;
  ms.R = reciprocal_of(box);
  ms.two_pi = 2.0 * M_PI;
  ms.inv4a2 = 1.0 / (4.0 * alpha * alpha);
  for (int d = 0; d < 3; ++d)  // the metric of the frequency space
    for (int e = 0; e < 3; ++e) {
      double s = 0;
      for (int r = 0; r < 3; ++r) s += ms.R[3 * r + d] * ms.R[3 * r + e];
      ms.Gm[d][e] = s;
    }
  for (int d = 0; d < 3; ++d) ms.ax[d] = remembered_axis_table(K[d], p);
  set_bounds(ms, box, alpha);
  // The per-axis factors of the aliases' |k|^2 and Gaussians (orthogonal reciprocal axes).
  ms.orthogonal = ms.Gm[0][1] == 0.0 && ms.Gm[0][2] == 0.0 && ms.Gm[1][2] == 0.0;
  if (ms.orthogonal)
    for (int d = 0; d < 3; ++d) {
      ms.gauss[d].assign(3 * K[d], 0.0);
      ms.kk[d].assign(3 * K[d], 0.0);
      for (int g = 0; g < K[d]; ++g)
        for (int b = -1; b <= 1; ++b) {
          const double x = ms.ax[d].m[g] + static_cast<double>(b) * K[d];
          ms.kk[d][3 * g + b + 1] = 4.0 * M_PI * M_PI * ms.Gm[d][d] * x * x;
          ms.gauss[d][3 * g + b + 1] = std::exp(-ms.kk[d][3 * g + b + 1] * ms.inv4a2);
        }
    }
  const Acc19 tot = sum_over_mesh(ms);
  MeshErrorSums out;
  out.pair = tot.v[0];
  for (int i = 0; i < 18; ++i) {
    out.self[i] = tot.v[1 + i];
    out.neighbours[i] = tot.v[19 + i];
  }
  return out;
}

}  // namespace tuning
}  // namespace pmewald
