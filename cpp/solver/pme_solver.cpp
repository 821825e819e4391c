// PMESolver: the options' checks, construction, the pair list and comm-mode
// configuration, set_box / set_skin / set_precision, compute (the order of the
// stages: migration, real space and its overlap with the mesh, the reductions,
// the result) and the timings. The mesh stages are in reciprocal_stages.cpp, the
// charge-sets call in charge_sets.cpp.
#include "solver/pme_solver.hpp"

#include <algorithm>
#include <cmath>
#include <new>
#include <sstream>

#include "geometry/decomposition.hpp"
#include "base/compute_model.hpp"
#include "base/errors.hpp"
#include "base/kokkos_runtime.hpp"

namespace pmewald {
inline namespace solver {

namespace {

constexpr int kMinOrder = 3, kMaxOrder = 10, kMaxMesh = 4096;

// Local validation of the options; "" when fine.
std::string check_options(const SolverOptions& o) {
  std::ostringstream why;
  const std::string box_problem = PeriodicCell::check(o.box.data());
  if (!box_problem.empty()) return "box: " + box_problem;
  if (o.order < kMinOrder || o.order > kMaxOrder)
    return "order must be between " + std::to_string(kMinOrder) + " and " + std::to_string(kMaxOrder) +
           ", got " + std::to_string(o.order);
  for (int d = 0; d < 3; ++d) {
    if (o.mesh[d] < o.order || o.mesh[d] > kMaxMesh) {
      why << "mesh must have between order (" << o.order << ") and " << kMaxMesh << " points per axis, got ("
          << o.mesh[0] << ", " << o.mesh[1] << ", " << o.mesh[2] << ")";
      return why.str();
    }
  }
  if (!(o.alpha > 0) || !std::isfinite(o.alpha)) return "alpha must be a positive finite number";
  if (!(o.coulomb_constant > 0) || !std::isfinite(o.coulomb_constant))
    return "coulomb_constant must be a positive finite number";
  if (!(o.cutoff > 0) || !std::isfinite(o.cutoff)) return "cutoff must be a positive finite number";
  if (!(o.skin >= 0) || !std::isfinite(o.skin)) return "skin must be a non-negative finite number";
  if (o.precision == PairPrecision::Mixed && o.real_space && !(o.alpha * o.cutoff < kMaxAlphaR))
    return "precision 'mixed' needs alpha * cutoff < 8 (the range of its erfc), got " +
           std::to_string(o.alpha * o.cutoff);
  if (o.overlap_poll.poll_rows < 1) return "overlap poll_rows must be at least 1";
  if (!(o.overlap_poll.poll_seconds > 0) || !std::isfinite(o.overlap_poll.poll_seconds))
    return "overlap poll interval must be a positive finite number of seconds";
  const PeriodicCell cell(o.box.data());
  if (o.cutoff > 0.5 * cell.min_height() * (1 + 1e-12)) {
    why << "cutoff " << o.cutoff << " is longer than half the smallest cell height ("
        << 0.5 * cell.min_height() << ")";
    return why.str();
  }
  return "";
}

std::vector<double> options_fingerprint(const SolverOptions& o) {
  std::vector<double> v(o.box.begin(), o.box.end());
  v.insert(v.end(), {double(o.mesh[0]), double(o.mesh[1]), double(o.mesh[2]), double(o.order), o.alpha, o.cutoff,
                     double(static_cast<int>(o.differentiation)), double(static_cast<int>(o.mode)),
                     o.coulomb_constant, o.real_space ? 1.0 : 0.0, o.choose_mode ? 1.0 : 0.0,
                     o.overlap ? (*o.overlap ? 1.0 : 0.0) : -1.0, double(o.overlap_poll.poll_rows),
                     o.overlap_poll.poll_seconds, o.skin, double(static_cast<int>(o.precision))});
  return v;
}

}  // namespace

PMESolver::PMESolver(MPI_Comm comm, const SolverOptions& options)
    : comm_(comm), opt_(options), migration_(comm_.get()), exclusions_(comm_.get()), realspace_(comm_.get()) {
  ensure_kokkos_initialized();
  agree_or_throw(comm_.get(), check_options(opt_));
  if (!same_on_all_ranks(comm_.get(), options_fingerprint(opt_)))
    throw ValueError("PME parameters differ between ranks: every rank must pass the same box, cutoff, mesh, "
                     "order, alpha, differentiation, comm_mode, coulomb_constant, real_space and overlap");
  configure_overlap();
  realspace_.set_precision(opt_.precision);
  cell_ = PeriodicCell(opt_.box.data());
  recip_ = reciprocal_of(opt_.box);
  const int P = comm_.size(), me = comm_.rank();
  const Int3 grid = processor_grid_3d(P, opt_.mesh);
  for (int r = 0; r < P; ++r) bricks_.push_back(brick_box(grid, opt_.mesh, r));
  halo_ = std::make_unique<Halo>(comm_.get(), bricks_, opt_.mesh, opt_.order - 1, opt_.mode);
  // The real grids are the FFT's storage: it reads and writes their interior.
  // One rank: a single 3-D r2c plan, halving z (the contiguous axis: measured
  // faster); across ranks the r2c runs in the x-pencils, halving x.
  const int halved = P == 1 ? 2 : 0;
  RealFFTOptions fft_options;
  fft_options.mode = opt_.mode;
  fft_options.fftw_flags = opt_.fftw_flags;
  fft_options.in_storage = halo_->extended();
  fft_options.halved_axis = halved;
  fft_ = std::make_unique<RealFFT3d>(comm_.get(), opt_.mesh, bricks_[me],
                                     RealFFT3d::z_pencil_box(opt_.mesh, P, me, halved), fft_options);
  // The rest is local and holds most of the memory: a failure here (out of memory
  // on one rank) is agreed, so no rank is left in a later collective.
  std::string err;
  try {
    SpectrumLayout layout;
    layout.half_axis = halved;
    layout.unnormalised_backward = true;
    kspace_ = std::make_unique<KSpaceSolver>(opt_.box, opt_.mesh, opt_.alpha, opt_.order, opt_.coulomb_constant,
                                             fft_->outbox(), kCOrder, layout);
    migration_.set_geometry(cell_, opt_.mesh);
    configure_list();

    const Int3 e = halo_->extended().shape();
    grid_ = View3<double>("pme_grid", e[0], e[1], e[2]);
    kspace_c_ = View1<Complex>("pme_kspace_c", fft_->outbox().volume());
    if (opt_.differentiation == Differentiation::IK) {
      for (int a = 0; a < 3; ++a) {
        field_[a] = View3<double>("pme_field", e[0], e[1], e[2]);
        kfield_[a] = View1<Complex>("pme_kfield", fft_->outbox().volume());
      }
    }
  } catch (const std::bad_alloc&) {
    err = "out of memory: could not allocate the solver's grids on this rank";
  } catch (const std::exception& e) {
    err = std::string("could not set up the solver's grids on this rank: ") + e.what();
  }
  agree_or_throw(comm_.get(), err);
}

void PMESolver::configure_overlap() {
  const bool on = opt_.overlap.value_or(opt_.mode != CommMode::Pt2Pt);
  if (!on)
    overlap_.reset();
  else if (!overlap_)
    overlap_ = std::make_unique<Overlap>(opt_.overlap_poll);
}

void PMESolver::configure_list() {
  // cutoff + skin <= half the smallest height: the ghosts' reach (one image per pair).
  list_skin_ = opt_.real_space ? std::min(opt_.skin, 0.5 * cell_.min_height() - opt_.cutoff) : 0.0;
  if (!(list_skin_ > 0)) list_skin_ = 0;
  if (list_skin_ > 0 && !list_) list_ = std::make_unique<PairList>(comm_.get());
  if (list_) {
    list_->set_geometry(cell_, opt_.mesh);
    list_->set_precision(opt_.precision);
  }
}

void PMESolver::adopt(const SolverOptions& next, const char* differs) {
  ensure_kokkos_initialized();  // this thread may run kernels (base/kokkos_runtime.hpp)
  agree_or_throw(comm_.get(), check_options(next));
  if (!same_on_all_ranks(comm_.get(), options_fingerprint(next))) throw ValueError(differs);
  opt_ = next;
}

void PMESolver::set_skin(double skin) {
  SolverOptions next = opt_;
  next.skin = skin;
  adopt(next, "set_skin: the skin differs between ranks");
  configure_list();
}

void PMESolver::set_precision(PairPrecision precision) {
  SolverOptions next = opt_;
  next.precision = precision;
  adopt(next, "set_precision: the precision differs between ranks");
  realspace_.set_precision(precision);
  if (list_) list_->set_precision(precision);
}

void PMESolver::set_box(const Mat3& box) {
  SolverOptions next = opt_;
  next.box = box;
  adopt(next, "set_box: the box differs between ranks");
  cell_ = PeriodicCell(opt_.box.data());
  recip_ = reciprocal_of(opt_.box);
  kspace_->set_box(opt_.box);
  migration_.set_geometry(cell_, opt_.mesh);
  configure_list();
}

double PMESolver::lap(const char* phase, double start) {
  const double now = wall_seconds();
  const double hidden = overlap_ ? overlap_->stats().work_seconds : 0;
  timers_.add(phase, now - start - (hidden - hidden_mark_));
  hidden_mark_ = hidden;
  return now;
}

SolverResult PMESolver::compute(const double* positions, const double* charges, const std::int64_t* ids,
                                std::size_t n, const std::int64_t* exclusions, std::size_t m,
                                double* forces_out, bool potentials, double* potentials_out, double* fields_out) {
  ensure_kokkos_initialized();  // this thread may run kernels (base/kokkos_runtime.hpp)
  SolverResult res;
  if (opt_.choose_mode && !modes_done_) choose_mode();
  double t = wall_seconds();
  // Exclusions are routed to the ranks holding their atoms (cached while the
  // ids and pairs do not change) and travel with the atoms as payload.
  exclusions_.update(ids, n, exclusions, m);
  charge(Work::Exclusions, static_cast<double>(n));
  t = timers_.lap("exclusions", t);
  // With a pair list the real-space atoms keep their owners between rebuilds (the
  // list's own migration); this one is the reciprocal part's, by current position.
  // The list's rebuild vote rides on its Allreduce.
  // A call with potentials searches afresh (the list's sweep has no potentials
  // pass); exclusions changed in such a call make the list's next call rebuild.
  const bool use_list = list_skin_ > 0 && !potentials;
  if (list_skin_ > 0 && potentials && exclusions_.changed()) list_stale_ = true;
  int vote = 0;
  if (use_list) {
    vote = list_->vote(positions, ids, n, list_skin_) | (exclusions_.changed() || list_stale_ ? 1 : 0);
    list_stale_ = false;
    t = timers_.lap("real_space", t);
    migration_.forward(positions, charges, ids, n, nullptr, nullptr, vote);
  } else {
    migration_.forward(positions, charges, ids, n, exclusions_.offsets(), exclusions_.partners());
  }
  charge(Work::Migrate, static_cast<double>(n));
  t = timers_.lap("migrate", t);
  const std::size_t n_own = migration_.n_owned();
  force_views(n_own);
  if (potentials) potential_views(n_own);
  realspace_.request_potentials(potentials, real_pot_);
  realspace_.request_sets(0);
  // Real space: pairs (or, with real_space off, only the exclusion corrections),
  // in pieces: before the reciprocal part, or (overlap) while its exchanges are in
  // flight; the ghost forces' return and the error agreement after it.
  const bool pairs = opt_.real_space || exclusions_.any();
  RealSpaceTerms local;
  Overlap* overlap = nullptr;
  BackgroundWork* work = nullptr;
  if (use_list) {
    list_->begin(migration_.agreed_vote() != 0, positions, charges, ids, n, exclusions_.offsets(),
                 exclusions_.partners(), opt_.cutoff, list_skin_, opt_.alpha, opt_.coulomb_constant);
    work = &list_->pairs();
  } else if (pairs) {
    migration_.exchange_ghosts(opt_.cutoff);
    charge(Work::GhostAtoms, static_cast<double>(migration_.n_ghost()));
    t = timers_.lap("ghost_atoms", t);
    realspace_.begin_local(migration_, opt_.cutoff, opt_.alpha, opt_.coulomb_constant, f_real_, opt_.real_space);
    work = &realspace_.pairs();
  } else {
    auto q = migration_.owned_charges();
    for (std::size_t i = 0; i < n_own; ++i) {
      local.sum_q += q(i);
      local.sum_q2 += q(i) * q(i);
    }
    if (potentials) Kokkos::deep_copy(real_pot_, 0.0);
  }
  overlap = start_work(work, t);
  if (use_list || !pairs) Kokkos::deep_copy(f_real_, 0.0);
  const double hidden0 = overlap_ ? overlap_->stats().work_seconds : 0;
  stencils();
  reciprocal(migration_.owned_charges(), res, f_rec_, overlap, potentials);
  t = wall_seconds();
  if (work) {
    if (use_list) {
      f_list_.resize(3 * n);
      local = list_->finish(f_list_.data());
    } else {
      local = realspace_.finish_local();
    }
    stop_work(overlap, hidden0);
    t = timers_.lap("real_space", t);
  }
  // The real-space terms are summed over ranks below, with the reciprocal ones.

  // Total forces on owned atoms, global sums, and forces back to the callers.
  auto fr = f_real_;
  auto fk = f_rec_;
  double f2 = 0;
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
  if (use_list) {
    // The list's forces are in the caller's order: add them there.
    migration_.reverse(fk.data(), 3, forces_out);
    f2 = 0;
    for (std::size_t i = 0; i < 3 * n; ++i) {
      forces_out[i] += f_list_[i];
      f2 += forces_out[i] * forces_out[i];
    }
    t = timers_.lap("migrate", t);
  }
  // One Allreduce: the real-space terms' sums, reciprocal energy, virial, sum |F|^2
  // and the atom count (exact in a double below 2^53).
  constexpr int kReal = RealSpace::kSums, kSums = kReal + 3 + Virial::kComponents;
  double sums[kSums];
  RealSpace::terms_to_sum(local, sums);
  sums[kReal] = res.terms["reciprocal"];
  for (int k = 0; k < Virial::kComponents; ++k) sums[kReal + 1 + k] = res.virial[k];
  sums[kSums - 2] = f2;
  sums[kSums - 1] = static_cast<double>(n);
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, sums, kSums, MPI_DOUBLE, MPI_SUM, comm_.get()), "MPI_Allreduce");
  const RealSpaceTerms terms = RealSpace::terms_from_sums(sums, cell_, opt_.alpha, opt_.coulomb_constant);
  const std::int64_t n_total = static_cast<std::int64_t>(sums[kSums - 1]);
  t = timers_.lap("reduce", t);
  if (!use_list) {
    migration_.reverse(fk.data(), 3, forces_out);
    charge(Work::Migrate, static_cast<double>(n));
    t = timers_.lap("migrate", t);
  }
  if (potentials) {
    assemble_potentials(terms.sum_q, potentials_out, fields_out, n);
    t = timers_.lap("migrate", t);
  }

  finish_result(res, &sums[kReal], terms, sums[kSums - 2], n_total);
  timers_.count("calls");
  return res;
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

Overlap* PMESolver::start_work(BackgroundWork* work, double& t) {
  if (!work) return nullptr;
  Overlap* overlap = nullptr;
  if (overlap_) {
    overlap = overlap_.get();
    overlap->set_work(work);
  } else {
    work->run_rest();
  }
  t = timers_.lap("real_space", t);
  return overlap;
}

void PMESolver::stop_work(Overlap* overlap, double hidden0) {
  if (!overlap) return;
  overlap->set_work(nullptr);
  timers_.add("real_space", overlap_->stats().work_seconds - hidden0);
}

std::map<std::string, double> PMESolver::timings() const {
  std::map<std::string, double> out = timers_.all();
  // Communication detail of the FFT remaps and the halo.
  for (int t = 0; t < RealFFT3d::kRemaps; ++t)
    for (Direction d : {Direction::Forward, Direction::Reverse}) {
      const ExchangeStats& s = fft_->remap_stats(t, d);
      out["fft_comm_wait"] += s.wait_seconds;
      out["fft_pack_unpack"] += s.pack_seconds + s.unpack_seconds + s.self_seconds;
      out["fft_messages"] += static_cast<double>(s.messages_sent);
      out["fft_bytes"] += static_cast<double>(s.bytes_sent);
      out["overlap_test_seconds"] += s.test_seconds;
    }
  out["fft_1d"] = fft_->fft_seconds(Direction::Forward) + fft_->fft_seconds(Direction::Reverse);
  // Transforms that had to copy the grid (alignment): 0 is the design.
  out["fft_unaligned_copies"] = static_cast<double>(fft_->unaligned_copies());
  for (Direction d : {Direction::Forward, Direction::Reverse}) {
    const ExchangeStats& s = halo_->executor().stats(d);
    out["ghost_comm_wait"] += s.wait_seconds;
    out["ghost_messages"] += static_cast<double>(s.messages_sent);
    out["ghost_bytes"] += static_cast<double>(s.bytes_sent);
    out["overlap_test_seconds"] += s.test_seconds;
  }
  // The atoms' messages: migration (to owners and back) and ghost atoms (and forces).
  out["migrate_messages"] = static_cast<double>(migration_.migration_traffic().messages);
  out["migrate_bytes"] = static_cast<double>(migration_.migration_traffic().bytes);
  out["ghost_atoms_messages"] = static_cast<double>(migration_.ghost_traffic().messages);
  out["ghost_atoms_bytes"] = static_cast<double>(migration_.ghost_traffic().bytes);
  if (list_) {
    // The pair list's own migration (at builds; displacements between them) and ghosts.
    const Migration& lm = list_->migration();
    out["migrate_messages"] += static_cast<double>(lm.migration_traffic().messages);
    out["migrate_bytes"] += static_cast<double>(lm.migration_traffic().bytes);
    out["ghost_atoms_messages"] += static_cast<double>(lm.ghost_traffic().messages);
    out["ghost_atoms_bytes"] += static_cast<double>(lm.ghost_traffic().bytes);
    const PairList::Stats& ls = list_->stats();
    out["pair_list_builds"] = ls.builds;
    out["pair_list_build"] = ls.build_seconds;
    out["pair_list_refresh"] = ls.refresh_seconds;
    out["pair_list_evaluate"] = ls.evaluate_seconds;
  }
  // The reciprocal part's communication left exposed (inside MPI, not computing),
  // and with overlap what was hidden behind the pair loop, and the polling's cost.
  out["comm_wait"] = out["fft_comm_wait"] + out["ghost_comm_wait"];
  if (overlap_) {
    const OverlapStats& o = overlap_->stats();
    out["comm_hidden"] = o.work_seconds;
    out["overlap_exchanges"] = static_cast<double>(o.exchanges);
    out["overlap_hidden_exchanges"] = static_cast<double>(o.hidden_exchanges);
    out["overlap_polls"] = static_cast<double>(o.polls);
    out["overlap_poll_seconds"] = out["overlap_test_seconds"];  // inside MPI_Test*: the polling's cost
    out["overlap_progress_seconds"] = o.poll_seconds;           // the progress calls with their unpacks
    out["overlap_finish_wait"] = o.finish_seconds;
  }
  if (!overlap_) out.erase("overlap_test_seconds");
  if (modes_.measured)
    for (CommMode m : {CommMode::Pt2Pt, CommMode::Nonblocking, CommMode::Collective})
      out[std::string("auto_") + comm_mode_name(m)] = modes_.seconds[static_cast<int>(m)];
  return out;
}

void PMESolver::reset_timings() {
  timers_.reset();
  if (overlap_) overlap_->reset_stats();
  hidden_mark_ = 0;
  fft_->reset_stats();
  halo_->reset_stats();
  migration_.reset_traffic();
  if (list_) list_->reset_stats();
}

}  // namespace solver
}  // namespace pmewald
