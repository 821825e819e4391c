// The pair loops' rows in fixed blocks (RealSpace::kPairBlockRows), run piece by
// piece (BackgroundWork, for overlap) or all at once. Internal to realspace/.
//
// A piece runs several blocks in one parallel_for, one block per work item
// (dynamically scheduled), each block's sums apart, then adds them in block
// order: the sums do not depend on how the blocks were grouped into pieces, nor
// on the number of threads. A piece is kBlocksPerThread blocks per thread (one
// block on a single thread): threads woken for a single block of 64 rows spent
// longer waking than working (docs/benchmarks.md, hybrid), and run_rest() runs
// all that is left as one parallel_for.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include <Kokkos_Core.hpp>

#include "base/compute_model.hpp"
#include "base/kokkos_types.hpp"
#include "base/timers.hpp"
#include "comm/overlap.hpp"

namespace pmewald {
inline namespace realspace {
namespace detail {

// Kernel: `void operator()(int row, double* acc) const`, adding to acc[0..kSums).
template <class Kernel, int kSums>
class RowBlocks : public BackgroundWork {
 public:
  static constexpr int kBlockRows = 64;
  static constexpr int kBlocksPerThread = 4;
  // Both kernels count the candidate pairs they tested in acc[8]: the pieces' work
  // (base/compute_model.hpp).
  static constexpr int kCandidateSum = 8;
  static_assert(kSums > kCandidateSum, "the kernel's sums hold its candidate pairs at kCandidateSum");

  // Starts a loop over `n_rows` rows of `kernel` (a copy is taken at each piece).
  void reset(int n_rows) {
    rows = n_rows;
    next = 0;
    seconds = 0;
    for (double& v : sums) v = 0;
  }

  std::int64_t run_piece() override { return run_blocks(piece_blocks()); }
  std::int64_t run_rest() override { return run_blocks(blocks()); }
  bool done() const override { return next >= rows; }

  Kernel kern;
  int rows = 0, next = 0;  // rows of the loop; the next one to run
  double sums[kSums] = {};
  double seconds = 0;  // inside the pieces
  // When allocated (at least `rows` long): each row's candidate pairs (the load
  // balancer's work density, particles/balance.hpp).
  View1<double> row_work;

 private:
  int blocks() const { return (rows + kBlockRows - 1) / kBlockRows; }
  static int piece_blocks() {
    const int threads = ExecSpace().concurrency();
    return threads > 1 ? kBlocksPerThread * threads : 1;
  }
  std::int64_t run_blocks(int count) {
    if (next >= rows) return 0;  // (next / kBlockRows would name the last block again)
    const int b0 = next / kBlockRows, b1 = std::min(blocks(), b0 + std::max(count, 0));
    if (b0 >= b1) return 0;
    const double t0 = wall_seconds();
    if (block_sums_.extent(0) < static_cast<std::size_t>(b1 - b0))
      block_sums_ = View2<double>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("row_block_sums")),
                                  static_cast<std::size_t>(b1 - b0), kSums);
    const View2<double> bs = block_sums_;
    const Kernel k = kern;
    const int n_rows = rows;
    const View1<double> rw = row_work;
    const bool per_row = rw.extent(0) >= static_cast<std::size_t>(n_rows);
    using Dynamic = Kokkos::RangePolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>;
    Kokkos::parallel_for("pmewald::pair_rows", Dynamic(0, b1 - b0).set_chunk_size(1), [=](const int i) {
      double acc[kSums] = {};
      const int a0 = (b0 + i) * kBlockRows, a1 = std::min(n_rows, a0 + kBlockRows);
      for (int a = a0; a < a1; ++a) {
        const double before = acc[kCandidateSum];
        k(a, acc);
        if (per_row) rw(static_cast<std::size_t>(a)) = acc[kCandidateSum] - before;
      }
      for (int s = 0; s < kSums; ++s) bs(static_cast<std::size_t>(i), static_cast<std::size_t>(s)) = acc[s];
    });
    Kokkos::fence();
    const double candidates0 = sums[kCandidateSum];
    for (int i = 0; i < b1 - b0; ++i)
      for (int s = 0; s < kSums; ++s) sums[s] += bs(static_cast<std::size_t>(i), static_cast<std::size_t>(s));
    charge(Work::Pairs, sums[kCandidateSum] - candidates0);
    seconds += wall_seconds() - t0;
    const int end = std::min(rows, b1 * kBlockRows), done_rows = end - next;
    next = end;
    return done_rows;
  }
  View2<double> block_sums_;
};

}  // namespace detail
}  // namespace realspace
}  // namespace pmewald
