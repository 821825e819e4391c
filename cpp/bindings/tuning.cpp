// Python view of the tuning layer (no MPI): error estimates, the cost model and the
// parameter choice. Submodule pmewald._core.tuning (pmewald.PME tunes with it).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "bindings/bindings.hpp"
#include "geometry/lattice.hpp"
#include "pme/differentiation.hpp"
#include "tuning/cost_model.hpp"
#include "tuning/error_estimates.hpp"
#include "tuning/parameter_choice.hpp"

namespace py = pybind11;

namespace pmewald::bindings {

namespace {

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

void bind_tuning(py::module_& core) {
  auto t = core.def_submodule(
      "tuning", "Error estimates, the cost model and the parameter choice of smooth PME (no MPI).");

  t.def("fft_friendly", &fft_friendly, py::arg("n"),
        "Smallest integer >= n with prime factors 2, 3, 5 only.");
  t.def("real_space_error", &real_space_error, py::arg("alpha"), py::arg("cutoff"), py::arg("sum_q2"),
        py::arg("n_atoms"), py::arg("volume"), py::arg("coulomb_constant") = 1.0,
        "Kolafa-Perram absolute RMS real-space force error: 2 k sum_q2 / sqrt(N rc V) exp(-alpha^2 rc^2).");
  t.def(
      "estimate_errors",
      [](darr box, double alpha, double cutoff, const Int3& mesh, int order,
         const std::string& differentiation, double sum_q2, int n_atoms,
         double coulomb_constant, py::object sum_q4) {
        const Mat3 B = mat3_from_python(box);
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
  t.def(
      "choose_parameters",
      [](darr box, double cutoff, double target, double sum_q2, int n_atoms,
         const std::string& differentiation, double coulomb_constant, py::object alpha,
         py::object mesh, py::object order, py::object sum_q4) {
        const Mat3 B = mat3_from_python(box);
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
  t.def(
      "reciprocal_error_parts",
      [](darr box, double alpha, const Int3& mesh, int order, const std::string& differentiation,
         double sum_q2, int n_atoms, py::object sum_q4) {
        const Mat3 B = mat3_from_python(box);
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
  t.def("cost_model", []() { return cost_dict(default_cost_model()); },
        "The calibrated constants of the reciprocal cost model (seconds; see tuning/cost_model.hpp and "
        "`python -m pmewald.bench cost`).");
  t.def(
      "reciprocal_cost",
      [](const Int3& mesh, int order, const std::string& differentiation, int n_atoms, py::object cost) {
        return reciprocal_cost(cost_arg(cost), mesh, order, parse_differentiation(differentiation), n_atoms);
      },
      py::arg("mesh"), py::arg("order"), py::arg("differentiation"), py::arg("n_atoms"),
      py::arg("cost") = py::none(),
      "Modelled seconds of one reciprocal-space step on one rank (cost: dict overriding cost_model()).");
  t.def(
      "choose_cheapest",
      [](darr box, double cutoff, double target, double sum_q2, int n_atoms, const std::string& differentiation,
         double coulomb_constant, py::object alpha, py::object order, std::pair<int, int> orders,
         py::object cost, py::object sum_q4, py::object mesh_target) {
        const Mat3 B = mat3_from_python(box);
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
      "requirement, whatever the differentiation).");}

}  // namespace pmewald::bindings
