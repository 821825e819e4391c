// Real-space load balancing: domain cuts that move so that every rank has the
// same real-space work (LAMMPS's `balance shift` / `fix balance shift`: one set
// of cut planes per axis, shared by all ranks along it; GROMACS's DLB: the
// measured work decides, under-relaxed).
//
// The domains start as the mesh's bricks: until the measured imbalance exceeds
// the threshold nothing moves, and the solver runs its pairs on the bricks as
// without balancing (no second migration, the same bits). Once they move, the
// cuts live on a fine resolution (kResolution index points per axis,
// DomainGrid::with_cuts). Along each axis with more than one rank, the new cuts
// split a global histogram of the work along that axis into equal parts: the
// histogram (64 bins per rank along the axis, at most 4,096; one Allreduce of
// the three histograms) sums where the work was.
//
//   - After a call, the work of each rank is either the candidate pairs its pair
//     loop tested (BalanceWork::Pairs: deterministic, the same on every run) or
//     the seconds of its pair loop, the MPI-free region (BalanceWork::Time:
//     whatever makes a rank slow, noisy run to run).
//   - The work's place: the rank's work (its ghost rows' included) spread over
//     its owned atoms in proportion to their own rows' candidate pairs where the
//     pair loop records them (RealSpace::row_work), else evenly (the reused
//     pair list).
//   - BalanceMode::Once moves the cuts all the way to the balanced position after
//     the first calls whose imbalance (slowest / mean work) exceeds the
//     threshold, at most kOnceCorrections times, then keeps them.
//     BalanceMode::Dynamic re-balances after any such call, the first time all
//     the way, then `relax` of the way (0.5, as GROMACS), halved whenever a move
//     left the imbalance higher than it found it. The histogram takes each atom's
//     work as fixed while the cuts move; in domains not much wider than the cutoff
//     a moved cut shifts more work than that (the ghosts' pairs move with it), the
//     half-way moves overshoot and the cuts oscillate (water slab at 64 simulated
//     ranks: slowest / mean 1.05-1.24 over ten calls at 0.5, 1.04 at 0.25).
//
// The imbalance itself (slowest / mean of the pair loop's seconds and of the
// candidate pairs) is measured after every call in every mode (the sums and the
// maxima ride on the solver's result reduction), so the solver's timings report
// it with balancing off too.
//
// A tensor product of per-axis cuts balances work that varies along the axes
// (a slab with vacuum, an interface, a layered system); work that varies in 3-D
// within an axis's slabs is balanced only on average.
#pragma once

#include <mpi.h>

#include <array>
#include <cstddef>
#include <vector>

#include "base/kokkos_types.hpp"
#include "geometry/domain_grid.hpp"

namespace pmewald {
inline namespace particles {

enum class BalanceMode : int { Off = 0, Once = 1, Dynamic = 2 };
enum class BalanceWork : int { Pairs = 0, Time = 1 };

struct BalanceSettings {
  BalanceMode mode = BalanceMode::Off;
  BalanceWork work = BalanceWork::Pairs;
  double threshold = 1.05;  // Dynamic: re-balance when slowest / mean work exceeds it
  double relax = 0.5;       // Dynamic: the fraction of the way to the balanced cuts
};

class Balancer {
 public:
  static constexpr int kResolution = 1 << 20;
  static constexpr int kOnceCorrections = 3;

  // The bricks of `grid` over `mesh` (the particle decomposition's processor grid).
  Balancer(MPI_Comm comm, const Int3& grid, const Int3& mesh, const BalanceSettings& settings);

  const BalanceSettings& settings() const { return settings_; }
  const DomainGrid& domains() const { return domains_; }
  bool on() const { return settings_.mode != BalanceMode::Off; }
  // Whether the cuts have left the bricks (the solver then runs its pairs on
  // domains of their own).
  bool moved() const { return moved_; }

  // Where this rank's work was: n points (fractional positions in [0, 1),
  // `stride` doubles apart) with a weight each (candidate pairs), or without
  // weights the same share of the rank's work each (its owned atoms).
  struct WorkSample {
    const double* s = nullptr;
    std::size_t stride = 3, n = 0;
    const double* w = nullptr;
  };
  // This rank's candidate pairs and pair-loop seconds, and their sums and maxima
  // over the ranks (the caller's result reduction carries them: measuring the
  // imbalance costs no reduction of its own).
  struct Work {
    double pairs = 0, seconds = 0, sum_pairs = 0, sum_seconds = 0, max_pairs = 0, max_seconds = 0;
  };
  // On every rank, after every call: the work and where it was (nullptr on every
  // rank when the call did not run on the balanced domains: potentials, charge
  // sets). Updates the statistics; with balancing on, may move the cuts (per the
  // mode; collective then, one Allreduce of the work's histograms, decided alike
  // on every rank from the reduced work). Returns whether they changed.
  bool after_call(const Work& work, const WorkSample* where);

  struct Stats {
    int calls = 0;
    int rebalances = 0;
    double last_imbalance = 1.0;        // slowest / mean of the last call's work measure
    double last_time_imbalance = 1.0;   // slowest / mean pair-loop seconds of the last call
    double last_pairs_imbalance = 1.0;  // the same for candidate pairs
    double max_seconds = 0, mean_seconds = 0;  // sums over calls of the slowest and the mean
    double max_pairs = 0, mean_pairs = 0;      // the same for the candidate pairs
    double my_seconds = 0, my_pairs = 0;       // this rank's sums over calls
  };
  const Stats& stats() const { return stats_; }
  void reset_stats() { stats_ = Stats{}; }

 private:
  // Histograms of the weights along each axis with p_d > 1 (summed over ranks),
  // and the cuts that split them into equal parts; `relax` of the way there.
  bool rebalance(const WorkSample& where, double scale, double relax);

  MPI_Comm comm_;
  BalanceSettings settings_;
  DomainGrid domains_;
  bool moved_ = false;
  int corrections_ = 0;  // the moves so far (Once: at most kOnceCorrections)
  // Dynamic: the fraction of the way the next under-relaxed move goes (settings_.relax
  // at first, halved, down to kMinRelax, after every under-relaxed move that left the
  // imbalance higher than it found it) and the imbalance that led to the last move.
  static constexpr double kMinRelax = 1.0 / 16;
  double relax_, imbalance_before_ = 0;
  Stats stats_;
  std::vector<double> hist_;
};

}  // namespace particles
}  // namespace pmewald
