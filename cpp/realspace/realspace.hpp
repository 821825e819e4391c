// Real-space part of Ewald: erfc-screened pairs within the cutoff (cell list
// over owned + ghost atoms), exclusion corrections, self and background
// terms.
//
// Pair counting: a half neighbour search over owned + ghost atoms sorted by
// cell (cells >= cutoff / 2, half stencil). Every pair of this rank's atoms is
// visited once: two owned atoms count here and both get their force; an
// owned-ghost pair counts fully on exactly one of the two ranks that see it
// (keeps_cross_pair, pair_select.hpp), and the force on the ghost is sent to
// its owner; two ghosts are skipped. Since cutoff <= min height / 2, at most
// one image of a pair is within the cutoff and it is the minimum image. The
// kernel itself is pair_kernel.hpp's erfc_pair_batch.
//
// Exclusions (OpenMM's way): an excluded pair gets no erfc term and gets
// -k q_i q_j erf(alpha r)/r (minimum image) to remove its reciprocal-space
// part. Excluded pairs must be closer than the cutoff.
//
// Virial: W = -dE/d(eps) with positions and box strained by (1 + eps); for
// pairs W_ab = sum r_ij,a F_ij,b (F_ij the force on i due to j).
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/kokkos_types.hpp"
#include "base/virial.hpp"
#include "comm/overlap.hpp"
#include "particles/migration.hpp"
#include "particles/exclusions.hpp"
#include "realspace/pair_kernel.hpp"

namespace pmewald {
inline namespace realspace {

namespace detail {
struct HalfPairKernel;
}
struct PairTable;

// Energies and virial.
struct RealSpaceTerms {
  double real = 0;        // erfc pair sum
  double exclusion = 0;   // -erf corrections of excluded pairs
  double self = 0;        // -k alpha / sqrt(pi) sum q^2
  double background = 0;  // -k pi Q^2 / (2 V alpha^2)
  Virial virial;  // of real + exclusion + background
  double sum_q = 0, sum_q2 = 0;
  // Wall seconds on this rank, by phase (filled by compute_realspace; the
  // pair kernel time also by compute_local as `pairs`, cell list as `cells`).
  double t_migrate = 0, t_exclusions = 0, t_ghosts = 0, t_cells = 0, t_pairs = 0, t_reverse = 0;
  // Neighbour-search statistics on this rank: distances checked, pairs evaluated.
  double candidates = 0, pairs = 0;
  // Sum over the evaluated pairs of |f_pair|^2 with the mixed-precision kernel
  // (its error model's input, pair_kernel.hpp), 0 with the double one; summed
  // over ranks by reduce_terms.
  double pair_force2 = 0;
  double energy() const { return real + exclusion + self + background; }
};

class RealSpace {
 public:
  // Rows of the pair loop per block: the loop always runs in these blocks, each
  // block's sums apart and added in block order (row_blocks.hpp), so its results
  // do not depend on whether or when the pieces run between progress calls.
  static constexpr int kPairBlockRows = 64;

  // Uses `comm` as given (the same communicator as the Migration).
  explicit RealSpace(MPI_Comm comm);
  ~RealSpace();

  // Collective (the ghost forces' return, Migration::reverse_ghosts, and the
  // error agreement at its end). Needs
  // mig.forward() (with the ExclusionList's CSR as payload when there are
  // exclusions) and mig.exchange_ghosts(cutoff) first. Overwrites forces
  // (n_owned x 3) with the real-space + exclusion forces on the owned atoms
  // and returns THIS RANK's share (not reduced): real, exclusion, virial,
  // sum_q, sum_q2 (self/background left 0; see reduce_terms). An excluded
  // pair not closer than the cutoff raises ValueError on every rank.
  // pair_terms = false computes only the exclusion corrections (for a solver
  // whose caller does its own erfc pairs).
  RealSpaceTerms compute_local(Migration& mig, double cutoff, double alpha,
                               double coulomb_constant, View2<double> forces,
                               bool pair_terms = true);

  // compute_local in three steps, so that the pair loop can run while
  // communication is in flight (comm/overlap.hpp): begin_local builds the cell
  // list (no MPI); pairs() is the pair loop as work in pieces of kPairBlockRows
  // rows (valid until finish_local); finish_local runs the pieces left and does
  // the rest of compute_local (collective: the ghost forces' return and the
  // error agreement). compute_local is begin_local + finish_local. With
  // `deferred_error`, the agreement is the caller's: this rank's problem ("" when
  // none) goes there, and the caller must raise it on every rank before the
  // results are used (the solver folds it into its result reduction).
  void begin_local(Migration& mig, double cutoff, double alpha, double coulomb_constant,
                   View2<double> forces, bool pair_terms = true);
  BackgroundWork& pairs();
  RealSpaceTerms finish_local(std::string* deferred_error = nullptr);

  // Potentials and fields (on request): before begin_local, on = true and `out`
  // (n_owned x 4, row-major) for the next begin_local/finish_local; finish_local
  // overwrites it with each owned atom's real-space (phi, E_x, E_y, E_z), erfc
  // pairs plus the exclusion corrections (pair_search.hpp), the ghosts' shares
  // returned to their owners (collective: on must agree over the ranks). Off by
  // default; the request stays until changed.
  void request_potentials(bool on, View2<double> out = View2<double>()) {
    want_pot_ = on;
    pot_out_ = out;
  }
  // The load balancer's work density (particles/balance.hpp): on, the next pair
  // loops record each sorted atom's candidate pairs; after finish_local,
  // row_work() gives every owned atom's fractional position (wrapped into
  // [0, 1), n x 3) and its row's count. No MPI.
  void request_row_work(bool on) { want_row_work_ = on; }
  void row_work(const PeriodicCell& cell, std::vector<double>& s, std::vector<double>& w) const;
  // The erfc pairs' kernel precision from the next begin_local on (pair_kernel.hpp;
  // Double by default). No MPI.
  void set_precision(PairPrecision p) { precision_ = p; }

  // Charge sets (on request): before begin_local, n_sets > 0 charge vectors of the
  // owned atoms (owned_q, n_owned x n_sets) and of the ghosts (ghost_q, n_ghost x
  // n_sets, e.g. Migration::route_ghosts of owned_q), and `out` (n_owned x
  // kSetCols * n_sets, row-major) for the next begin_local/finish_local: the pair
  // loop then evaluates every pair once for all sets (pair_search.hpp's charge
  // sets: column v * n_sets + c holds term v = (phi_pair, E_x, E_y, E_z, phi_excl,
  // w_xx, w_yy, w_zz, w_xy, w_xz, w_yz) of set c for each owned atom, with E_real =
  // sum q phi_pair / 2, E_excl = sum q phi_excl / 2, W = sum q w; the ghosts' shares
  // returned to their owners) instead of the forces and energies of the migrated
  // charges (those come out zero). n_sets = 0 turns it off (the default).
  static constexpr int kSetCols = 11;
  void request_sets(int n_sets, View2<double> owned_q = View2<double>(), View2<double> ghost_q = View2<double>(),
                    View2<double> out = View2<double>()) {
    n_sets_ = n_sets;
    sets_owned_q_ = owned_q;
    sets_ghost_q_ = ghost_q;
    sets_out_ = out;
  }

  // Collective: sums local terms over ranks and adds the self and background
  // terms (background virial E_bg * identity). Identical on every rank.
  static RealSpaceTerms reduce_terms(MPI_Comm comm, const RealSpaceTerms& local,
                                     const PeriodicCell& cell, double alpha,
                                     double coulomb_constant);
  // reduce_terms in two halves, for a caller that sums them over ranks together
  // with its own numbers (one Allreduce instead of two): the kSums values to sum,
  // and the global terms from their sums.
  static constexpr int kSums = 5 + Virial::kComponents;
  static void terms_to_sum(const RealSpaceTerms& local, double* out);
  // The pair list's build (pair_list.hpp; defined in pair_list.cpp): mig's atoms
  // sorted as for compute_local at search radius `radius` (mig's ghosts exchanged
  // for at least that), and the pairs within it that this rank evaluates
  // recorded into `out`, each row's partners closer than inner_radius first
  // (PairTable::row_mid); kern is left pointing at the sorted atoms (this object's
  // scratch, valid until its next use). No MPI.
  void record_pairs(Migration& mig, double radius, double inner_radius, PairTable& out,
                    detail::HalfPairKernel& kern);
  static RealSpaceTerms terms_from_sums(const double* sums, const PeriodicCell& cell, double alpha,
                                        double coulomb_constant);

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  // Cell-list scratch, reused between calls: prefix sums over cells (atoms,
  // owned atoms); atoms sorted by cell as structure of arrays; their forces.
  View1<int> cell_start_, cell_owned_, slot_of_, scell_, sowner_;
  View1<double> sx_, sy_, sz_, sq_, sown_;
  View1<std::int64_t> sid_, skey_, selo_, sehi_, semask_;
  View2<double> sforce_;
  std::vector<double> ghost_force_;  // n_ghost x 3, for Migration::reverse_ghosts
  View1<int> found_;
  std::vector<int> cell_of_, fill_;
  class PairSweep;  // the pair loop between begin_local and finish_local
  // Sorts mig's owned and ghost atoms by cell for a search of radius `radius`
  // (cells from mig's ghost margin, which must be at least that) and points
  // kern's atom, cell and exclusion arrays at the result; the evaluation
  // constants and forces are the caller's. Returns the sorted atoms (0 without
  // owned atoms: nothing to do). No MPI.
  std::size_t sort_atoms(Migration& mig, double radius, detail::HalfPairKernel& kern);
  // sort_atoms' steps (realspace.cpp): the cell grid, the views for N atoms, the
  // atoms' cells and slots (counting sort), their sorted rows, kern pointed at them.
  struct CellGrid;
  void sorted_views(std::size_t N, int ncell, bool any_excl);
  void bin_atoms(Migration& mig, const CellGrid& grid);
  void write_sorted_rows(Migration& mig, bool any_excl);
  void point_kernel(Migration& mig, const CellGrid& grid, double radius, detail::HalfPairKernel& kern);
  std::unique_ptr<PairSweep> sweep_;
  // Potentials (request_potentials): the output, per sorted atom, the ghosts' rows.
  bool want_pot_ = false;
  bool want_row_work_ = false;
  PairPrecision precision_ = PairPrecision::Double;
  View2<double> pot_out_, spot_;
  std::vector<double> ghost_pot_;
  // Charge sets (request_sets): their charges and output, per sorted atom the
  // charges and the scatter target, the ghosts' rows.
  int n_sets_ = 0;
  View2<double> sets_owned_q_, sets_ghost_q_, sets_out_, sq_sets_, ssets_;
  std::vector<double> ghost_sets_;
};

// The whole real-space pipeline on caller-split atoms (what the Python
// binding runs, and the order the solver follows): route exclusions, migrate
// (exclusion lists as payload), ghosts, pair kernel, reverse the forces to the
// caller's order, reduce. forces_out: n_local x 3.
RealSpaceTerms compute_realspace(MPI_Comm comm, const double* box9, const Int3& mesh,
                                 const double* positions, const double* charges,
                                 const std::int64_t* ids, std::size_t n_local,
                                 const std::int64_t* exclusions, std::size_t n_exclusions,
                                 double cutoff, double alpha, double coulomb_constant,
                                 double* forces_out);

}  // namespace realspace
}  // namespace pmewald
