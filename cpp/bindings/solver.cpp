// Python view of the PME solver: NumPy arrays in, NumPy arrays and dicts out.
// Validation of user input and parameter choice live in python/pmewald/pme/solver.py.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <tuple>
#include <utility>

#include "solver/pme_solver.hpp"
#include "solver/plan_census.hpp"
#include "bindings/bindings.hpp"
#include "bindings/pycomm.hpp"

namespace py = pybind11;

namespace pmewald::bindings {

namespace {

using CArray = py::array_t<double, py::array::c_style | py::array::forcecast>;
using IArray = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;

// "atoms", "clusters" or "auto" (clusters first, then the faster by a trial; pmewald.PME
// validates it first; this guards direct use): (layout, choose).
std::pair<PairLayout, bool> parse_pair_layout(const std::string& l) {
  if (l == "atoms") return {PairLayout::Atoms, false};
  if (l == "clusters") return {PairLayout::Clusters, false};
  if (l == "auto") return {PairLayout::Clusters, true};
  throw py::value_error("pair_layout must be 'atoms', 'clusters' or 'auto', got '" + l + "'");
}

std::string pair_layout_name(const PMESolver& s) {
  return s.choose_layout() ? "auto" : layout_name(s.pair_layout());
}

// "double" or "mixed" (pmewald.PME validates it first; this guards direct use).
PairPrecision parse_precision(const std::string& p) {
  if (p == "double") return PairPrecision::Double;
  if (p == "mixed") return PairPrecision::Mixed;
  throw py::value_error("precision must be 'double' or 'mixed', got '" + p + "'");
}

// A compute call's results as Python: compute's one set as numbers, compute_sets'
// m sets as arrays with the set as leading axis (sets); the forces, potentials
// and fields the call filled.
py::dict results_to_python(const std::vector<SolverResult>& r, bool sets, const py::array_t<double>& forces,
                           bool potentials, const py::array_t<double>& phi, const py::array_t<double>& field) {
  const auto M = static_cast<py::ssize_t>(r.size());
  // One value per set: a number for compute, an array for compute_sets.
  auto each = [&](auto get) -> py::object {
    if (!sets) return py::float_(get(r.front()));
    py::array_t<double> v(M);
    for (py::ssize_t c = 0; c < M; ++c) v.mutable_data()[c] = get(r[static_cast<std::size_t>(c)]);
    return std::move(v);
  };
  py::dict d;
  d["energy"] = each([](const SolverResult& x) { return x.energy; });
  d["forces"] = forces;
  if (!sets) {
    d["virial"] = virial_to_python(r.front().virial);
  } else {
    py::array_t<double> virial({M, static_cast<py::ssize_t>(3), static_cast<py::ssize_t>(3)});
    for (py::ssize_t c = 0; c < M; ++c) {
      const auto w = r[static_cast<std::size_t>(c)].virial.matrix();
      std::copy(w.begin(), w.end(), virial.mutable_data() + 9 * c);
    }
    d["virial"] = virial;
  }
  py::dict terms;
  for (const auto& term : r.front().terms) {
    const std::string name = term.first;
    terms[py::str(name)] = each([&name](const SolverResult& x) { return x.terms.at(name); });
  }
  d["terms"] = terms;
  d["sum_force2"] = each([](const SolverResult& x) { return x.sum_force2; });
  if (!sets) d["sum_pair_force2"] = r.front().sum_pair_force2;
  d["sum_q"] = each([](const SolverResult& x) { return x.sum_q; });
  d["sum_q2"] = each([](const SolverResult& x) { return x.sum_q2; });
  d["n_atoms"] = r.empty() ? 0 : r.front().n_atoms;
  if (potentials) {
    d["potentials"] = phi;
    d["fields"] = field;
  }
  return d;
}

GhostExchangeChoice parse_ghost_exchange(const std::string& s) {
  if (s == "direct") return GhostExchangeChoice::Direct;
  if (s == "staged") return GhostExchangeChoice::Staged;
  if (s == "auto") return GhostExchangeChoice::Auto;
  throw ValueError("ghost_exchange must be 'auto', 'direct' or 'staged', got '" + s + "'");
}

BalanceMode parse_balance(const std::string& s) {
  if (s == "off") return BalanceMode::Off;
  if (s == "once") return BalanceMode::Once;
  if (s == "dynamic") return BalanceMode::Dynamic;
  throw ValueError("balance must be 'off', 'once' or 'dynamic', got '" + s + "'");
}

}  // namespace

// Longer than 150 lines because it is a list of independent declarations (one .def per bound
// class, method or function, each with its docstring); there are no steps to split.
void bind_solver(py::module_& m, py::module_& testing) {
  testing.def(
      "mode_trial",
      [](std::optional<bool> overlap, const std::vector<double>& call_seconds) {
        // comm_mode "auto"'s trial on one rank with made-up call times (the warm-up's first):
        // the variants in call order, the winner and each candidate's seconds.
        ModeTrial t(ModeTrial::candidates(overlap), default_variant(CommMode::Nonblocking, overlap));
        if (call_seconds.size() != t.calls()) throw py::value_error("one time per trial call");
        py::list order;
        for (double s : call_seconds) {
          order.append(t.next().name());
          t.record(MPI_COMM_SELF, s);
        }
        py::dict seconds;
        for (std::size_t c = 0; c < t.variants().size(); ++c) seconds[py::str(t.variants()[c].name())] = t.seconds()[c];
        return py::make_tuple(order, t.best().name(), seconds);
      },
      py::arg("overlap"), py::arg("call_seconds"));
  m.def("fftw_planner", [] { return fftw_planner_name(fftw_planner_flags()); },
        "The FFTW planner PME solvers use unless told otherwise: 'measure', or what PMEWALD_FFTW_PLANNER says.");
  py::class_<PMESolver>(m, "PMESolver", "C++ PME solver (use pmewald.PME, which validates and tunes).")
      .def(py::init([](py::object comm, darr box, std::array<int, 3> mesh, int order, double alpha, double cutoff,
                       const std::string& differentiation, const std::string& comm_mode, double coulomb_constant,
                       bool real_space, std::optional<bool> overlap, std::int64_t poll_rows, double poll_us,
                       double skin, const std::string& precision, const std::string& ghost_exchange,
                       const std::string& balance, const std::string& balance_by, double balance_threshold,
                       std::optional<std::string> planner, const std::string& pair_layout) {
             SolverOptions o;
             if (planner) o.fftw_flags = fftw_flags_or_throw(*planner);
             o.box = mat3_from_python(box);
             o.mesh = mesh;
             o.order = order;
             o.alpha = alpha;
             o.cutoff = cutoff;
             o.differentiation = parse_differentiation(differentiation);
             // "auto": start in the default mode, measure the three at the first compute.
             o.choose_mode = comm_mode == "auto";
             o.mode = o.choose_mode ? CommMode::Nonblocking : comm_mode_from_string(comm_mode);
             o.overlap = overlap;
             o.overlap_poll.poll_rows = poll_rows;
             o.overlap_poll.poll_seconds = poll_us * 1e-6;
             o.coulomb_constant = coulomb_constant;
             o.real_space = real_space;
             o.skin = skin;
             o.precision = parse_precision(precision);
             std::tie(o.pair_layout, o.choose_layout) = parse_pair_layout(pair_layout);
             o.ghost_exchange = parse_ghost_exchange(ghost_exchange);
             o.balance.mode = parse_balance(balance);
             if (balance_by != "pairs" && balance_by != "time")
               throw ValueError("balance_by must be 'pairs' or 'time', got '" + balance_by + "'");
             o.balance.work = balance_by == "time" ? BalanceWork::Time : BalanceWork::Pairs;
             o.balance.threshold = balance_threshold;
             MPI_Comm c = comm_from_python(comm);
             py::gil_scoped_release nogil;
             return std::make_unique<PMESolver>(c, o);
           }),
           py::arg("comm"), py::arg("box"), py::arg("mesh"), py::arg("order"), py::arg("alpha"), py::arg("cutoff"),
           py::arg("differentiation"), py::arg("comm_mode"), py::arg("coulomb_constant"), py::arg("real_space"),
           py::arg("overlap") = py::none(), py::arg("poll_rows") = OverlapSettings{}.poll_rows,
           py::arg("poll_us") = OverlapSettings{}.poll_seconds * 1e6, py::arg("skin") = 0.0, py::arg("precision") = "double",
           py::arg("ghost_exchange") = "auto", py::arg("balance") = "off", py::arg("balance_by") = "pairs",
           py::arg("balance_threshold") = BalanceSettings{}.threshold, py::arg("planner") = py::none(),
           py::arg("pair_layout") = "atoms")
      .def(
          "compute",
          [](PMESolver& s, CArray positions, CArray charges, IArray ids, IArray exclusions, bool potentials) {
            require_mpi_running();
            const std::size_t n = static_cast<std::size_t>(charges.size());
            const std::size_t m = static_cast<std::size_t>(exclusions.size() / 2);
            py::array_t<double> forces({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(3)});
            // potentials: phi (n) and field (n x 3) too (pme_solver.hpp).
            py::array_t<double> phi(static_cast<py::ssize_t>(potentials ? n : 0));
            py::array_t<double> field({static_cast<py::ssize_t>(potentials ? n : 0), static_cast<py::ssize_t>(3)});
            std::vector<SolverResult> r(1);
            {
              py::gil_scoped_release nogil;
              r[0] = s.compute(positions.data(), charges.data(), ids.data(), n, exclusions.data(), m,
                               forces.mutable_data(), potentials, phi.mutable_data(), field.mutable_data());
            }
            return results_to_python(r, false, forces, potentials, phi, field);
          },
          py::arg("positions"), py::arg("charges"), py::arg("ids"), py::arg("exclusions"),
          py::arg("potentials") = false)
      .def(
          "compute_sets",
          [](PMESolver& s, CArray positions, CArray charges, IArray ids, IArray exclusions, bool potentials) {
            // charges n x m: m charge sets (pme_solver.hpp's compute_sets); forces n x m x 3.
            require_mpi_running();
            if (charges.ndim() != 2) throw ValueError("compute_sets: charges must be n x m");
            const std::size_t n = static_cast<std::size_t>(charges.shape(0));
            const int sets = static_cast<int>(charges.shape(1));
            const std::size_t m = static_cast<std::size_t>(exclusions.size() / 2);
            const auto N = static_cast<py::ssize_t>(n), M = static_cast<py::ssize_t>(sets);
            py::array_t<double> forces({N, M, static_cast<py::ssize_t>(3)});
            py::array_t<double> phi({potentials ? N : 0, M});
            py::array_t<double> field({potentials ? N : 0, M, static_cast<py::ssize_t>(3)});
            std::vector<SolverResult> r;
            {
              py::gil_scoped_release nogil;
              r = s.compute_sets(positions.data(), charges.data(), sets, ids.data(), n, exclusions.data(), m,
                                 forces.mutable_data(), potentials, phi.mutable_data(), field.mutable_data());
            }
            return results_to_python(r, true, forces, potentials, phi, field);
          },
          py::arg("positions"), py::arg("charges"), py::arg("ids"), py::arg("exclusions"),
          py::arg("potentials") = false)
      .def("set_box",
           [](PMESolver& s, darr box) {
             require_mpi_running();
             const auto b = mat3_from_python(box);
             py::gil_scoped_release nogil;
             s.set_box(b);
           })
      .def("set_comm_mode",
           [](PMESolver& s, const std::string& mode, std::optional<bool> overlap) {
             require_mpi_running();
             const CommMode m = comm_mode_from_string(mode);
             py::gil_scoped_release nogil;
             s.set_comm_mode(m, overlap);
           },
           py::arg("mode"), py::arg("overlap") = py::none(),
           "Collective: the next calls in this mode ('pt2pt', 'nonblocking', 'collective'), overlapped as "
           "overlap says (None: the mode's default); ends comm_mode 'auto' and its trial.")
      .def("set_skin",
           [](PMESolver& s, double skin) {
             require_mpi_running();
             py::gil_scoped_release nogil;
             s.set_skin(skin);
           })
      .def("set_precision",
           [](PMESolver& s, const std::string& precision) {
             require_mpi_running();
             const PairPrecision p = parse_precision(precision);
             py::gil_scoped_release nogil;
             s.set_precision(p);
           })
      .def_property_readonly("precision", [](const PMESolver& s) { return std::string(precision_name(s.precision())); })
      .def("set_pair_layout",
           [](PMESolver& s, const std::string& layout) {
             require_mpi_running();
             const auto [l, choose] = parse_pair_layout(layout);
             py::gil_scoped_release nogil;
             s.set_pair_layout(l, choose);
           })
      .def_property_readonly("pair_layout", &pair_layout_name, "'atoms', 'clusters' or 'auto' (as set).")
      .def_property_readonly(
          "pair_layout_trial",
          [](const PMESolver& s) -> py::object {
            const LayoutTrial& t = s.layout_trial();
            if (t.running()) return py::str("trying");
            if (!t.measured()) return py::none();
            py::dict d;
            d["clusters"] = t.seconds()[0];
            d["atoms"] = t.seconds()[1];
            d["chosen"] = layout_name(t.best());
            return std::move(d);
          },
          "pair_layout 'auto': 'trying' while the list's calls time the layouts, then the slowest rank's "
          "evaluation seconds per layout (its faster call) and the one chosen; None without a trial.")
      .def_property_readonly("pair_layout_used",
                             [](const PMESolver& s) { return std::string(layout_name(s.pair_layout_used())); },
                             "The layout the pair list evaluated the last call with ('atoms' without a list).")
      .def_property_readonly("cluster_lanes_per_pair", &PMESolver::cluster_lanes_per_pair,
                             "Kernel lanes per listed pair of the cluster layout (16 x cluster pairs / pairs); 0 by atoms.")
      .def("set_planner",
           [](PMESolver& s, const std::string& planner) {
             require_mpi_running();
             const unsigned flags = fftw_flags_or_throw(planner);
             py::gil_scoped_release nogil;
             s.set_fftw_flags(flags);
           },
           "Collective: plan the mesh FFTs again with this FFTW planner ('estimate', 'measure', 'patient', "
           "'exhaustive'); nothing when it is the current one.")
      .def_property_readonly("planner", [](const PMESolver& s) { return fftw_planner_name(s.fftw_flags()); })
      .def("timings", &PMESolver::timings)
      .def_property_readonly("comm_mode", [](const PMESolver& s) { return std::string(comm_mode_name(s.comm_mode())); })
      .def_property_readonly("overlap", &PMESolver::overlapping)
      .def_property_readonly("skin", &PMESolver::skin_used)
      .def_property_readonly(
          "comm_mode_seconds",
          [](const PMESolver& s) {
            // comm_mode "auto": seconds per call of each variant tried (the slowest rank's);
            // empty while the trial runs, on one rank and without "auto".
            py::dict d;
            const ModeTrial& t = s.mode_trial();
            if (t.measured())
              for (std::size_t c = 0; c < t.variants().size(); ++c) d[py::str(t.variants()[c].name())] = t.seconds()[c];
            return d;
          })
      .def("reset_timings", &PMESolver::reset_timings)
      .def_property_readonly("brick", [](const PMESolver& s) { return box_to_python(s.brick()); })
      .def_property_readonly("ghost_exchange",
                             [](const PMESolver& s) {
                               return std::string(s.ghost_exchange_used() == Migration::GhostExchange::Staged
                                                      ? "staged"
                                                      : "direct");
                             })
      .def_property_readonly(
          "realspace_cuts",
          [](const PMESolver& s) {
            // Per axis the real-space domains' cuts as fractions (the bricks' without balancing).
            const DomainGrid& d = s.realspace_domains();
            py::list out;
            for (int a = 0; a < 3; ++a) {
              py::list axis;
              for (int c : d.cuts(a)) axis.append(double(c) / d.resolution()[a]);
              out.append(axis);
            }
            return out;
          })
      .def_property_readonly("kspace_box", [](const PMESolver& s) { return box_to_python(s.kspace_box()); });

  m.def(
      "solver_census",
      [](int ranks, std::array<int, 3> mesh, int order, const std::string& differentiation, darr box, double cutoff,
         std::int64_t atoms, const std::string& ghost_exchange) {
        CensusInput in;
        in.ghost_exchange = static_cast<int>(parse_ghost_exchange(ghost_exchange));
        in.ranks = ranks;
        in.mesh = mesh;
        in.order = order;
        in.ik = parse_differentiation(differentiation) == Differentiation::IK;
        const Mat3 b = mat3_from_python(box);
        std::copy(b.begin(), b.end(), in.box);
        in.cutoff = cutoff;
        in.atoms = atoms;
        std::vector<ExchangeCensus> census;
        {
          py::gil_scoped_release nogil;
          census = solver_census(in);
        }
        py::list out;
        auto arr = [](const auto& v) {
          using T = typename std::decay_t<decltype(v)>::value_type;
          return py::array_t<T>(static_cast<py::ssize_t>(v.size()), v.data());
        };
        for (const ExchangeCensus& c : census) {
          py::dict d;
          d["name"] = c.name;
          d["element_bytes"] = c.element_bytes;
          d["forward_calls"] = c.forward_calls;
          d["reverse_calls"] = c.reverse_calls;
          d["start"] = arr(c.start);
          d["dst"] = arr(c.dst);
          d["elements"] = arr(c.elements);
          d["self_elements"] = arr(c.self_elements);
          d["component_size"] = arr(c.component_size);
          d["component_rank"] = arr(c.component_rank);
          out.append(d);
        }
        return out;
      },
      py::arg("ranks"), py::arg("mesh"), py::arg("order"), py::arg("differentiation"), py::arg("box"),
      py::arg("cutoff"), py::arg("atoms"), py::arg("ghost_exchange") = "auto",
      "What one PMESolver compute call sends, rank by rank, from the plan geometry alone (solver/"
      "plan_census.hpp): per exchange its name, element size, forward/reverse executions per call, the "
      "forward messages as CSR over senders (start, dst, elements), each rank's self piece and its "
      "connected component (size, place). Pure: no MPI; used by pmewald.bench.scale.comm_model.");
}

}  // namespace pmewald::bindings
