// The real-space pair list with a skin, reused across compute calls (a Verlet
// list, LAMMPS's scheme): one stage between the caller's atoms and the pair
// kernel, used by the solver when its skin is positive.
//
// Build (the first call, and whenever a rebuild is agreed): the caller's atoms
// go to their owners through a Migration of the list's own (with the exclusion
// lists as payload), ghosts are exchanged within cutoff + skin of each domain,
// and the half neighbour search of realspace (pair_search.hpp) runs at radius
// cutoff + skin, recording instead of evaluating: per sorted atom its partners
// that this rank evaluates, and its excluded pairs with the exclusion entries
// their sightings count for.
//
// Reuse (every other call): migration and ghosts stay frozen. Each caller atom's
// displacement since the build (minimum image, so an atom wrapped back into the
// box by the caller is not a jump) and its charge travel to the atom's owner at
// the build (Migration::route) and on to its ghost images (route_ghosts, the
// same partners as the ghost exchange); the stored pairs are evaluated at
// build position + displacement, only those closer than the cutoff. Any pair
// within the cutoff now was within cutoff + skin at the build when no atom has
// moved more than skin / 2, so the result is that of a fresh search up to
// rounding (another summation order; positions that differ by lattice vectors).
//
// Rebuild when, on some rank: an atom moved more than skin / 2 since the build,
// the caller's atom set changed (count or ids), the exclusions changed, the
// box changed (set_geometry), or there is no valid list (first call, failed
// call). vote() is the local answer; the solver agrees on it in the Allreduce
// its migration does anyway (Migration::forward's vote), so reuse costs no
// collective of its own.
//
// Each row's partners are stored inner ones first (closer than cutoff - skin at the
// build: within the cutoff at every reuse, so gathered for the kernel without a
// distance check), then the shell's (checked against the cutoff on every call).
//
// Excluded pairs: recorded at the build if within cutoff + skin, evaluated and
// counted only while closer than the cutoff, so an excluded pair beyond the
// cutoff raises the same ValueError (on every rank) as a fresh search.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/kokkos_types.hpp"
#include "comm/overlap.hpp"
#include "geometry/lattice.hpp"
#include "particles/migration.hpp"
#include "realspace/cluster_layout.hpp"
#include "realspace/realspace.hpp"

namespace pmewald {
inline namespace realspace {

// How the list's pairs are evaluated (a strategy chosen per solver, applied at the next build):
//   Atoms:    row by row, each atom's partners gathered into the pair kernel (pair_kernel.hpp);
//   Clusters: the same pairs as 4 x 4 cluster blocks with masks (cluster_layout.hpp,
//             cluster_kernel.hpp), no gather or selection per pair. Needs alpha * cutoff
//             < kMaxAlphaR; above it the list evaluates by atoms.
enum class PairLayout { Atoms, Clusters };
const char* layout_name(PairLayout l);

// The pairs of one build, by sorted atom (RealSpace::record_pairs).
struct PairTable {
  struct Excluded {
    int j;
    std::int64_t e1, e2;  // HalfPairKernel::exclusion_entries
  };
  std::size_t rows = 0;          // sorted atoms (owned + ghost; 0 without owned atoms)
  std::vector<int> row_off, js;  // CSR: partners js[row_off[a] .. row_off[a + 1]) of sorted atom a
  // js[row_off[a] .. row_mid[a]): the inner partners, closer than cutoff - skin at the build, so
  // within the cutoff at every reuse (no atom moved more than skin / 2): evaluated without the
  // distance check; the rest (the shell, up to cutoff + skin) are checked.
  std::vector<int> row_mid;
  std::vector<int> ex_off;       // CSR: its excluded pairs
  std::vector<Excluded> ex;
  std::vector<int> slot;         // sorted slot of owned atom i (i < n_owned), ghost g (n_owned + g)
  double candidates = 0;         // distances the build's search checked
};

class PairList {
 public:
  explicit PairList(MPI_Comm comm);
  ~PairList();

  // Box and mesh (ownership at the next build); the next call rebuilds. No MPI.
  void set_geometry(const PeriodicCell& cell, const Int3& mesh);
  // Box and any domain grid (balanced real-space domains, particles/balance.hpp);
  // the next call rebuilds. No MPI.
  void set_domains(const PeriodicCell& cell, const DomainGrid& domains);
  // How the list's ghosts travel (Migration::GhostExchange); the next call rebuilds.
  void set_ghost_exchange(Migration::GhostExchange how);
  // The next call rebuilds (e.g. the exclusions changed). No MPI.
  void invalidate() { valid_ = false; }
  // The erfc pairs' kernel precision for the next begin() (pair_kernel.hpp). No MPI.
  void set_precision(PairPrecision p) { precision_ = p; }
  // The evaluation's layout from the next call on. A list built for clusters holds the
  // atoms' table too: it evaluates by either without a rebuild (until its next build,
  // which builds for `l`); a list built for atoms is invalidated by Clusters. No MPI.
  void set_layout(PairLayout l) {
    if (l == PairLayout::Clusters && !clusters_built_) valid_ = false;
    layout_ = l;
  }
  PairLayout layout() const { return layout_; }
  // The layout the current list evaluates with (Atoms where Clusters cannot: alpha * cutoff
  // >= kMaxAlphaR), and its cluster pairs' lanes per pair of the list (0 by atoms).
  PairLayout active_layout() const { return active_layout_; }
  double cluster_lanes_per_pair() const { return active_layout_ == PairLayout::Clusters ? clusters_.lanes_per_pair() : 0.0; }

  // Local, no MPI: 1 when this rank needs a new list for these atoms of the
  // caller (see the header), else 0; keeps the displacements for begin().
  int vote(const double* positions, const std::int64_t* ids, std::size_t n, double skin);

  // Collective. rebuild: the agreed vote (every rank the same). Builds or
  // refreshes the list for the caller's atoms (as passed to vote), then prepares
  // the evaluation; exclusions: the ExclusionList's CSR over the caller's atoms
  // (nullptr when none).
  void begin(bool rebuild, const double* positions, const double* charges, const std::int64_t* ids,
             std::size_t n, const std::int64_t* excl_offsets, const std::int64_t* excl_partners, double cutoff,
             double skin, double alpha, double coulomb_constant);
  // The evaluation as work in pieces (RealSpace::kPairBlockRows rows), valid until finish().
  BackgroundWork& pairs();
  // Collective: runs the pieces left, returns the ghosts' forces to their owners
  // and the forces to the caller: forces_out (n x 3, the caller's order)
  // receives the real-space + exclusion forces. Returns this rank's share of the
  // terms (as RealSpace::finish_local). An excluded pair not closer than the
  // cutoff raises ValueError on every rank, or with `deferred_error` is this
  // rank's problem there, for the caller to raise on every rank (as
  // RealSpace::finish_local).
  RealSpaceTerms finish(double* forces_out, std::string* deferred_error = nullptr);

  // Counters since construction: builds, and seconds in building (migration,
  // ghosts, search), refreshing (vote: displacements; between builds their
  // routing along the frozen plans) and evaluating the list.
  struct Stats {
    double builds = 0, build_seconds = 0, refresh_seconds = 0, evaluate_seconds = 0;
  };
  const Stats& stats() const { return stats_; }
  void reset_stats() {
    stats_ = Stats{};
    mig_.reset_traffic();
  }
  const Migration& migration() const { return mig_; }

 private:
  class Sweep;
  class ClusterSweep;
  void begin_clusters(double cutoff);  // (cluster_sweep.cpp)
  detail::HalfPairKernel& list_kernel();  // the build's search state (in sweep_), evaluated by the sweep
  void build(const double* positions, const double* charges, const std::int64_t* ids, std::size_t n,
             const std::int64_t* excl_offsets, const std::int64_t* excl_partners, double radius,
             double inner_radius);
  void refresh(const double* charges, std::size_t n);
  // The exclusion check: a call counts only the stored excluded pairs beyond the cutoff;
  // the build checks that each owned exclusion was recorded once. These two are the
  // exact per-entry count (found == 1), at the build and where a call found a problem.
  bool count_exclusions(double rc2);
  void pair_virial_from_forces(const View2<double>& sforce, const double* applied, double* w);
  std::string exclusion_problem(double cutoff);

  MPI_Comm comm_;
  Migration mig_;
  RealSpace builder_;
  PairTable table_;
  std::unique_ptr<Sweep> sweep_;
  std::unique_ptr<ClusterSweep> csweep_;
  PairLayout layout_ = PairLayout::Atoms, active_layout_ = PairLayout::Atoms;
  ClusterTable clusters_;
  bool clusters_built_ = false;
  bool exclusions_recorded_once_ = false;  // at the last build (count_exclusions)
  bool valid_ = false, have_geometry_ = false;
  PairPrecision precision_ = PairPrecision::Double;
  PeriodicCell cell_;
  // The caller's atoms at the build: positions (as passed), ids.
  std::vector<double> ref_r_;
  std::vector<std::int64_t> ref_id_;
  std::vector<double> moved_;  // n x 4: displacement since the build (minimum image), charge
  // Owned and ghost positions at the build; now: build + displacement, charge.
  std::vector<double> base_own_, base_ghost_, own4_, ghost4_;
  std::vector<double> f_owned_, f_ghost_;
  Stats stats_;
};

}  // namespace realspace
}  // namespace pmewald
