#include "realspace/kernel_timing.hpp"

#include <cstdint>
#include <random>
#include <vector>

#include "base/simd.hpp"
#include "base/timers.hpp"
#include "realspace/cluster_kernel.hpp"

namespace pmewald {
inline namespace realspace {

namespace {

constexpr double kAlpha = 0.35, kK = 332.0637;

// 8 (or 16, 4) lanes of float, 12 independent FMA chains (latency x throughput
// covered on current cores), `n` rounds; returns the rounds' register FMAs.
template <int L>
struct FloatVec {
  typedef float F __attribute__((vector_size(4 * L)));
};

template <int L>
__attribute__((always_inline)) inline double fma_chains(long n) {
  using F = typename FloatVec<L>::F;
  constexpr int kChains = 12;
  F a[kChains];
  for (int c = 0; c < kChains; ++c) a[c] = F{} + (1.0f + 1e-3f * c);
  const F m = F{} + 0.999999f, b = F{} + 1e-7f;
  for (long k = 0; k < n; ++k)
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) a[c] = a[c] * m + b;
  float s = 0;
  for (int c = 0; c < kChains; ++c) s += a[c][0];
  volatile float sink = s;
  (void)sink;
  return static_cast<double>(n) * kChains;
}

using ChainFn = double (*)(long);
#if PMEWALD_X86_DISPATCH
PMEWALD_TARGET_V4 double chains_v4(long n) { return fma_chains<16>(n); }
PMEWALD_TARGET_V3 double chains_v3(long n) { return fma_chains<8>(n); }
#endif
double chains_base(long n) { return fma_chains<4>(n); }

}  // namespace

FmaRate fma_rate(double seconds) {
  const ChainFn f = simd::choose<ChainFn>(PMEWALD_SIMD_VERSIONS(chains_v4, chains_v3, chains_base));
  const simd::Isa isa = simd::isa();
  FmaRate out;
  out.lanes = isa == simd::Isa::V4 ? 16 : isa == simd::Isa::V3 ? 8 : 4;
  long n = 1 << 16;
  double done = 0;
  const double t0 = wall_seconds();
  while (wall_seconds() - t0 < seconds) {
    done += f(n);
    n = n < (1L << 24) ? 2 * n : n;
  }
  out.per_second = done / (wall_seconds() - t0);
  return out;
}

double atom_kernel_ns_per_pair(PairPrecision precision, int reps) {
  constexpr int n = 256;
  std::mt19937 g(1);
  std::uniform_real_distribution<double> u(-5.0, 5.0);
  std::vector<double> X(n), Y(n), Z(n);
  for (int b = 0; b < n; ++b) {
    X[b] = u(g);
    Y[b] = u(g);
    Z[b] = u(g);
  }
  alignas(64) double bx[n], by[n], bz[n], bq[n], fx[n], fy[n], fz[n];
  double acc[PairBatchAcc::kSize] = {};
  const auto block = precision == PairPrecision::Mixed ? erfc_pair_block_mixed : erfc_pair_block;
  const double t0 = wall_seconds();
  for (int r = 0; r < reps; ++r) {
    for (int b = 0; b < n; ++b) {  // the block kernel may pad its scratch: refill
      bx[b] = X[b];
      by[b] = Y[b];
      bz[b] = Z[b];
      bq[b] = 0.4;
    }
    block(n, bx, by, bz, bq, 0.1, 0.2, 0.3, kK * 0.4, kAlpha, fx, fy, fz, acc);
  }
  volatile double sink = acc[0];
  (void)sink;
  return (wall_seconds() - t0) * 1e9 / (static_cast<double>(reps) * n);
}

double cluster_kernel_ns_per_lane(PairPrecision precision, int reps, double cutoff) {
  constexpr int C = 65, P = C - 1;
  std::mt19937 g(1);
  std::uniform_real_distribution<double> u(-1.5, 1.5);
  std::vector<double> d(16 * C), centres(3 * C);
  std::vector<float> f(16 * C);
  for (int c = 0; c < C; ++c)
    for (int k = 0; k < 3; ++k) {
      centres[3 * c + k] = c == 0 ? 0.0 : 2.0 * u(g);
      for (int l = 0; l < 4; ++l) {
        const double x = centres[3 * c + k] + u(g);
        d[16 * c + 4 * k + l] = x;
        f[16 * c + 4 * k + l] = static_cast<float>(x - centres[3 * c + k]);
      }
    }
  for (int c = 0; c < C; ++c)
    for (int l = 0; l < 4; ++l) {
      d[16 * c + 12 + l] = 0.4;
      f[16 * c + 12 + l] = 0.4f;
    }
  std::vector<int> cj(P);
  std::vector<std::uint16_t> mask(P, 0xffff);
  for (int p = 0; p < P; ++p) cj[p] = p + 1;
  ClusterRowArgs a;
  a.ci = 0;
  a.n = P;
  a.cj = cj.data();
  a.mask = mask.data();
  a.k = kK;
  a.alpha = kAlpha;
  a.rc2 = cutoff * cutoff;  // 20: every pair within (at most 9 sqrt(3) = 15.6 A apart; alpha r < 5.5)
  double fi[12] = {};
  std::vector<double> cforce(12 * C);
  ClusterBlockSums s;
  const double t0 = wall_seconds();
  for (int r = 0; r < reps; ++r) {
    if (precision == PairPrecision::Mixed)
      cluster_row_mixed(a, centres.data(), f.data(), fi, cforce.data(), s);
    else
      cluster_row_double(a, d.data(), fi, cforce.data(), s);
  }
  volatile double sink = s.e;
  (void)sink;
  return (wall_seconds() - t0) * 1e9 / (static_cast<double>(reps) * P * 16);
}

}  // namespace realspace
}  // namespace pmewald
