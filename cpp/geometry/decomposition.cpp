#include "geometry/decomposition.hpp"

#include <limits>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace pmewald {
inline namespace geometry {

std::array<int, 2> split_range(int n, int p, int i) {
  if (p <= 0 || i < 0 || i >= p) throw std::invalid_argument("split_range: part index out of range");
  const long long lo = static_cast<long long>(i) * n / p;
  const long long hi = static_cast<long long>(i + 1) * n / p;
  return {static_cast<int>(lo), static_cast<int>(hi)};
}

long long grid_surface(const Int3& g, const Int3& m) {
  const long long nx = m[0], ny = m[1], nz = m[2];
  return 2 * (g[0] * ny * nz + g[1] * nx * nz + g[2] * nx * ny);
}

Int3 processor_grid_3d(int P, const Int3& mesh) {
  if (P < 1) throw std::invalid_argument("processor_grid_3d: need at least one rank");
  Int3 best{P, 1, 1};
  // Key: (leaves an empty brick, surface, -pz, -py): smaller is better.
  auto key = [&](const Int3& g) {
    const bool empties = g[0] > mesh[0] || g[1] > mesh[1] || g[2] > mesh[2];
    return std::make_tuple(empties, grid_surface(g, mesh), -g[2], -g[1]);
  };
  auto best_key = key(best);
  for (int px = 1; px <= P; ++px) {
    if (P % px) continue;
    const int rest = P / px;
    for (int py = 1; py <= rest; ++py) {
      if (rest % py) continue;
      const Int3 g{px, py, rest / py};
      const auto k = key(g);
      if (k < best_key) {
        best = g;
        best_key = k;
      }
    }
  }
  return best;
}

std::array<int, 2> processor_grid_2d(int P, int n0, int n1) {
  if (P < 1) throw std::invalid_argument("processor_grid_2d: need at least one rank");
  std::array<int, 2> best{P, 1};
  auto key = [&](int p0, int p1) {
    const bool empties = p0 > n0 || p1 > n1;
    return std::make_tuple(empties, static_cast<long long>(p0) * n1 + static_cast<long long>(p1) * n0, -p1);
  };
  auto best_key = key(P, 1);
  // Divisor pairs (d, P / d) with d <= sqrt(P): O(sqrt P), as every rank's pencil box
  // calls this (a model of all P ranks would otherwise be O(P^2)). The key orders all
  // candidates strictly (p1 differs), so the visiting order does not change the choice.
  auto consider = [&](int p0) {
    const auto k = key(p0, P / p0);
    if (k < best_key) {
      best = {p0, P / p0};
      best_key = k;
    }
  };
  for (int d = 1; static_cast<long long>(d) * d <= P; ++d) {
    if (P % d) continue;
    consider(d);
    consider(P / d);
  }
  return best;
}

Int3 grid_coords(const Int3& grid, int rank) {
  return {rank % grid[0], (rank / grid[0]) % grid[1], rank / (grid[0] * grid[1])};
}

Box3 brick_box(const Int3& grid, const Int3& mesh, int rank) {
  const int P = grid[0] * grid[1] * grid[2];
  if (rank < 0 || rank >= P) throw std::invalid_argument("brick_box: rank out of range");
  const Int3 c = grid_coords(grid, rank);
  Box3 b;
  for (int d = 0; d < 3; ++d) {
    const auto r = split_range(mesh[d], grid[d], c[d]);
    b.lo[d] = r[0];
    b.hi[d] = r[1];
  }
  return b;
}

Box3 brick_box(int P, const Int3& mesh, int rank) {
  return brick_box(processor_grid_3d(P, mesh), mesh, rank);
}

Box3 pencil_box(int axis, int P, const Int3& mesh, int rank) {
  if (axis < 0 || axis > 2) throw std::invalid_argument("pencil_box: axis must be 0, 1 or 2");
  if (rank < 0 || rank >= P) throw std::invalid_argument("pencil_box: rank out of range");
  const int a = (axis + 1) % 3 < (axis + 2) % 3 ? (axis + 1) % 3 : (axis + 2) % 3;
  const int b = 3 - axis - a;
  const auto g = processor_grid_2d(P, mesh[a], mesh[b]);
  const int ia = rank % g[0], ib = rank / g[0];
  Box3 box;
  box.lo[axis] = 0;
  box.hi[axis] = mesh[axis];
  const auto ra = split_range(mesh[a], g[0], ia);
  const auto rb = split_range(mesh[b], g[1], ib);
  box.lo[a] = ra[0];
  box.hi[a] = ra[1];
  box.lo[b] = rb[0];
  box.hi[b] = rb[1];
  return box;
}

bool tiles_exactly(const std::vector<Box3>& boxes, const Int3& mesh, std::string* why) {
  auto fail = [&](const std::string& msg) {
    if (why) *why = msg;
    return false;
  };
  const Box3 whole = full_box(mesh);
  long long total = 0;
  for (size_t r = 0; r < boxes.size(); ++r) {
    const Box3& b = boxes[r];
    for (int d = 0; d < 3; ++d)
      if (b.hi[d] < b.lo[d] && !b.empty())
        return fail("box of rank " + std::to_string(r) + " has hi < lo");
    if (!contains(whole, b))
      return fail("box of rank " + std::to_string(r) + " " + b.str() + " extends outside the mesh " +
                  whole.str());
    total += b.volume();
  }
  for (size_t r = 0; r < boxes.size(); ++r) {
    if (boxes[r].empty()) continue;
    for (size_t s = r + 1; s < boxes.size(); ++s)
      if (!intersect(boxes[r], boxes[s]).empty())
        return fail("boxes of ranks " + std::to_string(r) + " and " + std::to_string(s) + " overlap");
  }
  if (total != whole.volume()) {
    std::ostringstream m;
    m << "boxes cover " << total << " mesh points but the mesh has " << whole.volume();
    return fail(m.str());
  }
  if (why) why->clear();
  return true;
}

}  // namespace geometry
}  // namespace pmewald
