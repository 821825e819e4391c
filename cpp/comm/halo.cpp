#include "comm/halo.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "base/errors.hpp"
#include "comm/mpi_helpers.hpp"
#include "comm/tags.hpp"

namespace pmewald {
inline namespace comm {

namespace {

// Element index of global point x inside box b (C order, z fastest).
inline Index local_index(const Box3& b, int x, int y, int z) {
  return static_cast<Index>((static_cast<std::int64_t>(x - b.lo[0]) * b.size(1) + (y - b.lo[1])) * b.size(2) +
                            (z - b.lo[2]));
}

Box3 shifted(const Box3& b, const Int3& n, const Int3& mesh) {
  Box3 r = b;
  for (int d = 0; d < 3; ++d) {
    r.lo[d] += n[d] * mesh[d];
    r.hi[d] += n[d] * mesh[d];
  }
  return r;
}

// Visit the pieces shared by the extended box `ext` (of the ghost holder) and the
// periodic images of brick `owner`, in the canonical order both sides use:
// shifts n in {-1,0}^3 lexicographically, points in C order. `skip_identity`
// drops n = 0 (the brick itself when holder == owner). f(x, y, z, n).
template <class F>
void for_each_shared_point(const Box3& ext, const Box3& owner, const Int3& mesh, bool skip_identity, F&& f) {
  if (ext.empty() || owner.empty()) return;
  for (int nx = -1; nx <= 0; ++nx)
    for (int ny = -1; ny <= 0; ++ny)
      for (int nz = -1; nz <= 0; ++nz) {
        const Int3 n{nx, ny, nz};
        if (skip_identity && nx == 0 && ny == 0 && nz == 0) continue;
        const Box3 piece = intersect(ext, shifted(owner, n, mesh));
        if (piece.empty()) continue;
        for (int x = piece.lo[0]; x < piece.hi[0]; ++x)
          for (int y = piece.lo[1]; y < piece.hi[1]; ++y)
            for (int z = piece.lo[2]; z < piece.hi[2]; ++z) f(x, y, z, n);
      }
}

}  // namespace

Box3 halo_extended_box(const Box3& brick, int ghost) {
  if (brick.empty()) return Box3{brick.lo, brick.lo};
  Box3 e = brick;
  for (int d = 0; d < 3; ++d) e.lo[d] -= ghost;
  return e;
}

namespace {

std::vector<Box3> extended_boxes(const std::vector<Box3>& bricks, int ghost) {
  std::vector<Box3> e;
  e.reserve(bricks.size());
  for (const Box3& b : bricks) e.push_back(halo_extended_box(b, ghost));
  return e;
}

}  // namespace

HaloLayout::HaloLayout(const std::vector<Box3>& bricks_in, const Int3& mesh_in, int ghost_in)
    : mesh(mesh_in), ghost(ghost_in), bricks(bricks_in), extended(extended_boxes(bricks_in, ghost_in)) {
  for (int d = 0; d < 3; ++d)
    if (ghost >= mesh[d] && ghost > 0)
      throw ValueError("halo: the mesh (" + std::to_string(mesh[d]) + " points along an axis) must be larger than " +
                       "the ghost width " + std::to_string(ghost) + " (mesh >= spline order)");
}

ExchangeLists halo_lists(const HaloLayout& layout, int me, std::int64_t* examined) {
  const int P = layout.size();
  const Int3& mesh = layout.mesh;
  const std::vector<Box3>& bricks = layout.bricks.boxes();
  const std::vector<Box3>& exts = layout.extended.boxes();
  const Box3& my_brick = bricks[me];
  const Box3& my_ext = exts[me];
  ExchangeLists L;
  L.src_size = L.dst_size = my_ext.volume();
  // Partners: ranks whose extended box holds an image of my brick (I send), and
  // ranks with an image of their brick in my extended box (I receive).
  std::vector<int> partners;
  for (int nx = -1; nx <= 0; ++nx)
    for (int ny = -1; ny <= 0; ++ny)
      for (int nz = -1; nz <= 0; ++nz) {
        const Int3 n{nx, ny, nz}, minus{-nx, -ny, -nz};
        for (int r : layout.extended.overlapping(shifted(my_brick, n, mesh), examined)) partners.push_back(r);
        for (int r : layout.bricks.overlapping(shifted(my_ext, minus, mesh), examined)) partners.push_back(r);
      }
  // Ring order from me+1, as in the remaps; the self piece (me) comes last.
  auto ring = [&](int r) { return (r - me - 1 + P) % P; };
  std::sort(partners.begin(), partners.end(), [&](int a, int b) { return ring(a) < ring(b); });
  partners.erase(std::unique(partners.begin(), partners.end()), partners.end());
  if (partners.empty() || partners.back() != me) partners.push_back(me);
  for (const int other : partners) {
    const bool self = other == me;
    // As owner: my brick points that `other` holds as ghosts.
    std::vector<Index> send;
    for_each_shared_point(exts[other], my_brick, mesh, self, [&](int x, int y, int z, const Int3& n) {
      const Index src = local_index(my_ext, x - n[0] * mesh[0], y - n[1] * mesh[1], z - n[2] * mesh[2]);
      if (self) {
        L.self_src.push_back(src);
        L.self_dst.push_back(local_index(my_ext, x, y, z));
      } else {
        send.push_back(src);
      }
    });
    if (self) continue;
    if (!send.empty()) {
      L.send_ranks.push_back(other);
      L.send_indices.push_back(std::move(send));
    }
    // As ghost holder: my ghost points owned by `other`.
    std::vector<Index> recv;
    for_each_shared_point(my_ext, bricks[other], mesh, false,
                          [&](int x, int y, int z, const Int3&) { recv.push_back(local_index(my_ext, x, y, z)); });
    if (!recv.empty()) {
      L.recv_ranks.push_back(other);
      L.recv_indices.push_back(std::move(recv));
    }
  }
  return L;
}

ExchangeLists halo_lists(const std::vector<Box3>& bricks, const Int3& mesh, int ghost, int me) {
  return halo_lists(HaloLayout(bricks, mesh, ghost), me);
}

Halo::Halo(MPI_Comm comm, const std::vector<Box3>& bricks, const Int3& mesh, int ghost, CommMode mode)
    : ghost_(ghost) {
  int me = 0;
  MPI_Comm_rank(comm, &me);
  brick_ = bricks[me];
  extended_ = halo_extended_box(brick_, ghost);
  // local_index is 32-bit (the exchange layer's Index): refuse before building lists.
  agree_or_throw(comm, extended_.volume() > INT32_MAX
                           ? "halo: this rank's ghosted brick " + extended_.str() + " has " +
                                 std::to_string(extended_.volume()) +
                                 " points, more than the 2^31 - 1 a rank can index; use more ranks"
                           : std::string());
  plan_ = std::make_shared<const ExchangePlan>(comm, halo_lists(bricks, mesh, ghost, me), tags::kHalo);
  exec_ = make_executor<double>(mode, plan_);
}

void Halo::reduce(double* grid, Overlap* overlap) {
  exchange(*exec_, grid, grid, Direction::Reverse, UnpackOp::Add, overlap);
}

void Halo::fill(double* grid, Overlap* overlap) {
  exchange(*exec_, grid, grid, Direction::Forward, UnpackOp::Assign, overlap);
}

void Halo::set_mode(CommMode mode) {
  if (mode == exec_->mode()) return;
  exec_.reset();  // a collective executor frees its sub-communicator first
  exec_ = make_executor<double>(mode, plan_);
}

}  // namespace comm
}  // namespace pmewald
