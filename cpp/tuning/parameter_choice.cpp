#include "tuning/parameter_choice.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "pme/bspline.hpp"
#include "base/errors.hpp"
#include "tuning/error_estimates.hpp"
#include "tuning/mesh_search.hpp"

namespace pmewald {
inline namespace tuning {

int fft_friendly(int n) {
  if (n < 1) n = 1;
  for (int m = n;; ++m) {
    int r = m;
    for (int f : {2, 3, 5})
      while (r % f == 0) r /= f;
    if (r == 1) return m;
  }
}

namespace detail {

Int3 mesh_for_density(double s, const std::array<double, 3>& h, int p) {
  Int3 K;
  for (int d = 0; d < 3; ++d) {
    const double want = std::ceil(s * h[d] - 1e-9);
    const int k = want > 4096 ? 4097 : static_cast<int>(want);
    K[d] = fft_friendly(std::max(k, p));
  }
  return K;
}

MeshChoice smallest_mesh(const Mat3& box, double alpha, int p, Differentiation diff,
                         double sum_q2, int n, double kc, double sum_q4, double goal,
                         const ChargeCorrelation* corr) {
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
    return reciprocal_error(box, alpha, K, p, diff, sum_q2, n, kc, sum_q4, corr);
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

}  // namespace detail

using detail::mesh_for_density;
using detail::MeshChoice;
using detail::smallest_mesh;

Parameters choose_parameters(const Mat3& box, double cutoff, double target, double sum_q2,
                             int n_atoms, Differentiation diff, double kc, double alpha,
                             const Int3& mesh, int order, double sum_q4, const ChargeCorrelation* corr) {
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
  P.est_real = real_space_error(P.alpha, cutoff, sum_q2, n, V, kc) *
               (corr ? corr->real_factor(P.alpha * cutoff) : 1.0);
  double goal = target / std::sqrt(2.0);
  if (P.est_real < target) goal = std::fmax(goal, std::sqrt(target * target - P.est_real * P.est_real));
  const bool fixed_mesh = mesh[0] > 0 && mesh[1] > 0 && mesh[2] > 0;
  auto finish = [&](const Int3& K, int p) {
    P.mesh = K;
    P.order = p;
    P.est_recip = reciprocal_error(box, P.alpha, K, p, diff, sum_q2, n, kc, sum_q4, corr);
    P.est_total = std::sqrt(P.est_real * P.est_real + P.est_recip * P.est_recip);
    return P;
  };
  if (order > 0) {
    if (fixed_mesh) return finish(mesh, order);
    const MeshChoice c = smallest_mesh(box, P.alpha, order, diff, sum_q2, n, kc, sum_q4, goal, corr);
    return finish(c.mesh, order);
  }
  // choose the order by the cost model
  const CostModel cm = default_cost_model();
  double best_cost = -1;
  Int3 bestK{0, 0, 0};
  int bestp = 5;
  for (int p = 4; p <= 8; ++p) {
    Int3 K = mesh;
    if (!fixed_mesh) {
      try {
        K = smallest_mesh(box, P.alpha, p, diff, sum_q2, n, kc, sum_q4, goal, corr).mesh;
      } catch (const ValueError&) {
        continue;
      }
    } else if (K[0] < p || K[1] < p || K[2] < p) {
      continue;
    }
    const double cost = reciprocal_cost(cm, K, p, diff, n);
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      bestK = K;
      bestp = p;
    }
  }
  if (best_cost < 0)
    throw ValueError("no order in 4..8 with a mesh up to 512 per axis reaches the target");
  return finish(bestK, bestp);
}

}  // namespace tuning
}  // namespace pmewald
