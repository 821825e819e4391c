// Python view of the tuning layer (no MPI): error estimates, the cost model and the
// parameter choice. Submodule pmewald._core.tuning (pmewald.PME tunes with it).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "bindings/bindings.hpp"
#include "geometry/lattice.hpp"
#include "pme/differentiation.hpp"
#include "tuning/charge_correlation.hpp"
#include "tuning/cost_model.hpp"
#include "tuning/error_estimates.hpp"
#include "tuning/parameter_choice.hpp"
#include "tuning/real_space_tail.hpp"

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

// A ChargeCorrelation argument (None: uncorrelated charges).
const ChargeCorrelation* correlation_arg(const py::object& c) {
  return c.is_none() ? nullptr : c.cast<const ChargeCorrelation*>();
}

}  // namespace

// Longer than 150 lines because it is a list of independent declarations (one .def per bound
// class, method or function, each with its docstring); there are no steps to split.
void bind_tuning(py::module_& core) {
  auto t = core.def_submodule(
      "tuning", "Error estimates, the cost model and the parameter choice of smooth PME (no MPI).");

  t.def("fft_friendly", &fft_friendly, py::arg("n"),
        "Smallest integer >= n with prime factors 2, 3, 5 only.");
  t.def("real_space_error", &real_space_error, py::arg("alpha"), py::arg("cutoff"), py::arg("sum_q2"),
        py::arg("n_atoms"), py::arg("volume"), py::arg("coulomb_constant") = 1.0,
        "Kolafa-Perram absolute RMS real-space force error: 2 k sum_q2 / sqrt(N rc V) exp(-alpha^2 rc^2).");
  t.def("combined_error", &combined_error, py::arg("real"), py::arg("recip"), py::arg("cross"),
        "sqrt(real^2 + recip^2 + 2 cross real recip) (at least |real - recip|): the total of two errors "
        "whose correlation is cross.");
  t.def("reciprocal_budget", &reciprocal_budget, py::arg("target"), py::arg("real"), py::arg("cross"),
        "The largest reciprocal error whose combined_error with real is at most target (0 when real >= target).");
  t.def(
      "estimate_errors",
      [](darr box, double alpha, double cutoff, const Int3& mesh, int order,
         const std::string& differentiation, double sum_q2, int n_atoms,
         double coulomb_constant, py::object sum_q4, py::object correlation, py::object real_volume) {
        const Mat3 B = mat3_from_python(box);
        const double q4 = sum_q4.is_none() ? -1.0 : sum_q4.cast<double>();
        const ChargeCorrelation* corr = correlation_arg(correlation);
        const double rv = real_volume.is_none() ? volume_of(B) : real_volume.cast<double>();
        if (!(rv > 0) || !std::isfinite(rv)) throw ValueError("real_volume must be positive");
        const double er = real_space_error(alpha, cutoff, sum_q2, n_atoms, rv, coulomb_constant) *
                          (corr ? corr->real_factor(alpha * cutoff) : 1.0);
        double ek;
        {
          py::gil_scoped_release nogil;
          ek = reciprocal_error(B, alpha, mesh, order, parse_differentiation(differentiation),
                                sum_q2, n_atoms, coulomb_constant, q4, corr);
        }
        py::dict d;
        d["real"] = er;
        d["recip"] = ek;
        d["total"] = std::sqrt(er * er + ek * ek);
        return d;
      },
      py::arg("box"), py::arg("alpha"), py::arg("cutoff"), py::arg("mesh"), py::arg("order"),
      py::arg("differentiation"), py::arg("sum_q2"), py::arg("n_atoms"),
      py::arg("coulomb_constant") = 1.0, py::arg("sum_q4") = py::none(), py::arg("correlation") = py::none(),
      py::arg("real_volume") = py::none(),
      "Absolute RMS force error estimates {real, recip, total} (Kolafa-Perram; "
      "Hockney-Eastwood/Deserno-Holm functional for SPME incl. self forces; with a ChargeCorrelation, "
      "weighted by the charges' structure factor). real_volume: the volume the atoms fill, for the "
      "real-space density (None: the box's; a slab in vacuum: the slab's).");
  t.def(
      "choose_parameters",
      [](darr box, double cutoff, double target, double sum_q2, int n_atoms,
         const std::string& differentiation, double coulomb_constant, py::object alpha,
         py::object mesh, py::object order, py::object sum_q4, py::object correlation) {
        const Mat3 B = mat3_from_python(box);
        const double a = alpha.is_none() ? 0.0 : alpha.cast<double>();
        const Int3 K = mesh.is_none() ? Int3{0, 0, 0} : mesh.cast<Int3>();
        const int p = order.is_none() ? 0 : order.cast<int>();
        const double q4 = sum_q4.is_none() ? -1.0 : sum_q4.cast<double>();
        const Differentiation diff = parse_differentiation(differentiation);
        const ChargeCorrelation* corr = correlation_arg(correlation);
        Parameters P;
        {
          py::gil_scoped_release nogil;
          P = choose_parameters(B, cutoff, target, sum_q2, n_atoms, diff, coulomb_constant, a,
                                K, p, q4, corr);
        }
        return params_dict(P);
      },
      py::arg("box"), py::arg("cutoff"), py::arg("target"), py::arg("sum_q2"),
      py::arg("n_atoms"), py::arg("differentiation") = "ad", py::arg("coulomb_constant") = 1.0,
      py::arg("alpha") = py::none(), py::arg("mesh") = py::none(), py::arg("order") = 5,
      py::arg("sum_q4") = py::none(), py::arg("correlation") = py::none(),
      "Choose (alpha, mesh, order) for an ABSOLUTE RMS force error target; order=None "
      "chooses the order by a cost model. Returns dict alpha, mesh, order, est_real, "
      "est_recip, est_total.");
  t.def(
      "reciprocal_error_parts",
      [](darr box, double alpha, const Int3& mesh, int order, const std::string& differentiation,
         double sum_q2, int n_atoms, py::object sum_q4, py::object correlation) {
        const Mat3 B = mat3_from_python(box);
        const double q4 = sum_q4.is_none() ? -1.0 : sum_q4.cast<double>();
        const ChargeCorrelation* corr = correlation_arg(correlation);
        ReciprocalErrorParts e;
        {
          py::gil_scoped_release nogil;
          e = reciprocal_error_parts(B, alpha, mesh, order, parse_differentiation(differentiation), sum_q2,
                                     n_atoms, q4, corr);
        }
        py::dict d;
        d["pair"] = e.pair;
        d["self"] = e.self;
        return d;
      },
      py::arg("box"), py::arg("alpha"), py::arg("mesh"), py::arg("order"), py::arg("differentiation"),
      py::arg("sum_q2"), py::arg("n_atoms"), py::arg("sum_q4") = py::none(), py::arg("correlation") = py::none(),
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
         py::object cost, py::object sum_q4, py::object mesh_target, py::object correlation,
         py::object real_volume, double cross, double recip_factor) {
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
        const ChargeCorrelation* corr = correlation_arg(correlation);
        const double rv = real_volume.is_none() ? 0.0 : real_volume.cast<double>();
        Choice C;
        {
          py::gil_scoped_release nogil;
          C = choose_cheapest(B, cutoff, target, sum_q2, n_atoms, coulomb_constant, a, diffs, lo, hi, cm, q4, mt,
                              corr, rv, cross, recip_factor);
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
      py::arg("sum_q4") = py::none(), py::arg("mesh_target") = py::none(), py::arg("correlation") = py::none(),
      py::arg("real_volume") = py::none(), py::arg("cross") = 0.0, py::arg("recip_factor") = 1.0,
      "The cheapest (differentiation, order, alpha, mesh) by the cost model whose estimated "
      "ABSOLUTE RMS force error meets target. differentiation 'auto' tries ad and ik; order None "
      "tries orders[0]..orders[1]; alpha None scans alpha (real-space share 99%..10% of the "
      "budget). Returns dict alpha, mesh, order, differentiation, est_real, est_recip, est_total, "
      "cost (modelled seconds) and candidates (the best of each (differentiation, order), "
      "cheapest first; 'exact' marks those checked with the exact estimate). mesh_target: "
      "also require the ad reciprocal estimate of the mesh to be at most this (an energy "
      "requirement, whatever the differentiation). correlation: a ChargeCorrelation (None: uncorrelated). "
      "real_volume: the volume the atoms fill, for the real-space density (None: the box's). cross: the "
      "correlation of the real-space and mesh errors (total sqrt(r^2 + k^2 + 2 cross r k)); recip_factor: the "
      "reciprocal estimates scaled by it (a measured / model ratio; est_recip and est_total include it).");

  t.def(
      "correlation_half_widths",
      [](darr box, double kmax, int max_half) { return correlation_half_widths(mat3_from_python(box), kmax, max_half); },
      py::arg("box"), py::arg("kmax"), py::arg("max_half"),
        "Index half-widths ceil(kmax |a_d| / 2 pi) (each at most max_half) of the structure-factor table that "
        "covers every |k| <= kmax.");
  t.def(
      "local_structure_factors",
      [](darr box, darr positions, darr charges, const Int3& half) {
        const Mat3 B = mat3_from_python(box);
        if (positions.ndim() != 2 || positions.shape(1) != 3) throw ValueError("positions must have shape (n, 3)");
        if (charges.ndim() != 1 || charges.shape(0) != positions.shape(0))
          throw ValueError("charges must have shape (n,) matching positions");
        std::vector<Complex> v;
        {
          py::gil_scoped_release nogil;
          v = local_structure_factors(B, positions.data(), charges.data(), static_cast<std::size_t>(charges.shape(0)),
                                      half);
        }
        py::array_t<std::complex<double>> out(
            {py::ssize_t(2), py::ssize_t(2 * half[0] + 1), py::ssize_t(2 * half[1] + 1), py::ssize_t(2 * half[2] + 1)});
        auto* o = out.mutable_data();
        for (std::size_t i = 0; i < v.size(); ++i) o[i] = std::complex<double>(v[i].real(), v[i].imag());
        return out;
      },
      py::arg("box"), py::arg("positions"), py::arg("charges"), py::arg("half"),
      "S(x) = sum_j q_j exp(-2 pi i x.s_j) and T(x) (the same with q_j^3) of these atoms for every integer x with "
      "|x_d| <= half[d]: a complex array (2, 2 half_0 + 1, 2 half_1 + 1, 2 half_2 + 1). Sum it over the ranks "
      "before building a ChargeCorrelation.");
  t.attr("TAIL_EXPONENT") = kTailExponent;
  t.def("tail_radius", &tail_radius, py::arg("alpha"), py::arg("cutoff"),
        "Outer radius sqrt(r_c^2 + TAIL_EXPONENT / alpha^2) of the truncated shell local_tail_fields sums.");
  t.def(
      "local_tail_fields",
      [](darr box, double cutoff, const std::vector<double>& alphas, darr samples, darr positions, darr charges) {
        const Mat3 B = mat3_from_python(box);
        if (samples.ndim() != 2 || samples.shape(1) != 3) throw ValueError("samples must have shape (s, 3)");
        if (positions.ndim() != 2 || positions.shape(1) != 3) throw ValueError("positions must have shape (n, 3)");
        if (charges.ndim() != 1 || charges.shape(0) != positions.shape(0))
          throw ValueError("charges must have shape (n,) matching positions");
        const std::size_t ns = static_cast<std::size_t>(samples.shape(0));
        std::vector<double> v;
        {
          py::gil_scoped_release nogil;
          v = local_tail_fields(B, cutoff, alphas, samples.data(), ns, positions.data(), charges.data(),
                                static_cast<std::size_t>(charges.shape(0)));
        }
        py::array_t<double> out({py::ssize_t(alphas.size()), py::ssize_t(ns), py::ssize_t(3)});
        std::copy(v.begin(), v.end(), out.mutable_data());
        return out;
      },
      py::arg("box"), py::arg("cutoff"), py::arg("alphas"), py::arg("samples"), py::arg("positions"),
      py::arg("charges"),
      "The truncated real-space field at each sample point from these atoms (all periodic images with "
      "r_c < r < tail_radius(alpha)), Coulomb constant 1: an array (n_alpha, n_samples, 3). Sum it over the "
      "ranks (tuning/real_space_tail.hpp).");
  py::class_<ChargeCorrelation>(t, "ChargeCorrelation",
                                "c(x) = C(k_x) / (sum_q2^2 - sum_q4), C(k) = sum_i q_i^2 |S_{-i}(k)|^2, over the "
                                "table of local_structure_factors (tuning/charge_correlation.hpp); 1 outside it.")
      .def(py::init([](const Int3& half, py::array_t<std::complex<double>, py::array::c_style | py::array::forcecast> sums,
                       double sum_q2, double sum_q4) {
             const std::size_t M = static_cast<std::size_t>(2 * half[0] + 1) * (2 * half[1] + 1) * (2 * half[2] + 1);
             if (static_cast<std::size_t>(sums.size()) != 2 * M)
               throw ValueError("sums must hold 2 (2 half_0 + 1)(2 half_1 + 1)(2 half_2 + 1) values");
             std::vector<Complex> v(2 * M);
             const auto* s = sums.data();
             for (std::size_t i = 0; i < 2 * M; ++i) v[i] = Complex(s[i].real(), s[i].imag());
             return ChargeCorrelation(half, v.data(), sum_q2, sum_q4);
           }),
           py::arg("half"), py::arg("sums"), py::arg("sum_q2"), py::arg("sum_q4"))
      .def_property_readonly("half", [](const ChargeCorrelation& c) { return c.half(); })
      .def_property_readonly("empty", &ChargeCorrelation::empty)
      .def("__call__", [](const ChargeCorrelation& c, long x0, long x1, long x2) { return c(x0, x1, x2); })
      .def("set_real_factors", &ChargeCorrelation::set_real_factors, py::arg("alpha_rc"), py::arg("factors"),
           "The real-space estimate's factors (sampled truncation error / Kolafa-Perram) at increasing alpha r_c.")
      .def("real_factor", &ChargeCorrelation::real_factor, py::arg("alpha_rc"),
           "The real-space factor at alpha r_c (log-linear between the nodes, the end values outside; 1 without).")
      .def_property_readonly("real_nodes", &ChargeCorrelation::real_nodes)
      .def_property_readonly("real_factors", &ChargeCorrelation::real_factors);
}

}  // namespace pmewald::bindings
