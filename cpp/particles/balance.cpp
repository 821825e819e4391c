#include "particles/balance.hpp"

#include <algorithm>
#include <cmath>

#include "comm/mpi_helpers.hpp"

namespace pmewald {
inline namespace particles {

namespace {

constexpr int kBinsPerRank = 64, kMaxBins = 4096;

int bins_of(int p) { return p > 1 ? std::min(kMaxBins, kBinsPerRank * p) : 0; }

// The cut positions (fractions) that split the histogram h (B bins over [0, 1))
// into p equal parts; empty when it holds nothing.
std::vector<double> quantiles(const double* h, int B, int p) {
  double total = 0;
  for (int b = 0; b < B; ++b) total += h[b];
  if (!(total > 0)) return {};
  std::vector<double> out;
  double below = 0;
  int b = 0;
  for (int g = 1; g < p; ++g) {
    const double target = total * g / p;
    while (b < B && below + h[b] < target) below += h[b++];
    if (b >= B) {
      out.push_back(1.0);
      continue;
    }
    const double inside = h[b] > 0 ? (target - below) / h[b] : 0.5;
    out.push_back((b + std::min(std::max(inside, 0.0), 1.0)) / B);
  }
  return out;
}

}  // namespace

Balancer::Balancer(MPI_Comm comm, const Int3& grid, const Int3& mesh, const BalanceSettings& settings)
    : comm_(comm), settings_(settings), domains_(DomainGrid::bricks(grid, mesh)), relax_(settings.relax) {}

bool Balancer::after_call(const Work& w, const WorkSample* where) {
  const double pairs = w.pairs, seconds = w.seconds;
  const double mx[2] = {w.max_seconds, w.max_pairs};  // the slowest rank's (the caller's reduction)
  const int P = domains_.ranks();
  const double mean_t = w.sum_seconds / P, mean_p = w.sum_pairs / P;
  stats_.calls += 1;
  stats_.my_seconds += seconds;
  stats_.my_pairs += pairs;
  stats_.max_seconds += mx[0];
  stats_.max_pairs += mx[1];
  stats_.mean_pairs += mean_p;
  stats_.mean_seconds += mean_t;
  stats_.last_time_imbalance = mean_t > 0 ? mx[0] / mean_t : 1.0;
  stats_.last_pairs_imbalance = mean_p > 0 ? mx[1] / mean_p : 1.0;
  stats_.last_imbalance =
      settings_.work == BalanceWork::Time ? stats_.last_time_imbalance : stats_.last_pairs_imbalance;
  if (!on() || !where || !(stats_.last_imbalance > settings_.threshold)) return false;
  if (settings_.mode == BalanceMode::Once && corrections_ >= kOnceCorrections) return false;
  // All the way the first time (and every time with Once), then under-relaxed, the
  // step halved after a move that made the imbalance worse (an overshoot).
  double relax = 1.0;
  if (settings_.mode == BalanceMode::Dynamic && corrections_ > 0) {
    if (corrections_ > 1 && stats_.last_imbalance > imbalance_before_) relax_ = std::max(relax_ * 0.5, kMinRelax);
    relax = relax_;
  }
  imbalance_before_ = stats_.last_imbalance;
  corrections_ += 1;
  // The rank's whole work (its ghost rows' too) over its points, in proportion
  // to their weights (or evenly).
  const double work = settings_.work == BalanceWork::Time ? seconds : pairs;
  double total = 0;
  for (std::size_t i = 0; i < where->n; ++i) total += where->w ? where->w[i] : 1.0;
  const double scale = total > 0 ? work / total : 0.0;
  return rebalance(*where, scale, relax);
}

bool Balancer::rebalance(const WorkSample& where, double scale, double relax) {
  const Int3& grid = domains_.grid();
  int B[3], off[4] = {0, 0, 0, 0};
  for (int d = 0; d < 3; ++d) {
    B[d] = bins_of(grid[d]);
    off[d + 1] = off[d] + B[d];
  }
  if (off[3] == 0) return false;  // one rank along every axis: nothing to cut
  hist_.assign(static_cast<std::size_t>(off[3]), 0.0);
  for (std::size_t i = 0; i < where.n; ++i) {
    const double weight = scale * (where.w ? where.w[i] : 1.0);
    for (int d = 0; d < 3; ++d) {
      if (B[d] == 0) continue;
      const double x = where.s[i * where.stride + d];
      const int b = std::min(B[d] - 1, std::max(0, static_cast<int>(std::floor(x * B[d]))));
      hist_[static_cast<std::size_t>(off[d] + b)] += weight;
    }
  }
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, hist_.data(), off[3], MPI_DOUBLE, MPI_SUM, comm_), "MPI_Allreduce");
  // The bricks' cuts on the fine resolution (the first move), or the current ones.
  std::array<std::vector<int>, 3> cuts;
  for (int d = 0; d < 3; ++d) {
    const long long K = domains_.resolution()[d];
    cuts[d] = domains_.cuts(d);
    if (K != kResolution)
      for (int& c : cuts[d]) c = static_cast<int>((static_cast<long long>(c) * kResolution + K / 2) / K);
    if (B[d] == 0) continue;
    const std::vector<double> q = quantiles(hist_.data() + off[d], B[d], grid[d]);
    if (q.empty()) continue;
    const int p = grid[d], R = kResolution;
    for (int g = 1; g < p; ++g) {
      const double now = cuts[d][g];
      const double want = q[static_cast<std::size_t>(g - 1)] * R;
      int c = static_cast<int>(std::lround(now + relax * (want - now)));
      // Every domain keeps at least one index point (no empty domains).
      c = std::max(c, cuts[d][g - 1] + 1);
      c = std::min(c, R - (p - g));
      cuts[d][g] = c;
    }
  }
  DomainGrid next = DomainGrid::with_cuts(grid, {kResolution, kResolution, kResolution}, std::move(cuts));
  if (moved_ && next == domains_) return false;
  domains_ = std::move(next);
  moved_ = true;
  stats_.rebalances += 1;
  return true;
}

}  // namespace particles
}  // namespace pmewald
