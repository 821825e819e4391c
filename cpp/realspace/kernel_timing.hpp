// Timings of the pair kernels alone, on synthetic partners, for benchmarks
// (benchmarks/pair_kernels.py): the atom kernels per pair and the cluster
// kernels per lane, beside this core's measured FMA throughput (the
// arithmetic limit they are compared with). Not used by the solver.
#pragma once

#include "realspace/pair_kernel.hpp"

namespace pmewald {
inline namespace realspace {

// Nanoseconds per pair of the atom block kernel (erfc_pair_block or its mixed
// form): one atom against 256 partners within the cutoff, `reps` times.
double atom_kernel_ns_per_pair(PairPrecision precision, int reps);
// Nanoseconds per lane of the cluster kernel: one i-cluster against 64 full
// blocks (every mask bit set; separations up to 15.6, alpha 0.35), `reps` times,
// with the cutoff `cutoff`: 20 (alpha rc 7) puts every pair within it and the
// mixed kernel on its erfcx path, 14 (alpha rc 4.9) the mixed kernel on its
// rational path (a few lanes past the cutoff, which cost as much as the others).
double cluster_kernel_ns_per_lane(PairPrecision precision, int reps, double cutoff = 20.0);
// Fused multiply-adds per second of this core on the pair kernels' widest
// float registers (8 lanes with AVX2, 16 with AVX-512, 4 on the baseline):
// independent chains, `seconds` long. Returns (register FMAs per second, lanes).
struct FmaRate {
  double per_second = 0;
  int lanes = 0;
};
FmaRate fma_rate(double seconds);

}  // namespace realspace
}  // namespace pmewald
