#include "solver/mode_choice.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "comm/mpi_helpers.hpp"

namespace pmewald {
inline namespace solver {

std::string CommVariant::name() const { return std::string(comm_mode_name(mode)) + (overlap ? "+overlap" : ""); }

CommVariant default_variant(CommMode mode, std::optional<bool> overlap) {
  return {mode, overlap.value_or(mode != CommMode::Pt2Pt)};
}

std::vector<CommVariant> ModeTrial::candidates(std::optional<bool> overlap) {
  constexpr CommMode kModes[3] = {CommMode::Pt2Pt, CommMode::Nonblocking, CommMode::Collective};
  std::vector<CommVariant> out;
  for (CommMode m : kModes) {
    if (overlap) {
      out.push_back({m, *overlap});
    } else {
      out.push_back({m, false});
      if (m != CommMode::Pt2Pt) out.push_back({m, true});
    }
  }
  return out;
}

ModeTrial::ModeTrial(std::vector<CommVariant> candidates, CommVariant warmup)
    : cand_(std::move(candidates)), warmup_(warmup) {
  if (cand_.empty()) throw std::invalid_argument("ModeTrial: no candidates");
  const int n = static_cast<int>(cand_.size());
  order_.push_back(-1);
  for (int r = 0; r < kRounds; ++r)
    for (int k = 0; k < n; ++k) order_.push_back(r % 2 == 0 ? k : n - 1 - k);
  mine_.assign(cand_.size(), std::numeric_limits<double>::infinity());
}

CommVariant ModeTrial::next() const {
  if (!running()) return best();
  const int k = order_[pos_];
  return k < 0 ? warmup_ : cand_[static_cast<std::size_t>(k)];
}

bool ModeTrial::record(MPI_Comm comm, double seconds) {
  if (!running()) return false;
  const int k = order_[pos_++];
  if (k >= 0) mine_[static_cast<std::size_t>(k)] = std::min(mine_[static_cast<std::size_t>(k)], seconds);
  if (running()) return false;
  best_ = static_cast<int>(fastest_on_the_slowest_rank(comm, mine_, seconds_));
  measured_ = true;
  return true;
}

}  // namespace solver
}  // namespace pmewald
