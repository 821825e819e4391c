#include "tuning/cost_model.hpp"

#include <algorithm>
#include <cmath>

namespace pmewald {
inline namespace tuning {

// Calibrated with `python -m pmewald.bench cost` (its defaults: 20000 random charges in
// cell order, 60 A box, meshes 64^3..160^3, orders 4..8, 1 rank, Serial Kokkos, FFTW
// real-to-complex transforms, FFTW_MEASURE) on the 2-core development VM at main 4204f75
// (AVX-512 spread/gather, unrolled stencils), 2026-11-30 19:50 UTC (model / measured
// 0.77..1.18 over the 40 settings; the previous constants, from 28653f1, overestimated
// high orders up to 2.35x after that change). Re-run it after changing the FFT,
// solve, spread or gather kernels and paste its output here.
CostModel default_cost_model() {
  CostModel c;
  c.fft = 1.91e-10;
  c.mesh_ad = 4.59e-09;
  c.mesh_ik = 6.99e-09;
  c.atom_ad = 5.27e-08;
  c.atom_ik = 1.43e-07;
  c.point_ad = 5.49e-10;
  c.point_ik = 6.81e-10;
  c.transforms_ad = 2;
  c.transforms_ik = 4;
  return c;
}

double reciprocal_cost(const CostModel& c, const Int3& K, int p, Differentiation diff, int n_atoms) {
  const double N = static_cast<double>(K[0]) * K[1] * K[2];
  const bool ik = diff == Differentiation::IK;
  const double p3 = static_cast<double>(p) * p * p;
  return c.fft * (ik ? c.transforms_ik : c.transforms_ad) * N * std::log2(std::fmax(N, 2.0)) +
         (ik ? c.mesh_ik : c.mesh_ad) * N +
         ((ik ? c.atom_ik : c.atom_ad) + (ik ? c.point_ik : c.point_ad) * p3) * std::max(n_atoms, 0);
}

}  // namespace tuning
}  // namespace pmewald
