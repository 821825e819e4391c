// choose_cheapest (parameter_choice.hpp): the cheapest (differentiation, order, alpha, mesh)
// for an accuracy target by the cost model, from tables of the reciprocal estimate carried
// to every alpha and an exact check of the cheapest predictions. No MPI.
#include "tuning/parameter_choice.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "pme/bspline.hpp"
#include "base/errors.hpp"
#include "tuning/error_estimates.hpp"
#include "tuning/mesh_search.hpp"

namespace pmewald {
inline namespace tuning {

using detail::mesh_for_density;
using detail::MeshChoice;
using detail::smallest_mesh;

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

namespace {

// choose_cheapest's arguments (in its order), and what follows from them alone.
struct CheapestProblem {
  Mat3 box;
  double cutoff, target, sum_q2;
  int n_atoms;
  double kc, alpha;
  std::vector<Differentiation> diffs;
  int order_lo, order_hi;
  CostModel cm;
  double sum_q4, mesh_target;  // sum_q4 < 0: sum_q2^2 / n
  const ChargeCorrelation* corr;
  double real_volume, cross, recip_factor;
  bool mesh_bound = false;     // mesh_target > 0
  double V = 0;                // the real-space density's volume: real_volume, or the box's
  int n = 1;                   // n_atoms, at least 1
  std::array<double, 3> h{};
  double hmin = 0, hmax = 0;
  double aprod = 1;            // product of the edge lengths |a_d|
  double s_cap = 0;            // the density of kMaxMeshAxis points on the largest height
  double kc2n = 0;             // kc^2 / n
};

// An alpha considered, with its real-space estimate and reciprocal budget.
struct AlphaOption {
  double alpha, real, budget;
};

AlphaOption alpha_option(const CheapestProblem& pr, double a) {
  const double r = real_space_error(a, pr.cutoff, pr.sum_q2, pr.n, pr.V, pr.kc) *
                   (pr.corr ? pr.corr->real_factor(a * pr.cutoff) : 1.0);
  double b = pr.target / std::sqrt(2.0);
  if (r < pr.target) b = std::fmax(b, reciprocal_budget(pr.target, r, pr.cross));
  return AlphaOption{a, r, b / pr.recip_factor};
}

// The alphas considered: the given one, or the scan over real-space shares of the target.
std::vector<AlphaOption> alpha_options(const CheapestProblem& pr) {
  std::vector<AlphaOption> al;
  if (pr.alpha > 0) {
    al.push_back(alpha_option(pr, pr.alpha));
    return al;
  }
  const double A = 2.0 * std::fabs(pr.kc) * pr.sum_q2 / std::sqrt(static_cast<double>(pr.n) * pr.cutoff * pr.V);
  auto alpha_of = [&](double share) {  // real_space_error(alpha) = share * target
    const double x = std::log(std::fmax(A / (share * pr.target), 1.0));
    return std::fmax(std::sqrt(x), kMinAlphaRc) / pr.cutoff;
  };
  // the real-space factor of a correlated system (charge_correlation.hpp) moves the shares
  double f_lo = 1.0, f_hi = 1.0;
  if (pr.corr)
    for (double f : pr.corr->real_factors()) f_lo = std::fmin(f_lo, f), f_hi = std::fmax(f_hi, f);
  const double a_lo = alpha_of(0.99 / f_lo), a_hi = alpha_of(0.10 / f_hi);
  const int steps =
      a_hi > a_lo * 1.0001 ? static_cast<int>(std::ceil(std::log(a_hi / a_lo) / std::log(1.005))) : 0;
  for (int i = 0; i <= steps; ++i) {
    const double a = round_sig(steps ? a_lo * std::pow(a_hi / a_lo, double(i) / steps) : a_lo, 4);
    if (!al.empty() && a <= al.back().alpha) continue;
    AlphaOption o = alpha_option(pr, a);
    o.budget = reciprocal_budget(pr.target, o.real, pr.cross) / pr.recip_factor;
    if (o.budget > 0) al.push_back(o);
  }
  if (al.empty()) al.push_back(alpha_option(pr, round_sig(a_hi, 4)));
  return al;
}

// The option of alpha a: the scan's, or computed for an alpha outside it.
AlphaOption option_of(const CheapestProblem& pr, const std::vector<AlphaOption>& al, double a) {
  for (const AlphaOption& o : al)
    if (o.alpha == a) return o;
  return alpha_option(pr, a);
}

// The choice of the winner w, with every candidate of finite cost, cheapest first.
Choice finish(const CheapestProblem& pr, const std::vector<AlphaOption>& al, const Candidate& w,
              const std::vector<Candidate>& all) {
  Choice best;
  best.alpha = w.alpha;
  best.mesh = w.mesh;
  best.order = w.order;
  best.diff = w.diff;
  best.est_real = option_of(pr, al, w.alpha).real;
  best.est_recip = w.est_recip * pr.recip_factor;
  best.est_total = combined_error(best.est_real, best.est_recip, pr.cross);
  best.cost = w.cost;
  std::vector<Candidate> out;
  for (const Candidate& c : all)
    if (std::isfinite(c.cost)) out.push_back(c);
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) { return a.cost < b.cost; });
  best.candidates = out;
  return best;
}

ValueError no_mesh_error(const CheapestProblem& pr) {
  return ValueError("no mesh up to " + std::to_string(kMaxMeshAxis) +
                    " points per axis reaches the requested accuracy with orders " + std::to_string(pr.order_lo) +
                    ".." + std::to_string(pr.order_hi) + "; loosen the tolerance or raise the cutoff");
}

// Tables of the estimate over densities at alpha_t, per (diff, order), made when first
// asked for, up to where every alpha meets its goal; and the estimates carried from them
// to any alpha by the continuum scaling.
class EstimateTables {
 public:
  EstimateTables(const CheapestProblem& pr, const std::vector<AlphaOption>& al)
      : pr_(pr), al_(al), alpha_t_(std::fmin(al.front().alpha, kTableAlphaEdge / std::cbrt(pr.aprod))),
        wants_ad_(std::find(pr.diffs.begin(), pr.diffs.end(), Differentiation::AD) != pr.diffs.end()),
        tables_(2 * (kMaxOrder + 1)) {}

  // The table of (diff, order p).
  const std::vector<TablePoint>& table(Differentiation diff, int p) {
    std::vector<TablePoint>& tab = tables_[2 * p + (diff == Differentiation::IK)];
    if (!tab.empty()) return tab;
    const double s_cap_t = pr_.s_cap * alpha_t_ / al_.front().alpha;
    double s = (p + 0.5) / pr_.hmin;
    double slope = p;
    for (int it = 0; it < 200; ++it) {
      const Int3 K = mesh_round(s, p);
      const double se = density(K);
      if (!tab.empty() && se <= tab.back().s * (1 + 1e-12)) {
        s *= 1.02;
        continue;
      }
      const ReciprocalErrorParts e =
          reciprocal_error_parts(pr_.box, alpha_t_, K, p, diff, pr_.sum_q2, pr_.n, pr_.sum_q4, pr_.corr);
      tab.push_back({se, e.pair, e.self});
      double worst = 0;
      for (const AlphaOption& o : al_) worst = std::fmax(worst, scaled(o.alpha, tab.back()) / goal(diff, o));
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
  }

  // The density (at alpha, in the real box) where a table's scaled estimate meets `limit`,
  // interpolated in log-log; 0 when the table never does.
  double crossing(const std::vector<TablePoint>& tab, double a, double limit) const {
    size_t j = 0;
    while (j < tab.size() && scaled(a, tab[j]) > limit) ++j;
    if (j == tab.size()) return 0.0;
    double st = tab[j].s;
    if (j > 0) {
      const double e0 = std::log(scaled(a, tab[j - 1])), e1 = std::log(scaled(a, tab[j]));
      const double w = e0 > e1 ? (e0 - std::log(limit)) / (e0 - e1) : 1.0;
      st = std::exp(std::log(tab[j - 1].s) + w * (std::log(tab[j].s) - std::log(tab[j - 1].s)));
    }
    return st * a / alpha_t_;
  }

  // The table's estimate of mesh K at alpha a.
  double predicted(const std::vector<TablePoint>& tab, double a, const Int3& K) const {
    const double sk = density(K) * alpha_t_ / a;
    TablePoint t{sk, interp_log(tab, sk, &TablePoint::pair), interp_log(tab, sk, &TablePoint::self)};
    return scaled(a, t);
  }

 private:
  Int3 mesh_round(double s, int p) const {
    Int3 K;
    for (int d = 0; d < 3; ++d) K[d] = std::max(p, static_cast<int>(std::lround(s * pr_.h[d])));
    return K;
  }
  double density(const Int3& K) const {
    return std::cbrt(K[0] / pr_.h[0] * (K[1] / pr_.h[1]) * (K[2] / pr_.h[2]));
  }
  // the absolute reciprocal estimate at alpha of a table point (continuum scaling)
  double scaled(double a, const TablePoint& t) const {
    const double r = a / alpha_t_;
    return std::sqrt(std::fmax(pr_.kc2n * (r * t.pair + r * r * r * r * t.self), 0.0));
  }
  // What a table of (diff, order) must reach at each alpha: the force budget when diff is
  // a candidate, the mesh bound (on the ad estimate) when there is one.
  double goal(Differentiation diff, const AlphaOption& o) const {
    const bool candidate = diff == Differentiation::IK || wants_ad_;
    double g = candidate ? o.budget : pr_.mesh_target;
    if (diff == Differentiation::AD && pr_.mesh_bound) g = std::fmin(g, pr_.mesh_target);
    return g;
  }

  const CheapestProblem& pr_;
  const std::vector<AlphaOption>& al_;
  const double alpha_t_;
  const bool wants_ad_;
  std::vector<std::vector<TablePoint>> tables_;
};

// The predicted cheapest (alpha, mesh) of every (diff, order) that reaches the bounds, with
// the density it was predicted at (cand_s), in the order considered.
std::vector<Candidate> predicted_candidates(const CheapestProblem& pr, const std::vector<AlphaOption>& al,
                                            EstimateTables& tables, std::vector<double>& cand_s) {
  const CostModel& cm = pr.cm;
  const int n = pr.n;
  // Candidate order: the usual winners first, so the lower bound prunes more.
  std::vector<int> orders;
  for (int p : {5, 6, 4, 7, 8, 3, 9, 10})
    if (p >= pr.order_lo && p <= pr.order_hi) orders.push_back(p);
  std::vector<Candidate> cands;
  double best_pred = -1;
  for (int p : orders)
    for (Differentiation diff : pr.diffs) {
      const bool ik = diff == Differentiation::IK;
      const double floor_cost = ((ik ? cm.atom_ik : cm.atom_ad) + (ik ? cm.point_ik : cm.point_ad) * p * p * p) * n;
      if (best_pred >= 0 && floor_cost >= best_pred) continue;
      const std::vector<TablePoint>& tab = tables.table(diff, p);
      const std::vector<TablePoint>* tab_ad = pr.mesh_bound ? &tables.table(Differentiation::AD, p) : nullptr;
      // Every alpha: the density where the scaled estimates meet their bounds, mesh, cost.
      Candidate bestc;
      double bestc_s = 0, bestc_tot = 0;
      bool found = false;
      for (const AlphaOption& o : al) {
        double sa = tables.crossing(tab, o.alpha,
                                    ik || !pr.mesh_bound ? o.budget : std::fmin(o.budget, pr.mesh_target));
        if (sa > 0 && ik && pr.mesh_bound) {
          const double sm = tables.crossing(*tab_ad, o.alpha, pr.mesh_target);
          sa = sm > 0 ? std::fmax(sa, sm) : 0.0;
        }
        if (!(sa > 0)) continue;  // not reached below the cap
        const Int3 K = mesh_for_density(sa, pr.h, p);
        if (K[0] > kMaxMeshAxis || K[1] > kMaxMeshAxis || K[2] > kMaxMeshAxis) continue;
        const double cost = reciprocal_cost(cm, K, p, diff, n);
        const double pred = tables.predicted(tab, o.alpha, K);  // of this very mesh (rounded up from sa)
        const double tot = combined_error(o.real, pred * pr.recip_factor, pr.cross);
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
  return cands;
}

// The exact check of one candidate: the smallest FFT-friendly mesh near the predicted
// density sv whose exact estimate meets the budget (and the mesh bound) at the candidate's
// alpha becomes its mesh, estimate and cost; false (cost infinite) when none up to
// kMaxMeshAxis does.
//
// Each exact estimate is a sum over the mesh (~40 ms at 50x54x90, ~0.2 s at 72x80x125), so
// the walk along the density line is steered by the table's prediction corrected by the
// ratio f of the last exact estimate to its prediction (the ratio drifts slowly along the
// line):
// - upwards (the predicted mesh fails) it jumps to the first mesh whose corrected
//   prediction meets the bounds, at most kMaxJump steps at a time (a prediction can be far
//   off), and gives up at cost_cap, the cheapest candidate checked so far: a larger mesh
//   of this candidate cannot win;
// - downwards (a mesh passed) it tries the smallest mesh whose corrected prediction meets
//   the bounds first, bisects between it and the passing one when it fails, then steps
//   down while the next mesh is not predicted to miss by more than kSkipMargin.
// Every mesh chosen is checked exactly; only a mesh predicted to fail by that margin is
// not. (Stepping mesh by mesh, the choice for 30k water at 1e-4 took 5 sums where 2 do.)
constexpr double kSkipMargin = 1.03;
constexpr int kMaxJump = 8;  // mesh steps one jump may skip (a prediction can be far off)

bool check_exactly(const CheapestProblem& pr, const AlphaOption& o, Candidate& c, double sv,
                   EstimateTables& tables, double cost_cap) {
  double e = 0;
  auto meets = [&](const Int3& K) {  // sets e
    e = reciprocal_error(pr.box, c.alpha, K, c.order, c.diff, pr.sum_q2, pr.n, pr.kc, pr.sum_q4, pr.corr);
    if (e > o.budget) return false;
    if (!pr.mesh_bound) return true;
    const double ead = c.diff == Differentiation::AD
                           ? e
                           : reciprocal_error(pr.box, c.alpha, K, c.order, Differentiation::AD, pr.sum_q2, pr.n,
                                              pr.kc, pr.sum_q4, pr.corr);
    return ead <= pr.mesh_target;
  };
  auto next = [&](double& s, const Int3& K, double factor) {  // the next mesh along the density line
    Int3 K2 = K;
    for (int i = 0; i < 400 && K2 == K; ++i) {
      s *= factor;
      K2 = mesh_for_density(s, pr.h, c.order);
    }
    return K2;
  };
  auto too_big = [](const Int3& K) { return K[0] > kMaxMeshAxis || K[1] > kMaxMeshAxis || K[2] > kMaxMeshAxis; };
  // The prediction steers only where one estimate decides: the force estimate against its
  // limit (the budget, or for ad with a mesh bound the smaller of the two). ik with a mesh
  // bound is decided by two estimates and walks mesh by mesh.
  const bool steer = !(pr.mesh_bound && c.diff == Differentiation::IK);
  const double limit = pr.mesh_bound && c.diff == Differentiation::AD ? std::fmin(o.budget, pr.mesh_target)
                                                                      : o.budget;
  const std::vector<TablePoint>& tab = tables.table(c.diff, c.order);
  auto costs = [&](const Int3& K) { return reciprocal_cost(pr.cm, K, c.order, c.diff, pr.n); };
  auto predicted = [&](const Int3& K) { return tables.predicted(tab, c.alpha, K); };
  auto ratio = [&](const Int3& K, double exact) {  // exact over predicted at K, 1 when either is 0
    const double pk = predicted(K);
    return pk > 0 && exact > 0 ? exact / pk : 1.0;
  };
  Int3 K = c.mesh;
  bool ok = meets(K);
  for (int step = 0; step < 16 && !ok; ++step) {  // larger meshes until one meets the bounds
    const double f = ratio(K, e);  // e: K's sum, which failed
    Int3 K2 = next(sv, K, 1.02);
    for (int jump = 0; steer && jump < kMaxJump && f * predicted(K2) > limit; ++jump) {
      double s3 = sv;
      const Int3 K3 = next(s3, K2, 1.02);
      // the prediction may be far off: the mesh before the cap or the edge is checked instead
      if (too_big(K3) || costs(K3) >= cost_cap) break;
      K2 = K3, sv = s3;
    }
    if (too_big(K2) || costs(K2) >= cost_cap) break;  // no larger mesh can win
    K = K2;
    ok = meets(K);
  }
  if (!ok) {
    c.cost = std::numeric_limits<double>::infinity();
    return false;
  }
  double e_ok = e;
  if (steer) {  // down to the smallest mesh the corrected prediction lets meet the bounds
    const double f = ratio(K, e_ok);
    std::vector<std::pair<Int3, double>> line;  // (mesh, density) predicted to pass, shrinking
    double s2 = sv;
    Int3 cur = K;
    for (int i = 0; i < 32; ++i) {
      const Int3 K2 = next(s2, cur, 0.98);
      if (K2 == cur || f * predicted(K2) > limit) break;
      line.emplace_back(K2, s2);
      cur = K2;
    }
    // The smallest first; when it fails, bisection between it and K (the error falls
    // along the line, so passing meshes form a prefix of it from K down).
    long lo = static_cast<long>(line.size()) - 1, hi = -1;  // line[lo] fails once tried; K = "line[-1]" passes
    if (lo >= 0 && meets(line[lo].first)) {
      hi = lo;
      e_ok = e;
    } else {
      while (lo - hi > 1) {
        const long mid = (lo + hi) / 2;
        if (meets(line[mid].first))
          hi = mid, e_ok = e;
        else
          lo = mid;
      }
    }
    if (hi >= 0) K = line[hi].first, sv = line[hi].second;
  }
  for (int step = 0; step < 8; ++step) {  // smaller meshes while they still meet the bounds
    double s2 = sv;
    const Int3 K2 = next(s2, K, 0.98);
    // ratio at K from its own sum (e_ok): the last sum may be a failed bisection step's
    if (K2 == K || (steer && ratio(K, e_ok) * predicted(K2) > kSkipMargin * limit) || !meets(K2)) break;
    K = K2, sv = s2, e_ok = e;
  }
  e = e_ok;
  c.mesh = K;
  c.est_recip = e;
  c.cost = costs(K);
  c.exact = true;
  return true;
}

// The pick: the cheapest predictions checked exactly (check_exactly), cheapest first; the
// index of the cheapest that passed, -1 when none did.
int cheapest_checked(const CheapestProblem& pr, const std::vector<AlphaOption>& al, std::vector<Candidate>& cands,
                     const std::vector<double>& cand_s, EstimateTables& tables) {
  std::vector<size_t> idx(cands.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  auto by_cost = [&](size_t a, size_t b) { return cands[a].cost < cands[b].cost; };
  std::stable_sort(idx.begin(), idx.end(), by_cost);
  int best_i = -1, checked = 0;
  for (size_t k = 0; k < idx.size() && checked < 6; ++k) {
    Candidate& c = cands[idx[k]];
    // predictions within 25% of the best checked cost are checked too: the table's
    // prediction can be a mesh step off (per-axis rounding of small meshes; with the
    // cheap AVX-512 spreading, orders 5 and 6 on meshes of 12-16 points came within
    // 2.4% of each other while the order-5 prediction was 12% too high)
    if (best_i >= 0 && c.cost >= 1.25 * cands[best_i].cost) break;
    ++checked;
    const double cap = best_i >= 0 ? cands[best_i].cost : std::numeric_limits<double>::infinity();
    if (check_exactly(pr, option_of(pr, al, c.alpha), c, cand_s[idx[k]], tables, cap) &&
        (best_i < 0 || c.cost < cands[best_i].cost))
      best_i = static_cast<int>(idx[k]);
    // an exact candidate may now cost more than the next predictions: re-sort the rest
    std::stable_sort(idx.begin() + k + 1, idx.end(), by_cost);
  }
  return best_i;
}

}  // namespace

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
  CheapestProblem pr{box, cutoff, target, sum_q2, n_atoms, kc, alpha, diffs, order_lo, order_hi, cm,
                     sum_q4, mesh_target, corr, real_volume, cross, recip_factor};
  pr.mesh_bound = mesh_target > 0;
  pr.V = real_volume > 0 ? real_volume : volume_of(box);
  pr.n = std::max(n_atoms, 1);
  if (sum_q4 < 0) pr.sum_q4 = sum_q2 * sum_q2 / pr.n;
  pr.h = heights_of(box);
  pr.hmin = std::fmin(pr.h[0], std::fmin(pr.h[1], pr.h[2]));
  pr.hmax = std::fmax(pr.h[0], std::fmax(pr.h[1], pr.h[2]));
  for (int d = 0; d < 3; ++d)
    pr.aprod *= std::sqrt(box[3 * d] * box[3 * d] + box[3 * d + 1] * box[3 * d + 1] + box[3 * d + 2] * box[3 * d + 2]);
  pr.s_cap = kMaxMeshAxis / pr.hmax;
  pr.kc2n = kc * kc / pr.n;

  const std::vector<AlphaOption> al = alpha_options(pr);
  // One (diff, order), one alpha, no mesh bound: the exact search alone (as choose_parameters).
  if (diffs.size() == 1 && order_lo == order_hi && al.size() == 1 && !pr.mesh_bound) {
    const AlphaOption& o = al[0];
    const MeshChoice c =
        smallest_mesh(box, o.alpha, order_lo, diffs[0], sum_q2, pr.n, kc, pr.sum_q4, o.budget, corr);
    const Candidate w{diffs[0], order_lo, o.alpha, c.mesh, reciprocal_cost(cm, c.mesh, order_lo, diffs[0], pr.n),
                      c.err, true};
    return finish(pr, al, w, {w});
  }
  // The tables' predictions per (diff, order), then the exact check of the cheapest.
  EstimateTables tables(pr, al);
  std::vector<double> cand_s;  // the density (at the candidate's alpha) the table predicts
  std::vector<Candidate> cands = predicted_candidates(pr, al, tables, cand_s);
  if (cands.empty()) throw no_mesh_error(pr);
  const int best_i = cheapest_checked(pr, al, cands, cand_s, tables);
  if (best_i < 0) throw no_mesh_error(pr);
  return finish(pr, al, cands[best_i], cands);
}

}  // namespace tuning
}  // namespace pmewald
