// Test hooks of the local reciprocal-space stages (no MPI): B-splines, moduli,
// spreading, the k-space solve and the single-rank reference. Registered as
// pmewald._core._testing.pme: the suite's, not an API.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <string>

#include "base/errors.hpp"
#include "base/kokkos_types.hpp"
#include "bindings/bindings.hpp"
#include "geometry/lattice.hpp"
#include "pme/bspline.hpp"
#include "pme/differentiation.hpp"
#include "pme/gather.hpp"
#include "pme/kspace_solve.hpp"
#include "pme/serial_reference.hpp"
#include "pme/spread.hpp"

namespace py = pybind11;

namespace pmewald::bindings {

namespace {

using carr = py::array_t<std::complex<double>, py::array::c_style | py::array::forcecast>;

View2<const double> positions_arg(const darr& x) {
  if (x.ndim() != 2 || x.shape(1) != 3) throw ValueError("positions must have shape (n, 3)");
  const double* p = x.data();
  for (py::ssize_t i = 0; i < x.size(); ++i)
    if (!std::isfinite(p[i])) throw ValueError("positions contain NaN or inf");
  return View2<const double>(p, x.shape(0), 3);
}

View1<const double> charges_arg(const darr& q, py::ssize_t n) {
  if (q.ndim() != 1 || q.shape(0) != n)
    throw ValueError("charges must have shape (n,) matching positions");
  for (py::ssize_t i = 0; i < n; ++i)
    if (!std::isfinite(q.data()[i])) throw ValueError("charges contain NaN or inf");
  return View1<const double>(q.data(), n);
}

}  // namespace

void bind_pme(py::module_& testing) {
  auto k = testing.def_submodule("pme", "Local (single-rank, no MPI) smooth-PME reciprocal-space stages.");

  k.def(
      "bspline_weights",
      [](int p, darr w) {
        if (p < 2 || p > kMaxOrder) throw ValueError("order must be in [2, 10]");
        const py::ssize_t n = w.size();
        py::array_t<double> M({n, static_cast<py::ssize_t>(p)}), dM({n, static_cast<py::ssize_t>(p)});
        double* a = M.mutable_data();
        double* b = dM.mutable_data();
        for (py::ssize_t i = 0; i < n; ++i) {
          const double x = w.data()[i];
          if (!(x >= 0.0 && x < 1.0)) throw ValueError("w must lie in [0, 1)");
          bspline_weights(p, x, a + i * p, b + i * p);
        }
        return py::make_tuple(M, dM);
      },
      py::arg("order"), py::arg("w"),
      "Weights M[i, j] = M_p(w_i + p-1-j) of the stencil points floor(u)-p+1+j and their "
      "derivatives d/du; returns (M, dM), each (len(w), p).");
  k.def("bspline_value", &bspline_value, py::arg("order"), py::arg("x"),
        "Cardinal B-spline M_p(x) (support [0, p]).");
  k.def(
      "bspline_moduli",
      [](int K, int p) {
        auto v = bspline_moduli(K, p);
        return py::array_t<double>(v.size(), v.data());
      },
      py::arg("K"), py::arg("order"),
      "|b(m)|^2 for m = 0..K-1 (Euler exponential spline; odd-order zeros fixed by "
      "neighbour interpolation of the denominator).");
  k.def(
      "serial_reference",
      [](darr box, darr positions, darr charges, double alpha, const Int3& mesh, int order,
         const std::string& differentiation, double coulomb_constant) {
        const Mat3 B = mat3_from_python(box);
        auto x = positions_arg(positions);
        const py::ssize_t n = positions.shape(0);
        auto q = charges_arg(charges, n);
        const Differentiation diff = parse_differentiation(differentiation);
        py::array_t<double> F({n, static_cast<py::ssize_t>(3)});
        py::array_t<double> pot(n);
        View2<double> fv(F.mutable_data(), n, 3);
        View1<double> pv(pot.mutable_data(), n);
        SerialReferenceResult r;
        {
          py::gil_scoped_release nogil;
          r = serial_reference(B, x, q, alpha, mesh, order, diff, coulomb_constant, fv, pv);
        }
        return py::make_tuple(r.energy, F, virial_to_python(r.virial), pot);
      },
      py::arg("box"), py::arg("positions"), py::arg("charges"), py::arg("alpha"),
      py::arg("mesh"), py::arg("order") = 5, py::arg("differentiation") = "ad",
      py::arg("coulomb_constant") = 1.0,
      "Single-rank SPME reciprocal part: returns (energy, forces (n,3), virial (3,3), "
      "potential (n,)). virial = -dE/d(strain) (symmetric); potential_i = dE/dq_i.");
  k.def(
      "spread_brick",
      [](darr box, darr positions, darr charges, const Int3& mesh, int order,
         py::handle brick, const std::string& mode, int repeat) {
        SpreadMode sm;
        if (mode == "auto") sm = SpreadMode::Auto;
        else if (mode == "plain") sm = SpreadMode::Plain;
        else if (mode == "atomic") sm = SpreadMode::Atomic;
        else throw ValueError("mode must be \"auto\", \"plain\" or \"atomic\"");
        const Mat3 B = mat3_from_python(box);
        auto x = positions_arg(positions);
        auto q = charges_arg(charges, positions.shape(0));
        const Box3 br = box_from_python(brick, "brick");
        const Box3 eb = extended_box(br, order);
        Stencil st;
        compute_stencils(reciprocal_of(B), mesh, order, x, br, false, st);
        const Int3 s = eb.shape();
        py::array_t<double> G({s[0], s[1], s[2]});
        View3<double> gv(G.mutable_data(), s[0], s[1], s[2]);
        Kokkos::Timer timer;
        for (int r = 0; r < std::max(repeat, 1); ++r) spread(st, q, eb, gv, true, sm);
        const double seconds = timer.seconds() / std::max(repeat, 1);
        return py::make_tuple(G, box_to_python(eb), seconds);
      },
      py::arg("box"), py::arg("positions"), py::arg("charges"), py::arg("mesh"),
      py::arg("order"), py::arg("brick"), py::arg("mode") = "auto", py::arg("repeat") = 1,
      "Spread owned atoms onto the brick's extended grid [lo-(p-1), hi); returns "
      "(grid, extended_box, seconds per spread) (mode auto/plain/atomic, repeat for timing).");
  k.def(
      "mesh_cells",
      [](darr box, darr positions, const Int3& mesh) {
        auto x = positions_arg(positions);
        const py::ssize_t n = positions.shape(0);
        py::array_t<int> C({n, static_cast<py::ssize_t>(3)});
        View2<int> cv(C.mutable_data(), n, 3);
        mesh_cells(reciprocal_of(mat3_from_python(box)), mesh, x, cv);
        return C;
      },
      py::arg("box"), py::arg("positions"), py::arg("mesh"),
      "Owning mesh cell floor(u) in [0, K) of each atom.");
  k.def(
      "kspace_apply",
      [](darr box, const Int3& mesh, double alpha, int order, double coulomb_constant,
         py::handle kbox, const Int3& storage_order, carr data,
         const std::string& differentiation, int half_axis, bool unnormalised_backward) {
        const Box3 kb = box_from_python(kbox, "kbox");
        SpectrumLayout layout;
        layout.half_axis = half_axis;
        layout.unnormalised_backward = unnormalised_backward;
        KSpaceSolver S(mat3_from_python(box), mesh, alpha, order, coulomb_constant, kb, storage_order, layout);
        if (data.size() != kb.volume()) throw ValueError("data size does not match kbox");
        const Differentiation diff = parse_differentiation(differentiation);
        Virial vir;
        py::array_t<std::complex<double>> out(data.size());
        const Complex* in = reinterpret_cast<const Complex*>(data.data());
        if (diff == Differentiation::AD) {
          std::copy(data.data(), data.data() + data.size(), out.mutable_data());
          const double e = S.apply_ad(reinterpret_cast<Complex*>(out.mutable_data()), &vir);
          return py::tuple(py::make_tuple(e, virial_to_python(vir), out));
        }
        py::array_t<std::complex<double>> ey(data.size()), ez(data.size());
        const double e = S.apply_ik(in, reinterpret_cast<Complex*>(out.mutable_data()),
                                    reinterpret_cast<Complex*>(ey.mutable_data()),
                                    reinterpret_cast<Complex*>(ez.mutable_data()), &vir);
        return py::tuple(py::make_tuple(e, virial_to_python(vir), py::make_tuple(out, ey, ez)));
      },
      py::arg("box"), py::arg("mesh"), py::arg("alpha"), py::arg("order"),
      py::arg("coulomb_constant"), py::arg("kbox"), py::arg("storage_order"), py::arg("data"),
      py::arg("differentiation") = "ad", py::arg("half_axis") = -1, py::arg("unnormalised_backward") = false,
      "Run KSpaceSolver on a flat spectrum of kbox (storage order given): returns "
      "(energy, virial, out) with out the scaled spectrum (ad) or (ex, ey, ez) (ik). half_axis h "
      ">= 0: kbox is part of the r2c half spectrum halved along h (m_h = 0..K_h/2); unnormalised_backward: "
      "scale by 2 G instead of 2 N G.");
}

}  // namespace pmewald::bindings
