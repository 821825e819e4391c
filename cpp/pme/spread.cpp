#include "pme/spread.hpp"

#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "pme/bspline.hpp"
#include "base/compute_model.hpp"
#include "base/errors.hpp"
#include "base/simd.hpp"

namespace pmewald {
inline namespace pme {

Box3 extended_box(const Box3& brick, int order) {
  Box3 e = brick;
  for (int d = 0; d < 3; ++d) e.lo[d] -= order - 1;
  return e;
}

namespace {

// The serial spreading loop on raw pointers (stencil arrays are contiguous,
// n x 3 and n x 3 x P; grid rows contiguous along the last index).
// index: the atoms' order (nullptr: 0, 1, ...); a call spreads atoms k0..k1-1 of it.
struct SpreadArgs {
  std::size_t n;
  const int* index;
  const double* q;
  const int* base;
  const double* w;
  int lo[3];
  double* grid;
  std::ptrdiff_t s0, s1;
};

template <int P>
inline __attribute__((always_inline)) void spread_rows_generic(const SpreadArgs& a, std::size_t k0, std::size_t k1) {
  for (std::size_t k = k0; k < k1; ++k) {
    const std::size_t i = a.index ? static_cast<std::size_t>(a.index[k]) : k;
    const int* bi = a.base + 3 * i;
    const double* wi = a.w + 3 * P * i;
    const double* w2 = wi + 2 * P;
    double* corner = a.grid + (bi[0] - a.lo[0]) * a.s0 + (bi[1] - a.lo[1]) * a.s1 + (bi[2] - a.lo[2]);
    for (int x = 0; x < P; ++x) {
      const double qa = a.q[i] * wi[x];
      for (int y = 0; y < P; ++y) {
        const double qab = qa * wi[P + y];
        double* row = corner + x * a.s0 + y * a.s1;
        for (int c = 0; c < P; ++c) row[c] += qab * w2[c];
      }
    }
  }
}

#if PMEWALD_X86_DISPATCH
// AVX-512: one stencil row (P <= 8 points along z) is one masked register:
// load, one FMA, store, instead of P scalar updates.
template <int P>
PMEWALD_TARGET_V4 void spread_rows_v4(const SpreadArgs& a, std::size_t k0, std::size_t k1) {
  if constexpr (P > 8) {
    spread_rows_generic<P>(a, k0, k1);
  } else {
    const __mmask8 m = static_cast<__mmask8>((1u << P) - 1);
    for (std::size_t k = k0; k < k1; ++k) {
      const std::size_t i = a.index ? static_cast<std::size_t>(a.index[k]) : k;
      const int* bi = a.base + 3 * i;
      const double* wi = a.w + 3 * P * i;
      const __m512d w2 = _mm512_maskz_loadu_pd(m, wi + 2 * P);
      double* corner = a.grid + (bi[0] - a.lo[0]) * a.s0 + (bi[1] - a.lo[1]) * a.s1 + (bi[2] - a.lo[2]);
      for (int x = 0; x < P; ++x) {
        const __m512d qw = _mm512_mul_pd(_mm512_set1_pd(a.q[i] * wi[x]), w2);
        for (int y = 0; y < P; ++y) {
          double* row = corner + x * a.s0 + y * a.s1;
          const __m512d v = _mm512_fmadd_pd(_mm512_set1_pd(wi[P + y]), qw, _mm512_maskz_loadu_pd(m, row));
          _mm512_mask_storeu_pd(row, m, v);
        }
      }
    }
  }
}
template <int P>
PMEWALD_TARGET_V3 void spread_rows_v3(const SpreadArgs& a, std::size_t k0, std::size_t k1) {
  spread_rows_generic<P>(a, k0, k1);  // the compiler's AVX2 code for the fixed-length rows
}
#endif

template <int P>
void spread_rows(const SpreadArgs& a, std::size_t k0, std::size_t k1) {
  simd::choose(PMEWALD_SIMD_VERSIONS(spread_rows_v4<P>, spread_rows_v3<P>, spread_rows_generic<P>))(a, k0, k1);
}

// The threaded spreading: atoms binned by the first x plane of their stencil
// into slabs of P planes. An atom of slab s writes planes [sP, sP + 2P - 1)
// only, so slabs of one parity never write the same plane: the even slabs run
// in parallel, then the odd ones, each slab's atoms one after another through
// the vectorised rows. No atomics, and every grid point sums its terms in the
// same order whatever the thread count.
// Within a slab the atoms go by blocks of P rows (y of the stencil's first
// point), each block's atoms in their given order: one stable counting sort on
// (slab, y block). A block's stencils then overlap, within a footprint of
// (2P - 1)^2 rows that stays in a core's cache, and the atoms' own order along
// the rows (z) is kept. By slab alone, a slab's atoms could sweep its 2P - 1
// planes (larger than a core's L2) more than once: a crystal built cell by cell,
// whose basis straddles two slabs, cost the rock salt (32,768 ions, 96^3, P = 6)
// 12.1 ms of CPU per spread on one thread instead of Plain's 9.0; by (slab, y
// block) 7.8 vs 7.5 (blocks in z as well break the rows' order: 14.8; CPU
// times of spread_brick, machine load 11-16).
template <int P>
void spread_coloured(const SpreadArgs& a, const int* base, const Int3& shape) {
  const int nslab = (shape[0] + P - 1) / P, nby = (shape[1] + P - 1) / P;
  const std::size_t per_slab = static_cast<std::size_t>(nby);
  const std::size_t nbins = static_cast<std::size_t>(nslab) * per_slab;
  std::vector<int> start(nbins + 1, 0), index(a.n), bin(a.n);
  for (std::size_t i = 0; i < a.n; ++i) {
    const int* b = base + 3 * i;
    bin[i] = (b[0] - a.lo[0]) / P * nby + (b[1] - a.lo[1]) / P;
    ++start[static_cast<std::size_t>(bin[i]) + 1];
  }
  for (std::size_t k = 0; k < nbins; ++k) start[k + 1] += start[k];
  std::vector<int> fill(start.begin(), start.end() - 1);
  for (std::size_t i = 0; i < a.n; ++i) index[static_cast<std::size_t>(fill[static_cast<std::size_t>(bin[i])]++)] = static_cast<int>(i);
  SpreadArgs b = a;
  b.index = index.data();
  const int* st = start.data();
  using Dynamic = Kokkos::RangePolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>;
  for (int parity = 0; parity < 2; ++parity) {
    const int count = (nslab - parity + 1) / 2;
    Kokkos::parallel_for("pmewald::spread_coloured", Dynamic(0, count), [=](const int c) {
      const std::size_t s = static_cast<std::size_t>(2 * c + parity);
      spread_rows<P>(b, static_cast<std::size_t>(st[s * per_slab]), static_cast<std::size_t>(st[(s + 1) * per_slab]));
    });
    Kokkos::fence();
  }
}

}  // namespace

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
  if (mode == SpreadMode::Auto) mode = ExecSpace().concurrency() <= 1 ? SpreadMode::Plain : SpreadMode::Coloured;
  if (mode == SpreadMode::Atomic) {
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
  } else {
    // Plain: one thread, race-free plain adds; Coloured: threads on slabs that
    // never share a plane. Both run spread_rows, vectorised for the CPU (simd.hpp).
    if (grid.stride(2) != 1 || !charges.span_is_contiguous())
      throw std::logic_error("spread: grid rows and charges must be contiguous");
    const SpreadArgs args{n, nullptr, charges.data(), st.base.data(), st.w.data(), {lo[0], lo[1], lo[2]}, grid.data(),
                          static_cast<std::ptrdiff_t>(grid.stride(0)), static_cast<std::ptrdiff_t>(grid.stride(1))};
    with_order(p, [&](auto order) {
      constexpr int P = decltype(order)::value;
      if (mode == SpreadMode::Plain)
        spread_rows<P>(args, 0, n);
      else
        spread_coloured<P>(args, st.base.data(), shape);
    });
  }
  Kokkos::fence();
  charge(Work::Spread, static_cast<double>(n) * p * p * p);
}

}  // namespace pme
}  // namespace pmewald
