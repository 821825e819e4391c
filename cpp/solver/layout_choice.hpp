// pair_layout "auto": which layout of the reused pair list -- atom by atom, or
// 4 x 4 cluster blocks (realspace/pair_list.hpp) -- evaluates this solver's pairs
// faster, measured on its own calls. Neither wins everywhere: on an AVX2 core
// the mixed cluster kernel took 0.71-0.77x the atoms' time on 30k water atoms;
// on an AVX-512 core, whose atom kernel runs 16 float lanes, 1.22x there and
// 1.18-1.20x on the LAMMPS peptide (docs/realspace.md, "Cluster pairs").
//
// A list built for clusters holds the atoms' table too, so the trial costs no
// rebuild: its calls evaluate the same list by clusters, atoms, clusters, atoms
// (kRounds rounds), each timing the evaluation alone (the pieces' kernel time,
// wherever the overlap ran them: PairList::Stats::evaluate_seconds); a layout's
// time is this rank's faster call, the slowest rank's time decides (one
// MPI_Allreduce after the last trial call; a tie keeps clusters), so every rank
// keeps the same winner. Both layouts evaluate the same pairs; every call's
// results are those of a solver with that call's layout fixed.
#pragma once

#include <mpi.h>

#include <vector>

#include "realspace/pair_list.hpp"

namespace pmewald {
inline namespace solver {

class LayoutTrial {
 public:
  static constexpr int kRounds = 2;

  LayoutTrial() = default;  // nothing to measure (a fixed layout)
  // A trial of kRounds rounds from the next list call on.
  static LayoutTrial started();

  bool running() const { return running_; }
  // The layout the next trial call evaluates by.
  PairLayout next() const { return pos_ % 2 == 0 ? PairLayout::Clusters : PairLayout::Atoms; }
  // After a call that evaluated by next(): this rank's evaluation seconds.
  // Collective on the trial's last call (its Allreduce, over `comm`); true when
  // the winner is decided.
  bool record(MPI_Comm comm, double seconds);

  bool measured() const { return measured_; }
  PairLayout best() const { return best_; }
  // The slowest rank's seconds per layout, clusters then atoms (after measured()).
  const std::vector<double>& seconds() const { return seconds_; }

 private:
  bool running_ = false, measured_ = false;
  int pos_ = 0;
  std::vector<double> mine_, seconds_;
  PairLayout best_ = PairLayout::Clusters;
};

}  // namespace solver
}  // namespace pmewald
