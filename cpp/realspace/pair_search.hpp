// The half neighbour search of the real-space sum over the cell-sorted atoms of
// one rank and the batched erfc pair kernel it feeds (realspace.cpp builds the
// cell list and runs it as one Kokkos parallel_reduce). Internal to realspace/.
#pragma once

#include <cmath>
#include <cstdint>

#include <Kokkos_Core.hpp>
#include <Kokkos_ScatterView.hpp>

#include "base/kokkos_types.hpp"
#include "realspace/erfc_table.hpp"
#include "realspace/pair_kernel.hpp"
#include "realspace/pair_select.hpp"

namespace pmewald {
inline namespace realspace {
namespace detail {

constexpr double kTwoOverSqrtPi = 1.12837916709551257390;

using ConstI64 = Kokkos::View<const std::int64_t*, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

using ScatterForces = Kokkos::Experimental::ScatterView<double**, Kokkos::LayoutRight, ExecSpace,
                                                        Kokkos::Experimental::ScatterSum>;

// Half neighbour search and the batched pair kernel. Work item a is a sorted
// atom (owned or ghost); it pairs with the atoms after it in its own row of
// cells (up to `reach` cells on, or to the cutoff in orthorhombic boxes), and
// with every atom of the rows above it in
// the (2 * reach + 1)^3 stencil (dz > 0, or dz = 0 and dy > 0): each unordered
// pair of this rank's atoms (owned + ghost) is seen exactly once. Pairs of two
// ghosts are skipped (their owners count them); a pair of an owned atom and a
// ghost is evaluated here only if keeps_cross_pair says so (otherwise the
// ghost's owner evaluates the mirror pair). Both atoms of an evaluated pair
// get their force (Newton's third law) through a ScatterView (atomic or
// duplicated on threaded backends); forces on ghosts go back to their owners
// (Migration::reverse_ghosts). Excluded pairs are the exception: both sides
// see them (the `found` check needs that), so an excluded owned-ghost pair
// counts half on each side and only its owned atom gets the force.
struct HalfPairKernel {
  using value_type = double[];
  unsigned value_count = 11;  // E_real, E_excl, W (6, Virial's order), candidates, pairs, sum |f_pair|^2
  static constexpr int kBatch = kMaxBatch;
  // Cells per cutoff along each axis (a pair within the cutoff is at most
  // that many cells apart); x cells are finer in orthorhombic boxes.
  static constexpr int kReach = 2;
  static constexpr int kReachXOrtho = 8;

  View1<double> x, y, z, q, own;      // sorted atoms: positions, charges, 1 owned / 0 ghost
  View1<std::int64_t> sid, skey;      // ids; Migration::owned_key (of the original, for a ghost)
  View1<std::int64_t> elo, ehi;       // id range of each sorted atom's excluded partners (empty: lo > hi)
  View1<std::int64_t> emask;          // their bits id mod 64 (0: none)
  View1<int> scell, sowner;           // cell, and owned index (-1 for a ghost), per sorted atom
  View1<int> cell_start, cell_owned;  // prefix sums over cells: atoms, owned atoms
  ConstI64 excl_off, excl_ids;        // excluded partner ids, CSR by owned index
  View1<int> found;                   // sightings per exclusion entry
  ScatterForces sforces;              // per sorted atom
  const double* erfc_coef;
  int nc0, nc1, nc2;
  // Orthorhombic boxes: rows are trimmed to the cells within the cutoff of
  // the atom (x cells are finer for that); box lengths, the grid's lower
  // fractional corner and fractional cell widths per axis.
  bool ortho = false;
  double len[3], flo[3], wf[3];
  double rc2, alpha, k;
  bool pairs = true;  // false: only the exclusion corrections (real_space=False)
  bool any_excl = false;
  bool vector_kernel = true;  // alpha * cutoff < kMaxAlphaR
  PairKernels kernels = pair_kernels(PairPrecision::Double, 0.0);  // the erfc pairs' (pair_kernel.hpp)

  // ---- Potentials and fields (on request; RealSpace::request_potentials) ----
  // Per sorted atom (phi, E_x, E_y, E_z): phi_i = sum_j k q_j erfc(alpha r)/r and
  // E_i = -grad_i phi_i, from the same pairs as the forces (each pair once, both
  // sides), computed from the partner's charge only, so they are defined for
  // q_i = 0 too. Excluded pairs get -k q_j erf(alpha r)/r and its field instead,
  // on their owned sides only (like their forces).
  bool potentials = false;
  ScatterForces spot;  // n_sorted x 4

  // Unit-charge pair terms of atom a with partners js (erfc_unit_batch, or the
  // table where alpha * cutoff >= kMaxAlphaR): adds
  // q_j (s, g d) to pa and q_a (s, -g d) to each partner j,
  // s = k erfc(alpha r)/r, g = (s + k (2 alpha/sqrt(pi)) exp(-alpha^2 r^2)) / r^2.
  template <class Access>
  void pair_potentials(const int* js, int count, double xi, double yi, double zi, double qa, double* pa,
                       Access& acc) const {
    const double a_tsp = alpha * kTwoOverSqrtPi;
    double bs[kBatch], bg[kBatch];  // the vector kernel's s and g per pair
    if (vector_kernel) erfc_unit_batch(count, js, xi, yi, zi, k, x.data(), y.data(), z.data(), alpha, bs, bg);
    for (int b = 0; b < count; ++b) {
      const int j = js[b];
      const double dx = xi - x(j), dy = yi - y(j), dz = zi - z(j);
      double s, g;
      if (vector_kernel) {
        s = bs[b];
        g = bg[b];
      } else {  // alpha r up to anything: the table
        const double r2 = dx * dx + dy * dy + dz * dz;
        const double inv_r = 1.0 / std::sqrt(r2);
        double erfc_ar, exp_mar2;
        ErfcTable::eval(erfc_coef, alpha * r2 * inv_r, erfc_ar, exp_mar2);
        s = k * erfc_ar * inv_r;
        g = (s + k * a_tsp * exp_mar2) * inv_r * inv_r;
      }
      const double qj = q(j);
      pa[0] += qj * s;
      pa[1] += qj * g * dx;
      pa[2] += qj * g * dy;
      pa[3] += qj * g * dz;
      acc(j, 0) += qa * s;
      acc(j, 1) -= qa * g * dx;
      acc(j, 2) -= qa * g * dy;
      acc(j, 3) -= qa * g * dz;
    }
  }

  // An excluded pair's unit-charge terms (excluded_pair with k for k q_i q_j).
  template <class Access>
  void excluded_potentials(int a, int j, double dx, double dy, double dz, double* pa, Access& acc) const {
    double s, g;
    excluded_pair(k, dx * dx + dy * dy + dz * dz, s, g);
    if (sowner(a) >= 0) {
      const double qj = q(j);
      pa[0] += qj * s;
      pa[1] += qj * g * dx;
      pa[2] += qj * g * dy;
      pa[3] += qj * g * dz;
    }
    if (own(j) != 0.0) {
      const double qa = q(a);
      acc(j, 0) += qa * s;
      acc(j, 1) -= qa * g * dx;
      acc(j, 2) -= qa * g * dy;
      acc(j, 3) -= qa * g * dz;
    }
  }
  // ---- end of potentials ----

  // ---- Charge sets (on request; RealSpace::request_sets) ----
  // n_sets charge vectors on the same atoms (qs: n_sorted x n_sets): per pair the
  // unit-charge terms s and g once (as pair_potentials), then for every set c the
  // columns v * n_sets + c, v = 0..10 = (phi_pair, E_x, E_y, E_z, phi_excl, w_xx,
  // w_yy, w_zz, w_xy, w_xz, w_yz), from the partner's charge of set c: phi += q_j s
  // and E += q_j g d on both atoms, w += q_j g d (x) d (Virial's order) on the
  // pair's first atom only, so that per set E_real = sum_i q_i phi_pair,i / 2, F_i =
  // q_i E_i and W = sum_i q_i w_i (each pair once). Excluded pairs add -k q_j
  // erf(alpha r)/r and its gradient terms to phi_excl and E of their owned sides,
  // and half their w to each owned side (both ranks of an owned-ghost pair see it).
  // The force kernel does not run. Per batch of partners, atom a's sums stay in
  // registers; each partner's row gets its 4 potential and field columns per set.
  static constexpr int kSetCols = 11;
  static constexpr int kSetTerms = 10;  // s, g d (3), g d d (6)
  int n_sets = 0;       // 0: off
  View2<double> qs;     // n_sorted x n_sets
  ScatterForces ssets;  // n_sorted x (kSetCols * n_sets)

  // The ten unit-charge terms of pair (i, j) with s and g (the pair's d = r_i - r_j).
  static void set_terms(double s, double g, double dx, double dy, double dz, double* t) {
    const double gx = g * dx, gy = g * dy, gz = g * dz;
    t[0] = s;
    t[1] = gx;
    t[2] = gy;
    t[3] = gz;
    t[4 + Virial::XX] = gx * dx;
    t[4 + Virial::YY] = gy * dy;
    t[4 + Virial::ZZ] = gz * dz;
    t[4 + Virial::XY] = gx * dy;
    t[4 + Virial::XZ] = gx * dz;
    t[4 + Virial::YZ] = gy * dz;
  }
  // Column (times n_sets) of term v (set_terms' order): the potential in 0 (pairs) or 4
  // (excluded pairs), the field in 1..3, w in 5..10.
  static int term_column(int v, bool excluded) { return v == 0 ? (excluded ? 4 : 0) : (v < 4 ? v : v + 1); }

  // The pairs (a, js[b]) of every set.
  template <class Access>
  void pair_sets(const int* js, int count, double xi, double yi, double zi, int a, Access& acc) const {
    const double a_tsp = alpha * kTwoOverSqrtPi;
    double bs[kBatch], bg[kBatch];
    if (vector_kernel) erfc_unit_batch(count, js, xi, yi, zi, k, x.data(), y.data(), z.data(), alpha, bs, bg);
    else
      for (int b = 0; b < count; ++b) {  // alpha r up to anything: the table
        const int j = js[b];
        const double dx = xi - x(j), dy = yi - y(j), dz = zi - z(j);
        const double r2 = dx * dx + dy * dy + dz * dz;
        const double inv_r = 1.0 / std::sqrt(r2);
        double erfc_ar, exp_mar2;
        ErfcTable::eval(erfc_coef, alpha * r2 * inv_r, erfc_ar, exp_mar2);
        bs[b] = k * erfc_ar * inv_r;
        bg[b] = (bs[b] + k * a_tsp * exp_mar2) * inv_r * inv_r;
      }
    double t[kSetTerms][kBatch];
    for (int b = 0; b < count; ++b) {
      const int j = js[b];
      double tb[kSetTerms];
      set_terms(bs[b], bg[b], xi - x(j), yi - y(j), zi - z(j), tb);
      for (int v = 0; v < kSetTerms; ++v) t[v][b] = tb[v];
    }
    const int m = n_sets;
    for (int c = 0; c < m; ++c) {
      const double qa = qs(a, c);
      double sum[kSetTerms] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
      for (int b = 0; b < count; ++b) {
        const int j = js[b];
        const double qj = qs(j, c);
        for (int v = 0; v < kSetTerms; ++v) sum[v] += qj * t[v][b];
        acc(j, c) += qa * t[0][b];
        acc(j, m + c) -= qa * t[1][b];
        acc(j, 2 * m + c) -= qa * t[2][b];
        acc(j, 3 * m + c) -= qa * t[3][b];
      }
      for (int v = 0; v < kSetTerms; ++v) acc(a, term_column(v, false) * m + c) += sum[v];
    }
  }

  // An excluded pair's terms in every set (phi_excl, E and half of w; owned sides only).
  template <class Access>
  void excluded_sets(int a, int j, double dx, double dy, double dz, Access& acc) const {
    double s, g, t[kSetTerms];
    excluded_pair(k, dx * dx + dy * dy + dz * dz, s, g);
    set_terms(s, g, dx, dy, dz, t);
    const int m = n_sets;
    for (int side = 0; side < 2; ++side) {
      const int row = side == 0 ? a : j, other = side == 0 ? j : a;
      if (side == 0 ? sowner(a) < 0 : own(j) == 0.0) continue;
      for (int c = 0; c < m; ++c) {
        const double q = qs(other, c);
        for (int v = 0; v < kSetTerms; ++v) {
          const double tv = v == 0 ? t[v] : (v < 4 ? (side == 0 ? t[v] : -t[v]) : 0.5 * t[v]);
          acc(row, term_column(v, true) * m + c) += q * tv;
        }
      }
    }
  }
  // ---- end of charge sets ----

  // Distance from coordinate v to cell c's slab along axis d (0 inside).
  double gap(double v, int c, int d) const {
    const double lo = (flo[d] + c * wf[d]) * len[d], hi = lo + wf[d] * len[d];
    return v < lo ? lo - v : (v > hi ? v - hi : 0.0);
  }
  double x_origin = 0, inv_x_width = 1;  // Cartesian start of the x cells, 1 / their width
  int x_cell(double xv) const {
    const double t = (xv - x_origin) * inv_x_width;
    const int c = t > 0 ? static_cast<int>(t) : 0;
    return c >= nc0 ? nc0 - 1 : c;
  }

  // Entry of `partner_id` in owned atom o's exclusion list, or -1.
  std::int64_t entry(int o, std::int64_t partner_id) const {
    for (std::int64_t e = excl_off(o), e1 = excl_off(o + 1); e < e1; ++e)
      if (excl_ids(e) == partner_id) return e;
    return -1;
  }

  // Whether the pair (a, j) is excluded, with the exclusion entries its sighting
  // counts for (e1: of the owned side, a's if both are owned; e2: j's then, else -1).
  bool exclusion_entries(int a, int j, std::int64_t& e1, std::int64_t& e2) const {
    const int oa = sowner(a), oj = sowner(j);
    e1 = oa >= 0 ? entry(oa, sid(j)) : entry(oj, sid(a));
    e2 = e1 >= 0 && oa >= 0 && oj >= 0 ? entry(oj, sid(a)) : -1;
    return e1 >= 0;
  }

  // Whether the pair (a, j) is excluded; counts the sighting for every owned side.
  bool excluded(int a, int j) const {
    std::int64_t e1, e2;
    if (!exclusion_entries(a, j, e1, e2)) return false;
    Kokkos::atomic_increment(&found(e1));
    if (e2 >= 0) Kokkos::atomic_increment(&found(e2));
    return true;
  }

  // Whether this rank evaluates the (not excluded) pair (a, j) (pair_select.hpp).
  bool keeps(int a, int j) const {
    const bool oa = own(a) != 0.0, oj = own(j) != 0.0;
    if (oa && oj) return true;
    return oa ? keeps_cross_pair(skey(a), skey(j)) : keeps_cross_pair(skey(j), skey(a));
  }

  // Excluded pair (rare): no erfc term; -k q_i q_j erf(alpha r)/r instead.
  void excluded_pair(double kqq, double r2, double& e, double& fr) const {
    if (r2 == 0.0) {
      e = -kqq * alpha * kTwoOverSqrtPi;
      fr = 0;
      return;
    }
    const double r = std::sqrt(r2);
    const double ar = alpha * r;
    double erfc_ar, exp_mar2;
    ErfcTable::eval(erfc_coef, ar, erfc_ar, exp_mar2);
    const double erf_ar = ar < 0.5 ? std::erf(ar) : 1.0 - erfc_ar;
    e = -kqq * erf_ar / r;
    fr = kqq * (kTwoOverSqrtPi * ar * exp_mar2 - erf_ar) / (r * r2);
  }

  // The stencil walk of sorted atom a at search radius sqrt(rc2): hands its hits
  // to on_batch(list, n, maybe, n_maybe) in batches of at most kBatch (list: pairs
  // this rank evaluates and that cannot be excluded; maybe: hits that might be
  // excluded pairs, whichever rank evaluates them). Returns the distances checked.
  template <class OnBatch>
  double walk(const int a, OnBatch&& on_batch) const {
    const int c = scell(a);
    const int cx = c % nc0, cy = (c / nc0) % nc1, cz = c / (nc0 * nc1);
    const bool a_owned = sowner(a) >= 0;
    const double xi = x(a), yi = y(a), zi = z(a);
    // Hits (list) and hits that might be excluded pairs (maybe); select_within
    // may store up to 8 entries past either count.
    int list[kBatch + 8], maybe[kBatch + 8];
    double candidates = 0;
    int n = 0, n_maybe = 0;
    NeighbourQuery query{xi, yi, zi, rc2, !a_owned, x.data(), y.data(), z.data(), own.data(), skey.data(), skey(a)};
    if (any_excl) {
      query.ids = sid.data();
      query.elo = elo.data();
      query.ehi = ehi.data();
      query.id_i = sid(a);
      query.lo = elo(a);
      query.hi = ehi(a);
      query.emask = emask.data();
      query.mask = emask(a);
    }
    auto flush = [&]() {
      on_batch(list, n, maybe, n_maybe);
      n = n_maybe = 0;
    };

    constexpr int m = kReach;
    // Squared distances from the atom to the neighbouring y and z slabs.
    double gy2[2 * m + 1], gz2[m + 1];
    if (ortho) {
      for (int d = -m; d <= m; ++d) {
        const double g = d != 0 && cy + d >= 0 && cy + d < nc1 ? gap(yi, cy + d, 1) : 0.0;
        gy2[d + m] = g * g;
      }
      for (int d = 0; d <= m; ++d) {
        const double g = d != 0 && cz + d < nc2 ? gap(zi, cz + d, 2) : 0.0;
        gz2[d] = g * g;
      }
    }
    for (int dz = 0; dz <= m && cz + dz < nc2; ++dz) {
      for (int dy = dz == 0 ? 0 : -m; dy <= m; ++dy) {
        const int yy = cy + dy;
        if (yy < 0 || yy >= nc1) continue;
        const bool home = dz == 0 && dy == 0;
        int x0, x1;
        if (ortho) {
          const double g2 = gy2[dy + m] + gz2[dz];
          if (g2 >= rc2) continue;
          const double rho = std::sqrt(rc2 - g2);
          x0 = home ? cx : x_cell(xi - rho);
          x1 = x_cell(xi + rho);
        } else {
          x0 = home ? cx : (cx > m ? cx - m : 0);
          x1 = cx + m < nc0 ? cx + m : nc0 - 1;
        }
        // Cells x0..x1 of a row are contiguous in the sorted arrays.
        const int row = nc0 * (yy + nc1 * (cz + dz));
        if (!a_owned && cell_owned(row + x1 + 1) == cell_owned(row + x0)) continue;  // ghosts only
        int j = home ? a + 1 : cell_start(row + x0);
        const int je = cell_start(row + x1 + 1);
        while (j < je) {
          const int room = kBatch - (n > n_maybe ? n : n_maybe);
          if (room == 0) {
            flush();
            continue;
          }
          const int chunk_end = je - j < room ? je : j + room;
          candidates += chunk_end - j;
          n = select_within(query, j, chunk_end, list, n, maybe, n_maybe);
          j = chunk_end;
        }
      }
    }
    flush();
    return candidates;
  }

  void operator()(const int a, double* acc) const {
    const bool a_owned = sowner(a) >= 0;
    const double xi = x(a), yi = y(a), zi = z(a), own_a = own(a);
    const double kqi = k * q(a);
    auto access = sforces.access();
    auto pot_access = spot.access();
    double pa[4] = {0, 0, 0, 0};  // potentials: atom a's phi and field
    double bfx[kBatch], bfy[kBatch], bfz[kBatch];
    double sums[PairBatchAcc::kSize] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    double excl_sums[PairBatchAcc::kSize] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};  // excluded pairs
    double e_excl = 0, evaluated = 0;

    auto set_access = ssets.access();
    auto evaluate = [&](int* js, int count) {
      if (!pairs || count == 0) return;
      evaluated += count;
      if (n_sets > 0) {
        pair_sets(js, count, xi, yi, zi, a, set_access);
        return;
      }
      evaluate_batch(js, count, xi, yi, zi, kqi, bfx, bfy, bfz, sums, access);
      if (potentials) pair_potentials(js, count, xi, yi, zi, q(a), pa, pot_access);
    };
    // Candidates for exclusion: look them up; the excluded ones get the erf
    // correction (forces on owned atoms only), the others join the ordinary
    // pairs if this rank evaluates them.
    const double candidates = walk(a, [&](int* list, int n, int* maybe, int n_maybe) {
      int kept = 0;
      for (int b = 0; b < n_maybe; ++b) {
        const int j = maybe[b];
        if (!excluded(a, j)) {
          if (keeps(a, j)) maybe[kept++] = j;
          continue;
        }
        if (n_sets > 0) {
          excluded_sets(a, j, xi - x(j), yi - y(j), zi - z(j), set_access);
          continue;
        }
        add_excluded(a, j, own_a, e_excl, excl_sums, access);
        if (potentials) excluded_potentials(a, j, xi - x(j), yi - y(j), zi - z(j), pa, pot_access);
      }
      evaluate(list, n);
      evaluate(maybe, kept);
    });
    for (int d = 0; d < 3; ++d) access(a, d) += sums[7 + d] + (a_owned ? excl_sums[7 + d] : 0.0);
    if (potentials)
      for (int c = 0; c < 4; ++c) pot_access(a, c) += pa[c];
    acc[0] += sums[0];
    acc[1] += e_excl;
    for (int v = 0; v < Virial::kComponents; ++v)
      acc[2 + v] += sums[PairBatchAcc::kVirial + v] + excl_sums[PairBatchAcc::kVirial + v];
    acc[8] += candidates;
    acc[9] += evaluated;
    acc[10] += sums[PairBatchAcc::kPairForce2];
  }

  // The erfc terms of the pairs (i, js[b]), b < count (count <= kBatch), i at
  // (xi, yi, zi) with k q_i = kqi: into sums (PairBatchAcc's layout), the
  // forces on the partners subtracted through `access`; bf*: scratch of kBatch.
  template <class Access>
  void evaluate_batch(const int* js, int count, double xi, double yi, double zi, double kqi, double* bfx,
                      double* bfy, double* bfz, double* sums, Access& access) const {
    kernels.batch(count, js, xi, yi, zi, kqi, x.data(), y.data(), z.data(), q.data(), alpha, bfx, bfy, bfz, sums);
    for (int b = 0; b < count; ++b) {
      const int j = js[b];
      access(j, 0) -= bfx[b];
      access(j, 1) -= bfy[b];
      access(j, 2) -= bfz[b];
    }
  }

  // The erf correction of the excluded pair (a, j) (weight 1/2 per owned side;
  // the force on j if owned here; a's force left in excl_sums[7..9]).
  template <class Access>
  void add_excluded(int a, int j, double own_a, double& e_excl, double* excl_sums, Access& access,
                    double* f_out = nullptr) const {
    const double dx = x(a) - x(j), dy = y(a) - y(j), dz = z(a) - z(j);
    double epair, fr;
    excluded_pair(k * q(a) * q(j), dx * dx + dy * dy + dz * dz, epair, fr);
    const double w = 0.5 * (own_a + own(j));
    e_excl += w * epair;
    double f[3];
    PairBatchAcc::add_pair(w, fr, dx, dy, dz, excl_sums, f);
    if (own(j) != 0.0)
      for (int d = 0; d < 3; ++d) access(j, d) -= f[d];
    if (f_out)
      for (int d = 0; d < 3; ++d) f_out[d] = f[d];
  }
};

}  // namespace detail
}  // namespace realspace
}  // namespace pmewald
