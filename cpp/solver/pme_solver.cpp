// PMESolver: the options' checks, construction, the pair list and comm-mode
// configuration, set_box / set_skin / set_precision, the overlap's start and stop
// and the timings. The call path of compute and compute_sets (its stages in
// order) is in compute_call.cpp, the mesh stages in reciprocal_stages.cpp, the
// charge sets' own stages in charge_sets.cpp.
#include "solver/pme_solver.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
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
  if (!(o.balance.threshold >= 1) || !std::isfinite(o.balance.threshold))
    return "balance threshold must be a finite number of at least 1";
  if (!(o.balance.relax > 0 && o.balance.relax <= 1)) return "balance relax must be in (0, 1]";
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
                     o.overlap_poll.poll_seconds, o.skin, double(static_cast<int>(o.precision)),
                     double(static_cast<int>(o.ghost_exchange)), double(static_cast<int>(o.balance.mode)),
                     double(static_cast<int>(o.balance.work)), o.balance.threshold, o.balance.relax,
                     double(static_cast<int>(o.pair_layout)), o.choose_layout ? 1.0 : 0.0});
  return v;
}

}  // namespace

PMESolver::PMESolver(MPI_Comm comm, const SolverOptions& options)
    : comm_(comm), opt_(options), migration_(comm_.get()), exclusions_(comm_.get()), realspace_(comm_.get()) {
  ensure_kokkos_initialized();
  agree_or_throw(comm_.get(), check_options(opt_));
  if (!same_on_all_ranks(comm_.get(), options_fingerprint(opt_)))
    throw ValueError("PME parameters differ between ranks: every rank must pass the same box, cutoff, mesh, "
                     "order, alpha, differentiation, comm_mode, coulomb_constant, real_space, overlap, "
                     "ghost_exchange and balance");
  configure_overlap(default_variant(opt_.mode, opt_.overlap).overlap);
  realspace_.set_precision(opt_.precision);
  cell_ = PeriodicCell(opt_.box.data());
  recip_ = reciprocal_of(opt_.box);
  const int P = comm_.size();
  const Int3 grid = processor_grid_3d(P, opt_.mesh);
  for (int r = 0; r < P; ++r) bricks_.push_back(brick_box(grid, opt_.mesh, r));
  halo_ = std::make_unique<Halo>(comm_.get(), bricks_, opt_.mesh, opt_.order - 1, opt_.mode);
  // The real grids are the FFT's storage: it reads and writes their interior.
  fft_ = make_fft(opt_.fftw_flags);
  // The rest is local and holds most of the memory: a failure here (out of memory
  // on one rank) is agreed, so no rank is left in a later collective.
  std::string err;
  try {
    SpectrumLayout layout;
    layout.half_axis = halved_axis();
    layout.unnormalised_backward = true;
    kspace_ = std::make_unique<KSpaceSolver>(opt_.box, opt_.mesh, opt_.alpha, opt_.order, opt_.coulomb_constant,
                                             fft_->outbox(), kCOrder, layout);
    migration_.set_geometry(cell_, opt_.mesh);
    migration_.set_ghost_exchange(ghost_exchange_for(migration_.domains(), opt_.cutoff));
    balancer_ = std::make_unique<Balancer>(comm_.get(), grid, opt_.mesh, opt_.balance);
    if (balancer_->on()) rs_migration_ = std::make_unique<Migration>(comm_.get());
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
  // comm_mode "auto": the first calls try the variants (on one rank nothing to try: the default).
  if (opt_.choose_mode && P > 1)
    trial_ = ModeTrial(ModeTrial::candidates(opt_.overlap), default_variant(opt_.mode, opt_.overlap));
}

std::unique_ptr<RealFFT3d> PMESolver::make_fft(unsigned fftw_flags) const {
  const int P = comm_.size(), me = comm_.rank();
  const int halved = halved_axis();
  RealFFTOptions fft_options;
  fft_options.mode = opt_.mode;
  fft_options.fftw_flags = fftw_flags;
  fft_options.in_storage = halo_->extended();
  fft_options.halved_axis = halved;
  const Box3 outbox = RealFFT3d::z_pencil_box(opt_.mesh, P, me, halved);
  auto fft = std::make_unique<RealFFT3d>(comm_.get(), opt_.mesh, bricks_[me], outbox, fft_options);
  // (FFTW_ESTIMATE: no timing, the in-place read; runs stay reproducible bit for bit.)
  if (P == 1 || (fftw_flags & FFTW_ESTIMATE)) return fft;
  int in_place = fft->real_x_order() == kCOrder && !fft->inbox().empty() ? 1 : 0, any = 0;
  check_mpi(MPI_Allreduce(&in_place, &any, 1, MPI_INT, MPI_MAX, comm_.get()), "MPI_Allreduce");
  if (!any) return fft;
  fft_options.contiguous_real_x = true;
  auto copied = std::make_unique<RealFFT3d>(comm_.get(), opt_.mesh, bricks_[me], outbox, fft_options);
  // A forward and an unscaled backward transform of zeros, each variant in turn, three
  // rounds after one untimed each; this rank's faster round counts.
  std::vector<double> real(static_cast<std::size_t>(std::max<std::int64_t>(fft->in_storage().volume(), 1)), 0.0);
  std::vector<Complex> spectrum(static_cast<std::size_t>(std::max<std::int64_t>(fft->outbox().volume(), 1)));
  std::vector<double> best(2, std::numeric_limits<double>::infinity()), slowest;
  for (int round = 0; round < 4; ++round)
    for (std::size_t v = 0; v < 2; ++v) {
      RealFFT3d& f = v == 0 ? *fft : *copied;
      const double t0 = wall_seconds();
      f.forward(real.data(), spectrum.data());
      f.backward_destroying_input(spectrum.data(), real.data(), false);
      if (round > 0) best[v] = std::min(best[v], wall_seconds() - t0);
    }
  auto& kept = fastest_on_the_slowest_rank(comm_.get(), best, slowest) == 1 ? copied : fft;
  kept->reset_stats();
  return std::move(kept);
}

void PMESolver::set_fftw_flags(unsigned fftw_flags) {
  if (!same_on_all_ranks(comm_.get(), {static_cast<double>(fftw_flags)}))
    throw ValueError("set_planner: the planner differs between ranks");
  if (fftw_flags == opt_.fftw_flags) return;
  // Planning may overwrite the grids: they hold nothing between calls. The new
  // plans take over the mode in use (a measured "auto" mode included).
  fft_ = make_fft(fftw_flags);
  opt_.fftw_flags = fftw_flags;
}

void PMESolver::configure_overlap(bool on) {
  overlap_on_ = on;
  if (on && !overlap_) overlap_ = std::make_unique<Overlap>(opt_.overlap_poll);
}

void PMESolver::use_variant(const CommVariant& v) {
  halo_->set_mode(v.mode);
  fft_->set_mode(v.mode);
  opt_.mode = v.mode;
  configure_overlap(v.overlap);
}

void PMESolver::configure_list() {
  // cutoff + skin <= half the smallest height: the ghosts' reach (one image per pair).
  list_skin_ = opt_.real_space ? std::min(opt_.skin, 0.5 * cell_.min_height() - opt_.cutoff) : 0.0;
  if (!(list_skin_ > 0)) list_skin_ = 0;
  if (list_skin_ > 0 && !list_) list_ = std::make_unique<PairList>(comm_.get());
  if (list_) {
    list_->set_geometry(cell_, opt_.mesh);
    list_->set_precision(opt_.precision);
    // choose_layout: a trial from the list's first call, unless one has run or runs
    // (set_box and set_skin keep its winner), and only where clusters can evaluate.
    if (opt_.choose_layout && !layout_trial_.running() && !layout_trial_.measured() &&
        opt_.alpha * opt_.cutoff < kMaxAlphaR)
      layout_trial_ = LayoutTrial::started();
    list_->set_layout(layout_trial_.measured() ? layout_trial_.best() : opt_.pair_layout);
    list_->set_ghost_exchange(ghost_exchange_for(migration_.domains(), opt_.cutoff + list_skin_));
  }
  apply_domains();
}

void PMESolver::apply_domains() {
  if (!balancer_ || !balancer_->moved()) return;  // (on the bricks: migration_'s, the list's own)
  const DomainGrid& dom = balancer_->domains();
  rs_migration_->set_domains(cell_, dom);
  rs_migration_->set_ghost_exchange(ghost_exchange_for(dom, opt_.cutoff));
  if (list_) {
    list_->set_domains(cell_, dom);
    list_->set_ghost_exchange(ghost_exchange_for(dom, opt_.cutoff + list_skin_));
  }
}

Migration::GhostExchange PMESolver::ghost_exchange_for(const DomainGrid& domains, double radius) const {
  switch (opt_.ghost_exchange) {
    case GhostExchangeChoice::Direct:
      return Migration::GhostExchange::Direct;
    case GhostExchangeChoice::Staged:
      return Migration::GhostExchange::Staged;
    case GhostExchangeChoice::Auto:
      break;
  }
  std::array<double, 3> reach{};
  for (int d = 0; d < 3; ++d) reach[d] = radius / cell_.height[d] * domains.resolution()[d];
  return staged_preferred(domains, reach) ? Migration::GhostExchange::Staged : Migration::GhostExchange::Direct;
}

Migration::GhostExchange PMESolver::ghost_exchange_used() const {
  if (list_) return list_->migration().ghost_exchange();
  return rs_migration_ ? rs_migration_->ghost_exchange() : migration_.ghost_exchange();
}

const DomainGrid& PMESolver::realspace_domains() const {
  return rs_migration_ ? rs_migration_->domains() : migration_.domains();
}

void PMESolver::adopt(const SolverOptions& next, const char* differs) {
  ensure_kokkos_initialized();  // this thread may run kernels (base/kokkos_runtime.hpp)
  agree_or_throw(comm_.get(), check_options(next));
  if (!same_on_all_ranks(comm_.get(), options_fingerprint(next))) throw ValueError(differs);
  opt_ = next;
}

void PMESolver::set_comm_mode(CommMode mode, std::optional<bool> overlap) {
  SolverOptions next = opt_;
  next.mode = mode;
  next.overlap = overlap;
  next.choose_mode = false;
  adopt(next, "set_comm_mode: the mode or overlap differs between ranks");
  trial_ = ModeTrial{};
  use_variant(default_variant(mode, overlap));
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

void PMESolver::set_pair_layout(PairLayout layout, bool choose) {
  SolverOptions next = opt_;
  next.pair_layout = layout;
  next.choose_layout = choose;
  adopt(next, "set_pair_layout: the layout differs between ranks");
  layout_trial_ = LayoutTrial{};
  configure_list();
}

void PMESolver::set_box(const Mat3& box) {
  SolverOptions next = opt_;
  next.box = box;
  adopt(next, "set_box: the box differs between ranks");
  cell_ = PeriodicCell(opt_.box.data());
  recip_ = reciprocal_of(opt_.box);
  kspace_->set_box(opt_.box);
  migration_.set_geometry(cell_, opt_.mesh);
  migration_.set_ghost_exchange(ghost_exchange_for(migration_.domains(), opt_.cutoff));
  configure_list();
}

double PMESolver::lap(const char* phase, double start) {
  const double now = wall_seconds();
  const double hidden = overlap_ ? overlap_->stats().work_seconds : 0;
  timers_.add(phase, now - start - (hidden - hidden_mark_));
  hidden_mark_ = hidden;
  return now;
}

Overlap* PMESolver::start_work(BackgroundWork* work, double& t) {
  if (!work) return nullptr;
  Overlap* overlap = nullptr;
  if (overlap_on_) {
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
  // 1 where make_fft timed the x-fastest copy before the r2c faster (and kept it).
  out["fft_contiguous_real_x"] = fft_->options().contiguous_real_x ? 1.0 : 0.0;
  out["fft_paired_real_lines"] = fft_->paired_real_lines() ? 1.0 : 0.0;
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
  if (rs_migration_) {
    out["migrate_messages"] += static_cast<double>(rs_migration_->migration_traffic().messages);
    out["migrate_bytes"] += static_cast<double>(rs_migration_->migration_traffic().bytes);
    out["ghost_atoms_messages"] += static_cast<double>(rs_migration_->ghost_traffic().messages);
    out["ghost_atoms_bytes"] += static_cast<double>(rs_migration_->ghost_traffic().bytes);
  }
  // The real-space imbalance: slowest / mean pair-loop seconds over the calls
  // (and the last call's, by pairs and by time), the re-balances.
  const Balancer::Stats& bs = balancer_->stats();
  out["real_space_pair_loop"] = bs.my_seconds;  // this rank's (the imbalance's input)
  out["real_space_candidates"] = bs.my_pairs;
  out["real_space_slowest"] = bs.max_seconds;
  out["real_space_mean"] = bs.mean_seconds;
  out["real_space_imbalance"] = bs.mean_seconds > 0 ? bs.max_seconds / bs.mean_seconds : 1.0;
  out["real_space_pairs_imbalance"] = bs.mean_pairs > 0 ? bs.max_pairs / bs.mean_pairs : 1.0;
  out["real_space_imbalance_last"] = bs.last_time_imbalance;
  out["real_space_pairs_imbalance_last"] = bs.last_pairs_imbalance;
  out["balance_rebalances"] = bs.rebalances;
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
  if (trial_.measured())  // comm_mode "auto": each candidate's seconds per call (the slowest rank's)
    for (std::size_t c = 0; c < trial_.variants().size(); ++c)
      out["auto_" + trial_.variants()[c].name()] = trial_.seconds()[c];
  return out;
}

void PMESolver::reset_timings() {
  timers_.reset();
  if (overlap_) overlap_->reset_stats();
  hidden_mark_ = 0;
  fft_->reset_stats();
  halo_->reset_stats();
  migration_.reset_traffic();
  if (rs_migration_) rs_migration_->reset_traffic();
  balancer_->reset_stats();
  if (list_) list_->reset_stats();
}

}  // namespace solver
}  // namespace pmewald
