#include "pme/kspace_solve.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "pme/bspline.hpp"
#include "base/compute_model.hpp"
#include "base/errors.hpp"
#include "base/simd.hpp"

namespace pmewald {
inline namespace pme {

namespace {

struct Acc7 {
  double v[7];
  KOKKOS_INLINE_FUNCTION Acc7() {
    for (int i = 0; i < 7; ++i) v[i] = 0;
  }
  KOKKOS_INLINE_FUNCTION Acc7& operator+=(const Acc7& o) {
    for (int i = 0; i < 7; ++i) v[i] += o.v[i];
    return *this;
  }
  KOKKOS_INLINE_FUNCTION void operator+=(const volatile Acc7& o) volatile {
    for (int i = 0; i < 7; ++i) v[i] += o.v[i];
  }
};

// Maps storage index t of kbox to the signed frequency m.
struct IndexMap {
  int lo[3], s[3], perm[3], K[3];
  KOKKOS_INLINE_FUNCTION void signed_m(std::int64_t t, int m[3]) const {
    const int i2 = static_cast<int>(t % s[2]);
    const std::int64_t t1 = t / s[2];
    const int i1 = static_cast<int>(t1 % s[1]);
    const int i0 = static_cast<int>(t1 / s[1]);
    const int ii[3] = {i0, i1, i2};
    for (int a = 0; a < 3; ++a) {
      const int d = perm[a];
      int g = (lo[d] + ii[a]) % K[d];
      if (g < 0) g += K[d];
      m[d] = (2 * g > K[d]) ? g - K[d] : g;
    }
  }
};

// One run of a row's points whose frequency along the fastest axis is m0, m0 + 1, ...
// with no Nyquist or zero component there and no wrap (KSpaceSolver::run splits the
// rows so): the energy, the virial and (Mode 1) the scaled spectrum, with eight
// partial sums per quantity so the loops vectorise, added to acc[0..6] at the end.
// data: the complex values as re, im pairs (Mode 1 scales them in place).
struct SolveRun {
  double* data;
  const double *g, *vc;
  int n;
  double w, m0, N2;
  double base[3], step[3];
};
using SolveRunFn = void (*)(const SolveRun&, double* acc);

template <int Mode, bool kVirial>
__attribute__((always_inline)) inline void solve_run_lanes(const SolveRun& r, double* acc) {
  constexpr int L = 8;
  double* __restrict d = r.data;
  const double* __restrict g = r.g;
  const double* __restrict vc = r.vc;
  const double w = r.w, N2 = r.N2, m0 = r.m0;
  const double b0 = r.base[0], b1 = r.base[1], b2 = r.base[2], t0 = r.step[0], t1 = r.step[1], t2 = r.step[2];
  double s[7][L] = {};
  auto point = [&](int k, int l) __attribute__((always_inline)) {
    const double re = d[2 * k], im = d[2 * k + 1], gt = g[k];
    const double em = w * gt * (re * re + im * im);
    s[0][l] += em;
    if (kVirial) {
      const double m2 = m0 + k;
      const double mt0 = b0 + t0 * m2, mt1 = b1 + t1 * m2, mt2 = b2 + t2 * m2;
      const double c = vc[k];
      s[1][l] += em * (1.0 - c * mt0 * mt0);
      s[2][l] += em * (1.0 - c * mt1 * mt1);
      s[3][l] += em * (1.0 - c * mt2 * mt2);
      s[4][l] -= em * c * mt0 * mt1;
      s[5][l] -= em * c * mt0 * mt2;
      s[6][l] -= em * c * mt1 * mt2;
    }
    if (Mode == 1) {
      const double f = N2 * gt;
      d[2 * k] = re * f;
      d[2 * k + 1] = im * f;
    }
  };
  const int n = r.n;
  int i = 0;
  for (; i + L <= n; i += L)
    for (int l = 0; l < L; ++l) point(i + l, l);
  for (int l = 0; i < n; ++i, ++l) point(i, l);
  for (int q = 0; q < 7; ++q) {
    double sum = 0;
    for (int l = 0; l < L; ++l) sum += s[q][l];
    acc[q] += sum;
  }
}

template <int Mode, bool kVirial>
void solve_run_base(const SolveRun& r, double* acc) {
  solve_run_lanes<Mode, kVirial>(r, acc);
}
#if PMEWALD_X86_DISPATCH
template <int Mode, bool kVirial>
PMEWALD_TARGET_V4 void solve_run_v4(const SolveRun& r, double* acc) {
  solve_run_lanes<Mode, kVirial>(r, acc);
}
template <int Mode, bool kVirial>
PMEWALD_TARGET_V3 void solve_run_v3(const SolveRun& r, double* acc) {
  solve_run_lanes<Mode, kVirial>(r, acc);
}
#endif

template <int Mode, bool kVirial>
SolveRunFn solve_run_fn() {
  const SolveRunFn base = solve_run_base<Mode, kVirial>;
#if PMEWALD_X86_DISPATCH
  const SolveRunFn v4 = solve_run_v4<Mode, kVirial>, v3 = solve_run_v3<Mode, kVirial>;
  return simd::choose<SolveRunFn>(PMEWALD_SIMD_VERSIONS(v4, v3, base));
#else
  return simd::choose<SolveRunFn>(PMEWALD_SIMD_VERSIONS(base, base, base));
#endif
}

// A row of s2 points whose first has index gk (of K) along the fastest axis: the runs
// between its special points (m = 0: the half spectrum's weight; 2 m = K: the Nyquist
// pair and weight), where m grows by one, through fn; those points through one(i2, gk).
// row: the row's fields (data, g and vc at its first point, w, N2, base, step).
template <class One>
void solve_row_in_runs(int s2, int gk, int K, const SolveRun& row, SolveRunFn fn, double* acc, One&& one) {
  int i2 = 0;
  while (i2 < s2) {
    if (gk == 0 || 2 * gk == K) {
      one(i2, gk);
      ++i2;
      gk = gk + 1 == K ? 0 : gk + 1;
      continue;
    }
    const bool positive = 2 * gk < K;
    const int end = positive ? (K + 1) / 2 : K;  // the sign change, or the wrap
    SolveRun run = row;
    run.n = std::min(s2 - i2, end - gk);
    run.data += 2 * i2;
    run.g += i2;
    run.vc += i2;
    run.m0 = positive ? gk : gk - K;
    fn(run, acc);
    i2 += run.n;
    gk += run.n;
    if (gk == K) gk = 0;
  }
}

IndexMap make_map(const Box3& kbox, const Int3& perm, const Int3& K) {
  IndexMap im;
  for (int a = 0; a < 3; ++a) {
    im.perm[a] = perm[a];
    im.s[a] = kbox.size(perm[a]);
    im.lo[a] = kbox.lo[a];
    im.K[a] = K[a];
  }
  return im;
}

}  // namespace

// G(m) and the virial coefficient 2 (1 + pi^2 |m~|^2/alpha^2) / |m~|^2 of one
// signed frequency m != 0 (m~ = recip @ m returned in mt).
struct Influence {
  Mat3 R;
  double pref, pa2;
  int K[3];
  View1<double> b0, b1, b2;
  KOKKOS_INLINE_FUNCTION void eval(const int m[3], double& g, double& vc, double mt[3]) const {
    double mt2 = 0;
    for (int a = 0; a < 3; ++a) {
      mt[a] = R[3 * a] * m[0] + R[3 * a + 1] * m[1] + R[3 * a + 2] * m[2];
      mt2 += mt[a] * mt[a];
    }
    const int g0 = (m[0] + K[0]) % K[0], g1 = (m[1] + K[1]) % K[1], g2 = (m[2] + K[2]) % K[2];
    const double B = b0(g0) * b1(g1) * b2(g2);
    g = pref * kexp(-pa2 * mt2) / mt2 * B;
    vc = 2.0 * (1.0 + pa2 * mt2) / mt2;
  }
  // The stored representative of -m: Nyquist components (2 m_d = K_d) stay +K_d/2.
  KOKKOS_INLINE_FUNCTION static bool mirror(const int m[3], const int K[3], int ms[3]) {
    bool nyquist = false;
    for (int d = 0; d < 3; ++d) {
      const bool n = 2 * m[d] == K[d] && m[d] != 0;
      ms[d] = n ? m[d] : -m[d];
      nyquist = nyquist || n;
    }
    return nyquist;
  }
};

}  // namespace pme
}  // namespace pmewald

namespace Kokkos {
template <>
struct reduction_identity<pmewald::pme::Acc7> {
  KOKKOS_FORCEINLINE_FUNCTION static pmewald::pme::Acc7 sum() {
    return pmewald::pme::Acc7();
  }
};
}  // namespace Kokkos

namespace pmewald {
inline namespace pme {

KSpaceSolver::KSpaceSolver(const Mat3& box, const Int3& mesh, double alpha, int order,
                           double coulomb_constant, const Box3& kbox, const Int3& storage_order,
                           const SpectrumLayout& layout)
    : mesh_(mesh), alpha_(alpha), kc_(coulomb_constant), order_(order), kbox_(kbox),
      perm_(storage_order), layout_(layout) {
  if (!(alpha > 0) || !std::isfinite(alpha)) throw ValueError("alpha must be positive and finite");
  if (!std::isfinite(coulomb_constant)) throw ValueError("coulomb_constant must be finite");
  bool seen[3] = {false, false, false};
  for (int a = 0; a < 3; ++a) {
    if (perm_[a] < 0 || perm_[a] > 2 || seen[perm_[a]])
      throw ValueError("storage_order must be a permutation of (0, 1, 2)");
    seen[perm_[a]] = true;
  }
  if (layout.half_axis < -1 || layout.half_axis > 2) throw ValueError("half_axis must be -1, 0, 1 or 2");
  for (int d = 0; d < 3; ++d) {
    if (mesh[d] < order)
      throw ValueError("mesh size " + std::to_string(mesh[d]) + " is smaller than the order " +
                       std::to_string(order));
    const int extent = d == layout.half_axis ? mesh[d] / 2 + 1 : mesh[d];
    if (!kbox.empty() && (kbox.lo[d] < 0 || kbox.hi[d] > extent))
      throw ValueError("k-space box " + kbox.str() + " is not inside the " +
                       std::string(layout.half_axis >= 0 ? "half spectrum" : "mesh"));
    const std::vector<double> b = bspline_moduli(mesh[d], order);
    bmod_[d] = View1<double>("bspline_moduli", mesh[d]);
    auto h = Kokkos::create_mirror_view(bmod_[d]);
    for (int m = 0; m < mesh[d]; ++m) h(m) = b[m];
    Kokkos::deep_copy(bmod_[d], h);
  }
  g_ = View1<double>("influence", kbox.volume());
  vc_ = View1<double>("virial_coef", kbox.volume());
  set_box(box);
}

Influence KSpaceSolver::influence_fn() const {
  Influence f;
  f.R = recip_;
  f.pref = kc_ / (2.0 * M_PI * volume_of(box_));
  f.pa2 = M_PI * M_PI / (alpha_ * alpha_);
  for (int d = 0; d < 3; ++d) f.K[d] = mesh_[d];
  f.b0 = bmod_[0];
  f.b1 = bmod_[1];
  f.b2 = bmod_[2];
  return f;
}

void KSpaceSolver::set_box(const Mat3& box) {
  const Mat3 R = reciprocal_of(box);  // throws on degenerate boxes
  box_ = box;
  recip_ = R;
  const IndexMap im = make_map(kbox_, perm_, mesh_);
  const Influence f = influence_fn();
  const bool half = layout_.half_axis >= 0;
  auto g = g_;
  auto vc = vc_;
  Kokkos::parallel_for(
      "pmewald::influence", Range(0, g_.extent(0)), KOKKOS_LAMBDA(const std::int64_t t) {
        int m[3];
        im.signed_m(t, m);
        if (m[0] == 0 && m[1] == 0 && m[2] == 0) {
          g(t) = 0.0;
          vc(t) = 0.0;
          return;
        }
        double gt, ct, mt[3];
        f.eval(m, gt, ct, mt);
        // Half spectrum: the c2c code summed G(m) over m and -m separately, and at
        // Nyquist components -m is stored as another representative (+K/2), with
        // another G in a non-orthogonal box. G~ = (G(m) + G(m*))/2 keeps that sum
        // (and the real part the c2c backward transform kept) exactly.
        int ms[3];
        if (half && Influence::mirror(m, f.K, ms)) {
          double gs, cs, mts[3];
          f.eval(ms, gs, cs, mts);
          gt = 0.5 * (gt + gs);
        }
        g(t) = gt;
        vc(t) = ct;
      });
  Kokkos::fence();
}

// Mode 0: energy only; 1: AD (in-place scale); 2: ik (three outputs).
template <int Mode>
double KSpaceSolver::run(Complex* data, const Complex* in, Complex* ex, Complex* ey,
                         Complex* ez, Virial* virial) const {
  // Parallel over rows of the two slower storage axes; along the fastest axis the
  // frequency advances by one (with wrap), so no per-point index division.
  const IndexMap im = make_map(kbox_, perm_, mesh_);
  const Mat3 R = recip_;
  // Output factor 2 N (2 with the 1/N of the backward transform folded in).
  const double N2 =
      layout_.unnormalised_backward ? 2.0 : 2.0 * static_cast<double>(mesh_[0]) * mesh_[1] * mesh_[2];
  const bool half = layout_.half_axis >= 0;
  const int h = half ? layout_.half_axis : 0;
  const Influence f = influence_fn();
  const Int3 K = mesh_;
  auto g = g_;
  auto vc = vc_;
  const bool want_vir = virial != nullptr;
  const int d0 = im.perm[0], d1 = im.perm[1], d2 = im.perm[2];
  const int s1 = im.s[1], s2 = im.s[2];
  const std::int64_t rows = s2 > 0 ? static_cast<std::int64_t>(g_.extent(0)) / s2 : 0;
  auto wrap_signed = [](int g0, int k) {
    int gg = g0 % k;
    if (gg < 0) gg += k;
    return (2 * gg > k) ? gg - k : gg;
  };
  const SolveRunFn run_fn = want_vir ? solve_run_fn<Mode, true>() : solve_run_fn<Mode, false>();
  Acc7 acc;
  parallel_reduce_locked(
      "pmewald::kspace_solve", Range(0, rows),
      [=](const std::int64_t row, Acc7& a) {
        const int i0 = static_cast<int>(row / s1), i1 = static_cast<int>(row % s1);
        int m[3];
        m[d0] = wrap_signed(im.lo[d0] + i0, K[d0]);
        m[d1] = wrap_signed(im.lo[d1] + i1, K[d1]);
        // Cartesian frequency of the row (without the fastest axis), then per point.
        auto nyq = [&](int d, int md) { return 2 * md == K[d] && md != 0; };
        double base[3], step[3];
        for (int r = 0; r < 3; ++r) {
          base[r] = R[3 * r + d0] * m[d0] + R[3 * r + d1] * m[d1];
          step[r] = R[3 * r + d2];
        }
        int gk = im.lo[d2] % K[d2];
        if (gk < 0) gk += K[d2];
        const std::int64_t t0 = row * s2;
        // Half spectrum: weight 2 for the planes 0 < m_h < K_h/2 (m_h >= 0 there);
        // points with a Nyquist component get their mirror pair's virial (below).
        auto weight = [&](int mh) { return (half && mh != 0 && 2 * mh != K[h]) ? 2.0 : 1.0; };
        const double w_row = d2 == h ? 1.0 : weight(m[h]);
        const bool row_nyq = half && (nyq(d0, m[d0]) || nyq(d1, m[d1]));
        // One point, every case (the Nyquist pairs, the half spectrum's weights, ik).
        auto one = [&](const int i2, const int gk) {
          const std::int64_t t = t0 + i2;
          const int m2 = (2 * gk > K[d2]) ? gk - K[d2] : gk;
          const Complex q = in[t];
          const double gt = g(t);
          const double w = d2 == h ? weight(m2) : w_row;
          const double q2 = q.real() * q.real() + q.imag() * q.imag();
          const double em = w * gt * q2;
          a.v[0] += em;
          if (want_vir && gt != 0.0 && (row_nyq || (half && nyq(d2, m2)))) {
            // The pair {m, m*} (m* the stored representative of -m) as the c2c code
            // summed it: each with its own G and m~.
            int mm[3], ms[3];
            mm[d0] = m[d0];
            mm[d1] = m[d1];
            mm[d2] = m2;
            Influence::mirror(mm, f.K, ms);
            double g1, c1, t1[3], g2, c2, t2[3];
            f.eval(mm, g1, c1, t1);
            f.eval(ms, g2, c2, t2);
            const double e1 = 0.5 * w * q2 * g1, e2 = 0.5 * w * q2 * g2;
            a.v[1] += e1 * (1.0 - c1 * t1[0] * t1[0]) + e2 * (1.0 - c2 * t2[0] * t2[0]);
            a.v[2] += e1 * (1.0 - c1 * t1[1] * t1[1]) + e2 * (1.0 - c2 * t2[1] * t2[1]);
            a.v[3] += e1 * (1.0 - c1 * t1[2] * t1[2]) + e2 * (1.0 - c2 * t2[2] * t2[2]);
            a.v[4] -= e1 * c1 * t1[0] * t1[1] + e2 * c2 * t2[0] * t2[1];
            a.v[5] -= e1 * c1 * t1[0] * t1[2] + e2 * c2 * t2[0] * t2[2];
            a.v[6] -= e1 * c1 * t1[1] * t1[2] + e2 * c2 * t2[1] * t2[2];
          } else if (want_vir && gt != 0.0) {
            double mt[3];
            for (int r = 0; r < 3; ++r) mt[r] = base[r] + step[r] * m2;
            const double c = vc(t);
            a.v[1] += em * (1.0 - c * mt[0] * mt[0]);
            a.v[2] += em * (1.0 - c * mt[1] * mt[1]);
            a.v[3] += em * (1.0 - c * mt[2] * mt[2]);
            a.v[4] -= em * c * mt[0] * mt[1];
            a.v[5] -= em * c * mt[0] * mt[2];
            a.v[6] -= em * c * mt[1] * mt[2];
          }
          if (Mode == 1) data[t] = q * (N2 * gt);
          if (Mode == 2) {
            // Nyquist components (m_d = K_d/2) are zeroed so the fields are real.
            // (Summed in axis order, so any storage order gives the same bits.)
            int mp[3];
            mp[d0] = m[d0];
            mp[d1] = m[d1];
            mp[d2] = m2;
            for (int d = 0; d < 3; ++d)
              if (2 * mp[d] == K[d]) mp[d] = 0;
            const double two_pi = 2.0 * M_PI;
            double k[3];
            for (int r = 0; r < 3; ++r)
              k[r] = two_pi * (R[3 * r] * mp[0] + R[3 * r + 1] * mp[1] + R[3 * r + 2] * mp[2]);
            // -i k * s with s = 2 N G q:  -i k (x + i y) = k y - i k x
            const Complex sq = q * (N2 * gt);
            ex[t] = Complex(k[0] * sq.imag(), -k[0] * sq.real());
            ey[t] = Complex(k[1] * sq.imag(), -k[1] * sq.real());
            ez[t] = Complex(k[2] * sq.imag(), -k[2] * sq.real());
          }
        };
        if (Mode != 2 && !row_nyq) {
          SolveRun r;
          r.data = Mode == 1 ? reinterpret_cast<double*>(data + t0)
                             : const_cast<double*>(reinterpret_cast<const double*>(in + t0));
          r.g = g.data() + t0;
          r.vc = vc.data() + t0;
          r.w = d2 == h ? (half ? 2.0 : 1.0) : w_row;
          r.N2 = N2;
          for (int q = 0; q < 3; ++q) {
            r.base[q] = base[q];
            r.step[q] = step[q];
          }
          solve_row_in_runs(s2, gk, K[d2], r, run_fn, a.v, one);
        } else {
          for (int i2 = 0; i2 < s2; ++i2, gk = (gk + 1 == K[d2]) ? 0 : gk + 1) one(i2, gk);
        }
      },
      Kokkos::Sum<Acc7>(acc));
  charge(Work::Solve, static_cast<double>(kbox_.volume()));
  if (want_vir)
    for (int i = 0; i < Virial::kComponents; ++i) (*virial)[i] += acc.v[i + 1];
  return acc.v[0];
}

double KSpaceSolver::apply_ad(Complex* data, Virial* virial) const {
  return run<1>(data, data, nullptr, nullptr, nullptr, virial);
}

double KSpaceSolver::apply_ik(const Complex* data, Complex* ex, Complex* ey, Complex* ez,
                              Virial* virial) const {
  return run<2>(nullptr, data, ex, ey, ez, virial);
}

double KSpaceSolver::energy(const Complex* data, Virial* virial) const {
  return run<0>(nullptr, data, nullptr, nullptr, nullptr, virial);
}

}  // namespace pme
}  // namespace pmewald
