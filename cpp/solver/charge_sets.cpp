// The charge-sets stages of PMESolver::run (compute_call.cpp): m charge sets on
// the same atoms in one call. One migration (the sets' charges routed along its
// plan and to the ghosts), one pair search with the charge-sets pass of the pair
// loop (RealSpace::request_sets, pair_search.hpp), the B-spline stencils once,
// then per set the mesh part (PMESolver::reciprocal) on the shared plans; the
// per-set terms for run's one Allreduce; the per-set potentials.
#include <algorithm>
#include <cmath>

#include "base/kokkos_runtime.hpp"
#include "solver/pme_solver.hpp"

namespace pmewald {
inline namespace solver {

// The ghosts' charges of every set (routed along the ghost plan) and the pair
// loop's sets pass requested (RealSpace::request_sets).
void PMESolver::route_set_ghosts(int M) {
  const std::size_t Ms = static_cast<std::size_t>(M);
  const std::size_t n_g = migration_.n_ghost();
  if (set_ghost_q_.extent(0) != n_g || set_ghost_q_.extent(1) != Ms)
    set_ghost_q_ = View2<double>("pme_set_ghost_charges", n_g, Ms);
  migration_.route_ghosts(set_q_.data(), M, set_ghost_q_.data());
  realspace_.request_sets(M, set_q_, set_ghost_q_, set_real_);
}

// Set c's mesh part: its charges as one column (set_col_), spread, FFTs, solve
// and gather on the shared stencils and plans; its forces (and potentials) into
// set c's columns of set_f_ (set_pot_).
void PMESolver::mesh_set(int c, SolverResult& res, Overlap* overlap, bool potentials) {
  const std::size_t n_own = migration_.n_owned();
  auto q = set_col_;
  auto all = set_q_;
  Kokkos::parallel_for(
      "pmewald::set_column", Range(0, n_own), KOKKOS_LAMBDA(const std::size_t i) { q(i) = all(i, c); });
  Kokkos::fence();
  reciprocal(set_col_, res, f_rec_, overlap, potentials);
  auto f = set_f_, fk = f_rec_;
  auto pot = set_pot_, field = rec_field_;
  auto phi = rec_phi_;
  Kokkos::parallel_for(
      "pmewald::set_store", Range(0, n_own), KOKKOS_LAMBDA(const std::size_t i) {
        for (int a = 0; a < 3; ++a) f(i, 3 * c + a) = fk(i, a);
        if (potentials) {
          pot(i, 4 * c) = phi(i);
          for (int a = 0; a < 3; ++a) pot(i, 4 * c + 1 + a) = field(i, a);
        }
      });
  Kokkos::fence();
}

// The atoms migrate once for all sets; the sets' charges follow along its plan
// into set_q_ (with the per-call views sized for the owned atoms).
void PMESolver::migrate_sets(const double* positions, const double* charges, int M, const std::int64_t* ids,
                             std::size_t n, bool potentials) {
  const std::size_t Ms = static_cast<std::size_t>(M);
  // One column stands for all sets in the migration: each atom's largest
  // |q|, NaN where some set's charge is not finite (the migration's check refuses
  // that on every rank); the sets' charges follow along its plan.
  std::vector<double> lead(n);
  for (std::size_t i = 0; i < n; ++i) {
    double v = 0, bad = 0;
    for (std::size_t c = 0; c < Ms; ++c) {
      const double qc = charges[i * Ms + c];
      v = std::max(v, std::fabs(qc));
      bad += qc - qc;
    }
    lead[i] = v + bad;
  }
  migration_.forward(positions, lead.data(), ids, n, exclusions_.offsets(), exclusions_.partners());
  const std::size_t n_own = migration_.n_owned(), cols = RealSpace::kSetCols * Ms;
  force_views(n_own);
  if (potentials) potential_views(n_own);
  if (set_q_.extent(0) != n_own || set_q_.extent(1) != Ms) {
    set_q_ = View2<double>("pme_set_charges", n_own, Ms);
    set_real_ = View2<double>("pme_set_real", n_own, cols);
    set_f_ = View2<double>("pme_set_forces", n_own, 3 * Ms);
    set_col_ = View1<double>("pme_set_column", n_own);
  }
  if (potentials && (set_pot_.extent(0) != n_own || set_pot_.extent(1) != 4 * Ms))
    set_pot_ = View2<double>("pme_set_potentials", n_own, 4 * Ms);
  migration_.route(charges, M, set_q_.data());
}

// Per set c: the local real-space terms from the atoms' columns (local[c]) and
// the total forces (into set_f_) with their sum of squares (f2[c]).
void PMESolver::set_terms(std::size_t Ms, std::vector<RealSpaceTerms>& local, std::vector<double>& f2) {
  const std::size_t n_own = migration_.n_owned();
  local.assign(Ms, RealSpaceTerms{});
  f2.assign(Ms, 0.0);
  // E = sum q phi / 2, W = sum q w, F = F_mesh + q E.
  for (std::size_t c = 0; c < Ms; ++c) {
    for (std::size_t i = 0; i < n_own; ++i) {
      const double q = set_q_(i, c);
      auto r = [&](int v) { return set_real_(i, v * Ms + c); };  // term v of set c
      local[c].real += 0.5 * q * r(0);
      local[c].exclusion += 0.5 * q * r(4);
      for (int v = 0; v < Virial::kComponents; ++v) local[c].virial[v] += q * r(5 + v);
      local[c].sum_q += q;
      local[c].sum_q2 += q * q;
      for (int a = 0; a < 3; ++a) {
        const double f = set_f_(i, 3 * c + a) + q * r(1 + a);
        set_f_(i, 3 * c + a) = f;
        f2[c] += f * f;
      }
    }
  }
}

// phi and E of every term per set (assemble_potentials' terms), back to the
// callers in one reverse.
void PMESolver::assemble_set_potentials(const std::vector<SolverResult>& res, std::size_t n, double* potentials_out,
                                        double* fields_out) {
  const std::size_t Ms = res.size();
  const std::size_t n_own = migration_.n_owned();
  const int M = static_cast<int>(Ms);
  constexpr double kPi = 3.14159265358979323846;
  const double k = opt_.coulomb_constant, a = opt_.alpha;
  const double self = -2.0 * k * a / std::sqrt(kPi);
  for (std::size_t c = 0; c < Ms; ++c) {
    const double background = -k * kPi * res[c].sum_q / (cell_.volume * a * a);
    for (std::size_t i = 0; i < n_own; ++i) {
      auto r = [&](int v) { return set_real_(i, v * Ms + c); };
      set_pot_(i, 4 * c) += r(0) + r(4) + self * set_q_(i, c) + background;
      for (int d = 0; d < 3; ++d) set_pot_(i, 4 * c + 1 + d) += r(1 + d);
    }
  }
  std::vector<double> back(4 * Ms * n);
  migration_.reverse(set_pot_.data(), 4 * M, back.data());
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < Ms; ++c) {
      potentials_out[i * Ms + c] = back[4 * (i * Ms + c)];
      for (int d = 0; d < 3; ++d) fields_out[3 * (i * Ms + c) + d] = back[4 * (i * Ms + c) + 1 + d];
    }
}

}  // namespace solver
}  // namespace pmewald
