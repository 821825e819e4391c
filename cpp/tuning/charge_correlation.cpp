#include "tuning/charge_correlation.hpp"

#include <fftw3.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "base/errors.hpp"
#include "base/fftw_planner.hpp"
#include "pme/bspline.hpp"
#include "tuning/parameter_choice.hpp"

namespace pmewald {
inline namespace tuning {

namespace {

constexpr int kSpreadOrder = 8;

double edge_length(const Mat3& box, int d) {
  return std::sqrt(box[3 * d] * box[3 * d] + box[3 * d + 1] * box[3 * d + 1] + box[3 * d + 2] * box[3 * d + 2]);
}

double round_sig(double x, int digits) {  // rank-count independent tables
  if (!(x != 0) || !std::isfinite(x)) return x;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*e", digits - 1, x);
  return std::strtod(buf, nullptr);
}

}  // namespace

Int3 correlation_half_widths(const Mat3& box, double kmax, int max_half) {
  if (!(kmax > 0) || !std::isfinite(kmax)) throw ValueError("kmax must be positive and finite");
  Int3 h;
  for (int d = 0; d < 3; ++d) {
    const double x = std::ceil(kmax * edge_length(box, d) / (2.0 * M_PI));
    h[d] = static_cast<int>(std::min<double>(x, max_half));
  }
  return h;
}

std::vector<Complex> local_structure_factors(const Mat3& box, const double* pos, const double* q, std::size_t n,
                                             const Int3& half) {
  for (int d = 0; d < 3; ++d)
    if (half[d] < 0 || half[d] > 256) throw ValueError("structure factor half-widths must lie in [0, 256]");
  const int p = kSpreadOrder;
  Int3 G;
  for (int d = 0; d < 3; ++d) G[d] = fft_friendly(std::max(4 * half[d] + 2, 2 * p));
  const std::size_t NG = static_cast<std::size_t>(G[0]) * G[1] * G[2];
  fftw_complex* grid = fftw_alloc_complex(NG);
  if (!grid) throw std::runtime_error("structure factors: out of memory");
  std::fill(reinterpret_cast<double*>(grid), reinterpret_cast<double*>(grid) + 2 * NG, 0.0);
  const Mat3 R = reciprocal_of(box);
  // spread q + i q^3 (one complex transform gives both structure factors)
  for (std::size_t a = 0; a < n; ++a) {
    int k0[3];
    double w[3][kMaxOrder];
    for (int d = 0; d < 3; ++d) {
      double s = 0;
      for (int r = 0; r < 3; ++r) s += R[3 * r + d] * pos[3 * a + r];
      s -= std::floor(s);
      double u = s * G[d];
      if (u >= G[d]) u -= G[d];
      const double fl = std::floor(u);
      bspline_weights(p, u - fl, w[d], nullptr);
      k0[d] = static_cast<int>(fl) - p + 1;
    }
    const double qa = q[a], q3 = qa * qa * qa;
    for (int i = 0; i < p; ++i) {
      const int gi = ((k0[0] + i) % G[0] + G[0]) % G[0];
      for (int j = 0; j < p; ++j) {
        const int gj = ((k0[1] + j) % G[1] + G[1]) % G[1];
        const double wij = w[0][i] * w[1][j];
        fftw_complex* row = grid + (static_cast<std::size_t>(gi) * G[1] + gj) * G[2];
        for (int k = 0; k < p; ++k) {
          const int gk = ((k0[2] + k) % G[2] + G[2]) % G[2];
          const double wt = wij * w[2][k];
          row[gk][0] += wt * qa;
          row[gk][1] += wt * q3;
        }
      }
    }
  }
  fftw_plan plan = nullptr;
  {
    // FFTW's planner is not thread-safe (two PME objects may tune in two threads).
    const std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    plan = fftw_plan_dft_3d(G[0], G[1], G[2], grid, grid, FFTW_FORWARD, FFTW_ESTIMATE);
  }
  if (!plan) {
    fftw_free(grid);
    throw std::runtime_error("structure factors: FFTW planning failed");
  }
  fftw_execute(plan);
  destroy_fftw_plan(plan);
  // per axis: 1 / (sinc^p(x/G) e^{i pi p x / G}) for x in [-half, half]
  std::vector<Complex> corr[3];
  for (int d = 0; d < 3; ++d) {
    corr[d].resize(2 * half[d] + 1);
    for (int x = -half[d]; x <= half[d]; ++x) {
      const double nu = static_cast<double>(x) / G[d];
      const double sc = x == 0 ? 1.0 : std::sin(M_PI * nu) / (M_PI * nu);
      const double ph = -M_PI * p * nu;
      corr[d][x + half[d]] = Complex(std::cos(ph), std::sin(ph)) / std::pow(sc, p);
    }
  }
  const std::size_t M = static_cast<std::size_t>(2 * half[0] + 1) * (2 * half[1] + 1) * (2 * half[2] + 1);
  std::vector<Complex> out(2 * M);
  auto at = [&](int x0, int x1, int x2) {
    const int g0 = (x0 % G[0] + G[0]) % G[0], g1 = (x1 % G[1] + G[1]) % G[1], g2 = (x2 % G[2] + G[2]) % G[2];
    const fftw_complex& z = grid[(static_cast<std::size_t>(g0) * G[1] + g1) * G[2] + g2];
    return Complex(z[0], z[1]);
  };
  std::size_t t = 0;
  for (int x0 = -half[0]; x0 <= half[0]; ++x0)
    for (int x1 = -half[1]; x1 <= half[1]; ++x1)
      for (int x2 = -half[2]; x2 <= half[2]; ++x2, ++t) {
        const Complex zp = at(x0, x1, x2), zm = Kokkos::conj(at(-x0, -x1, -x2));
        const Complex c = corr[0][x0 + half[0]] * corr[1][x1 + half[1]] * corr[2][x2 + half[2]];
        out[t] = 0.5 * (zp + zm) * c;                      // S
        out[M + t] = Complex(0.0, -0.5) * (zp - zm) * c;   // T
      }
  fftw_free(grid);
  return out;
}

ChargeCorrelation::ChargeCorrelation(const Int3& half, const Complex* sums, double sum_q2, double sum_q4)
    : half_(half) {
  static std::atomic<std::uint64_t> made{0};
  serial_ = ++made;
  const double denom = sum_q2 * sum_q2 - sum_q4;
  if (!(denom > 1e-12 * sum_q2 * sum_q2) || sums == nullptr) {  // a single charge: nothing to correlate
    half_ = Int3{0, 0, 0};
    return;
  }
  const std::size_t M = static_cast<std::size_t>(2 * half[0] + 1) * (2 * half[1] + 1) * (2 * half[2] + 1);
  c_.resize(M);
  chi_.resize(M);
  for (std::size_t t = 0; t < M; ++t) {
    const Complex S = sums[t], T = sums[M + t];
    const double ST = Kokkos::real(S * Kokkos::conj(T));
    const double C = sum_q2 * Kokkos::real(S * Kokkos::conj(S)) - 2.0 * ST + sum_q4;
    c_[t] = round_sig(std::fmax(C, 0.0) / denom, 6);
    chi_[t] = round_sig((ST - sum_q4) / sum_q4, 6);
  }
}

void ChargeCorrelation::set_real_factors(const std::vector<double>& alpha_rc, const std::vector<double>& factors) {
  if (alpha_rc.size() != factors.size()) throw ValueError("real factors: one factor per alpha r_c node");
  for (std::size_t i = 0; i < alpha_rc.size(); ++i) {
    if (!(factors[i] > 0) || !std::isfinite(factors[i]) || !std::isfinite(alpha_rc[i]))
      throw ValueError("real factors must be positive and finite");
    if (i > 0 && !(alpha_rc[i] > alpha_rc[i - 1])) throw ValueError("real factor nodes must increase");
  }
  real_x_ = alpha_rc;
  real_f_ = factors;
}

double ChargeCorrelation::real_factor(double alpha_rc) const {
  if (real_x_.empty()) return 1.0;
  if (alpha_rc <= real_x_.front()) return real_f_.front();
  if (alpha_rc >= real_x_.back()) return real_f_.back();
  const std::size_t i = static_cast<std::size_t>(std::upper_bound(real_x_.begin(), real_x_.end(), alpha_rc) -
                                                 real_x_.begin());
  const double t = (alpha_rc - real_x_[i - 1]) / (real_x_[i] - real_x_[i - 1]);
  return std::exp((1 - t) * std::log(real_f_[i - 1]) + t * std::log(real_f_[i]));
}

}  // namespace tuning
}  // namespace pmewald
