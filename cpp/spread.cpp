#include "spread.hpp"

#include <cmath>
#include <string>

#include "bspline.hpp"
#include "errors.hpp"

namespace pmewald::kernels {

Box3 extended_box(const Box3& brick, int order) {
  Box3 e = brick;
  for (int d = 0; d < 3; ++d) e.lo[d] -= order - 1;
  return e;
}

namespace {

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

KOKKOS_INLINE_FUNCTION int floor_div(int a, int b) {  // b > 0
  return (a >= 0) ? a / b : -((-a + b - 1) / b);
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

}  // namespace

void mesh_cells(const Mat3& recip, const Int3& mesh, View2<const double> positions,
                View2<int> cells) {
  const Mat3 R = recip;
  const Int3 K = mesh;
  Kokkos::parallel_for(
      "pmewald::mesh_cells", Range(0, positions.extent(0)), KOKKOS_LAMBDA(const int i) {
        const double x = positions(i, 0), y = positions(i, 1), z = positions(i, 2);
        for (int d = 0; d < 3; ++d) {
          const double s = x * R[d] + y * R[3 + d] + z * R[6 + d];
          int fl;
          double w;
          scaled_coord(s, K[d], fl, w);
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
  const int p = order;
  auto base = out.base;
  auto cell = out.cell;
  auto W = out.w;
  auto dW = out.dw;
  int bad = 0;
  Kokkos::parallel_reduce(
      "pmewald::compute_stencils", Range(0, n),
      KOKKOS_LAMBDA(const int i, int& nbad) {
        const double x = positions(i, 0), y = positions(i, 1), z = positions(i, 2);
        for (int d = 0; d < 3; ++d) {
          const double s = x * R[d] + y * R[3 + d] + z * R[6 + d];
          int fl;
          double w;
          scaled_coord(s, K[d], fl, w);
          // periodic image of the cell in [lo, hi): smallest fl + jK >= lo
          const int c = fl + K[d] * (-floor_div(fl - lo[d], K[d]));
          if (c >= hi[d]) nbad += 1;
          cell(i, d) = c;
          base(i, d) = c - p + 1;
          double M[kMaxOrder], dM[kMaxOrder];
          bspline_weights(p, w, M, derivatives ? dM : nullptr);
          for (int j = 0; j < p; ++j) W(i, d, j) = M[j];
          if (derivatives)
            for (int j = 0; j < p; ++j) dW(i, d, j) = dM[j];
        }
      },
      bad);
  if (bad > 0)
    throw ValueError("compute_stencils: " + std::to_string(bad) +
                     " atom coordinate(s) fall outside the brick " + brick.str() +
                     " (atoms must be migrated to their owning rank first)");
}

void spread(const Stencil& st, View1<const double> charges, const Box3& ext_box,
            View3<double> grid, bool zero_first, SpreadMode mode) {
  const int p = st.order;
  const std::size_t n = st.size();
  if (charges.extent(0) != n) throw ValueError("spread: charges and stencil lengths differ");
  const Int3 shape = ext_box.shape();
  if (grid.extent(0) != static_cast<std::size_t>(shape[0]) ||
      grid.extent(1) != static_cast<std::size_t>(shape[1]) ||
      grid.extent(2) != static_cast<std::size_t>(shape[2]))
    throw ValueError("spread: grid shape does not match the extended box " + ext_box.str());
  if (zero_first) Kokkos::deep_copy(grid, 0.0);
  const Int3 lo = ext_box.lo;
  auto base = st.base;
  auto W = st.w;
  const bool plain = mode == SpreadMode::Plain ||
                     (mode == SpreadMode::Auto && ExecSpace().concurrency() <= 1);
  if (plain) {
    // Serial backend: plain adds are race-free and avoid atomic overhead.
    with_order(p, [&](auto order) {
      constexpr int P = decltype(order)::value;
      Kokkos::parallel_for(
          "pmewald::spread_serial", Range(0, n), KOKKOS_LAMBDA(const int i) {
            const double q = charges(i);
            const int b0 = base(i, 0) - lo[0], b1 = base(i, 1) - lo[1], b2 = base(i, 2) - lo[2];
            double w2[P];
            for (int c = 0; c < P; ++c) w2[c] = W(i, 2, c);
            for (int a = 0; a < P; ++a) {
              const double qa = q * W(i, 0, a);
              for (int b = 0; b < P; ++b) {
                const double qab = qa * W(i, 1, b);
                double* row = &grid(b0 + a, b1 + b, b2);
                for (int c = 0; c < P; ++c) row[c] += qab * w2[c];
              }
            }
          });
    });
  } else {
    Kokkos::parallel_for(
        "pmewald::spread_atomic", Range(0, n), KOKKOS_LAMBDA(const int i) {
          const double q = charges(i);
          const int b0 = base(i, 0) - lo[0], b1 = base(i, 1) - lo[1], b2 = base(i, 2) - lo[2];
          for (int a = 0; a < p; ++a) {
            const double qa = q * W(i, 0, a);
            for (int b = 0; b < p; ++b) {
              const double qab = qa * W(i, 1, b);
              for (int c = 0; c < p; ++c)
                Kokkos::atomic_add(&grid(b0 + a, b1 + b, b2 + c), qab * W(i, 2, c));
            }
          }
        });
  }
  Kokkos::fence();
}

}  // namespace pmewald::kernels
