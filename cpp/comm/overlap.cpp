#include "comm/overlap.hpp"

#include <stdexcept>

#include "base/timers.hpp"

namespace pmewald {
inline namespace comm {

Overlap::Overlap(const OverlapSettings& settings) : settings_(settings) {
  if (settings_.poll_rows < 1 || !(settings_.poll_seconds > 0))
    throw std::invalid_argument("Overlap: poll_rows must be >= 1 and poll_seconds > 0");
}

void Overlap::await(PendingExchange& pending) {
  stats_.exchanges += 1;
  double last_test = wall_seconds();
  std::int64_t rows = 0;
  while (work_ && !work_->done()) {
    const double t0 = wall_seconds();
    rows += work_->run_piece();
    const double t1 = wall_seconds();
    stats_.work_seconds += t1 - t0;
    if (rows < settings_.poll_rows && t1 - last_test < settings_.poll_seconds) continue;
    stats_.polls += 1;
    const bool complete = pending.test();
    last_test = wall_seconds();
    stats_.poll_seconds += last_test - t1;
    rows = 0;
    if (complete) {
      stats_.hidden_exchanges += 1;
      return;
    }
  }
  const double t0 = wall_seconds();
  pending.finish();
  stats_.finish_seconds += wall_seconds() - t0;
}

void Overlap::drain() {
  if (work_) work_->run_rest();
}

}  // namespace comm
}  // namespace pmewald
