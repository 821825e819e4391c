#include "gather.hpp"

#include "bspline.hpp"
#include "errors.hpp"

namespace pmewald::kernels {

namespace {
template <class V>
void check_grid(const V& g, const Box3& ext, const char* what) {
  const Int3 s = ext.shape();
  if (g.extent(0) != static_cast<std::size_t>(s[0]) ||
      g.extent(1) != static_cast<std::size_t>(s[1]) ||
      g.extent(2) != static_cast<std::size_t>(s[2]))
    throw ValueError(std::string(what) + ": grid shape does not match the extended box " +
                     ext.str());
}
}  // namespace

void gather_ad(const Stencil& st, const Mat3& recip, const Int3& mesh,
               View1<const double> charges, const Box3& ext_box, View3<const double> phi,
               View2<double> forces, View1<double> potential) {
  const std::size_t n = st.size();
  check_grid(phi, ext_box, "gather_ad");
  if (st.dw.extent(0) != n) throw ValueError("gather_ad: stencil computed without derivatives");
  if (charges.extent(0) != n || forces.extent(0) != n)
    throw ValueError("gather_ad: charges/forces and stencil lengths differ");
  const bool want_pot = potential.extent(0) == n && n > 0;
  const int p = st.order;
  const Int3 lo = ext_box.lo;
  // chain-rule matrix: C[a][d] = K_d recip[a][d]
  Mat3 C;
  for (int a = 0; a < 3; ++a)
    for (int d = 0; d < 3; ++d) C[3 * a + d] = mesh[d] * recip[3 * a + d];
  auto base = st.base;
  auto W = st.w;
  auto dW = st.dw;
  with_order(p, [&](auto order) {
    constexpr int P = decltype(order)::value;
    Kokkos::parallel_for(
        "pmewald::gather_ad", Range(0, n), KOKKOS_LAMBDA(const int i) {
          const int b0 = base(i, 0) - lo[0], b1 = base(i, 1) - lo[1], b2 = base(i, 2) - lo[2];
          double w2[P], d2[P];
          for (int c = 0; c < P; ++c) {
            w2[c] = W(i, 2, c);
            d2[c] = dW(i, 2, c);
          }
          double pot = 0, g0 = 0, g1 = 0, g2 = 0;  // g_d = sum phi dW/du_d
          for (int a = 0; a < P; ++a) {
            const double wa = W(i, 0, a), da = dW(i, 0, a);
            for (int b = 0; b < P; ++b) {
              const double wb = W(i, 1, b), db = dW(i, 1, b);
              const double* row = &phi(b0 + a, b1 + b, b2);
              double s = 0, sd = 0;  // sum over c of phi*w_c and phi*dw_c
              for (int c = 0; c < P; ++c) {
                s += row[c] * w2[c];
                sd += row[c] * d2[c];
              }
              pot += wa * wb * s;
              g0 += da * wb * s;
              g1 += wa * db * s;
              g2 += wa * wb * sd;
            }
          }
          const double q = charges(i);
          for (int a = 0; a < 3; ++a)
            forces(i, a) = -q * (C[3 * a] * g0 + C[3 * a + 1] * g1 + C[3 * a + 2] * g2);
          if (want_pot) potential(i) = pot;
        });
  });
  Kokkos::fence();
}

void gather_ik(const Stencil& st, View1<const double> charges, const Box3& ext_box,
               View3<const double> ex, View3<const double> ey, View3<const double> ez,
               View2<double> forces) {
  const std::size_t n = st.size();
  check_grid(ex, ext_box, "gather_ik");
  check_grid(ey, ext_box, "gather_ik");
  check_grid(ez, ext_box, "gather_ik");
  if (charges.extent(0) != n || forces.extent(0) != n)
    throw ValueError("gather_ik: charges/forces and stencil lengths differ");
  const int p = st.order;
  const Int3 lo = ext_box.lo;
  auto base = st.base;
  auto W = st.w;
  with_order(p, [&](auto order) {
    constexpr int P = decltype(order)::value;
    Kokkos::parallel_for(
        "pmewald::gather_ik", Range(0, n), KOKKOS_LAMBDA(const int i) {
          const int b0 = base(i, 0) - lo[0], b1 = base(i, 1) - lo[1], b2 = base(i, 2) - lo[2];
          double w2[P];
          for (int c = 0; c < P; ++c) w2[c] = W(i, 2, c);
          double fx = 0, fy = 0, fz = 0;
          for (int a = 0; a < P; ++a)
            for (int b = 0; b < P; ++b) {
              const double wab = W(i, 0, a) * W(i, 1, b);
              const double *rx = &ex(b0 + a, b1 + b, b2), *ry = &ey(b0 + a, b1 + b, b2),
                           *rz = &ez(b0 + a, b1 + b, b2);
              double sx = 0, sy = 0, sz = 0;
              for (int c = 0; c < P; ++c) {
                sx += w2[c] * rx[c];
                sy += w2[c] * ry[c];
                sz += w2[c] * rz[c];
              }
              fx += wab * sx;
              fy += wab * sy;
              fz += wab * sz;
            }
          const double q = charges(i);
          forces(i, 0) = q * fx;
          forces(i, 1) = q * fy;
          forces(i, 2) = q * fz;
        });
  });
  Kokkos::fence();
}

void gather_potential(const Stencil& st, const Box3& ext_box, View3<const double> grid,
                      View1<double> potential) {
  const std::size_t n = st.size();
  check_grid(grid, ext_box, "gather_potential");
  if (potential.extent(0) != n) throw ValueError("gather_potential: length mismatch");
  const int p = st.order;
  const Int3 lo = ext_box.lo;
  auto base = st.base;
  auto W = st.w;
  Kokkos::parallel_for(
      "pmewald::gather_potential", Range(0, n), KOKKOS_LAMBDA(const int i) {
        const int b0 = base(i, 0) - lo[0], b1 = base(i, 1) - lo[1], b2 = base(i, 2) - lo[2];
        double pot = 0;
        for (int a = 0; a < p; ++a)
          for (int b = 0; b < p; ++b) {
            const double wab = W(i, 0, a) * W(i, 1, b);
            for (int c = 0; c < p; ++c) pot += wab * W(i, 2, c) * grid(b0 + a, b1 + b, b2 + c);
          }
        potential(i) = pot;
      });
  Kokkos::fence();
}

}  // namespace pmewald::kernels
