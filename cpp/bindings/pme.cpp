// Python view of the local reciprocal-space kernels (no MPI): B-splines,
// moduli, the single-rank reciprocal pipeline, error estimates and parameter
// selection. Submodule pmewald._core.kernels.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "pme/bspline.hpp"
#include "base/errors.hpp"
#include "pme/gather.hpp"
#include "base/kokkos_types.hpp"
#include "geometry/lattice.hpp"
#include "pme/differentiation.hpp"
#include "tuning/cost_model.hpp"
#include "tuning/error_estimates.hpp"
#include "tuning/parameter_choice.hpp"
#include "pme/serial_reference.hpp"
#include "pme/kspace_solve.hpp"
#include "pme/spread.hpp"
#include "bindings/bindings.hpp"

namespace py = pybind11;

namespace pmewald::bindings {

namespace {

using darr = py::array_t<double, py::array::c_style | py::array::forcecast>;
using carr = py::array_t<std::complex<double>, py::array::c_style | py::array::forcecast>;

Mat3 box_arg(const darr& b) {
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

py::array_t<double> virial_matrix(const Virial& v) {
  py::array_t<double> W({3, 3});
  const auto w = v.matrix();
  std::copy(w.begin(), w.end(), W.mutable_data());
  return W;
}

py::dict params_dict(const Parameters& P) {
  py::dict d;
  d["alpha"] = P.alpha;
  d["mesh"] = py::make_tuple(P.mesh[0], P.mesh[1], P.mesh[2]);
  d["order"] = P.order;
  d["est_real"] = P.est_real;
  d["est_recip"] = P.est_recip;
  d["est_total"] = P.est_total;
  return d;
}

const char* diff_name(Differentiation d) { return d == Differentiation::IK ? "ik" : "ad"; }

#define PMEWALD_COST_FIELDS(X) \
  X(fft) X(mesh_ad) X(mesh_ik) X(atom_ad) X(atom_ik) X(point_ad) X(point_ik) X(transforms_ad) X(transforms_ik)

py::dict cost_dict(const CostModel& c) {
  py::dict d;
#define X(f) d[#f] = c.f;
  PMEWALD_COST_FIELDS(X)
#undef X
  return d;
}

// default_cost_model() with the entries of `cost` (a dict, or None) replacing its own.
CostModel cost_arg(const py::object& cost) {
  CostModel c = default_cost_model();
  if (cost.is_none()) return c;
  for (auto item : cost.cast<py::dict>()) {
    const std::string k = item.first.cast<std::string>();
    bool known = false;
#define X(f)                                                 \
  if (k == #f) {                                             \
    c.f = item.second.cast<decltype(c.f)>();                 \
    known = true;                                            \
  }
    PMEWALD_COST_FIELDS(X)
#undef X
    if (!known) throw ValueError("unknown cost model entry \"" + k + "\"");
  }
  return c;
}

}  // namespace

void bind_kernels(py::module_& m) {
  auto k = m.def_submodule(
      "kernels", "Local (single-rank, no MPI) smooth-PME reciprocal-space kernels and estimates.");

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
  k.def("fft_friendly", &fft_friendly, py::arg("n"),
        "Smallest integer >= n with prime factors 2, 3, 5 only.");

  k.def(
      "reciprocal_serial",
      [](darr box, darr positions, darr charges, double alpha, const Int3& mesh, int order,
         const std::string& differentiation, double coulomb_constant) {
        const Mat3 B = box_arg(box);
        auto x = positions_arg(positions);
        const py::ssize_t n = positions.shape(0);
        auto q = charges_arg(charges, n);
        const Differentiation diff = parse_differentiation(differentiation);
        py::array_t<double> F({n, static_cast<py::ssize_t>(3)});
        py::array_t<double> pot(n);
        View2<double> fv(F.mutable_data(), n, 3);
        View1<double> pv(pot.mutable_data(), n);
        ReciprocalResult r;
        {
          py::gil_scoped_release nogil;
          r = reciprocal_serial(B, x, q, alpha, mesh, order, diff, coulomb_constant, fv, pv);
        }
        return py::make_tuple(r.energy, F, virial_matrix(r.virial), pot);
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
        const Mat3 B = box_arg(box);
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
        mesh_cells(reciprocal_of(box_arg(box)), mesh, x, cv);
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
        KSpaceSolver S(box_arg(box), mesh, alpha, order, coulomb_constant, kb, storage_order, layout);
        if (data.size() != kb.volume()) throw ValueError("data size does not match kbox");
        const Differentiation diff = parse_differentiation(differentiation);
        Virial vir;
        py::array_t<std::complex<double>> out(data.size());
        const Complex* in = reinterpret_cast<const Complex*>(data.data());
        if (diff == Differentiation::AD) {
          std::copy(data.data(), data.data() + data.size(), out.mutable_data());
          const double e = S.apply_ad(reinterpret_cast<Complex*>(out.mutable_data()), &vir);
          return py::tuple(py::make_tuple(e, virial_matrix(vir), out));
        }
        py::array_t<std::complex<double>> ey(data.size()), ez(data.size());
        const double e = S.apply_ik(in, reinterpret_cast<Complex*>(out.mutable_data()),
                                    reinterpret_cast<Complex*>(ey.mutable_data()),
                                    reinterpret_cast<Complex*>(ez.mutable_data()), &vir);
        return py::tuple(py::make_tuple(e, virial_matrix(vir), py::make_tuple(out, ey, ez)));
      },
      py::arg("box"), py::arg("mesh"), py::arg("alpha"), py::arg("order"),
      py::arg("coulomb_constant"), py::arg("kbox"), py::arg("storage_order"), py::arg("data"),
      py::arg("differentiation") = "ad", py::arg("half_axis") = -1, py::arg("unnormalised_backward") = false,
      "Run KSpaceSolver on a flat spectrum of kbox (storage order given): returns "
      "(energy, virial, out) with out the scaled spectrum (ad) or (ex, ey, ez) (ik). half_axis h "
      ">= 0: kbox is part of the r2c half spectrum halved along h (m_h = 0..K_h/2); unnormalised_backward: "
      "scale by 2 G instead of 2 N G.");

  k.def("real_space_error", &real_space_error, py::arg("alpha"), py::arg("cutoff"), py::arg("sum_q2"),
        py::arg("n_atoms"), py::arg("volume"), py::arg("coulomb_constant") = 1.0,
        "Kolafa-Perram absolute RMS real-space force error: 2 k sum_q2 / sqrt(N rc V) exp(-alpha^2 rc^2).");

  k.def(
      "estimate_errors",
      [](darr box, double alpha, double cutoff, const Int3& mesh, int order,
         const std::string& differentiation, double sum_q2, int n_atoms,
         double coulomb_constant, py::object sum_q4) {
        const Mat3 B = box_arg(box);
        const double q4 = sum_q4.is_none() ? -1.0 : sum_q4.cast<double>();
        const double er = real_space_error(alpha, cutoff, sum_q2, n_atoms, volume_of(B),
                                           coulomb_constant);
        double ek;
        {
          py::gil_scoped_release nogil;
          ek = reciprocal_error(B, alpha, mesh, order, parse_differentiation(differentiation),
                                sum_q2, n_atoms, coulomb_constant, q4);
        }
        py::dict d;
        d["real"] = er;
        d["recip"] = ek;
        d["total"] = std::sqrt(er * er + ek * ek);
        return d;
      },
      py::arg("box"), py::arg("alpha"), py::arg("cutoff"), py::arg("mesh"), py::arg("order"),
      py::arg("differentiation"), py::arg("sum_q2"), py::arg("n_atoms"),
      py::arg("coulomb_constant") = 1.0, py::arg("sum_q4") = py::none(),
      "Absolute RMS force error estimates {real, recip, total} (Kolafa-Perram; "
      "Hockney-Eastwood/Deserno-Holm functional for SPME incl. self forces).");

  k.def(
      "choose_parameters",
      [](darr box, double cutoff, double target, double sum_q2, int n_atoms,
         const std::string& differentiation, double coulomb_constant, py::object alpha,
         py::object mesh, py::object order, py::object sum_q4) {
        const Mat3 B = box_arg(box);
        const double a = alpha.is_none() ? 0.0 : alpha.cast<double>();
        const Int3 K = mesh.is_none() ? Int3{0, 0, 0} : mesh.cast<Int3>();
        const int p = order.is_none() ? 0 : order.cast<int>();
        const double q4 = sum_q4.is_none() ? -1.0 : sum_q4.cast<double>();
        const Differentiation diff = parse_differentiation(differentiation);
        Parameters P;
        {
          py::gil_scoped_release nogil;
          P = choose_parameters(B, cutoff, target, sum_q2, n_atoms, diff, coulomb_constant, a,
                                K, p, q4);
        }
        return params_dict(P);
      },
      py::arg("box"), py::arg("cutoff"), py::arg("target"), py::arg("sum_q2"),
      py::arg("n_atoms"), py::arg("differentiation") = "ad", py::arg("coulomb_constant") = 1.0,
      py::arg("alpha") = py::none(), py::arg("mesh") = py::none(), py::arg("order") = 5,
      py::arg("sum_q4") = py::none(),
      "Choose (alpha, mesh, order) for an ABSOLUTE RMS force error target; order=None "
      "chooses the order by a cost model. Returns dict alpha, mesh, order, est_real, "
      "est_recip, est_total.");

  k.def(
      "reciprocal_error_parts",
      [](darr box, double alpha, const Int3& mesh, int order, const std::string& differentiation,
         double sum_q2, int n_atoms, py::object sum_q4) {
        const Mat3 B = box_arg(box);
        const double q4 = sum_q4.is_none() ? -1.0 : sum_q4.cast<double>();
        ReciprocalErrorParts e;
        {
          py::gil_scoped_release nogil;
          e = reciprocal_error_parts(B, alpha, mesh, order, parse_differentiation(differentiation), sum_q2,
                                     n_atoms, q4);
        }
        py::dict d;
        d["pair"] = e.pair;
        d["self"] = e.self;
        return d;
      },
      py::arg("box"), py::arg("alpha"), py::arg("mesh"), py::arg("order"), py::arg("differentiation"),
      py::arg("sum_q2"), py::arg("n_atoms"), py::arg("sum_q4") = py::none(),
      "The pair and self parts of the reciprocal variance: recip = k sqrt((pair + self) / n_atoms).");

  k.def("cost_model", []() { return cost_dict(default_cost_model()); },
        "The calibrated constants of the reciprocal cost model (seconds; see parameters.hpp and "
        "`python -m pmewald.bench cost`).");

  k.def(
      "reciprocal_cost",
      [](const Int3& mesh, int order, const std::string& differentiation, int n_atoms, py::object cost) {
        return reciprocal_cost(cost_arg(cost), mesh, order, parse_differentiation(differentiation), n_atoms);
      },
      py::arg("mesh"), py::arg("order"), py::arg("differentiation"), py::arg("n_atoms"),
      py::arg("cost") = py::none(),
      "Modelled seconds of one reciprocal-space step on one rank (cost: dict overriding cost_model()).");

  k.def(
      "choose_cheapest",
      [](darr box, double cutoff, double target, double sum_q2, int n_atoms, const std::string& differentiation,
         double coulomb_constant, py::object alpha, py::object order, std::pair<int, int> orders,
         py::object cost, py::object sum_q4, py::object mesh_target) {
        const Mat3 B = box_arg(box);
        const double a = alpha.is_none() ? 0.0 : alpha.cast<double>();
        const double mt = mesh_target.is_none() ? 0.0 : mesh_target.cast<double>();
        if (!alpha.is_none() && !(a > 0)) throw ValueError("alpha must be positive");
        std::vector<Differentiation> diffs;
        if (differentiation == "auto") diffs = {Differentiation::AD, Differentiation::IK};
        else diffs = {parse_differentiation(differentiation)};
        int lo = orders.first, hi = orders.second;
        if (!order.is_none()) lo = hi = order.cast<int>();
        const CostModel cm = cost_arg(cost);
        const double q4 = sum_q4.is_none() ? -1.0 : sum_q4.cast<double>();
        Choice C;
        {
          py::gil_scoped_release nogil;
          C = choose_cheapest(B, cutoff, target, sum_q2, n_atoms, coulomb_constant, a, diffs, lo, hi, cm, q4, mt);
        }
        py::dict d;
        d["alpha"] = C.alpha;
        d["mesh"] = py::make_tuple(C.mesh[0], C.mesh[1], C.mesh[2]);
        d["order"] = C.order;
        d["differentiation"] = diff_name(C.diff);
        d["est_real"] = C.est_real;
        d["est_recip"] = C.est_recip;
        d["est_total"] = C.est_total;
        d["cost"] = C.cost;
        py::list cl;
        for (const Candidate& c : C.candidates) {
          py::dict e;
          e["differentiation"] = diff_name(c.diff);
          e["order"] = c.order;
          e["alpha"] = c.alpha;
          e["mesh"] = py::make_tuple(c.mesh[0], c.mesh[1], c.mesh[2]);
          e["cost"] = c.cost;
          e["est_recip"] = c.est_recip;
          e["exact"] = c.exact;
          cl.append(e);
        }
        d["candidates"] = cl;
        return d;
      },
      py::arg("box"), py::arg("cutoff"), py::arg("target"), py::arg("sum_q2"), py::arg("n_atoms"),
      py::arg("differentiation") = "auto", py::arg("coulomb_constant") = 1.0, py::arg("alpha") = py::none(),
      py::arg("order") = py::none(), py::arg("orders") = std::make_pair(4, 8), py::arg("cost") = py::none(),
      py::arg("sum_q4") = py::none(), py::arg("mesh_target") = py::none(),
      "The cheapest (differentiation, order, alpha, mesh) by the cost model whose estimated "
      "ABSOLUTE RMS force error meets target. differentiation 'auto' tries ad and ik; order None "
      "tries orders[0]..orders[1]; alpha None scans alpha (real-space share 99%..10% of the "
      "budget). Returns dict alpha, mesh, order, differentiation, est_real, est_recip, est_total, "
      "cost (modelled seconds) and candidates (the best of each (differentiation, order), "
      "cheapest first; 'exact' marks those checked with the exact estimate). mesh_target: "
      "also require the ad reciprocal estimate of the mesh to be at most this (an energy "
      "requirement, whatever the differentiation).");
}

}  // namespace pmewald::bindings
