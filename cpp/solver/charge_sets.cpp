// PMESolver::compute_sets (pme_solver.hpp): m charge sets on the same atoms in one
// call. One migration (the sets' charges routed along its plan and to the ghosts),
// one pair search with the charge-sets pass of the pair loop (RealSpace::
// request_sets, pair_search.hpp), the B-spline stencils once, then per set the mesh
// part (PMESolver::reciprocal) on the shared plans; one Allreduce of all sets' sums.
#include <algorithm>
#include <cmath>

#include "base/errors.hpp"
#include "base/kokkos_runtime.hpp"
#include "solver/pme_solver.hpp"

namespace pmewald {
inline namespace solver {

std::vector<SolverResult> PMESolver::compute_sets(const double* positions, const double* charges, int n_sets,
                                                  const std::int64_t* ids, std::size_t n,
                                                  const std::int64_t* exclusions, std::size_t m, double* forces_out,
                                                  bool potentials, double* potentials_out, double* fields_out) {
  ensure_kokkos_initialized();  // this thread may run kernels (base/kokkos_runtime.hpp)
  if (!same_on_all_ranks(comm_.get(), {double(n_sets), potentials ? 1.0 : 0.0}))
    throw ValueError("compute_sets: the number of charge sets and potentials must be the same on every rank");
  if (n_sets < 1) throw ValueError("compute_sets: at least one charge set");
  const int M = n_sets;
  const std::size_t Ms = static_cast<std::size_t>(M);
  if (opt_.choose_mode && !modes_done_) choose_mode();
  double t = wall_seconds();
  exclusions_.update(ids, n, exclusions, m);
  t = timers_.lap("exclusions", t);
  // A fresh search, as with potentials (the list has no sets pass); exclusions
  // changed here make the list's next call rebuild.
  if (list_skin_ > 0 && exclusions_.changed()) list_stale_ = true;
  migrate_sets(positions, charges, M, ids, n, potentials);
  const std::size_t n_own = migration_.n_owned();
  t = timers_.lap("migrate", t);
  // The pairs once for all sets (or, with real_space off, the exclusion corrections).
  const bool pairs = opt_.real_space || exclusions_.any();
  Kokkos::deep_copy(set_real_, 0.0);
  BackgroundWork* work = nullptr;
  realspace_.request_potentials(false);
  if (pairs) {
    migration_.exchange_ghosts(opt_.cutoff);
    const std::size_t n_g = migration_.n_ghost();
    if (set_ghost_q_.extent(0) != n_g || set_ghost_q_.extent(1) != Ms)
      set_ghost_q_ = View2<double>("pme_set_ghost_charges", n_g, Ms);
    migration_.route_ghosts(set_q_.data(), M, set_ghost_q_.data());
    t = timers_.lap("ghost_atoms", t);
    realspace_.request_sets(M, set_q_, set_ghost_q_, set_real_);
    realspace_.begin_local(migration_, opt_.cutoff, opt_.alpha, opt_.coulomb_constant, f_real_, opt_.real_space);
    work = &realspace_.pairs();
  }
  Overlap* overlap = start_work(work, t);
  const double hidden0 = overlap_ ? overlap_->stats().work_seconds : 0;
  // The mesh: stencils once, then each set's spread, FFTs, solve and gather on the
  // shared plans and buffers.
  std::vector<SolverResult> res(Ms);
  stencils();
  for (int c = 0; c < M; ++c) {
    auto q = set_col_;
    auto all = set_q_;
    Kokkos::parallel_for(
        "pmewald::set_column", Range(0, n_own), KOKKOS_LAMBDA(const std::size_t i) { q(i) = all(i, c); });
    Kokkos::fence();
    reciprocal(set_col_, res[static_cast<std::size_t>(c)], f_rec_, overlap, potentials);
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
  t = wall_seconds();
  if (work) {
    realspace_.finish_local();
    stop_work(overlap, hidden0);
    t = timers_.lap("real_space", t);
  }
  realspace_.request_sets(0);
  reduce_sets(res, n);
  t = timers_.lap("reduce", t);
  migration_.reverse(set_f_.data(), 3 * M, forces_out);
  if (potentials) assemble_set_potentials(res, n, potentials_out, fields_out);
  t = timers_.lap("migrate", t);
  timers_.count("calls");
  return res;
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

// Per set: the pair terms from the atoms' columns and the total forces (into
// set_f_), then one Allreduce of every set's sums and the results from them.
void PMESolver::reduce_sets(std::vector<SolverResult>& res, std::size_t n) {
  const std::size_t Ms = res.size();
  const std::size_t n_own = migration_.n_owned();
  // E = sum q phi / 2, W = sum q w, F = F_mesh + q E.
  constexpr int kReal = RealSpace::kSums, kPer = kReal + 2 + Virial::kComponents;
  std::vector<double> sums(kPer * Ms + 1, 0.0);
  for (std::size_t c = 0; c < Ms; ++c) {
    RealSpaceTerms local;
    double f2 = 0;
    for (std::size_t i = 0; i < n_own; ++i) {
      const double q = set_q_(i, c);
      auto r = [&](int v) { return set_real_(i, v * Ms + c); };  // term v of set c
      local.real += 0.5 * q * r(0);
      local.exclusion += 0.5 * q * r(4);
      for (int v = 0; v < Virial::kComponents; ++v) local.virial[v] += q * r(5 + v);
      local.sum_q += q;
      local.sum_q2 += q * q;
      for (int a = 0; a < 3; ++a) {
        const double f = set_f_(i, 3 * c + a) + q * r(1 + a);
        set_f_(i, 3 * c + a) = f;
        f2 += f * f;
      }
    }
    double* out = &sums[kPer * c];
    RealSpace::terms_to_sum(local, out);
    out[kReal] = res[c].terms["reciprocal"];
    for (int v = 0; v < Virial::kComponents; ++v) out[kReal + 1 + v] = res[c].virial[v];
    out[kPer - 1] = f2;
  }
  sums[kPer * Ms] = static_cast<double>(n);
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, sums.data(), static_cast<int>(sums.size()), MPI_DOUBLE, MPI_SUM, comm_.get()),
            "MPI_Allreduce");
  const std::int64_t n_total = static_cast<std::int64_t>(sums[kPer * Ms]);
  for (std::size_t c = 0; c < Ms; ++c) {
    const double* in = &sums[kPer * c];
    const RealSpaceTerms terms = RealSpace::terms_from_sums(in, cell_, opt_.alpha, opt_.coulomb_constant);
    finish_result(res[c], in + kReal, terms, in[kPer - 1], n_total);
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
