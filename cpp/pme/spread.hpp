// Charge spreading (smooth PME, B-splines of order p) onto a rank's extended
// brick. Pure local kernels: no MPI.
//
// Ownership: an atom with scaled fractional coordinates u (u_d = K_d (s_d - floor s_d))
// belongs to the rank whose brick [lo, hi) contains the mesh point floor(u)
// (wrapped into [0, K)). Its stencil covers floor(u_d) - p + 1 + j, j = 0..p-1,
// so a brick needs p-1 ghost layers on the LOW side only: the extended box is
// [lo - (p-1), hi) per axis, stored C order [x][y][z] (z fastest). Indices in
// the extended box are unwrapped global indices (they may be negative).
#pragma once

#include "geometry/index_box.hpp"
#include "base/kokkos_types.hpp"
#include "geometry/lattice.hpp"

namespace pmewald {
inline namespace pme {

// Per-atom stencil: for atom i and axis d, the p weights and (optionally)
// their derivatives d w / d u_d, starting at global unwrapped mesh index base(i, d).
struct Stencil {
  int order = 0;
  View2<int> base;   // (n, 3): first stencil point, = cell - (p-1)
  View2<int> cell;   // (n, 3): floor(u) in the unwrapped frame of the brick, lo <= cell < hi
  View3<double> w;   // (n, 3, p)
  View3<double> dw;  // (n, 3, p) (extent 0 when derivatives were not requested)
  std::size_t size() const { return base.extent(0); }
};

// The extended (ghosted) box of a brick: [lo - (order-1), hi).
Box3 extended_box(const Box3& brick, int order);

// Owning mesh cell of each atom: cells(i, d) = floor(u_d) in [0, K_d).
// positions: (n, 3) Cartesian; any image (wrapping is done here).
void mesh_cells(const Mat3& recip, const Int3& mesh, View2<const double> positions,
                View2<int> cells);

// Fill `out` (allocated/resized here) for the atoms in positions (n, 3).
// `brick` is the owned box [lo, hi) (global indices): the periodic image of
// floor(u) is chosen as floor(u) + n K in [lo, hi). Throws ValueError when an
// atom is not owned by the brick (no image of its cell lies in [lo, hi)).
// order in [3, 10]; derivatives: also fill dw (needed by AD gather).
void compute_stencils(const Mat3& recip, const Int3& mesh, int order,
                      View2<const double> positions, const Box3& brick, bool derivatives,
                      Stencil& out);

// How spread avoids races: Auto = plain adds when ExecSpace().concurrency() == 1
// (Serial backend), Kokkos::atomic_add otherwise; Plain/Atomic force one.
// Plain on a concurrent backend is a data race: only for measurements.
enum class SpreadMode { Auto, Plain, Atomic };

// grid(i, j, k) over ext_box (= extended_box(brick, order)) += sum_atoms q * w_x w_y w_z.
// zero_first: clear the grid first. Race-free on any backend with Auto.
// (Sorting atoms by mesh cell first would improve cache reuse for large n;
// not done yet: with p^3 = 125 contiguous-in-z updates per atom the grid
// traffic is already mostly cache-resident for bricks of a few MB.)
void spread(const Stencil& st, View1<const double> charges, const Box3& ext_box,
            View3<double> grid, bool zero_first = true, SpreadMode mode = SpreadMode::Auto);

}  // namespace pme
}  // namespace pmewald
