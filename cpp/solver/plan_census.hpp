// What one PMESolver::compute call sends, rank by rank, from the plan geometry alone:
// the input of the communication model (python/pmewald/bench/scale/comm_model.py, docs/scaling.md).
//
// The census is built from the functions the solver's own plans come from: the
// processor grid and bricks (geometry/decomposition), the halo's HaloLayout and
// halo_lists (comm/halo), the real FFT's plan_stages and remap_lists (fft/), and the
// ghost-atom partners of brick_neighborhood (geometry/neighborhood) with the number of
// atoms a uniform density puts in each partner's reach. So message counts and sizes
// are those of the real plans (tests/scale/test_plan_census.py compares them with the plans
// of a run). Pure: no MPI. Per rank O(partners + mesh points it moves), so a machine
// of 65,536 virtual ranks is counted in seconds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "geometry/index_box.hpp"

namespace pmewald {
inline namespace solver {

// One exchange of the compute call, as executed in its forward direction.
struct ExchangeCensus {
  // "in->x", "x->y", "y->z", "halo", "ghost atoms", "ghost forces"; staged ghosts: one
  // exchange per axis and pulse, "ghost atoms z2" (its forces "ghost forces z2").
  std::string name;
  int element_bytes = 0;     // bytes per element of `elements` (0: `elements` are bytes)
  int forward_calls = 0;     // executions per compute call in the forward direction ...
  int reverse_calls = 0;     // ... and reversed (the backward FFT, the halo reduce)
  // Messages in the forward direction, CSR over sender ranks: rank r sends
  // messages [start[r], start[r + 1]) to dst[k] with elements[k] elements.
  std::vector<std::int64_t> start;
  std::vector<int> dst;
  std::vector<std::int64_t> elements;
  std::vector<std::int64_t> self_elements;  // per rank: the piece it keeps
  // Per rank: the connected component of the exchange graph holding it (the
  // collective mode's sub-communicator): its size and this rank's place in it.
  std::vector<int> component_size, component_rank;
};

struct CensusInput {
  int ranks = 1;
  Int3 mesh{0, 0, 0};
  int order = 5;
  bool ik = false;             // ik differentiation: three backward FFTs and halo fills
  double box[9] = {0};         // rows are lattice vectors
  double cutoff = 0;
  std::int64_t atoms = 0;      // uniform density: atoms / box volume
  int ghost_exchange = 0;      // 0 direct, 1 staged, 2 auto (solver's GhostExchangeChoice rule)
};

std::vector<ExchangeCensus> solver_census(const CensusInput& in);

}  // namespace solver
}  // namespace pmewald
