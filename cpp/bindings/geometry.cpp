// Python view of the pure geometry layer (boxes, processor grids, bricks, pencils)
// and the box / lattice conversions the other binding files share.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>

#include "base/errors.hpp"

#include "geometry/decomposition.hpp"
#include "geometry/index_box.hpp"
#include "geometry/domain_grid.hpp"
#include "geometry/neighborhood.hpp"
#include "bindings/bindings.hpp"

namespace py = pybind11;

namespace pmewald::bindings {

py::tuple box_to_python(const Box3& b) {
  return py::make_tuple(py::make_tuple(b.lo[0], b.lo[1], b.lo[2]),
                        py::make_tuple(b.hi[0], b.hi[1], b.hi[2]));
}

Box3 box_from_python(const py::handle& obj, const char* argument) {
  try {
    auto pair = obj.cast<std::array<std::array<int, 3>, 2>>();
    return Box3{pair[0], pair[1]};
  } catch (const py::cast_error&) {
    throw py::type_error(std::string(argument) +
                         " must be a pair of integer triples ((lo_x, lo_y, lo_z), (hi_x, hi_y, hi_z))");
  }
}

Mat3 mat3_from_python(const darr& b) {
  Mat3 m{};
  if (b.ndim() == 1 && b.shape(0) == 3) {
    m[0] = b.at(0);
    m[4] = b.at(1);
    m[8] = b.at(2);
  } else if (b.ndim() == 2 && b.shape(0) == 3 && b.shape(1) == 3) {
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) m[3 * i + j] = b.at(i, j);
  } else {
    throw ValueError("box must be a (3, 3) array (rows = lattice vectors) or a length-3 array");
  }
  for (double v : m)
    if (!std::isfinite(v)) throw ValueError("box contains NaN or inf");
  return m;
}


void bind_geometry(py::module_& m) {
  auto g = m.def_submodule("geometry", "Pure index-box geometry (no MPI).");
  g.def("intersect",
        [](py::handle a, py::handle b) {
          return box_to_python(intersect(box_from_python(a, "a"), box_from_python(b, "b")));
        },
        py::arg("a"), py::arg("b"), "Overlap of two half-open boxes (empty when disjoint).");
  g.def("volume", [](py::handle a) { return box_from_python(a, "box").volume(); }, py::arg("box"));
  g.def("split_range", &split_range, py::arg("n"), py::arg("p"), py::arg("i"));
  g.def("grid_surface", &grid_surface, py::arg("grid"), py::arg("mesh"));
  g.def("processor_grid_3d", &processor_grid_3d, py::arg("nranks"), py::arg("mesh"),
        "Minimum-surface 3-D processor grid (px, py, pz) for nranks over mesh.");
  g.def("processor_grid_2d", &processor_grid_2d, py::arg("nranks"), py::arg("n0"), py::arg("n1"));
  g.def("brick_box",
        [](int P, const Int3& mesh, int rank) { return box_to_python(brick_box(P, mesh, rank)); },
        py::arg("nranks"), py::arg("mesh"), py::arg("rank"));
  g.def("brick_boxes",
        [](int P, const Int3& mesh) {
          const Int3 grid = processor_grid_3d(P, mesh);
          py::list out;
          for (int r = 0; r < P; ++r) out.append(box_to_python(brick_box(grid, mesh, r)));
          return out;
        },
        py::arg("nranks"), py::arg("mesh"), "Bricks of every rank of the minimum-surface grid.");
  g.def("brick_neighborhood",
        [](const Int3& grid, const Int3& mesh, int rank, const std::array<double, 3>& reach) {
          const Neighborhood n = brick_neighborhood(grid, mesh, rank, reach);
          return py::make_tuple(n.send, n.recv);
        },
        py::arg("grid"), py::arg("mesh"), py::arg("rank"), py::arg("reach"),
        "(send, recv): sorted ranks of the brick decomposition grid x mesh that rank's domain reaches "
        "within reach[d] mesh spacings, and those whose domains reach it (neighborhood.hpp).");
  g.def(
      "domain_grid",
      [](const Int3& grid, const Int3& resolution, const std::array<std::vector<int>, 3>& cuts, double rx, double ry,
         double rz) {
        // (pulses per axis for the reach, direct and staged messages, coord_of every index per axis)
        const DomainGrid d = DomainGrid::with_cuts(grid, resolution, cuts);
        const std::array<double, 3> reach{rx, ry, rz};
        std::array<int, 3> pulses{};
        py::list coords;
        for (int a = 0; a < 3; ++a) {
          pulses[a] = d.pulses(a, reach[a]);
          std::vector<int> c(static_cast<std::size_t>(resolution[a]));
          for (int m = 0; m < resolution[a]; ++m) c[static_cast<std::size_t>(m)] = d.coord_of(a, m);
          coords.append(c);
        }
        const GhostMessageCounts n = ghost_message_counts(d, reach);
        return py::make_tuple(pulses, n.direct, n.staged, coords, staged_preferred(d, reach));
      },
      py::arg("grid"), py::arg("resolution"), py::arg("cuts"), py::arg("rx"), py::arg("ry"), py::arg("rz"),
      "A domain grid with explicit cuts (domain_grid.hpp): (pulses per axis for the reach in index points, "
      "the direct and staged ghost messages per rank, each index's grid coordinate per axis, staged_preferred).");
  g.def("bricks_as_cuts",
        [](const Int3& grid, const Int3& mesh) {
          const DomainGrid d = DomainGrid::bricks(grid, mesh);
          return std::array<std::vector<int>, 3>{d.cuts(0), d.cuts(1), d.cuts(2)};
        },
        py::arg("grid"), py::arg("mesh"), "The bricks' cuts per axis (DomainGrid::bricks).");
  g.def("slab_reaches", &slab_reaches, py::arg("K"), py::arg("p"), py::arg("from_part"), py::arg("to_part"),
        py::arg("reach"));
  g.def("pencil_box",
        [](int axis, int P, const Int3& mesh, int rank) {
          return box_to_python(pencil_box(axis, P, mesh, rank));
        },
        py::arg("axis"), py::arg("nranks"), py::arg("mesh"), py::arg("rank"));
  g.def("pencil_boxes",
        [](int axis, int P, const Int3& mesh) {
          py::list out;
          for (int r = 0; r < P; ++r) out.append(box_to_python(pencil_box(axis, P, mesh, r)));
          return out;
        },
        py::arg("axis"), py::arg("nranks"), py::arg("mesh"));
  g.def("tiles_exactly",
        [](const py::list& boxes, const Int3& mesh) {
          std::vector<Box3> bs;
          for (auto b : boxes) bs.push_back(box_from_python(b, "boxes[i]"));
          std::string why;
          const bool ok = tiles_exactly(bs, mesh, &why);
          return py::make_tuple(ok, why);
        },
        py::arg("boxes"), py::arg("mesh"),
        "(ok, reason): whether the boxes cover the mesh exactly once.");
}

}  // namespace pmewald::bindings
