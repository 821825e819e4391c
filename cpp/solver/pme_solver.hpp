// The PME solver: owns the plans, buffers and timers of one (box, mesh, order,
// alpha) set-up and runs one compute call as the design's data flow describes:
// migrate atoms to owners -> B-spline stencils -> spread onto the ghosted brick
// -> halo reduce -> forward real-to-complex FFT (brick -> half-spectrum
// z-pencils, read straight from the ghosted grid) -> k-space solve (energy,
// virial; the 1/N of the backward transform folded into its factors) ->
// unnormalised backward c2r FFT(s) straight into the grid -> halo fill -> gather forces; real-space pairs
// from a cell list with ghost atoms; exclusion, self and background terms;
// forces returned to the callers' ranks in their order; energies and virial
// reduced over ranks.
//
// Overlap (options.overlap): the pair loop runs in pieces while the reciprocal
// part's exchanges are in flight (comm/overlap.hpp), with the same results. Without
// it the pairs run first, then the reciprocal part. comm_mode "auto"
// (options.choose_mode): the first computes run the modes, with and without
// overlap, in turn and keep the fastest (mode_choice.hpp); a new solver (new
// plans) measures again, set_box (same plans) does not.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicators.hpp"
#include "comm/mpi_helpers.hpp"
#include "comm/exchange.hpp"
#include "fft/rfft3d.hpp"
#include "comm/halo.hpp"
#include "comm/overlap.hpp"
#include "base/fftw_planner.hpp"
#include "base/kokkos_types.hpp"
#include "geometry/lattice.hpp"
#include "pme/differentiation.hpp"
#include "particles/balance.hpp"
#include "particles/migration.hpp"
#include "realspace/pair_list.hpp"
#include "realspace/realspace.hpp"
#include "solver/layout_choice.hpp"
#include "solver/mode_choice.hpp"
#include "pme/kspace_solve.hpp"
#include "pme/spread.hpp"
#include "base/timers.hpp"
#include "base/virial.hpp"

namespace pmewald {
inline namespace solver {

// How the ghost atoms travel (particles/migration.hpp, particles/staged_ghosts.hpp);
// Auto picks per Migration by the geometry (staged_preferred).
enum class GhostExchangeChoice : int { Direct = 0, Staged = 1, Auto = 2 };

struct SolverOptions {
  Mat3 box{};  // rows are lattice vectors
  Int3 mesh{0, 0, 0};
  int order = 5;
  double alpha = 0;
  double cutoff = 0;
  Differentiation differentiation = Differentiation::AD;
  CommMode mode = CommMode::Nonblocking;  // with choose_mode: the warm-up call's mode
  bool choose_mode = false;               // comm_mode "auto" (mode_choice.hpp)
  // Hide the reciprocal exchanges behind the pair loop; unset: where measured not
  // slower, i.e. in the nonblocking and collective modes, not in pt2pt (whose
  // blocking sends leave nothing to hide; docs/overlap.md), and with choose_mode
  // as the trial finds fastest.
  std::optional<bool> overlap;
  OverlapSettings overlap_poll;           // its progress-call intervals
  double coulomb_constant = 1.0;
  bool real_space = true;
  // Real-space pair list reused across calls (realspace/pair_list.hpp) with this
  // skin (length units); 0: a fresh search every call. Used with real_space only,
  // and limited to half the smallest cell height minus the cutoff (skin_used()).
  double skin = 0;
  // The erfc pair kernel's precision (realspace/pair_kernel.hpp): Mixed needs
  // alpha * cutoff < 8. Potentials and fields are computed in double either way.
  PairPrecision precision = PairPrecision::Double;
  // How the reused pair list (skin > 0) evaluates its pairs (realspace/pair_list.hpp):
  // atom by atom, or as 4 x 4 cluster blocks. The same pairs either way. With
  // choose_layout (pair_layout "auto"), the faster of the two on the first list calls
  // (layout_choice.hpp), from pair_layout.
  PairLayout pair_layout = PairLayout::Atoms;
  bool choose_layout = false;
  // FFTW's planning rigour for the mesh FFTs (FFTW_MEASURE, or what
  // PMEWALD_FFTW_PLANNER says: base/fftw_planner.hpp). FFTW_ESTIMATE makes runs
  // reproducible bit for bit; each rank plans its own transforms.
  unsigned fftw_flags = fftw_planner_flags();
  // How the ghost atoms travel: directly to every domain within the cutoff, staged
  // through the neighbours axis by axis, or Auto (by the geometry, per decomposition).
  GhostExchangeChoice ghost_exchange = GhostExchangeChoice::Auto;
  // Real-space load balancing (particles/balance.hpp): off by default. On, the
  // real-space part of compute() (without potentials) runs on its own balanced
  // domains, the mesh part on the mesh's bricks as before; compute_sets and calls
  // with potentials run it on the bricks.
  BalanceSettings balance;
};

struct SolverResult {
  double energy = 0;
  std::map<std::string, double> terms;  // real, reciprocal, self, background, exclusion
  Virial virial;                        // W = -dE/d(eps); virial.matrix() is the 3x3
  double sum_force2 = 0;                // sum over all atoms of |F_i|^2
  double sum_pair_force2 = 0;           // mixed precision: sum over the erfc pairs of |f_pair|^2 (else 0)
  double sum_q = 0, sum_q2 = 0;
  std::int64_t n_atoms = 0;
};

class PMESolver {
 public:
  // Collective over `comm` (duplicated). Options must agree on every rank
  // (checked collectively: ValueError on every rank otherwise).
  PMESolver(MPI_Comm comm, const SolverOptions& options);

  // Collective. positions n x 3, charges n, ids n (global identities),
  // exclusions m x 2 id pairs (any rank). forces_out n x 3 in input order.
  //
  // potentials (must agree over the ranks): also potentials_out (n), the
  // electrostatic potential phi_i = dE/dq_i of every term (real pairs, reciprocal
  // mesh, self -2 k alpha/sqrt(pi) q_i, background -k pi Q/(V alpha^2), exclusion
  // corrections), and fields_out (n x 3), the field at each atom: real-space terms
  // from the partners' charges, the mesh part gathered with unit weight, so it is
  // defined for q_i = 0 and F_i = q_i E_i (the mesh part of a charged atom holds its
  // own interpolation self-term, as its force does). The forces, energy and virial
  // are the same either way.
  SolverResult compute(const double* positions, const double* charges, const std::int64_t* ids,
                       std::size_t n, const std::int64_t* exclusions, std::size_t m, double* forces_out,
                       bool potentials = false, double* potentials_out = nullptr, double* fields_out = nullptr);

  // Collective: n_sets charge sets on the same atoms in one call (charges n x
  // n_sets, row-major; n_sets >= 1 and potentials the same on every rank). The
  // atoms migrate once (the sets' charges routed along the plan), the pairs are
  // searched and their erfc/exp evaluated once for all sets (RealSpace::
  // request_sets), the B-spline stencils computed once; each set has its own
  // spread, FFTs, solve and gather on the shared plans. Returns one SolverResult
  // per set (each as compute() would return for that set alone, to rounding);
  // forces_out n x n_sets x 3, and with potentials potentials_out n x n_sets and
  // fields_out n x n_sets x 3. A fresh pair search, like a call with potentials:
  // the pair list (skin) is left for the next compute().
  std::vector<SolverResult> compute_sets(const double* positions, const double* charges, int n_sets,
                                         const std::int64_t* ids, std::size_t n, const std::int64_t* exclusions,
                                         std::size_t m, double* forces_out, bool potentials = false,
                                         double* potentials_out = nullptr, double* fields_out = nullptr);

  // New box with the same mesh: plans and buffers are kept; the influence
  // function is recomputed. Collective (the box must agree on every rank).
  void set_box(const Mat3& box);

  const SolverOptions& options() const { return opt_; }
  // The mode in use (with choose_mode: the trial's current candidate, then its winner).
  CommMode comm_mode() const { return opt_.mode; }
  // choose_mode's trial (measured() false while it runs, on one rank and without choose_mode).
  const ModeTrial& mode_trial() const { return trial_; }
  // Whether the exchanges are overlapped (options.overlap, or its default for the mode
  // in use; with choose_mode as the trial says).
  bool overlapping() const { return overlap_on_; }
  // Collective: the next calls in this mode, overlapped as `overlap` says (unset: the
  // mode's default); ends choose_mode and a trial that has not finished. The plans
  // stay, the executors switch; the results do not change.
  void set_comm_mode(CommMode mode, std::optional<bool> overlap);
  // Collective: another skin for the next calls (a new list; 0: none).
  void set_skin(double skin);
  // Collective: another pair-kernel precision for the next calls (options.precision).
  void set_precision(PairPrecision precision);
  // Collective: another pair-list layout for the next calls (options.pair_layout; the list is
  // rebuilt); choose: the faster of the two by a trial on the next list calls (layout_choice.hpp).
  void set_pair_layout(PairLayout layout, bool choose = false);
  PairLayout pair_layout() const { return opt_.pair_layout; }
  bool choose_layout() const { return opt_.choose_layout; }
  // choose_layout's trial (running() while it times the layouts; measured() once decided).
  const LayoutTrial& layout_trial() const { return layout_trial_; }
  // The layout the pair list evaluated its last call with, and its lanes per pair (0 by atoms or
  // without a list).
  PairLayout pair_layout_used() const { return list_ ? list_->active_layout() : PairLayout::Atoms; }
  double cluster_lanes_per_pair() const { return list_ ? list_->cluster_lanes_per_pair() : 0.0; }
  // Collective: plan the mesh FFTs again with these FFTW flags (options.fftw_flags;
  // nothing when they are the current ones). The automatic choice plans its candidates
  // by estimate and the solver it keeps with the configured planner afterwards.
  void set_fftw_flags(unsigned fftw_flags);
  unsigned fftw_flags() const { return opt_.fftw_flags; }
  PairPrecision precision() const { return opt_.precision; }
  // The pair list's skin for the current box (0: no list).
  double skin_used() const { return list_ ? list_skin_ : 0.0; }
  const Box3& brick() const { return halo_->brick(); }
  // The ghost exchange the real-space part uses ("direct" or "staged"), and the
  // real-space domains (the bricks, or the balanced cuts).
  Migration::GhostExchange ghost_exchange_used() const;
  const DomainGrid& realspace_domains() const;
  const Balancer& balancer() const { return *balancer_; }
  const Box3& kspace_box() const { return fft_->outbox(); }
  std::map<std::string, double> timings() const;
  void reset_timings();
  MPI_Comm comm() const { return comm_.get(); }

 private:
  // One compute / compute_sets call (compute_call.cpp): sets 0 for compute's one
  // charge column, else the number of charge sets (charges n x sets).
  struct Call {
    const double* positions;
    const double* charges;
    int sets;
    const std::int64_t* ids;
    std::size_t n;
    const std::int64_t* exclusions;
    std::size_t m;
    double* forces_out;
    bool potentials;
    double* potentials_out;
    double* fields_out;
  };
  // What the stages of one call pass on: whether the reused pair list serves it,
  // the pair work to run (none without pairs), one set's local real-space terms.
  struct CallState {
    bool use_list = false;
    bool balancing = false;  // balance on and the call's pairs are the balanced ones
    bool balanced = false;   // ... and the cuts have moved: the pairs on rs_migration_
    // The pairs' forces come back in the callers' order (f_list_), not in the mesh's.
    bool separate() const { return use_list || balanced; }
    BackgroundWork* work = nullptr;
    RealSpaceTerms local;
    std::string pair_error;  // this rank's problem in the pair loop, raised by reduce
    int exclusion_flags[ExclusionList::kFlags] = {0, 0, 0};  // ExclusionList::check's, agreed by migrate
    bool rebuild_list = false;  // the list rebuilds this call (the agreed vote, or the exclusions changed)
  };
  // The call path and its stages in order (compute_call.cpp); t is the phase
  // timer's running mark.
  std::vector<SolverResult> run(const Call& call);
  void migrate(const Call& call, CallState& s, double& t);
  void begin_pairs(const Call& call, CallState& s, double& t);
  std::vector<SolverResult> mesh(const Call& call, Overlap* overlap);
  void reduce(const Call& call, CallState& s, std::vector<SolverResult>& res, double& t);
  double total_forces(const Call& call, CallState& s, double& t);
  void reduce_results(std::vector<SolverResult>& res, const std::vector<RealSpaceTerms>& local,
                      const std::vector<double>& f2, std::size_t n, const RealSpaceTerms* pair_work,
                      const std::string& pair_error);
  void return_forces(const Call& call, const CallState& s, const std::vector<SolverResult>& res, double& t);
  // The owned atoms' B-spline stencils (stencil_), for reciprocal() of any charges.
  void stencils();
  // The mesh part of charges q (per owned atom) with the current stencils: local
  // energy share and virial into res, forces.
  void reciprocal(View1<double> q, SolverResult& res, View2<double> forces, Overlap* overlap, bool potentials);
  // potentials: the mesh field gathered with unit charges (rec_field_, ad also
  // rec_phi_) and the forces from it; ik's potential mesh and its gather.
  void forces_from_field(View1<double> q, View2<double> forces);
  // A result from the reduced sums: rec[0] the reciprocal energy, rec[1..6] its
  // virial; the real-space terms (with self and background), sum |F|^2, the atoms.
  static void finish_result(SolverResult& r, const double* rec, const RealSpaceTerms& terms, double sum_force2,
                            std::int64_t n_atoms);
  void force_views(std::size_t n_own);      // f_real_, f_rec_ for n_own atoms
  void potential_views(std::size_t n_own);  // real_pot_, rec_field_, rec_phi_, ones_
  // The pair loop started: at once, or with overlap as work for the exchanges in
  // flight (returned); stop_work ends that and books its seconds as real_space.
  Overlap* start_work(BackgroundWork* work, double& t);
  void stop_work(Overlap* overlap, double hidden0);
  void ik_potentials(Overlap* overlap);
  // The charge sets' own stages (charge_sets.cpp): the migration with the sets'
  // charges, their ghosts' charges, one set's mesh part, the per-set terms and
  // total forces, the per-set potentials back to the callers.
  void migrate_sets(const double* positions, const double* charges, int n_sets, const std::int64_t* ids,
                    std::size_t n, bool potentials);
  void route_set_ghosts(int n_sets);
  void mesh_set(int c, SolverResult& res, Overlap* overlap, bool potentials);
  void set_terms(std::size_t n_sets, std::vector<RealSpaceTerms>& local, std::vector<double>& f2);
  void assemble_set_potentials(const std::vector<SolverResult>& res, std::size_t n, double* potentials_out,
                               double* fields_out);
  void assemble_potentials(double total_charge, double* potentials_out, double* fields_out, std::size_t n);
  // The mode and overlap the exchanges use from the next call on (choose_mode's trial).
  void use_variant(const CommVariant& v);
  void configure_overlap(bool on);  // overlap_on_ (overlap_ made the first time)
  void configure_list();     // list_ and list_skin_ for options.skin and the box
  // The balanced domains (balancer_) to rs_migration_ and the list, with their ghost exchange.
  void apply_domains();
  // A Migration's ghost exchange for ghosts within `radius` (options.ghost_exchange).
  Migration::GhostExchange ghost_exchange_for(const DomainGrid& domains, double radius) const;
  // After a call: the balancer's statistics and (balance on) new cuts.
  void balance_after(const Call& call, const CallState& s);
  // Collective: `next` checked (ValueError on every rank) and the same everywhere
  // (else ValueError(differs)), then in use.
  void adopt(const SolverOptions& next, const char* differs);
  // PhaseTimers::lap less the pair work the overlap ran inside the phase (which
  // counts as real_space).
  double lap(const char* phase, double start);

  Comm comm_;
  SolverOptions opt_;
  PeriodicCell cell_;
  Mat3 recip_{};
  std::vector<Box3> bricks_;
  std::unique_ptr<Halo> halo_;
  std::unique_ptr<RealFFT3d> fft_;
  // The mesh's FFT, in the current mode. Planning by measurement on several ranks,
  // where some rank's r2c would read its brick in place (x the strided axis), both that
  // and an x-fastest copy first (RealFFTOptions::contiguous_real_x) are built and timed,
  // and the faster kept (the slowest rank's time deciding). The in-place read runs as
  // paired z lines where the brick has an even number of z points (paired_real.hpp),
  // measured faster than the copy on every mesh tried; without pairing neither wins everywhere.
  std::unique_ptr<RealFFT3d> make_fft(unsigned fftw_flags) const;
  // The r2c's halved axis: one rank, a single 3-D plan halving z (the contiguous axis:
  // measured faster); across ranks the r2c runs in the x-pencils, halving x.
  int halved_axis() const { return comm_.size() == 1 ? 2 : 0; }
  std::unique_ptr<KSpaceSolver> kspace_;
  Migration migration_;
  ExclusionList exclusions_;
  RealSpace realspace_;
  std::unique_ptr<PairList> list_;  // null with skin 0 (or real_space off)
  double list_skin_ = 0;            // options.skin limited by the box; 0: fresh searches
  std::vector<double> f_list_;      // the list's (or balanced pairs') forces, caller order
  bool list_stale_ = false;         // exclusions changed while the list sat out: rebuild
  Stencil stencil_;
  // Extended bricks (the FFT's input/output storage): charges, then potential.
  View3<double> grid_;
  std::array<View3<double>, 3> field_;  // ik: field components
  View1<Complex> kspace_c_;              // half spectrum, z-pencils
  std::array<View1<Complex>, 3> kfield_;
  View2<double> f_real_, f_rec_;
  // Real-space load balancing: the balancer (statistics in every mode) and, with
  // it on, the real-space part's own migration over the balanced domains and its
  // forces on the atoms it owns.
  std::unique_ptr<Balancer> balancer_;
  std::unique_ptr<Migration> rs_migration_;
  View2<double> f_real_rs_;
  std::vector<double> row_s_, row_w_;  // the pair loop's work and where (balance_after)
  double pair_work_sums_[2] = {0, 0};   // the last call's pair-loop seconds and candidates, summed over ranks
  double pair_work_max_[2] = {0, 0};    // ... and their maxima
  // Potentials (compute(..., potentials)): per owned atom (phi, E) of the real-space
  // part, the reciprocal phi and E, unit charges for the field gathers.
  View2<double> real_pot_, rec_field_;
  View1<double> rec_phi_, ones_;
  // Charge sets (compute_sets): per owned atom the sets' charges, their real-space
  // columns (RealSpace::kSetCols per set), forces (3 per set), potentials and
  // fields (4 per set); one set's charges; the ghosts' charges.
  View2<double> set_q_, set_real_, set_f_, set_pot_, set_ghost_q_;
  View1<double> set_col_;
  PhaseTimers timers_;
  std::unique_ptr<Overlap> overlap_;  // made when first used; kept (its statistics) when switched off
  bool overlap_on_ = false;
  double hidden_mark_ = 0;            // overlap_'s work seconds at the last lap
  ModeTrial trial_;
  LayoutTrial layout_trial_;
};

}  // namespace solver
}  // namespace pmewald
