#include "tuning/parameter_choice.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "pme/bspline.hpp"
#include "base/errors.hpp"
#include "tuning/error_estimates.hpp"

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

}  // namespace

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

// choose_cheapest

namespace {

constexpr double kMinAlphaRc = 2.0;      // alpha scan floor (Kolafa-Perram regime)
// alpha_t (|a_1||a_2||a_3|)^(1/3) of the scaled tables: the estimate's continuum scaling
// holds to 1-2% there (2-5% on coarse meshes), and a table point sums ~3e4 mesh points
constexpr double kTableAlphaEdge = 8.0;
constexpr int kMaxMeshAxis = 512;

double round_sig(double x, int digits) {  // rank-count independent alphas, printed as chosen
  if (!(x > 0)) return x;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*e", digits - 1, x);
  return std::strtod(buf, nullptr);
}

struct TablePoint {
  double s;     // effective density (points per unit height, geometric mean) at alpha_t
  double pair;  // ReciprocalErrorParts at alpha_t
  double self;
};

// log(y) interpolated linearly in log(s) (extrapolated from the end pairs outside the table).
double interp_log(const std::vector<TablePoint>& t, double s, double TablePoint::*field) {
  if (t.empty()) return 0.0;
  if (t.size() == 1) return t[0].*field;
  size_t j = 1;
  while (j + 1 < t.size() && t[j].s < s) ++j;
  const TablePoint &a = t[j - 1], &b = t[j];
  const double ya = std::fmax(a.*field, 1e-300), yb = std::fmax(b.*field, 1e-300);
  const double w = std::log(s / a.s) / std::log(b.s / a.s);
  return std::exp(std::log(ya) + w * (std::log(yb) - std::log(ya)));
}

}  // namespace

double reciprocal_budget(double target, double real, double cross) {
  if (!(real < target)) return 0.0;
  return -cross * real + std::sqrt(std::fmax(cross * cross * real * real + target * target - real * real, 0.0));
}

double combined_error(double real, double recip, double cross) {
  return std::sqrt(std::fmax(real * real + recip * recip + 2.0 * cross * real * recip, (real - recip) * (real - recip)));
}

Choice choose_cheapest(const Mat3& box, double cutoff, double target, double sum_q2, int n_atoms,
                       double kc, double alpha, const std::vector<Differentiation>& diffs,
                       int order_lo, int order_hi, const CostModel& cm, double sum_q4,
                       double mesh_target, const ChargeCorrelation* corr, double real_volume, double cross,
                       double recip_factor) {
  if (!(target > 0) || !std::isfinite(target)) throw ValueError("target error must be positive");
  if (!(cutoff > 0) || !std::isfinite(cutoff)) throw ValueError("cutoff must be positive");
  if (!std::isfinite(real_volume) || real_volume < 0) throw ValueError("real_volume must be >= 0");
  if (order_lo < kMinOrder || order_hi > kMaxOrder || order_lo > order_hi)
    throw ValueError("orders must lie in [3, 10], got " + std::to_string(order_lo) + ".." +
                     std::to_string(order_hi));
  if (diffs.empty()) throw ValueError("no differentiation to choose from");
  if (!std::isfinite(mesh_target)) throw ValueError("mesh_target must be finite");
  if (!(cross >= -1.0 && cross <= 1.0)) throw ValueError("cross must lie in [-1, 1]");
  if (!(recip_factor > 0) || !std::isfinite(recip_factor)) throw ValueError("recip_factor must be positive");
  const bool mesh_bound = mesh_target > 0;
  const double V = real_volume > 0 ? real_volume : volume_of(box);  // the real-space density's
  const int n = std::max(n_atoms, 1);
  if (sum_q4 < 0) sum_q4 = sum_q2 * sum_q2 / n;
  const auto h = heights_of(box);
  const double hmin = std::fmin(h[0], std::fmin(h[1], h[2]));
  const double hmax = std::fmax(h[0], std::fmax(h[1], h[2]));
  double aprod = 1;  // product of the edge lengths |a_d|
  for (int d = 0; d < 3; ++d)
    aprod *= std::sqrt(box[3 * d] * box[3 * d] + box[3 * d + 1] * box[3 * d + 1] + box[3 * d + 2] * box[3 * d + 2]);
  const double s_cap = kMaxMeshAxis / hmax;
  const double kc2n = kc * kc / n;

  // The alphas considered, with their real-space estimates and reciprocal budgets.
  struct AlphaOption {
    double alpha, real, budget;
  };
  std::vector<AlphaOption> al;
  auto option = [&](double a) {
    const double r = real_space_error(a, cutoff, sum_q2, n, V, kc) *
                     (corr ? corr->real_factor(a * cutoff) : 1.0);
    double b = target / std::sqrt(2.0);
    if (r < target) b = std::fmax(b, reciprocal_budget(target, r, cross));
    return AlphaOption{a, r, b / recip_factor};
  };
  if (alpha > 0) {
    al.push_back(option(alpha));
  } else {
    const double A = 2.0 * std::fabs(kc) * sum_q2 / std::sqrt(static_cast<double>(n) * cutoff * V);
    auto alpha_of = [&](double share) {  // real_space_error(alpha) = share * target
      const double x = std::log(std::fmax(A / (share * target), 1.0));
      return std::fmax(std::sqrt(x), kMinAlphaRc) / cutoff;
    };
    // the real-space factor of a correlated system (charge_correlation.hpp) moves the shares
    double f_lo = 1.0, f_hi = 1.0;
    if (corr)
      for (double f : corr->real_factors()) f_lo = std::fmin(f_lo, f), f_hi = std::fmax(f_hi, f);
    const double a_lo = alpha_of(0.99 / f_lo), a_hi = alpha_of(0.10 / f_hi);
    const int steps =
        a_hi > a_lo * 1.0001 ? static_cast<int>(std::ceil(std::log(a_hi / a_lo) / std::log(1.005))) : 0;
    for (int i = 0; i <= steps; ++i) {
      const double a = round_sig(steps ? a_lo * std::pow(a_hi / a_lo, double(i) / steps) : a_lo, 4);
      if (!al.empty() && a <= al.back().alpha) continue;
      AlphaOption o = option(a);
      o.budget = reciprocal_budget(target, o.real, cross) / recip_factor;
      if (o.budget > 0) al.push_back(o);
    }
    if (al.empty()) al.push_back(option(round_sig(a_hi, 4)));
  }
  auto option_of = [&](double a) {
    for (const AlphaOption& o : al)
      if (o.alpha == a) return o;
    return option(a);
  };

  Choice best;
  auto finish = [&](const Candidate& w, const std::vector<Candidate>& all) {
    best.alpha = w.alpha;
    best.mesh = w.mesh;
    best.order = w.order;
    best.diff = w.diff;
    best.est_real = option_of(w.alpha).real;
    best.est_recip = w.est_recip * recip_factor;
    best.est_total = combined_error(best.est_real, best.est_recip, cross);
    best.cost = w.cost;
    std::vector<Candidate> out;
    for (const Candidate& c : all)
      if (std::isfinite(c.cost)) out.push_back(c);
    std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) { return a.cost < b.cost; });
    best.candidates = out;
    return best;
  };
  // One (diff, order), one alpha, no mesh bound: the exact search alone (as choose_parameters).
  if (diffs.size() == 1 && order_lo == order_hi && al.size() == 1 && !mesh_bound) {
    const AlphaOption& o = al[0];
    const MeshChoice c = smallest_mesh(box, o.alpha, order_lo, diffs[0], sum_q2, n, kc, sum_q4, o.budget, corr);
    const Candidate w{diffs[0], order_lo, o.alpha, c.mesh, reciprocal_cost(cm, c.mesh, order_lo, diffs[0], n),
                      c.err, true};
    return finish(w, {w});
  }

  const double alpha_t = std::fmin(al.front().alpha, kTableAlphaEdge / std::cbrt(aprod));
  auto mesh_round = [&](double s, int p) {
    Int3 K;
    for (int d = 0; d < 3; ++d) K[d] = std::max(p, static_cast<int>(std::lround(s * h[d])));
    return K;
  };
  auto density = [&](const Int3& K) { return std::cbrt(K[0] / h[0] * (K[1] / h[1]) * (K[2] / h[2])); };
  // the absolute reciprocal estimate at alpha of a table point (continuum scaling)
  auto scaled = [&](double a, const TablePoint& t) {
    const double r = a / alpha_t;
    return std::sqrt(std::fmax(kc2n * (r * t.pair + r * r * r * r * t.self), 0.0));
  };
  auto wants_ad = [&]() {
    for (Differentiation d : diffs)
      if (d == Differentiation::AD) return true;
    return false;
  }();
  // What a table of (diff, order) must reach at each alpha: the force budget when diff is
  // a candidate, the mesh bound (on the ad estimate) when there is one.
  auto goal = [&](Differentiation diff, const AlphaOption& o) {
    const bool candidate = diff == Differentiation::IK || wants_ad;
    double g = candidate ? o.budget : mesh_target;
    if (diff == Differentiation::AD && mesh_bound) g = std::fmin(g, mesh_target);
    return g;
  };
  // Tables of the estimate over densities at alpha_t, up to where every alpha meets its goal.
  std::vector<std::vector<TablePoint>> tables(2 * (kMaxOrder + 1));
  auto table = [&](Differentiation diff, int p) -> const std::vector<TablePoint>& {
    std::vector<TablePoint>& tab = tables[2 * p + (diff == Differentiation::IK)];
    if (!tab.empty()) return tab;
    const double s_cap_t = s_cap * alpha_t / al.front().alpha;
    double s = (p + 0.5) / hmin;
    double slope = p;
    for (int it = 0; it < 200; ++it) {
      const Int3 K = mesh_round(s, p);
      const double se = density(K);
      if (!tab.empty() && se <= tab.back().s * (1 + 1e-12)) {
        s *= 1.02;
        continue;
      }
      const ReciprocalErrorParts e = reciprocal_error_parts(box, alpha_t, K, p, diff, sum_q2, n, sum_q4, corr);
      tab.push_back({se, e.pair, e.self});
      double worst = 0;
      for (const AlphaOption& o : al) worst = std::fmax(worst, scaled(o.alpha, tab.back()) / goal(diff, o));
      if (worst <= 1.0 || se >= s_cap_t) break;
      if (tab.size() >= 2) {
        const TablePoint &a = tab[tab.size() - 2], &b = tab.back();
        const double ea = a.pair + a.self, eb = b.pair + b.self;
        if (ea > eb && eb > 0) slope = std::fmax(0.5 * std::log(ea / eb) / std::log(b.s / a.s), 1.0);
      }
      const double step =
          worst > 4.0 ? std::fmin(std::fmax(std::pow(worst / 2.0, 1.0 / slope), 1.06), 2.0) : 1.08;
      s = std::fmin(std::fmax(s, se) * step, s_cap_t * 1.0001);
    }
    return tab;
  };
  // The density (at alpha, in the real box) where a table's scaled estimate meets `limit`,
  // interpolated in log-log; 0 when the table never does.
  auto crossing = [&](const std::vector<TablePoint>& tab, double a, double limit) {
    size_t j = 0;
    while (j < tab.size() && scaled(a, tab[j]) > limit) ++j;
    if (j == tab.size()) return 0.0;
    double st = tab[j].s;
    if (j > 0) {
      const double e0 = std::log(scaled(a, tab[j - 1])), e1 = std::log(scaled(a, tab[j]));
      const double w = e0 > e1 ? (e0 - std::log(limit)) / (e0 - e1) : 1.0;
      st = std::exp(std::log(tab[j - 1].s) + w * (std::log(tab[j].s) - std::log(tab[j - 1].s)));
    }
    return st * a / alpha_t;
  };
  auto predicted = [&](const std::vector<TablePoint>& tab, double a, const Int3& K) {
    const double sk = density(K) * alpha_t / a;
    TablePoint t{sk, interp_log(tab, sk, &TablePoint::pair), interp_log(tab, sk, &TablePoint::self)};
    return scaled(a, t);
  };

  // Candidate order: the usual winners first, so the lower bound prunes more.
  std::vector<int> orders;
  for (int p : {5, 6, 4, 7, 8, 3, 9, 10})
    if (p >= order_lo && p <= order_hi) orders.push_back(p);
  std::vector<Candidate> cands;
  std::vector<double> cand_s;  // the density (at the candidate's alpha) the table predicts
  double best_pred = -1;
  for (int p : orders)
    for (Differentiation diff : diffs) {
      const bool ik = diff == Differentiation::IK;
      const double floor_cost = ((ik ? cm.atom_ik : cm.atom_ad) + (ik ? cm.point_ik : cm.point_ad) * p * p * p) * n;
      if (best_pred >= 0 && floor_cost >= best_pred) continue;
      const std::vector<TablePoint>& tab = table(diff, p);
      const std::vector<TablePoint>* tab_ad = mesh_bound ? &table(Differentiation::AD, p) : nullptr;
      // Every alpha: the density where the scaled estimates meet their bounds, mesh, cost.
      Candidate bestc;
      double bestc_s = 0, bestc_tot = 0;
      bool found = false;
      for (const AlphaOption& o : al) {
        double sa = crossing(tab, o.alpha, ik || !mesh_bound ? o.budget : std::fmin(o.budget, mesh_target));
        if (sa > 0 && ik && mesh_bound) {
          const double sm = crossing(*tab_ad, o.alpha, mesh_target);
          sa = sm > 0 ? std::fmax(sa, sm) : 0.0;
        }
        if (!(sa > 0)) continue;  // not reached below the cap
        const Int3 K = mesh_for_density(sa, h, p);
        if (K[0] > kMaxMeshAxis || K[1] > kMaxMeshAxis || K[2] > kMaxMeshAxis) continue;
        const double cost = reciprocal_cost(cm, K, p, diff, n);
        const double pred = predicted(tab, o.alpha, K);  // of this very mesh (rounded up from sa)
        const double tot = combined_error(o.real, pred * recip_factor, cross);
        if (!found || cost < bestc.cost * (1 - 1e-12) || (cost <= bestc.cost * (1 + 1e-12) && tot < bestc_tot)) {
          bestc = Candidate{diff, p, o.alpha, K, cost, pred, false};
          bestc_s = sa;
          bestc_tot = tot;
          found = true;
        }
      }
      if (!found) continue;
      cands.push_back(bestc);
      cand_s.push_back(bestc_s);
      if (best_pred < 0 || bestc.cost < best_pred) best_pred = bestc.cost;
    }
  auto fail = [&]() {
    return ValueError("no mesh up to " + std::to_string(kMaxMeshAxis) +
                      " points per axis reaches the requested accuracy with orders " + std::to_string(order_lo) +
                      ".." + std::to_string(order_hi) + "; loosen the tolerance or raise the cutoff");
  };
  if (cands.empty()) throw fail();
  std::vector<size_t> idx(cands.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  auto by_cost = [&](size_t a, size_t b) { return cands[a].cost < cands[b].cost; };
  std::stable_sort(idx.begin(), idx.end(), by_cost);

  // Exact check of the cheapest predictions: the smallest FFT-friendly mesh near the
  // predicted density whose exact estimate meets the budget (and the mesh bound) at the
  // candidate's alpha.
  int best_i = -1, checked = 0;
  for (size_t k = 0; k < idx.size() && checked < 6; ++k) {
    Candidate& c = cands[idx[k]];
    // predictions within 25% of the best checked cost are checked too: the table's
    // prediction can be a mesh step off (per-axis rounding of small meshes; with the
    // cheap AVX-512 spreading, orders 5 and 6 on meshes of 12-16 points came within
    // 2.4% of each other while the order-5 prediction was 12% too high)
    if (best_i >= 0 && c.cost >= 1.25 * cands[best_i].cost) break;
    ++checked;
    const AlphaOption o = option_of(c.alpha);
    double e = 0;
    auto meets = [&](const Int3& K) {  // sets e
      e = reciprocal_error(box, c.alpha, K, c.order, c.diff, sum_q2, n, kc, sum_q4, corr);
      if (e > o.budget) return false;
      if (!mesh_bound) return true;
      const double ead = c.diff == Differentiation::AD
                             ? e
                             : reciprocal_error(box, c.alpha, K, c.order, Differentiation::AD, sum_q2, n, kc, sum_q4, corr);
      return ead <= mesh_target;
    };
    auto next = [&](double& sv, const Int3& K, double factor) {  // the next mesh along the density line
      Int3 K2 = K;
      for (int i = 0; i < 400 && K2 == K; ++i) {
        sv *= factor;
        K2 = mesh_for_density(sv, h, c.order);
      }
      return K2;
    };
    auto too_big = [](const Int3& K) { return K[0] > kMaxMeshAxis || K[1] > kMaxMeshAxis || K[2] > kMaxMeshAxis; };
    double sv = cand_s[idx[k]];
    Int3 K = c.mesh;
    bool ok = meets(K);
    if (ok) {
      double e_ok = e;
      for (int step = 0; step < 8; ++step) {  // smaller meshes while they still meet the bounds
        double s2 = sv;
        const Int3 K2 = next(s2, K, 0.98);
        if (K2 == K || !meets(K2)) break;
        K = K2, sv = s2, e_ok = e;
      }
      e = e_ok;
    } else {
      for (int step = 0; step < 16 && !ok; ++step) {  // larger meshes until one meets them
        const Int3 K2 = next(sv, K, 1.02);
        if (too_big(K2)) break;
        K = K2;
        ok = meets(K);
      }
    }
    if (!ok) {
      c.cost = std::numeric_limits<double>::infinity();
    } else {
      c.mesh = K;
      c.est_recip = e;
      c.cost = reciprocal_cost(cm, K, c.order, c.diff, n);
      c.exact = true;
      if (best_i < 0 || c.cost < cands[best_i].cost) best_i = static_cast<int>(idx[k]);
    }
    // an exact candidate may now cost more than the next predictions: re-sort the rest
    std::stable_sort(idx.begin() + k + 1, idx.end(), by_cost);
  }
  if (best_i < 0) throw fail();
  return finish(cands[best_i], cands);
}

}  // namespace tuning
}  // namespace pmewald
