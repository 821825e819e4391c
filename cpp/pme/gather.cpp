#include "pme/gather.hpp"

#include <algorithm>
#include <cstddef>
#include <stdexcept>

#include "pme/bspline.hpp"
#include "base/compute_model.hpp"
#include "base/errors.hpp"
#include "base/simd.hpp"

namespace pmewald {
inline namespace pme {

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

// The serial gathering loops on raw pointers (stencil arrays contiguous, n x 3
// and n x 3 x P; grid rows contiguous along the last index). ad: one grid,
// potential and its gradient; ik: three field grids.
struct GatherArgs {
  std::size_t n;
  const double* q;
  const int* base;
  const double* w;
  const double* dw;  // ad only
  int lo[3];
  const double* g[3];  // ad: g[0]; ik: the field components
  std::ptrdiff_t s0, s1;
  double C[9];       // ad: chain rule C[3a + d] = K_d recip[a][d]
  double* forces;    // n x 3
  double* potential;  // ad, optional
};

template <int P>
inline __attribute__((always_inline)) void gather_ad_generic(const GatherArgs& A, std::size_t i0, std::size_t i1) {
  for (std::size_t i = i0; i < i1; ++i) {
    const int* bi = A.base + 3 * i;
    const double *wi = A.w + 3 * P * i, *di = A.dw + 3 * P * i;
    const double *w2 = wi + 2 * P, *d2 = di + 2 * P;
    const double* corner = A.g[0] + (bi[0] - A.lo[0]) * A.s0 + (bi[1] - A.lo[1]) * A.s1 + (bi[2] - A.lo[2]);
    double pot = 0, g0 = 0, g1 = 0, g2 = 0;  // g_d = sum phi dW/du_d
    for (int a = 0; a < P; ++a) {
      const double wa = wi[a], da = di[a];
      for (int b = 0; b < P; ++b) {
        const double wb = wi[P + b], db = di[P + b];
        const double* row = corner + a * A.s0 + b * A.s1;
        double sw = 0, sd = 0;  // sum over c of phi*w_c and phi*dw_c
        for (int c = 0; c < P; ++c) {
          sw += row[c] * w2[c];
          sd += row[c] * d2[c];
        }
        pot += wa * wb * sw;
        g0 += da * wb * sw;
        g1 += wa * db * sw;
        g2 += wa * wb * sd;
      }
    }
    const double q = A.q[i];
    for (int a = 0; a < 3; ++a)
      A.forces[3 * i + a] = -q * (A.C[3 * a] * g0 + A.C[3 * a + 1] * g1 + A.C[3 * a + 2] * g2);
    if (A.potential) A.potential[i] = pot;
  }
}

template <int P>
inline __attribute__((always_inline)) void gather_ik_generic(const GatherArgs& A, std::size_t i0, std::size_t i1) {
  for (std::size_t i = i0; i < i1; ++i) {
    const int* bi = A.base + 3 * i;
    const double* wi = A.w + 3 * P * i;
    const double* w2 = wi + 2 * P;
    const std::ptrdiff_t off = (bi[0] - A.lo[0]) * A.s0 + (bi[1] - A.lo[1]) * A.s1 + (bi[2] - A.lo[2]);
    double f[3] = {0, 0, 0};
    for (int a = 0; a < P; ++a)
      for (int b = 0; b < P; ++b) {
        const double wab = wi[a] * wi[P + b];
        const std::ptrdiff_t r = off + a * A.s0 + b * A.s1;
        for (int d = 0; d < 3; ++d) {
          double sum = 0;
          for (int c = 0; c < P; ++c) sum += w2[c] * A.g[d][r + c];
          f[d] += wab * sum;
        }
      }
    for (int d = 0; d < 3; ++d) A.forces[3 * i + d] = A.q[i] * f[d];
  }
}

#if PMEWALD_X86_DISPATCH
// AVX-512: a stencil row (P <= 8 points along z) is one masked register. The
// rows are first summed over y with the y weights (one FMA per row and
// weight), then over x, and the z weights are applied once per atom.
template <int P>
PMEWALD_TARGET_V4 void gather_ad_v4(const GatherArgs& A, std::size_t i0, std::size_t i1) {
  if constexpr (P > 8) {
    gather_ad_generic<P>(A, i0, i1);
  } else {
    const __mmask8 m = static_cast<__mmask8>((1u << P) - 1);
    for (std::size_t i = i0; i < i1; ++i) {
      const int* bi = A.base + 3 * i;
      const double *wi = A.w + 3 * P * i, *di = A.dw + 3 * P * i;
      const double* corner = A.g[0] + (bi[0] - A.lo[0]) * A.s0 + (bi[1] - A.lo[1]) * A.s1 + (bi[2] - A.lo[2]);
      __m512d ww = _mm512_setzero_pd(), dw = ww, wd = ww;  // sum_xy (w_x w_y, dw_x w_y, w_x dw_y) row
      for (int a = 0; a < P; ++a) {
        __m512d tw = _mm512_setzero_pd(), td = tw;  // sum_y w_y row, sum_y dw_y row
        for (int b = 0; b < P; ++b) {
          const __m512d row = _mm512_maskz_loadu_pd(m, corner + a * A.s0 + b * A.s1);
          tw = _mm512_fmadd_pd(_mm512_set1_pd(wi[P + b]), row, tw);
          td = _mm512_fmadd_pd(_mm512_set1_pd(di[P + b]), row, td);
        }
        ww = _mm512_fmadd_pd(_mm512_set1_pd(wi[a]), tw, ww);
        dw = _mm512_fmadd_pd(_mm512_set1_pd(di[a]), tw, dw);
        wd = _mm512_fmadd_pd(_mm512_set1_pd(wi[a]), td, wd);
      }
      const __m512d w2 = _mm512_maskz_loadu_pd(m, wi + 2 * P), d2 = _mm512_maskz_loadu_pd(m, di + 2 * P);
      const double pot = _mm512_reduce_add_pd(_mm512_mul_pd(ww, w2));
      const double g0 = _mm512_reduce_add_pd(_mm512_mul_pd(dw, w2));
      const double g1 = _mm512_reduce_add_pd(_mm512_mul_pd(wd, w2));
      const double g2 = _mm512_reduce_add_pd(_mm512_mul_pd(ww, d2));
      const double q = A.q[i];
      for (int a = 0; a < 3; ++a)
        A.forces[3 * i + a] = -q * (A.C[3 * a] * g0 + A.C[3 * a + 1] * g1 + A.C[3 * a + 2] * g2);
      if (A.potential) A.potential[i] = pot;
    }
  }
}

template <int P>
PMEWALD_TARGET_V4 void gather_ik_v4(const GatherArgs& A, std::size_t i0, std::size_t i1) {
  if constexpr (P > 8) {
    gather_ik_generic<P>(A, i0, i1);
  } else {
    const __mmask8 m = static_cast<__mmask8>((1u << P) - 1);
    for (std::size_t i = i0; i < i1; ++i) {
      const int* bi = A.base + 3 * i;
      const double* wi = A.w + 3 * P * i;
      const std::ptrdiff_t off = (bi[0] - A.lo[0]) * A.s0 + (bi[1] - A.lo[1]) * A.s1 + (bi[2] - A.lo[2]);
      __m512d f0 = _mm512_setzero_pd(), f1 = f0, f2 = f0;
      for (int a = 0; a < P; ++a) {
        __m512d t0 = _mm512_setzero_pd(), t1 = t0, t2 = t0;
        for (int b = 0; b < P; ++b) {
          const std::ptrdiff_t r = off + a * A.s0 + b * A.s1;
          const __m512d wb = _mm512_set1_pd(wi[P + b]);
          t0 = _mm512_fmadd_pd(wb, _mm512_maskz_loadu_pd(m, A.g[0] + r), t0);
          t1 = _mm512_fmadd_pd(wb, _mm512_maskz_loadu_pd(m, A.g[1] + r), t1);
          t2 = _mm512_fmadd_pd(wb, _mm512_maskz_loadu_pd(m, A.g[2] + r), t2);
        }
        const __m512d wa = _mm512_set1_pd(wi[a]);
        f0 = _mm512_fmadd_pd(wa, t0, f0);
        f1 = _mm512_fmadd_pd(wa, t1, f1);
        f2 = _mm512_fmadd_pd(wa, t2, f2);
      }
      const __m512d w2 = _mm512_maskz_loadu_pd(m, wi + 2 * P);
      const double q = A.q[i];
      A.forces[3 * i] = q * _mm512_reduce_add_pd(_mm512_mul_pd(f0, w2));
      A.forces[3 * i + 1] = q * _mm512_reduce_add_pd(_mm512_mul_pd(f1, w2));
      A.forces[3 * i + 2] = q * _mm512_reduce_add_pd(_mm512_mul_pd(f2, w2));
    }
  }
}

template <int P>
PMEWALD_TARGET_V3 void gather_ad_v3(const GatherArgs& A, std::size_t i0, std::size_t i1) {
  gather_ad_generic<P>(A, i0, i1);  // the compiler's AVX2 code for the fixed-length rows
}
template <int P>
PMEWALD_TARGET_V3 void gather_ik_v3(const GatherArgs& A, std::size_t i0, std::size_t i1) {
  gather_ik_generic<P>(A, i0, i1);
}
#endif

template <int P>
void gather_ad_rows(const GatherArgs& A, std::size_t i0, std::size_t i1) {
  simd::choose(PMEWALD_SIMD_VERSIONS(gather_ad_v4<P>, gather_ad_v3<P>, gather_ad_generic<P>))(A, i0, i1);
}

template <int P>
void gather_ik_rows(const GatherArgs& A, std::size_t i0, std::size_t i1) {
  simd::choose(PMEWALD_SIMD_VERSIONS(gather_ik_v4<P>, gather_ik_v3<P>, gather_ik_generic<P>))(A, i0, i1);
}

// Atoms in chunks of 256, the chunks spread over the execution space's
// threads (one chunk is one call of the vectorised loop).
template <class F>
void for_chunks(const char* label, std::size_t n, F f) {
  constexpr std::size_t kChunk = 256;
  Kokkos::parallel_for(label, Range(0, (n + kChunk - 1) / kChunk), [=](const std::size_t c) {
    f(c * kChunk, std::min(n, (c + 1) * kChunk));
  });
  Kokkos::fence();
}

template <class V>
std::ptrdiff_t row_stride(const V& g, int d) {
  if (g.stride(2) != 1) throw std::logic_error("gather: grid rows must be contiguous");
  return static_cast<std::ptrdiff_t>(g.stride(static_cast<std::size_t>(d)));
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
  if (!charges.span_is_contiguous() || !forces.span_is_contiguous() || forces.extent(1) != 3)
    throw std::logic_error("gather_ad: charges and forces must be contiguous");
  GatherArgs A{n, charges.data(), st.base.data(), st.w.data(), st.dw.data(), {lo[0], lo[1], lo[2]},
               {phi.data(), nullptr, nullptr}, row_stride(phi, 0), row_stride(phi, 1), {}, forces.data(),
               want_pot ? potential.data() : nullptr};
  for (int k = 0; k < 9; ++k) A.C[k] = C[k];
  with_order(p, [&](auto order) {
    constexpr int P = decltype(order)::value;
    for_chunks("pmewald::gather_ad", n, [=](std::size_t i0, std::size_t i1) { gather_ad_rows<P>(A, i0, i1); });
  });
  charge(Work::Gather, static_cast<double>(n) * p * p * p);
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
  if (!charges.span_is_contiguous() || !forces.span_is_contiguous() || forces.extent(1) != 3 ||
      ex.stride(0) != ey.stride(0) || ex.stride(0) != ez.stride(0) || ex.stride(1) != ey.stride(1) ||
      ex.stride(1) != ez.stride(1))
    throw std::logic_error("gather_ik: charges, forces and the three field grids must share one layout");
  GatherArgs A{n, charges.data(), st.base.data(), st.w.data(), nullptr, {lo[0], lo[1], lo[2]},
               {ex.data(), ey.data(), ez.data()}, row_stride(ex, 0), row_stride(ex, 1), {}, forces.data(), nullptr};
  with_order(p, [&](auto order) {
    constexpr int P = decltype(order)::value;
    for_chunks("pmewald::gather_ik", n, [=](std::size_t i0, std::size_t i1) { gather_ik_rows<P>(A, i0, i1); });
  });
  charge(Work::Gather, static_cast<double>(n) * p * p * p);
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
  charge(Work::Gather, static_cast<double>(n) * p * p * p);
}

}  // namespace pme
}  // namespace pmewald
