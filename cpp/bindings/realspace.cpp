// Test hooks of the real-space layer: the pipeline (migration, ghosts, pair kernel)
// on caller-split atoms, the pair kernel and the erfc table. Registered as
// pmewald._core._testing.realspace: the suite's (and benchmarks'), not an API.
#include <mpi.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "comm/communicators.hpp"
#include "comm/mpi_helpers.hpp"
#include "base/timers.hpp"
#include "realspace/erfc_table.hpp"
#include "realspace/cluster_kernel.hpp"
#include "realspace/kernel_timing.hpp"
#include "realspace/pair_kernel.hpp"
#include "realspace/realspace.hpp"
#include "bindings/bindings.hpp"
#include "bindings/pycomm.hpp"

namespace py = pybind11;

namespace pmewald::bindings {

namespace {

using DArr = py::array_t<double, py::array::c_style | py::array::forcecast>;
using IArr = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;

// Converts without throwing: on failure sets err (first problem only).
DArr as_double(const py::object& obj, const char* name, std::string& err) {
  if (!err.empty()) return DArr();
  try {
    py::array a = py::array::ensure(obj);
    if (!a) throw py::value_error("");
    const char kind = a.dtype().kind();
    if (kind != 'f' && kind != 'i' && kind != 'u') throw py::value_error("");
    return DArr::ensure(a);
  } catch (...) {
    PyErr_Clear();
    err = std::string(name) + " must be a numeric array";
    return DArr();
  }
}

IArr as_int(const py::object& obj, const char* name, std::string& err) {
  if (!err.empty()) return IArr();
  try {
    py::array a = py::array::ensure(obj);
    if (!a) throw py::value_error("");
    const char kind = a.dtype().kind();
    if (kind != 'i' && kind != 'u') throw py::value_error("");
    return IArr::ensure(a);
  } catch (...) {
    PyErr_Clear();
    err = std::string(name) + " must be an integer array";
    return IArr();
  }
}

// The owned atoms of a migration (positions, fractional, charges, ids) and `returned`:
// their (id, x, y, z) rows sent back through the reverse path (collective), in the order
// of the caller's n_local atoms.
py::dict owned_atoms(Migration& mig, std::size_t n_local) {
  const auto no = static_cast<py::ssize_t>(mig.n_owned());
  py::array_t<double> own_r({no, py::ssize_t{3}}), own_s({no, py::ssize_t{3}}), own_q(no);
  py::array_t<std::int64_t> own_id(no);
  std::vector<double> rows(static_cast<std::size_t>(no) * 4);
  for (py::ssize_t i = 0; i < no; ++i) {
    rows[static_cast<std::size_t>(4 * i)] = static_cast<double>(mig.owned_ids()(i));
    for (int a = 0; a < 3; ++a) {
      own_r.mutable_at(i, a) = mig.owned_positions()(i, a);
      own_s.mutable_at(i, a) = mig.owned_fractional()(i, a);
      rows[static_cast<std::size_t>(4 * i + 1 + a)] = mig.owned_positions()(i, a);
    }
    own_q.mutable_at(i) = mig.owned_charges()(i);
    own_id.mutable_at(i) = mig.owned_ids()(i);
  }
  py::array_t<double> back({static_cast<py::ssize_t>(n_local), py::ssize_t{4}});
  mig.reverse(rows.data(), 4, back.mutable_data());
  py::dict d;
  d["owned_positions"] = own_r;
  d["owned_fractional"] = own_s;
  d["owned_charges"] = own_q;
  d["owned_ids"] = own_id;
  d["returned"] = back;
  return d;
}

}  // namespace

// Longer than 150 lines because it is a list of independent declarations (one .def per bound
// class, method or function, each with its docstring); there are no steps to split.
void bind_realspace(py::module_& testing) {
  auto r = testing.def_submodule(
      "realspace", "The real-space Ewald part over MPI (migration, ghosts, pairs) and its kernels.");

  r.def(
      "compute",
      [](py::object comm_obj, py::object box_obj, py::object mesh_obj, py::object pos_obj,
         py::object q_obj, py::object ids_obj, py::object excl_obj, double cutoff, double alpha,
         double coulomb_constant, bool with_timings) -> py::tuple {
        MPI_Comm comm = comm_from_python(comm_obj);
        std::string err;
        DArr box = as_double(box_obj, "box", err);
        if (err.empty() && !(box.ndim() == 2 && box.shape(0) == 3 && box.shape(1) == 3))
          err = "box must be a 3x3 array (rows are lattice vectors)";
        Int3 mesh{0, 0, 0};
        if (err.empty()) {
          try {
            mesh = mesh_obj.cast<Int3>();
          } catch (...) {
            err = "mesh must be three integers";
          }
        }
        DArr pos = as_double(pos_obj, "positions", err);
        if (err.empty() && !(pos.ndim() == 2 && pos.shape(1) == 3))
          err = "positions must be an (n, 3) array";
        DArr q = as_double(q_obj, "charges", err);
        if (err.empty() && !(q.ndim() == 1 && q.shape(0) == pos.shape(0)))
          err = "charges must be a 1-D array with one entry per position";
        IArr ids;
        if (err.empty() && !ids_obj.is_none()) {
          ids = as_int(ids_obj, "ids", err);
          if (err.empty() && !(ids.ndim() == 1 && ids.shape(0) == pos.shape(0)))
            err = "ids must be a 1-D integer array with one entry per position";
        }
        IArr excl;
        if (err.empty() && !excl_obj.is_none()) {
          excl = as_int(excl_obj, "exclusions", err);
          if (err.empty() && !(excl.ndim() == 2 && excl.shape(1) == 2) &&
              !(excl.ndim() == 1 && excl.shape(0) == 0))
            err = "exclusions must be an (m, 2) integer array of atom id pairs";
        }
        agree_or_throw(comm, err);

        const std::size_t n = static_cast<std::size_t>(pos.shape(0));
        std::vector<std::int64_t> gen_ids;
        const std::int64_t* idp = nullptr;
        if (ids_obj.is_none()) {
          // Default ids: global index in rank order (an exclusive scan).
          long long mine = static_cast<long long>(n), before = 0;
          MPI_Exscan(&mine, &before, 1, MPI_LONG_LONG, MPI_SUM, comm);
          int rank = 0;
          MPI_Comm_rank(comm, &rank);
          if (rank == 0) before = 0;
          gen_ids.resize(n);
          for (std::size_t i = 0; i < n; ++i) gen_ids[i] = before + static_cast<long long>(i);
          idp = gen_ids.data();
        } else {
          idp = ids.data();
        }
        const std::size_t m_ex = excl_obj.is_none() || excl.ndim() != 2 ? 0 : static_cast<std::size_t>(excl.shape(0));
        const std::int64_t* exp = m_ex ? excl.data() : nullptr;

        py::array_t<double> forces({static_cast<py::ssize_t>(n), py::ssize_t{3}});
        const RealSpaceTerms t =
            compute_realspace(comm, box.data(), mesh, n ? pos.data() : nullptr, n ? q.data() : nullptr, idp, n,
                              exp, m_ex, cutoff, alpha, coulomb_constant, forces.mutable_data());
        py::array_t<double> virial = virial_to_python(t.virial);
        py::dict terms;
        terms["real"] = t.real;
        terms["self"] = t.self;
        terms["background"] = t.background;
        terms["exclusion"] = t.exclusion;
        py::dict timings;
        timings["migrate"] = t.t_migrate;
        timings["exclusions"] = t.t_exclusions;
        timings["ghosts"] = t.t_ghosts;
        timings["cells"] = t.t_cells;
        timings["pairs"] = t.t_pairs;
        timings["reverse"] = t.t_reverse;
        timings["candidates"] = t.candidates;
        timings["pairs_evaluated"] = t.pairs;
        if (with_timings) return py::make_tuple(t.energy(), forces, virial, terms, timings);
        return py::make_tuple(t.energy(), forces, virial, terms);
      },
      py::arg("comm"), py::arg("box"), py::arg("mesh"), py::arg("positions"), py::arg("charges"),
      py::arg("ids") = py::none(), py::arg("exclusions") = py::none(), py::arg("cutoff"),
      py::arg("alpha"), py::arg("coulomb_constant") = 1.0, py::arg("timings") = false,
      R"doc(Real-space Ewald part of atoms split over the ranks of `comm` in any way.

Returns (energy, forces, virial, terms): the global energy (real + exclusion +
self + background), the forces on this rank's atoms in the order given, the
global virial W = -dE/d(eps) (W_ab = sum over pairs r_ij,a F_ij,b; trace(W) of
the full Ewald sum is E), and the terms dict; with timings=True also this rank's wall seconds by phase. Collective; bad input raises
ValueError on every rank.)doc");

  r.def(
      "migrate",
      [](py::object comm_obj, py::array_t<double, py::array::c_style | py::array::forcecast> box,
         const Int3& mesh, py::array_t<double, py::array::c_style | py::array::forcecast> pos,
         py::array_t<double, py::array::c_style | py::array::forcecast> q,
         py::array_t<std::int64_t, py::array::c_style | py::array::forcecast> ids, double cutoff,
         py::object excl_obj, const std::string& ghost_exchange) {
        MPI_Comm comm = comm_from_python(comm_obj);
        if (ghost_exchange != "direct" && ghost_exchange != "staged")
          throw py::value_error("ghost_exchange must be 'direct' or 'staged'");
        std::string err;
        if (box.ndim() != 2 || box.shape(0) != 3 || box.shape(1) != 3) err = "box must be 3x3";
        else if (pos.ndim() != 2 || pos.shape(1) != 3 || q.ndim() != 1 || ids.ndim() != 1 ||
                 q.shape(0) != pos.shape(0) || ids.shape(0) != pos.shape(0))
          err = "positions (n, 3), charges (n,), ids (n,) expected";
        else
          err = PeriodicCell::check(box.data());
        agree_or_throw(comm, err);
        Comm dup(comm);
        Migration mig(dup.get());
        mig.set_geometry(PeriodicCell(box.data()), mesh);
        const std::size_t n = static_cast<std::size_t>(pos.shape(0));
        ExclusionList excl(dup.get());
        if (!excl_obj.is_none()) {
          auto e = excl_obj.cast<py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>>();
          excl.update(ids.data(), n, e.size() ? e.data() : nullptr, static_cast<std::size_t>(e.size() / 2));
        }
        mig.set_ghost_exchange(ghost_exchange == "staged" ? Migration::GhostExchange::Staged
                                                          : Migration::GhostExchange::Direct);
        mig.forward(pos.data(), q.data(), ids.data(), n, excl.offsets(), excl.partners());
        mig.reset_traffic();
        mig.exchange_ghosts(cutoff);
        const auto ghost_messages = mig.ghost_traffic().messages;
        const auto no = static_cast<py::ssize_t>(mig.n_owned());
        const auto ng = static_cast<py::ssize_t>(mig.n_ghost());
        // The ghosts' rows back to their owners ((1, id) per ghost: each owned atom
        // gets its number of images and that many times its id) and the owners'
        // rows out to the ghosts ((id, q): each ghost gets its original's).
        std::vector<double> gh_rows(static_cast<std::size_t>(ng) * 2), own_sum(static_cast<std::size_t>(no) * 2, 0.0);
        for (py::ssize_t g = 0; g < ng; ++g) {
          gh_rows[2 * g] = 1.0;
          gh_rows[2 * g + 1] = static_cast<double>(mig.ghost_ids()(g));
        }
        mig.reverse_ghosts(gh_rows.data(), own_sum.data(), 2);
        std::vector<double> own_rows(static_cast<std::size_t>(no) * 2);
        for (py::ssize_t i = 0; i < no; ++i) {
          own_rows[2 * i] = static_cast<double>(mig.owned_ids()(i));
          own_rows[2 * i + 1] = mig.owned_charges()(i);
        }
        py::array_t<double> routed({ng, py::ssize_t{2}});
        mig.route_ghosts(own_rows.data(), 2, routed.mutable_data());
        py::array_t<double> images({no, py::ssize_t{2}});
        std::copy(own_sum.begin(), own_sum.end(), images.mutable_data());
        py::array_t<std::int64_t> origin_rank(no), origin_index(no);
        for (py::ssize_t i = 0; i < no; ++i) {
          origin_rank.mutable_at(i) = mig.owned_origin_rank()[static_cast<std::size_t>(i)];
          origin_index.mutable_at(i) = mig.owned_origin_index()[static_cast<std::size_t>(i)];
        }
        py::array_t<double> gh_r({ng, py::ssize_t{3}}), gh_s({ng, py::ssize_t{3}}), gh_q(ng);
        py::array_t<std::int64_t> gh_id(ng);
        for (py::ssize_t g = 0; g < ng; ++g) {
          for (int a = 0; a < 3; ++a) {
            gh_r.mutable_at(g, a) = mig.ghost_positions()(g, a);
            gh_s.mutable_at(g, a) = mig.ghost_fractional()(g, a);
          }
          gh_q.mutable_at(g) = mig.ghost_charges()(g);
          gh_id.mutable_at(g) = mig.ghost_ids()(g);
        }
        py::dict d = owned_atoms(mig, n);
        d["origin_rank"] = origin_rank;
        d["origin_index"] = origin_index;
        d["ghost_positions"] = gh_r;
        d["ghost_fractional"] = gh_s;
        d["ghost_charges"] = gh_q;
        d["ghost_ids"] = gh_id;
        d["ghost_images_back"] = images;
        d["ghost_routed"] = routed;
        d["ghost_messages"] = ghost_messages;
        d["pulses"] = std::array<int, 3>{mig.staged_pulses()[0], mig.staged_pulses()[1], mig.staged_pulses()[2]};
        py::list payload;
        for (std::size_t i = 0; i < mig.n_owned(); ++i) {
          py::list l;
          for (auto p = mig.owned_payload_offsets()[i]; p < mig.owned_payload_offsets()[i + 1]; ++p)
            l.append(mig.owned_payload()[static_cast<std::size_t>(p)]);
          payload.append(l);
        }
        d["owned_payload"] = payload;
        d["grid"] = mig.grid();
        static const char* paths[] = {"none", "neighbors", "sparse"};
        d["forward_path"] = paths[static_cast<int>(mig.last_forward_path())];
        d["brick"] = box_to_python(mig.my_brick());
        d["margin"] = std::array<double, 3>{mig.ghost_margin(0), mig.ghost_margin(1), mig.ghost_margin(2)};
        return d;
      },
      py::arg("comm"), py::arg("box"), py::arg("mesh"), py::arg("positions"), py::arg("charges"),
      py::arg("ids"), py::arg("cutoff"), py::arg("exclusions") = py::none(), py::arg("ghost_exchange") = "direct",
      R"doc(Migration and ghost exchange alone (for tests): owned and ghost atoms of this
rank, the processor grid, brick and ghost margin, `returned`: the owners'
(id, x, y, z) rows sent back through the reverse path, in the caller's order,
and `owned_payload`: each owned atom's excluded partner ids, carried by the
migration. `ghost_exchange`: 'direct' or 'staged'; `ghost_images_back`: per owned
atom (count, count x id) of its ghosts summed back by reverse_ghosts;
`ghost_routed`: per ghost its original's (id, q) by route_ghosts;
`ghost_messages`: messages the ghost exchange sent; `pulses`: the staged pulses.)doc");

  r.def(
      "migrate_steps",
      [](py::object comm_obj, DArr box, const Int3& mesh, py::list steps) {
        MPI_Comm comm = comm_from_python(comm_obj);
        std::string err = box.ndim() != 2 || box.shape(0) != 3 || box.shape(1) != 3
                              ? "box must be 3x3"
                              : PeriodicCell::check(box.data());
        agree_or_throw(comm, err);
        Comm dup(comm);
        Migration mig(dup.get());
        mig.set_geometry(PeriodicCell(box.data()), mesh);
        py::list out;
        for (py::handle step : steps) {
          const auto t = step.cast<py::tuple>();
          const DArr pos = t[0].cast<DArr>(), q = t[1].cast<DArr>();
          const IArr ids = t[2].cast<IArr>();
          const std::size_t n = static_cast<std::size_t>(q.shape(0));
          if (pos.ndim() != 2 || pos.shape(0) != q.shape(0) || pos.shape(1) != 3 || ids.shape(0) != q.shape(0))
            throw py::value_error("positions (n, 3), charges (n,), ids (n,) expected");
          mig.forward(pos.data(), q.data(), ids.data(), n);
          py::dict d = owned_atoms(mig, n);
          d["reused"] = mig.last_forward_reused();
          out.append(d);
        }
        return out;
      },
      py::arg("comm"), py::arg("box"), py::arg("mesh"), py::arg("steps"),
      R"doc(One Migration forwarding several steps, each (positions, charges, ids) of this
rank's atoms (for tests of the kept plan): per step the owned atoms (positions,
fractional, charges, ids), `returned`: their (id, x, y, z) rows back in the
caller's order, and `reused`: whether the step kept the plan of the one before.)doc");

  py::class_<ExclusionList, std::shared_ptr<ExclusionList>>(
      r, "ExclusionList", "Excluded partners of the caller's atoms, routed once and cached.")
      .def(py::init([](py::object comm_obj) {
             // The communicator must outlive the object: keep a duplicate.
             auto dup = std::make_shared<Comm>(comm_from_python(comm_obj));
             auto self = std::shared_ptr<ExclusionList>(new ExclusionList(dup->get()),
                                                        [dup](ExclusionList* p) { delete p; });
             return self;
           }),
           py::arg("comm"))
      .def(
          "update",
          [](ExclusionList& self, py::array_t<std::int64_t, py::array::c_style | py::array::forcecast> ids,
             py::array_t<std::int64_t, py::array::c_style | py::array::forcecast> pairs) {
            self.update(ids.data(), static_cast<std::size_t>(ids.size()), pairs.size() ? pairs.data() : nullptr,
                        static_cast<std::size_t>(pairs.size() / 2));
            py::list out;
            for (py::ssize_t i = 0; i < ids.size(); ++i) {
              py::list l;
              if (self.any())
                for (auto p = self.offsets()[i]; p < self.offsets()[i + 1]; ++p) l.append(self.partners()[p]);
              out.append(l);
            }
            return py::make_tuple(self.changed(), out);
          },
          py::arg("ids"), py::arg("pairs"),
          "Collective. Returns (changed: the lists were rerouted or emptied, partner ids of each local atom).");

  r.def(
      "pair_batch",
      [](py::array_t<double, py::array::c_style | py::array::forcecast> ri, double kqi,
         py::array_t<double, py::array::c_style | py::array::forcecast> rj,
         py::array_t<double, py::array::c_style | py::array::forcecast> qj, double alpha, bool vector,
         const std::string& precision) {
        const py::ssize_t n = qj.size();
        if (ri.size() != 3 || rj.ndim() != 2 || rj.shape(0) != n || rj.shape(1) != 3)
          throw py::value_error("pair_batch: ri (3,), rj (n, 3), qj (n,)");
        if (n > kMaxBatch) throw py::value_error("pair_batch: at most " + std::to_string(kMaxBatch) + " partners");
        std::vector<double> x(n), y(n), z(n);
        std::vector<int> js(n);
        double r2_max = 0;
        for (py::ssize_t b = 0; b < n; ++b) {
          const double* r = rj.data() + 3 * b;
          x[b] = r[0];
          y[b] = r[1];
          z[b] = r[2];
          js[b] = static_cast<int>(b);
          double r2 = 0;
          for (int d = 0; d < 3; ++d) r2 += (ri.data()[d] - r[d]) * (ri.data()[d] - r[d]);
          r2_max = std::max(r2_max, r2);
        }
        if (precision != "double" && precision != "mixed")
          throw py::value_error("pair_batch: precision must be 'double' or 'mixed'");
        const bool mixed = precision == "mixed";
        if ((vector || mixed) && !(alpha * std::sqrt(r2_max) < kMaxAlphaR))
          throw py::value_error("pair_batch: the vector kernel needs alpha * r < 8 for every pair");
        std::vector<double> fx(kMaxBatch), fy(kMaxBatch), fz(kMaxBatch);
        // acc: 10 values; the mixed kernel's 11th, sum |f_pair|^2, only for it.
        const py::ssize_t n_acc = mixed ? PairBatchAcc::kSize : PairBatchAcc::kPairForce2;
        std::vector<double> acc_all(PairBatchAcc::kSize, 0.0);
        (mixed ? erfc_pair_batch_mixed : vector ? erfc_pair_batch : erfc_pair_batch_scalar)(
            static_cast<int>(n), js.data(), ri.data()[0], ri.data()[1], ri.data()[2], kqi, x.data(), y.data(),
            z.data(), qj.data(), alpha, fx.data(), fy.data(), fz.data(), acc_all.data());
        py::array_t<double> acc(n_acc);
        std::copy(acc_all.begin(), acc_all.begin() + n_acc, acc.mutable_data());
        py::array_t<double> f({n, py::ssize_t{3}});
        for (py::ssize_t b = 0; b < n; ++b) {
          f.mutable_data()[3 * b] = fx[b];
          f.mutable_data()[3 * b + 1] = fy[b];
          f.mutable_data()[3 * b + 2] = fz[b];
        }
        return py::make_tuple(f, acc);
      },
      py::arg("ri"), py::arg("kqi"), py::arg("rj"), py::arg("qj"), py::arg("alpha"), py::arg("vector") = true,
      py::arg("precision") = "double",
      "The real-space pair kernel on one atom's partners (pair_kernel.hpp): returns (fr d per pair (n, 3), "
      "[sum e, virial xx yy zz xy xz yz, force on i x y z, sum |fr d|^2 (mixed only)]). vector=False: the "
      "scalar table kernel; precision='mixed': the mixed-precision kernel (pair_kernel_mixed.cpp).");
  r.def(
      "erfc_mixed",
      [](py::array_t<double, py::array::c_style | py::array::forcecast> x) {
        for (py::ssize_t k = 0; k < x.size(); ++k)
          if (!(x.data()[k] >= 0 && x.data()[k] < kMaxAlphaR))
            throw py::value_error("erfc_mixed: x must lie in [0, 8)");
        py::array_t<double> e(x.size()), g(x.size());
        erfc_mixed(static_cast<int>(x.size()), x.data(), e.mutable_data(), g.mutable_data());
        return py::make_tuple(e, g);
      },
      py::arg("x"), "The mixed-precision pair kernel's erfc(x) and exp(-x^2) for x in [0, 8).");
  r.def(
      "ewald_corrections_float",
      [](py::array_t<double, py::array::c_style | py::array::forcecast> z) {
        for (py::ssize_t k = 0; k < z.size(); ++k)
          if (!(z.data()[k] >= 0 && z.data()[k] <= kEwaldCorrMaxZ))
            throw py::value_error("ewald_corrections_float: z must lie in [0, 25]");
        py::array_t<double> f(z.size()), v(z.size());
        ewald_corrections_float(static_cast<int>(z.size()), z.data(), f.mutable_data(), v.mutable_data());
        return py::make_tuple(f, v);
      },
      py::arg("z"),
      "The mixed cluster kernel's rational Ewald corrections at z = (alpha r)^2 in [0, 25], in float: "
      "(F(z), V(z)), V = erf(sqrt z) / sqrt z, F = (V - 2 / sqrt(pi) exp(-z)) / z (pair_math.hpp).");
  r.def("pair_kernel_isa", &pair_kernel_isa, "Instruction set of the pair kernel chosen for this CPU.");
  auto precision_of = [](const std::string& p) {
    if (p != "double" && p != "mixed") throw py::value_error("precision must be 'double' or 'mixed'");
    return p == "mixed" ? PairPrecision::Mixed : PairPrecision::Double;
  };
  r.def(
      "kernel_timings",
      [precision_of](const std::string& precision, int reps) {
        if (reps < 1) throw py::value_error("reps must be at least 1");
        const PairPrecision p = precision_of(precision);
        py::gil_scoped_release nogil;
        const double atom = atom_kernel_ns_per_pair(p, reps * 4);
        const double cluster = cluster_kernel_ns_per_lane(p, reps);
        const double short_cutoff = cluster_kernel_ns_per_lane(p, reps, 14.0);
        return std::make_tuple(atom, cluster, short_cutoff);
      },
      py::arg("precision"), py::arg("reps") = 2000,
      "(ns per pair of the atom block kernel, ns per lane of the cluster kernel at alpha rc 7, the same at "
      "alpha rc 4.9: the mixed kernel's rational path) on synthetic partners (realspace/kernel_timing.hpp); "
      "`reps` rows of 64 cluster blocks, 4 x reps atoms of 256 partners.");
  r.def(
      "fma_rate",
      [](double seconds) {
        FmaRate f;
        {
          py::gil_scoped_release nogil;
          f = fma_rate(seconds);
        }
        return py::make_tuple(f.per_second, f.lanes);
      },
      py::arg("seconds") = 0.5,
      "(float vector FMAs per second, lanes per vector) of this core, the pair kernels' widest float vectors.");

  r.def(
      "erfc",
      [](py::array_t<double, py::array::c_style | py::array::forcecast> x) {
        const double* c = ErfcTable::instance().coefficients();
        py::array_t<double> e(x.size()), g(x.size());
        for (py::ssize_t k = 0; k < x.size(); ++k)
          ErfcTable::eval(c, x.data()[k], e.mutable_data()[k], g.mutable_data()[k]);
        return py::make_tuple(e, g);
      },
      py::arg("x"), "Table erfc(x) and exp(-x^2) for x >= 0 (what the pair kernel uses).");

  r.def(
      "erfc_benchmark",
      [](double x_max, int n, int repeats) {
        std::vector<double> x(static_cast<std::size_t>(n));
        for (int k = 0; k < n; ++k) x[static_cast<std::size_t>(k)] = x_max * (k + 0.5) / n;
        const double* c = ErfcTable::instance().coefficients();
        double sink = 0;
        const double t0 = wall_seconds();
        for (int rep = 0; rep < repeats; ++rep)
          for (int k = 0; k < n; ++k) {
            double e, g;
            ErfcTable::eval(c, x[static_cast<std::size_t>(k)] + 1e-300 * rep, e, g);
            sink += e + g;
          }
        const double t1 = wall_seconds();
        for (int rep = 0; rep < repeats; ++rep)
          for (int k = 0; k < n; ++k) {
            const double xx = x[static_cast<std::size_t>(k)] + 1e-300 * rep;
            sink += std::erfc(xx) + std::exp(-xx * xx);
          }
        const double t2 = wall_seconds();
        const double calls = double(n) * repeats;
        return py::make_tuple((t1 - t0) / calls * 1e9, (t2 - t1) / calls * 1e9, sink);
      },
      py::arg("x_max") = 4.0, py::arg("n") = 4096, py::arg("repeats") = 200,
      "(ns per table call, ns per std::erfc + std::exp call, checksum).");
}

}  // namespace pmewald::bindings
