// PMESolver::compute and compute_sets: one call path (run) for one charge column
// and for m charge sets on the same atoms, in the order of its stages:
//
//   begin        the call's checks, comm_mode "auto"'s variant (its trial), exclusions
//   migrate      atoms to their owners (one set: the pair list's vote rides on it;
//                sets: one column leads, the sets' charges follow its plan;
//                balanced, once the cuts have moved: also to the real-space owners)
//   begin_pairs  ghosts and the pair loop, as work the mesh's exchanges can hide
//   mesh         the stencils once, then each set's spread, FFTs, solve, gather
//   finish_pairs the pair loop's rest, ghost forces back
//   reduce       total forces, one Allreduce of every set's sums, the results
//   return       forces (and potentials) back to the callers' order
//   balance      the real-space imbalance measured; balance on: new cuts
//   trial        comm_mode "auto": the call's time to the trial (mode_choice.hpp)
//
// What differs between one set and m sets stays inside a stage: the reused pair
// list and the cost model's charges serve the one-set call; the sets' per-atom
// columns (charge_sets.cpp) serve the m-set call.
#include <algorithm>
#include <cmath>

#include "base/compute_model.hpp"
#include "base/errors.hpp"
#include "base/kokkos_runtime.hpp"
#include "solver/pme_solver.hpp"

namespace pmewald {
inline namespace solver {

SolverResult PMESolver::compute(const double* positions, const double* charges, const std::int64_t* ids,
                                std::size_t n, const std::int64_t* exclusions, std::size_t m,
                                double* forces_out, bool potentials, double* potentials_out, double* fields_out) {
  const Call call{positions, charges, 0, ids, n, exclusions, m, forces_out, potentials, potentials_out, fields_out};
  return run(call).front();
}

std::vector<SolverResult> PMESolver::compute_sets(const double* positions, const double* charges, int n_sets,
                                                  const std::int64_t* ids, std::size_t n,
                                                  const std::int64_t* exclusions, std::size_t m, double* forces_out,
                                                  bool potentials, double* potentials_out, double* fields_out) {
  ensure_kokkos_initialized();  // this thread may run kernels (base/kokkos_runtime.hpp)
  if (!same_on_all_ranks(comm_.get(), {double(n_sets), potentials ? 1.0 : 0.0}))
    throw ValueError("compute_sets: the number of charge sets and potentials must be the same on every rank");
  if (n_sets < 1) throw ValueError("compute_sets: at least one charge set");
  const Call call{positions, charges, n_sets, ids, n, exclusions, m, forces_out, potentials, potentials_out,
                  fields_out};
  return run(call);
}

std::vector<SolverResult> PMESolver::run(const Call& call) {
  ensure_kokkos_initialized();  // this thread may run kernels (base/kokkos_runtime.hpp)
  // comm_mode "auto": plain calls (one charge set, no potentials: the same on every
  // rank) are the trial's, each in the variant it asks for.
  // (after pair_layout "auto"'s trial, whose calls alternate the layouts)
  const bool trial = trial_.running() && !layout_trial_.running() && !call.sets && !call.potentials;
  if (trial) use_variant(trial_.next());
  const double t_call = wall_seconds();
  double t = t_call;
  // Exclusions are routed to the ranks holding their atoms (cached while the
  // ids and pairs do not change) and travel with the atoms as payload. Whether
  // they changed on any rank rides on the migration's agreement (migrate); the
  // sets' calls agree here.
  CallState s;
  if (call.sets) {
    exclusions_.update(call.ids, call.n, call.exclusions, call.m);
  } else {
    exclusions_.check(call.ids, call.n, call.exclusions, call.m, s.exclusion_flags);
    charge(Work::Exclusions, static_cast<double>(call.n));
  }
  t = timers_.lap("exclusions", t);
  // The reused pair list serves one set without potentials; any other call
  // searches afresh, and exclusions changed in it make the list's next call rebuild.
  s.use_list = list_skin_ > 0 && !call.potentials && !call.sets;
  // pair_layout "auto": the list's calls evaluate by each layout in turn (layout_choice.hpp).
  const bool layout_trial = s.use_list && layout_trial_.running();
  if (layout_trial) list_->set_layout(layout_trial_.next());
  const double evaluated0 = layout_trial ? list_->stats().evaluate_seconds : 0.0;
  // Balancing serves the same calls (the list keeps its own migration); the pairs
  // leave the bricks for domains of their own once the cuts have moved.
  s.balancing = balancer_->on() && opt_.real_space && !call.potentials && !call.sets;
  s.balanced = s.balancing && !s.use_list && balancer_->moved();
  migrate(call, s, t);
  if (list_skin_ > 0 && !s.use_list && exclusions_.changed()) list_stale_ = true;
  begin_pairs(call, s, t);
  Overlap* overlap = start_work(s.work, t);
  const double hidden0 = overlap_ ? overlap_->stats().work_seconds : 0;
  std::vector<SolverResult> res = mesh(call, overlap);
  t = wall_seconds();
  if (s.work) {
    // (a problem found in the pair loop is raised on every rank by reduce)
    if (s.use_list) {
      f_list_.resize(3 * call.n);
      s.local = list_->finish(f_list_.data(), &s.pair_error);
    } else {
      s.local = realspace_.finish_local(&s.pair_error);
    }
    stop_work(overlap, hidden0);
    t = timers_.lap("real_space", t);
  }
  realspace_.request_sets(0);
  if (s.balanced) {  // the balanced domains' pair forces to the callers' order
    f_list_.resize(3 * call.n);
    rs_migration_->reverse(f_real_rs_.data(), 3, f_list_.data());
    charge(Work::Migrate, static_cast<double>(call.n));
    t = timers_.lap("migrate", t);
  }
  reduce(call, s, res, t);
  return_forces(call, s, res, t);
  balance_after(call, s);
  timers_.count("calls");
  if (layout_trial && layout_trial_.record(comm_.get(), list_->stats().evaluate_seconds - evaluated0))
    list_->set_layout(layout_trial_.best());
  if (trial && trial_.record(comm_.get(), wall_seconds() - t_call)) use_variant(trial_.best());
  return res;
}

// The imbalance of this call's pair loop (slowest / mean, every mode) and, with
// balancing on, new cuts for the next call (the list rebuilds on them).
void PMESolver::balance_after(const Call& call, const CallState& s) {
  if (call.sets) return;  // (the same on every rank) the sets' pair loop is not the one balanced
  const bool pairs = opt_.real_space;  // (s.local holds zeros where no pair loop ran)
  Balancer::WorkSample where;
  if (s.balancing && !s.use_list) {  // each owned atom's candidate pairs, where the loop was
    realspace_.row_work(cell_, row_s_, row_w_);
    where.s = row_s_.data();
    where.n = row_w_.size();
    where.w = row_w_.data();
  } else if (s.balancing) {  // the list's owned atoms, each its share
    const Migration& m = list_->migration();
    where.s = m.owned_fractional().data();
    where.stride = m.owned_fractional().stride(0);
    where.n = m.n_owned();
  }
  const Balancer::Work work{pairs ? s.local.candidates : 0.0, pairs ? s.local.t_pairs : 0.0, pair_work_sums_[1],
                            pair_work_sums_[0], pair_work_max_[1], pair_work_max_[0]};
  if (balancer_->after_call(work, s.balancing ? &where : nullptr)) apply_domains();  // (balancing: every rank alike)
}

// Atoms to their owners by current position. With the pair list the real-space
// atoms keep their owners between rebuilds (the list's own migration); this one
// is the reciprocal part's, and the list's rebuild vote and the exclusions' check
// ride on its Allreduce.
void PMESolver::migrate(const Call& call, CallState& s, double& t) {
  if (call.sets) {
    migrate_sets(call.positions, call.charges, call.sets, call.ids, call.n, call.potentials);
    t = timers_.lap("migrate", t);
    return;
  }
  // The exclusions' flags ride on the (first) forward's agreement, which then
  // settles them on every rank before any atom moves (rerouted where changed).
  Migration::SharedAgreement excl;
  std::copy(s.exclusion_flags, s.exclusion_flags + ExclusionList::kFlags, excl.flags);
  excl.settle = [this](const int* agreed) { exclusions_.settle(agreed); };
  if (s.use_list) {
    // (the list's own migration carries the exclusions, at its rebuilds)
    const int vote = list_->vote(call.positions, call.ids, call.n, list_skin_) | (list_stale_ ? 1 : 0);
    list_stale_ = false;
    t = timers_.lap("real_space", t);
    migration_.forward(call.positions, call.charges, call.ids, call.n, nullptr, nullptr, vote, &excl);
    s.rebuild_list = migration_.agreed_vote() != 0 || exclusions_.changed();
  } else if (s.balanced) {
    // The mesh's owners without the exclusions; the real-space owners with them.
    migration_.forward(call.positions, call.charges, call.ids, call.n, nullptr, nullptr, 0, &excl);
    rs_migration_->forward(call.positions, call.charges, call.ids, call.n, exclusions_.offsets(),
                           exclusions_.partners());
    const std::size_t n_rs = rs_migration_->n_owned();
    if (f_real_rs_.extent(0) != n_rs) f_real_rs_ = View2<double>("pme_f_real_balanced", n_rs, 3);
  } else {
    excl.changes_plan = excl.flags[0] != 0;  // (the payload the atoms carry changes)
    excl.payload = [this] { return std::make_pair(exclusions_.offsets(), exclusions_.partners()); };
    migration_.forward(call.positions, call.charges, call.ids, call.n, exclusions_.offsets(),
                       exclusions_.partners(), 0, &excl);
  }
  charge(Work::Migrate, static_cast<double>(call.n));
  t = timers_.lap("migrate", t);
  const std::size_t n_own = migration_.n_owned();
  force_views(n_own);
  if (call.potentials) potential_views(n_own);
}

// Real space: the pairs (or, with real_space off, only the exclusion
// corrections) as work to run now or, with overlap, while the mesh's exchanges
// are in flight (s.work; none when there are no pairs).
void PMESolver::begin_pairs(const Call& call, CallState& s, double& t) {
  const bool pairs = opt_.real_space || exclusions_.any();
  if (call.sets) {
    Kokkos::deep_copy(set_real_, 0.0);
    realspace_.request_potentials(false);
  } else {
    realspace_.request_potentials(call.potentials, real_pot_);
    realspace_.request_sets(0);
  }
  if (s.use_list) {
    list_->begin(s.rebuild_list, call.positions, call.charges, call.ids, call.n,
                 exclusions_.offsets(), exclusions_.partners(), opt_.cutoff, list_skin_, opt_.alpha,
                 opt_.coulomb_constant);
    s.work = &list_->pairs();
  } else if (pairs) {
    Migration& rs = s.balanced ? *rs_migration_ : migration_;
    rs.exchange_ghosts(opt_.cutoff);
    if (call.sets) {
      route_set_ghosts(call.sets);
    } else {
      charge(Work::GhostAtoms, static_cast<double>(rs.n_ghost()));
    }
    t = timers_.lap("ghost_atoms", t);
    realspace_.request_row_work(s.balancing);
    realspace_.begin_local(rs, opt_.cutoff, opt_.alpha, opt_.coulomb_constant, s.balanced ? f_real_rs_ : f_real_,
                           opt_.real_space);
    s.work = &realspace_.pairs();
  } else if (!call.sets) {
    // No pairs: the charge sums the result needs (sets: reduce_sets has them).
    auto q = migration_.owned_charges();
    for (std::size_t i = 0; i < migration_.n_owned(); ++i) {
      s.local.sum_q += q(i);
      s.local.sum_q2 += q(i) * q(i);
    }
    if (call.potentials) Kokkos::deep_copy(real_pot_, 0.0);
  }
  if (!call.sets && (s.separate() || !pairs)) Kokkos::deep_copy(f_real_, 0.0);
}

// The mesh: the stencils once, then each set's spread, FFTs, solve and gather on
// the shared plans and buffers (one set: the owned charges into f_rec_).
std::vector<SolverResult> PMESolver::mesh(const Call& call, Overlap* overlap) {
  std::vector<SolverResult> res(static_cast<std::size_t>(std::max(call.sets, 1)));
  stencils();
  if (!call.sets) {
    reciprocal(migration_.owned_charges(), res.front(), f_rec_, overlap, call.potentials);
    return res;
  }
  for (int c = 0; c < call.sets; ++c) mesh_set(c, res[static_cast<std::size_t>(c)], overlap, call.potentials);
  return res;
}

// Total forces on the owned atoms and every set's sums in one Allreduce, the
// results from them.
void PMESolver::reduce(const Call& call, CallState& s, std::vector<SolverResult>& res, double& t) {
  std::vector<RealSpaceTerms> local;
  std::vector<double> f2;
  if (call.sets) {
    set_terms(res.size(), local, f2);
  } else {
    local.push_back(s.local);
    f2.push_back(total_forces(call, s, t));
  }
  reduce_results(res, local, f2, call.n, call.sets || !opt_.real_space ? nullptr : &s.local, s.pair_error);
  t = timers_.lap("reduce", t);
}

// One set: F = F_mesh + F_real on the owned atoms (in f_rec_), sum |F|^2; the
// list's forces are in the callers' order and are added there.
double PMESolver::total_forces(const Call& call, CallState& s, double& t) {
  auto fr = f_real_;
  auto fk = f_rec_;
  double f2 = 0;
  const std::size_t n_own = migration_.n_owned();
  parallel_reduce_locked(
      "pmewald::sum_forces", Range(0, n_own),
      KOKKOS_LAMBDA(const std::size_t i, double& acc) {
        for (int a = 0; a < 3; ++a) {
          fk(i, a) += fr(i, a);
          acc += fk(i, a) * fk(i, a);
        }
      },
      f2);
  charge(Work::Reduce, static_cast<double>(n_own));
  if (s.separate()) {
    migration_.reverse(fk.data(), 3, call.forces_out);
    f2 = 0;
    for (std::size_t i = 0; i < 3 * call.n; ++i) {
      call.forces_out[i] += f_list_[i];
      f2 += call.forces_out[i] * call.forces_out[i];
    }
    t = timers_.lap("migrate", t);
  }
  return f2;
}

// One Allreduce (sums and maxima together): per set the real-space terms' sums,
// reciprocal energy, virial and sum |F|^2, then the atom count (exact in a double
// below 2^53), then (one set) the pair loop's seconds and candidate pairs, summed
// and maximised for the balancer's imbalance, and the lowest rank whose pair loop
// found a problem (`pair_error`: the call then raises it on every rank here, the
// agreement the pair loop would otherwise make with a reduction of its own).
void PMESolver::reduce_results(std::vector<SolverResult>& res, const std::vector<RealSpaceTerms>& local,
                               const std::vector<double>& f2, std::size_t n, const RealSpaceTerms* pair_work,
                               const std::string& pair_error) {
  const std::size_t Ms = res.size();
  constexpr int kReal = RealSpace::kSums, kPer = kReal + 2 + Virial::kComponents;
  std::vector<double> sums(kPer * Ms + 3, 0.0), maxima(3, 0.0);
  if (pair_work) {
    sums[kPer * Ms + 1] = maxima[0] = pair_work->t_pairs;
    sums[kPer * Ms + 2] = maxima[1] = pair_work->candidates;
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(comm_.get(), &rank);
  MPI_Comm_size(comm_.get(), &size);
  if (!pair_error.empty()) maxima[2] = size - rank;
  for (std::size_t c = 0; c < Ms; ++c) {
    double* out = &sums[kPer * c];
    RealSpace::terms_to_sum(local[c], out);
    out[kReal] = res[c].terms["reciprocal"];
    for (int v = 0; v < Virial::kComponents; ++v) out[kReal + 1 + v] = res[c].virial[v];
    out[kPer - 1] = f2[c];
  }
  sums[kPer * Ms] = static_cast<double>(n);
  allreduce_sums_and_maxima(comm_.get(), sums, maxima);
  if (maxima[2] > 0) throw_error_of_rank(comm_.get(), size - static_cast<int>(maxima[2]), pair_error);
  const std::int64_t n_total = static_cast<std::int64_t>(sums[kPer * Ms]);
  pair_work_sums_[0] = sums[kPer * Ms + 1];
  pair_work_sums_[1] = sums[kPer * Ms + 2];
  pair_work_max_[0] = maxima[0];
  pair_work_max_[1] = maxima[1];
  for (std::size_t c = 0; c < Ms; ++c) {
    const double* in = &sums[kPer * c];
    const RealSpaceTerms terms = RealSpace::terms_from_sums(in, cell_, opt_.alpha, opt_.coulomb_constant);
    finish_result(res[c], in + kReal, terms, in[kPer - 1], n_total);
  }
}

// Forces (and potentials and fields) back to the callers' order.
void PMESolver::return_forces(const Call& call, const CallState& s, const std::vector<SolverResult>& res,
                              double& t) {
  if (call.sets) {
    migration_.reverse(set_f_.data(), 3 * call.sets, call.forces_out);
    if (call.potentials) assemble_set_potentials(res, call.n, call.potentials_out, call.fields_out);
    t = timers_.lap("migrate", t);
    return;
  }
  if (!s.separate()) {
    migration_.reverse(f_rec_.data(), 3, call.forces_out);
    charge(Work::Migrate, static_cast<double>(call.n));
    t = timers_.lap("migrate", t);
  }
  if (call.potentials) {
    assemble_potentials(res.front().sum_q, call.potentials_out, call.fields_out, call.n);
    t = timers_.lap("migrate", t);
  }
}

// A result from the reduced sums: rec[0] the reciprocal energy, rec[1..6] its
// virial; the real-space terms (with self and background), sum |F|^2, the atoms.
void PMESolver::finish_result(SolverResult& r, const double* rec, const RealSpaceTerms& terms, double sum_force2,
                              std::int64_t n_atoms) {
  r.terms["reciprocal"] = rec[0];
  r.terms["real"] = terms.real;
  r.terms["exclusion"] = terms.exclusion;
  r.terms["self"] = terms.self;
  r.terms["background"] = terms.background;
  r.energy = rec[0] + terms.energy();
  for (int k = 0; k < Virial::kComponents; ++k) r.virial[k] = rec[1 + k] + terms.virial[k];
  r.sum_force2 = sum_force2;
  r.sum_pair_force2 = terms.pair_force2;
  r.sum_q = terms.sum_q;
  r.sum_q2 = terms.sum_q2;
  r.n_atoms = n_atoms;
}

}  // namespace solver
}  // namespace pmewald
