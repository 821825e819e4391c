// The cost model of one reciprocal-space step (what the automatic parameter choice
// minimises). No MPI, nothing timed at run time.
#pragma once

#include "geometry/index_box.hpp"
#include "pme/differentiation.hpp"

namespace pmewald {
inline namespace tuning {

// Cost model of one reciprocal-space step on ONE rank, in seconds. THE place for its
// constants: they are measured, not derived, and go stale when the kernels change.
// Re-calibrate with
//     python -m pmewald.bench cost            (prints the body of default_cost_model())
// The model, for a mesh of N = K1 K2 K3 points, order p, n atoms:
//   t = fft * transforms(diff) * N log2 N     3-D FFTs (ad: 1 forward + 1 backward,
//                                             ik: 1 forward + 3 backward)
//     + mesh(diff) * N                        solve, grid zeroing, ghost layers, copies
//     + (atom(diff) + point(diff) p^3) * n    spreading and gathering: per stencil point,
//                                             plus a per-atom part (stencil set-up, cache
//                                             misses on meshes larger than the cache)
// The choice only depends on ratios of these constants, is the same on every rank count
// (the one-rank model is used for any), and never times anything at run time.
struct CostModel {
  double fft = 0;       // s per N log2 N per 3-D transform
  double mesh_ad = 0;   // s per mesh point, ad step
  double mesh_ik = 0;   // s per mesh point, ik step
  double atom_ad = 0;   // s per atom, ad step (spread + gather)
  double atom_ik = 0;   // s per atom, ik step
  double point_ad = 0;  // s per atom per p^3, ad step (spread + gather)
  double point_ik = 0;  // s per atom per p^3, ik step
  int transforms_ad = 2;
  int transforms_ik = 4;
};
// The calibrated constants (defined in cost_model.cpp, next to the calibration record).
CostModel default_cost_model();

double reciprocal_cost(const CostModel& c, const Int3& mesh, int order, Differentiation diff,
                       int n_atoms);

}  // namespace tuning
}  // namespace pmewald
