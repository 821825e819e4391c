// Processor grids and the brick / pencil boxes each rank owns.
// Pure functions of (mesh, rank count, rank): no MPI inside, so every
// decomposition can be checked for any number of virtual ranks.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "geometry/index_box.hpp"

namespace pmewald {
inline namespace geometry {

// Part `i` of `n` items split into `p` nearly equal contiguous parts:
// [i*n/p, (i+1)*n/p). Parts are empty when p > n.
std::array<int, 2> split_range(int n, int p, int i);

// Total surface (in mesh points) of the bricks of a px*py*pz grid over `mesh`:
// 2*(px*ny*nz + py*nx*nz + pz*nx*ny). Independent of how uneven the split is.
long long grid_surface(const Int3& grid, const Int3& mesh);

// Factor P into a 3-D processor grid that minimises total brick surface.
// Grids that leave no brick empty (p_d <= n_d) are preferred; ties go to the
// grid with the most ranks along z, then along y (deterministic).
Int3 processor_grid_3d(int P, const Int3& mesh);

// Factor P into a 2-D grid (p0, p1) over a plane of n0 x n1 points, minimising
// the cut length p0*n1 + p1*n0, preferring grids without empty parts.
std::array<int, 2> processor_grid_2d(int P, int n0, int n1);

// Coordinates of `rank` in a processor grid; x varies fastest.
Int3 grid_coords(const Int3& grid, int rank);

// The brick of `rank` in processor grid `grid` over `mesh`.
Box3 brick_box(const Int3& grid, const Int3& mesh, int rank);

// The brick of `rank` in the minimum-surface grid for P ranks.
Box3 brick_box(int P, const Int3& mesh, int rank);

// The pencil of `rank` when the mesh is cut into P pencils along `axis`
// (each pencil holds whole lines of the mesh along that axis). The two other
// axes (in increasing order) form a 2-D processor grid, the first fastest.
Box3 pencil_box(int axis, int P, const Int3& mesh, int rank);

// True when `boxes` (one per rank) cover the mesh exactly once: every box
// inside the mesh, no two overlapping, volumes summing to the mesh volume.
// On failure `why` names the first problem found.
bool tiles_exactly(const std::vector<Box3>& boxes, const Int3& mesh, std::string* why = nullptr);

}  // namespace geometry
}  // namespace pmewald
