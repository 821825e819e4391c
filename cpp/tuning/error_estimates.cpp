#include "tuning/error_estimates.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "base/errors.hpp"
#include "base/kokkos_runtime.hpp"
#include "pme/bspline.hpp"
#include "tuning/mesh_error_sum.hpp"

namespace pmewald {
inline namespace tuning {

double real_space_error(double alpha, double cutoff, double sum_q2, int n_atoms, double volume,
                        double coulomb_constant) {
  if (n_atoms <= 0 || !(cutoff > 0) || !(volume > 0)) return 0.0;
  return 2.0 * std::fabs(coulomb_constant) * sum_q2 /
         std::sqrt(static_cast<double>(n_atoms) * cutoff * volume) *
         std::exp(-alpha * alpha * cutoff * cutoff);
}

namespace {

// The self force of a correlated system is reduced by (1 + cross/self2)^kSelfCancellation:
// 2 completes the square (a lower bound: exact only when every atom's neighbourhood
// cancels the same fraction along its self force), 1 is the linear term alone; measured
// on displaced rock salt and water (docs/accuracy.md), 1.5 is within [0.7, 1.6] of the truth.
constexpr double kSelfCancellation = 1.5;

// The memo of reciprocal_error_parts: the automatic choice asks for the same sums again
// and again within a call (choose_cheapest's tables and exact checks, the energy check's
// second choice, the estimate of the chosen parameters), and one sum at a 50x54x90 mesh
// costs ~50 ms against a ~120 ms compute on 30,000 atoms. Keyed by every input, bit for
// bit (the correlation table by its serial number): a hit is the very value the sum would
// give. Bounded; cleared when full.
using EstimateKey = std::tuple<std::array<double, 9>, double, Int3, int, int, double, int, double, std::uint64_t>;
constexpr std::size_t kMemoEntries = 4096;

std::mutex& memo_mutex() {
  static std::mutex m;
  return m;
}
std::map<EstimateKey, ReciprocalErrorParts>& memo() {
  static std::map<EstimateKey, ReciprocalErrorParts> m;
  return m;
}

ReciprocalErrorParts sum_parts(const Mat3& box, double alpha, const Int3& K, int p, Differentiation diff,
                               double sum_q2, double sum_q4, const ChargeCorrelation* corr);

}  // namespace

ReciprocalErrorParts reciprocal_error_parts(const Mat3& box, double alpha, const Int3& K, int p,
                                            Differentiation diff, double sum_q2, int n_atoms,
                                            double sum_q4, const ChargeCorrelation* correlation) {
  ensure_kokkos_initialized();  // this thread may run kernels (base/kokkos_runtime.hpp)
  if (n_atoms <= 0 || sum_q2 <= 0) return {0.0, 0.0};
  const ChargeCorrelation* corr = correlation != nullptr && !correlation->empty() ? correlation : nullptr;
  if (p < kMinOrder || p > kMaxOrder) throw ValueError("order must be in [3, 10]");
  for (int d = 0; d < 3; ++d)
    if (K[d] < p) throw ValueError("mesh smaller than the order");
  if (!(alpha > 0)) throw ValueError("alpha must be positive");
  if (sum_q4 < 0) sum_q4 = sum_q2 * sum_q2 / n_atoms;
  std::array<double, 9> b;
  for (int i = 0; i < 9; ++i) b[i] = box[i];
  const EstimateKey key{b, alpha, K, p, static_cast<int>(diff), sum_q2, n_atoms, sum_q4,
                        corr != nullptr ? corr->serial() : 0};
  {
    const std::lock_guard<std::mutex> lock(memo_mutex());
    const auto it = memo().find(key);
    if (it != memo().end()) return it->second;
  }
  const ReciprocalErrorParts e = sum_parts(box, alpha, K, p, diff, sum_q2, sum_q4, corr);
  const std::lock_guard<std::mutex> lock(memo_mutex());
  if (memo().size() >= kMemoEntries) memo().clear();
  memo().emplace(key, e);
  return e;
}

namespace {

ReciprocalErrorParts sum_parts(const Mat3& box, double alpha, const Int3& K, int p, Differentiation diff,
                               double sum_q2, double sum_q4, const ChargeCorrelation* corr) {
  const double V = volume_of(box);
  // The sums over the mesh (mesh_error_sum.hpp), and the two parts from them.
  const MeshErrorSums tot = mesh_error_sums(box, alpha, K, p, diff, corr);
  const double S_sum = tot.pair;
  double self2 = 0, cross = 0;
  for (int i = 0; i < 18; ++i) {
    self2 += tot.self[i] * tot.self[i];
    cross += tot.self[i] * tot.neighbours[i];
  }
  // Correlated neighbours: the self force of atom i and the position-dependent pair errors
  // of its neighbours add up to q_i^2 F_self (1 + sum_j (q_j / q_i) gamma_ij), the harmonic-n
  // response gamma of the kernel at r_ij. Its mean square over the atoms is completed to a
  // square from the cross term sum_i q_i^3 sum_j q_j gamma_ij = sum_q4 cross / self2 (exact
  // when every atom's neighbourhood cancels the same fraction, as for neutral groups).
  if (corr != nullptr && self2 > 0) {
    const double f = std::fmin(std::fmax(1.0 + cross / self2, 0.0), 1.0);
    self2 *= std::pow(f, kSelfCancellation);
  }
  self2 /= V * V;
  return {(sum_q2 * sum_q2 - sum_q4) * std::fmax(S_sum, 0.0) / (V * V), sum_q4 * self2};
}

}  // namespace

double reciprocal_error(const Mat3& box, double alpha, const Int3& K, int p,
                        Differentiation diff, double sum_q2, int n_atoms,
                        double coulomb_constant, double sum_q4, const ChargeCorrelation* correlation) {
  if (n_atoms <= 0 || sum_q2 <= 0) return 0.0;
  const ReciprocalErrorParts e =
      reciprocal_error_parts(box, alpha, K, p, diff, sum_q2, n_atoms, sum_q4, correlation);
  const double var = (e.pair + e.self) / n_atoms;
  return std::fabs(coulomb_constant) * std::sqrt(std::fmax(var, 0.0));
}

}  // namespace tuning
}  // namespace pmewald
