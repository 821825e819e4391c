// Force interpolation from a rank's extended brick grid(s) back to its atoms.
// Pure local kernels: no MPI. The grids are real, over the extended box
// ext_box = extended_box(brick, order) with the ghost layers FILLED
// (halo forward), C order [x][y][z].
#pragma once

#include "geometry/index_box.hpp"
#include "base/kokkos_types.hpp"
#include "geometry/lattice.hpp"
#include "pme/spread.hpp"

namespace pmewald {
inline namespace pme {

// Analytical differentiation. phi = dE_rec/dQ on the mesh (what the backward
// FFT of KSpaceSolver::apply_ad's output gives). With W_i(x) = prod_d M_p(u_d - x_d):
//   potential(i) = sum_x W_i(x) phi(x)                      (= dE_rec/dq_i)
//   F_i,a = -q_i sum_x phi(x) dW_i/dr_a,
//   dW/dr_a = sum_d (du_d/dr_a) dW/du_d,  du_d/dr_a = K_d recip[a][d].
// Overwrites forces (n, 3) and potential (n) (potential may be an empty view).
// The stencil must carry derivatives.
void gather_ad(const Stencil& st, const Mat3& recip, const Int3& mesh,
               View1<const double> charges, const Box3& ext_box, View3<const double> phi,
               View2<double> forces, View1<double> potential);

// ik differentiation: F_i,a = q_i sum_x W_i(x) E_a(x) with the three field
// grids E_a from the backward FFTs of KSpaceSolver::apply_ik. Overwrites forces.
void gather_ik(const Stencil& st, View1<const double> charges, const Box3& ext_box,
               View3<const double> ex, View3<const double> ey, View3<const double> ez,
               View2<double> forces);

// Potential only: potential(i) = sum_x W_i(x) grid(x) (overwrites).
void gather_potential(const Stencil& st, const Box3& ext_box, View3<const double> grid,
                      View1<double> potential);

}  // namespace pme
}  // namespace pmewald
