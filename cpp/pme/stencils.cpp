#include <algorithm>
#include <cstddef>
#include <string>

#include "base/errors.hpp"
#include "base/simd.hpp"
#include "pme/bspline.hpp"
#include "pme/spread.hpp"

// The B-spline stencils of the atoms (spread.hpp: mesh_cells, compute_stencils):
// each atom's mesh cell, one at a time, and the weights (and their derivatives)
// of blocks of eight atoms, one atom per vector lane, compiled for AVX-512, AVX2
// and the baseline and chosen at run time (base/simd.hpp).
//
// Why: one atom at a time the weights' recursion ran scalar, and on 30,000 water
// atoms at order 8 (ad) the stencils took about as long as the spreading itself
// (perf: 3.2% of the samples against spread_rows' 4.2%).

namespace pmewald {
inline namespace pme {

namespace {

constexpr int kLanes = 8;

// Scaled fractional coordinate of one axis; fl in [0, K), w in [0, 1).
KOKKOS_INLINE_FUNCTION void scaled_coord(double s, int K, int& fl, double& w) {
  const double f = s - kfloor(s);  // in [0, 1] (1 only by rounding)
  const double u = K * f;
  double flu = kfloor(u);
  w = u - flu;
  if (w < 0.0) w = 0.0;
  int c = static_cast<int>(flu);
  // u rounded up to K: the point is just below the top of the cell, so stay in
  // cell K-1 at w = 1 (same weights as cell 0 at w = 0, and the same owner as
  // Migration, which clamps).
  if (c >= K) { c = K - 1; w = 1.0; }
  if (c < 0) c += K;
  fl = c;
}

// Mesh cell and in-cell offset along axis d of the Cartesian point (x, y, z):
// s_d = r @ recip[:, d], then scaled_coord.
KOKKOS_INLINE_FUNCTION void mesh_coord(const Mat3& R, const Int3& K, double x, double y, double z, int d, int& fl,
                                       double& w) {
  scaled_coord(x * R[d] + y * R[3 + d] + z * R[6 + d], K[d], fl, w);
}

void check_common(const Int3& mesh, int order, std::size_t n_pos) {
  (void)n_pos;
  if (order < kMinOrder || order > kMaxOrder)
    throw ValueError("B-spline order must be in [3, 10], got " + std::to_string(order));
  for (int d = 0; d < 3; ++d)
    if (mesh[d] < order)
      throw ValueError("mesh size " + std::to_string(mesh[d]) + " is smaller than the order " +
                       std::to_string(order));
}


// The weights of up to kLanes atoms (w[d][l]: axis d, atom l) into the atoms'
// (3, P) blocks of W and dW (atom l at W + 3 P l), as bspline_weights_fixed
// computes them, each lane one atom.
template <int P, bool D>
using WeightsFn = void (*)(const double (*w)[kLanes], int count, double* W, double* dW);

template <int P, bool D>
__attribute__((always_inline)) inline void weights_lanes(const double (*wv)[kLanes], int count, double* __restrict W,
                                                         double* __restrict dW) {
  for (int d = 0; d < 3; ++d) {
    const double* w = wv[d];
    double a[P][kLanes], g[P][kLanes];
    for (int l = 0; l < kLanes; ++l) {
      a[0][l] = w[l];
      a[1][l] = 1.0 - w[l];
    }
#pragma GCC unroll 10
    for (int n = 3; n <= P; ++n) {
      if (D && n == P) {
        for (int l = 0; l < kLanes; ++l) g[P - 1][l] = a[0][l];
#pragma GCC unroll 10
        for (int i = 1; i < n - 1; ++i)
          for (int l = 0; l < kLanes; ++l) g[P - 1 - i][l] = a[i][l] - a[i - 1][l];
        for (int l = 0; l < kLanes; ++l) g[0][l] = -a[n - 2][l];
      }
      const double inv = 1.0 / (n - 1);
      for (int l = 0; l < kLanes; ++l) a[n - 1][l] = (1.0 - w[l]) * a[n - 2][l] * inv;
#pragma GCC unroll 10
      for (int i = n - 2; i >= 1; --i)
        for (int l = 0; l < kLanes; ++l) a[i][l] = ((w[l] + i) * a[i][l] + (n - w[l] - i) * a[i - 1][l]) * inv;
      for (int l = 0; l < kLanes; ++l) a[0][l] = w[l] * a[0][l] * inv;
    }
    for (int l = 0; l < count; ++l)
      for (int j = 0; j < P; ++j) W[3 * P * l + P * d + j] = a[P - 1 - j][l];
    if (D)
      for (int l = 0; l < count; ++l)
        for (int j = 0; j < P; ++j) dW[3 * P * l + P * d + j] = g[j][l];
  }
}

template <int P, bool D>
void weights_base(const double (*w)[kLanes], int count, double* W, double* dW) {
  weights_lanes<P, D>(w, count, W, dW);
}
#if PMEWALD_X86_DISPATCH
template <int P, bool D>
PMEWALD_TARGET_V4 void weights_v4(const double (*w)[kLanes], int count, double* W, double* dW) {
  weights_lanes<P, D>(w, count, W, dW);
}
template <int P, bool D>
PMEWALD_TARGET_V3 void weights_v3(const double (*w)[kLanes], int count, double* W, double* dW) {
  weights_lanes<P, D>(w, count, W, dW);
}
#endif

template <int P, bool D>
WeightsFn<P, D> weights_fn() {
  const WeightsFn<P, D> base = weights_base<P, D>;
#if PMEWALD_X86_DISPATCH
  const WeightsFn<P, D> v4 = weights_v4<P, D>, v3 = weights_v3<P, D>;
  return simd::choose<WeightsFn<P, D>>(PMEWALD_SIMD_VERSIONS(v4, v3, base));
#else
  return simd::choose<WeightsFn<P, D>>(PMEWALD_SIMD_VERSIONS(base, base, base));
#endif
}

}  // namespace

void mesh_cells(const Mat3& recip, const Int3& mesh, View2<const double> positions,
                View2<int> cells) {
  const Mat3 R = recip;
  const Int3 K = mesh;
  Kokkos::parallel_for(
      "pmewald::mesh_cells", Range(0, positions.extent(0)), KOKKOS_LAMBDA(const int i) {
        const double x = positions(i, 0), y = positions(i, 1), z = positions(i, 2);
        for (int d = 0; d < 3; ++d) {
          int fl;
          double w;
          mesh_coord(R, K, x, y, z, d, fl, w);
          cells(i, d) = fl;
        }
      });
  Kokkos::fence();
}

void compute_stencils(const Mat3& recip, const Int3& mesh, int order,
                      View2<const double> positions, const Box3& brick, bool derivatives,
                      Stencil& out) {
  const std::size_t n = positions.extent(0);
  check_common(mesh, order, n);
  out.order = order;
  if (out.base.extent(0) != n) {
    out.base = View2<int>("stencil_base", n, 3);
    out.cell = View2<int>("stencil_cell", n, 3);
  }
  if (out.w.extent(0) != n || out.w.extent(2) != static_cast<std::size_t>(order))
    out.w = View3<double>("stencil_w", n, 3, order);
  const std::size_t nd = derivatives ? n : 0;
  if (out.dw.extent(0) != nd || out.dw.extent(2) != static_cast<std::size_t>(order))
    out.dw = View3<double>("stencil_dw", nd, 3, order);

  const Mat3 R = recip;
  const Int3 K = mesh;
  const Int3 lo = brick.lo, hi = brick.hi;
  auto base = out.base;
  auto cell = out.cell;
  auto W = out.w;
  auto dW = out.dw;
  int bad = 0;
  const std::size_t nblocks = (n + kLanes - 1) / kLanes;
  auto run = [&](auto order, auto with_derivatives) {
    constexpr int P = decltype(order)::value;
    constexpr bool D = decltype(with_derivatives)::value;
    const WeightsFn<P, D> weights = weights_fn<P, D>();
    double* const Wp = W.data();
    double* const dWp = D ? dW.data() : nullptr;
    parallel_reduce_locked(
        "pmewald::compute_stencils", Range(0, nblocks),
        [&, weights, Wp, dWp](const int blk, int& nbad) {
          // The cells one atom at a time (the owner's rule, to the last bit), then the
          // block's weights together, one atom per lane (weights_fn).
          const std::size_t i0 = static_cast<std::size_t>(blk) * kLanes;
          const int count = static_cast<int>(std::min<std::size_t>(kLanes, n - i0));
          alignas(64) double wl[3][kLanes] = {};
          for (int l = 0; l < count; ++l) {
            const std::size_t i = i0 + l;
            const double x = positions(i, 0), y = positions(i, 1), z = positions(i, 2);
            for (int d = 0; d < 3; ++d) {
              int fl;
              double w;
              mesh_coord(R, K, x, y, z, d, fl, w);
              // periodic image of the cell in [lo, hi): smallest fl + jK >= lo
              // (fl in [0, K) and lo in [0, K) for a brick: at most one step)
              int c = fl;
              while (c < lo[d]) c += K[d];
              while (c - K[d] >= lo[d]) c -= K[d];
              if (c >= hi[d]) nbad += 1;
              cell(i, d) = c;
              base(i, d) = c - P + 1;
              wl[d][l] = w;
            }
          }
          weights(wl, count, Wp + 3 * P * i0, D ? dWp + 3 * P * i0 : nullptr);
        },
        bad);
  };
  with_order(order, [&](auto o) {
    if (derivatives)
      run(o, std::true_type{});
    else
      run(o, std::false_type{});
  });
  if (bad > 0)
    throw ValueError("compute_stencils: " + std::to_string(bad) +
                     " atom coordinate(s) fall outside the brick " + brick.str() +
                     " (atoms must be migrated to their owning rank first)");
}

}  // namespace pme
}  // namespace pmewald
