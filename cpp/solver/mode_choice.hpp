// comm_mode "auto": which communication variant -- a mode, with or without the
// overlap of its exchanges with the pair loop -- runs this solver's calls
// fastest, measured on the calls themselves (GROMACS's -tunepme idea: real
// steps, timed). The exchanges alone, timed on scratch data, cannot say what
// overlap hides: at simulated scale they picked plain nonblocking where
// collective+overlap ran the step 13% faster (docs/overlap.md).
//
// After one warm-up call (first touches, the pair list's build) in the default
// variant, the candidates run one call each in turn, then once more in the
// reverse order, so that a drift over the first calls (dynamic balancing, a
// list rebuild) favours none of them. A candidate's time is this rank's faster
// call; the slowest rank's time decides (one MPI_Allreduce after the last trial
// call), so every rank keeps the same winner (a tie: the one listed first).
// Every call's results are the same in any variant (docs/overlap.md).
#pragma once

#include <mpi.h>

#include <optional>
#include <string>
#include <vector>

#include "comm/exchange_plan.hpp"

namespace pmewald {
inline namespace solver {

struct CommVariant {
  CommMode mode = CommMode::Nonblocking;
  bool overlap = false;
  std::string name() const;  // "pt2pt", "nonblocking+overlap", ...
  bool operator==(const CommVariant& o) const { return mode == o.mode && overlap == o.overlap; }
};

// The variant a solver runs without a trial: `mode`, overlapped as `overlap`
// says, by default where measured not slower (not with pt2pt, whose blocking
// sends leave nothing to hide).
CommVariant default_variant(CommMode mode, std::optional<bool> overlap);

class ModeTrial {
 public:
  static constexpr int kRounds = 2;
  // The candidates for the overlap option: unset, pt2pt and both overlapped and
  // plain nonblocking and collective; set, the three modes with it.
  static std::vector<CommVariant> candidates(std::optional<bool> overlap);

  ModeTrial() = default;  // nothing to measure (one rank, or a fixed mode)
  ModeTrial(std::vector<CommVariant> candidates, CommVariant warmup);

  // Whether calls are still to be measured, and the variant the next one runs.
  bool running() const { return pos_ < order_.size(); }
  CommVariant next() const;
  // After a call that ran next(): this rank's seconds for it. Collective on the
  // trial's last call (its Allreduce, over `comm`); true when the winner is decided.
  bool record(MPI_Comm comm, double seconds);

  bool measured() const { return measured_; }
  const CommVariant& best() const { return cand_[static_cast<std::size_t>(best_)]; }
  const std::vector<CommVariant>& variants() const { return cand_; }
  // The slowest rank's seconds per candidate (after measured()).
  const std::vector<double>& seconds() const { return seconds_; }
  // Calls the trial takes, its warm-up included.
  std::size_t calls() const { return order_.size(); }

 private:
  std::vector<CommVariant> cand_;
  CommVariant warmup_;
  std::vector<int> order_;  // the calls: -1 the warm-up, then candidate indices
  std::size_t pos_ = 0;
  std::vector<double> mine_, seconds_;
  int best_ = 0;
  bool measured_ = false;
};

}  // namespace solver
}  // namespace pmewald
