// Hiding communication behind computation (the NAMD idea): while an exchange is in
// flight, run pieces of independent work and make progress calls between them.
//
// The pieces come from a BackgroundWork (the solver's real-space pair loop, in
// blocks of rows). Overlap is the strategy the communicating code hands its exchange
// to once it is started (exchange(), below): it runs pieces and, every `poll_rows`
// rows or `poll_seconds` seconds, whichever comes first, tests the exchange (which
// unpacks what has arrived), until the exchange is complete or the work is used up;
// then it finishes the exchange (waits for the rest). Without an Overlap the same
// call is the plain blocking exchange. The data moved are the same either way, and
// the work does the same pieces in the same order, only at other times.
//
// Polling many posted receives costs (the NAMD seed); one test is one MPI_Testsome
// (or MPI_Test) over the exchange's requests, and the default intervals keep their
// share of the hidden time small (measured: docs/overlap.md).
#pragma once

#include <cstdint>

#include "comm/exchange.hpp"

namespace pmewald {
inline namespace comm {

// Work to run while exchanges are in flight, piece by piece, in a fixed order.
class BackgroundWork {
 public:
  virtual ~BackgroundWork() = default;
  // Runs the next piece; returns the rows it did (0: no work left).
  virtual std::int64_t run_piece() = 0;
  // Runs all the work that is left, in as few steps as the work allows (nothing
  // to hide it behind); returns the rows it did. The results are those of
  // running it piece by piece.
  virtual std::int64_t run_rest() {
    std::int64_t rows = 0;
    while (!done()) rows += run_piece();
    return rows;
  }
  virtual bool done() const = 0;
};

struct OverlapSettings {
  // Test the exchange in flight after this many rows of work, or this many seconds,
  // whichever comes first (defaults measured: docs/overlap.md).
  std::int64_t poll_rows = 256;
  double poll_seconds = 100e-6;
};

// What overlapping did, on this rank, since the last reset.
struct OverlapStats {
  std::int64_t exchanges = 0;       // exchanges handed to the overlap
  std::int64_t hidden_exchanges = 0;  // of them, completed by a test while work ran
  std::int64_t polls = 0;           // tests made
  double work_seconds = 0;          // pieces run while an exchange was in flight (the time hidden)
  double poll_seconds = 0;          // inside the tests (MPI_Test* and the unpacks they did)
  double finish_seconds = 0;        // waiting in finish() after the work (left exposed)
  void reset() { *this = OverlapStats{}; }
};

class Overlap {
 public:
  explicit Overlap(const OverlapSettings& settings = OverlapSettings{});

  // The work to hide the exchanges behind (not owned; nullptr: none).
  void set_work(BackgroundWork* work) { work_ = work; }
  BackgroundWork* work() const { return work_; }
  // Runs the work, testing `pending`, until it is complete or the work is used up;
  // then finishes it. Returns with the exchange complete.
  void await(PendingExchange& pending);
  // Runs whatever work is left (no exchange in flight).
  void drain();

  const OverlapSettings& settings() const { return settings_; }
  const OverlapStats& stats() const { return stats_; }
  void reset_stats() { stats_.reset(); }

 private:
  OverlapSettings settings_;
  BackgroundWork* work_ = nullptr;
  OverlapStats stats_;
};

// One exchange of `exec`: whole when `overlap` is null, else started and handed to it.
template <class T>
void exchange(ExchangeExecutor<T>& exec, const T* src, T* dst, Direction dir, UnpackOp op, Overlap* overlap) {
  if (!overlap) {
    exec.execute(src, dst, dir, op);
    return;
  }
  exec.start(src, dst, dir, op);
  overlap->await(exec);
}

}  // namespace comm
}  // namespace pmewald
