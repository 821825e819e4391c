// Test hooks of the communication layer: a generic exchange plan with its
// executors, the buffer-allocation counter, and every rank's halo lists built
// without MPI (for virtual rank counts). Registered as pmewald._core._testing.comm;
// exchange_stats_to_python and lists_to_python serve the other binding files too.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <complex>
#include <memory>
#include <string>
#include <vector>

#include "comm/exchange.hpp"
#include "comm/halo.hpp"
#include "comm/communicators.hpp"
#include "comm/mpi_helpers.hpp"
#include "bindings/bindings.hpp"
#include "bindings/pycomm.hpp"

namespace py = pybind11;

namespace pmewald::bindings {

py::dict exchange_stats_to_python(const ExchangeStats& s) {
  py::dict d;
  d["executions"] = s.executions;
  d["messages_sent"] = s.messages_sent;
  d["messages_received"] = s.messages_received;
  d["bytes_sent"] = s.bytes_sent;
  d["bytes_received"] = s.bytes_received;
  d["self_bytes"] = s.self_bytes;
  d["pack_seconds"] = s.pack_seconds;
  d["wait_seconds"] = s.wait_seconds;
  d["unpack_seconds"] = s.unpack_seconds;
  d["self_seconds"] = s.self_seconds;
  d["tests"] = s.tests;
  d["test_seconds"] = s.test_seconds;
  return d;
}

py::dict lists_to_python(int P, const std::function<ExchangeLists(int)>& lists_of) {
  std::vector<std::int64_t> rank_start[3], msg_start[2], partner[2], index[2], self[2];
  for (auto& v : rank_start) v.push_back(0);
  for (auto& v : msg_start) v.push_back(0);
  for (int r = 0; r < P; ++r) {
    const ExchangeLists L = lists_of(r);
    const std::vector<int>* ranks[2] = {&L.send_ranks, &L.recv_ranks};
    const std::vector<std::vector<Index>>* lists[2] = {&L.send_indices, &L.recv_indices};
    for (int k = 0; k < 2; ++k) {
      for (std::size_t m = 0; m < ranks[k]->size(); ++m) {
        partner[k].push_back((*ranks[k])[m]);
        index[k].insert(index[k].end(), (*lists[k])[m].begin(), (*lists[k])[m].end());
        msg_start[k].push_back(static_cast<std::int64_t>(index[k].size()));
      }
      rank_start[k].push_back(static_cast<std::int64_t>(partner[k].size()));
    }
    self[0].insert(self[0].end(), L.self_src.begin(), L.self_src.end());
    self[1].insert(self[1].end(), L.self_dst.begin(), L.self_dst.end());
    rank_start[2].push_back(static_cast<std::int64_t>(self[0].size()));
  }
  auto arr = [](const std::vector<std::int64_t>& v) { return py::array_t<std::int64_t>(v.size(), v.data()); };
  py::dict d;
  const char* side[2] = {"send", "recv"};
  for (int k = 0; k < 2; ++k) {
    d[py::str(std::string(side[k]) + "_rank_start")] = arr(rank_start[k]);
    d[py::str(std::string(side[k]) + "_partner")] = arr(partner[k]);
    d[py::str(std::string(side[k]) + "_start")] = arr(msg_start[k]);
    d[py::str(std::string(side[k]) + "_index")] = arr(index[k]);
  }
  d["self_start"] = arr(rank_start[2]);
  d["self_src"] = arr(self[0]);
  d["self_dst"] = arr(self[1]);
  return d;
}

namespace {

// A Python handle on a generic exchange: owns a duplicate communicator, the plan,
// and executors for float64 and complex128 data (tests and experiments).
struct PyExchange {
  std::unique_ptr<Comm> comm;
  std::shared_ptr<const ExchangePlan> plan;
  std::unique_ptr<ExchangeExecutor<double>> real;
  std::unique_ptr<ExchangeExecutor<Complex>> cplx;
};

// The whole exchange, or (split) start(), test() until complete, finish(): returns
// the number of tests made (0 for a whole one).
template <class T>
std::int64_t run_exchange(ExchangeExecutor<T>& ex, const ExchangePlan& plan, py::array src, py::array dst,
                          Direction dir, UnpackOp op, bool split) {
  std::string err;
  if (src.size() != plan.source_size(dir) || dst.size() != plan.destination_size(dir))
    err = "src must hold " + std::to_string(plan.source_size(dir)) + " and dst " +
          std::to_string(plan.destination_size(dir)) + " elements";
  else if (!(src.flags() & py::array::c_style) || !(dst.flags() & py::array::c_style) || !dst.writeable())
    err = "src and dst must be C-contiguous (and dst writeable)";
  agree_on_arguments(plan.comm(), err, false);
  const T* s = reinterpret_cast<const T*>(src.data());
  T* d = reinterpret_cast<T*>(dst.mutable_data());
  py::gil_scoped_release release;
  if (!split) {
    ex.execute(s, d, dir, op);
    return 0;
  }
  ex.start(s, d, dir, op);
  std::int64_t tests = 1;
  while (!ex.test()) ++tests;
  ex.finish();
  return tests;
}

}  // namespace

void bind_comm(py::module_& testing) {
  auto c = testing.def_submodule("comm", "Exchange plans and executors, halo lists.");
  c.def("buffer_allocations", &buffer_allocations,
        "Process-wide count of buffers allocated by the exchange, remap and FFT layers.");
  c.def(
      "halo_plans",
      [](const py::list& bricks, const Int3& mesh, int ghost) {
        std::vector<Box3> b;
        for (auto x : bricks) b.push_back(box_from_python(x, "bricks[i]"));
        const HaloLayout layout(b, mesh, ghost);
        std::vector<std::int64_t> examined(b.size(), 0);
        py::dict d = lists_to_python(layout.size(), [&](int r) { return halo_lists(layout, r, &examined[r]); });
        py::list ext;
        for (const Box3& e : layout.extended.boxes()) ext.append(box_to_python(e));
        d["extended"] = ext;
        d["examined"] = py::array_t<std::int64_t>(examined.size(), examined.data());
        return d;
      },
      py::arg("bricks"), py::arg("mesh"), py::arg("ghost"),
      "Every rank's halo exchange lists (comm/halo.hpp's halo_lists), built without MPI: a dict of "
      "flat arrays (<side>_rank_start[r]..[r+1] index the messages of rank r in <side>_partner, whose "
      "elements are <side>_index[<side>_start[m]..[m+1]] for side send/recv; self_src/self_dst "
      "[self_start[r]..[r+1]]), the extended boxes, and the candidate boxes each rank's index looked at.");
  py::class_<PyExchange>(c, "Exchange", "Generic exchange plan with executors.")
      .def(py::init([](py::object comm, const std::string& mode, std::vector<int> send_ranks,
                       std::vector<std::vector<Index>> send_indices, std::vector<int> recv_ranks,
                       std::vector<std::vector<Index>> recv_indices, std::vector<Index> self_src,
                       std::vector<Index> self_dst, std::int64_t src_size, std::int64_t dst_size) {
             MPI_Comm c = comm_from_python(comm, "comm");
             const CommMode cm = comm_mode_from_string(mode);
             auto h = std::make_unique<PyExchange>();
             h->comm = std::make_unique<Comm>(c);
             ExchangeLists L{std::move(send_ranks), std::move(send_indices), std::move(recv_ranks),
                             std::move(recv_indices), std::move(self_src), std::move(self_dst), src_size, dst_size};
             h->plan = std::make_shared<const ExchangePlan>(h->comm->get(), std::move(L));
             h->real = make_executor<double>(cm, h->plan);
             h->cplx = make_executor<Complex>(cm, h->plan);
             return h;
           }),
           py::arg("comm"), py::arg("comm_mode"), py::arg("send_ranks"), py::arg("send_indices"),
           py::arg("recv_ranks"), py::arg("recv_indices"), py::arg("self_src"), py::arg("self_dst"),
           py::arg("src_size"), py::arg("dst_size"))
      .def(
          "execute",
          [](PyExchange& h, py::array src, py::array dst, bool reverse, bool add, bool split) {
            const Direction dir = reverse ? Direction::Reverse : Direction::Forward;
            const UnpackOp op = add ? UnpackOp::Add : UnpackOp::Assign;
            std::string err;
            const bool is_real = src.dtype().is(py::dtype::of<double>()) && dst.dtype().is(py::dtype::of<double>());
            const bool is_cplx = src.dtype().is(py::dtype::of<std::complex<double>>()) &&
                                 dst.dtype().is(py::dtype::of<std::complex<double>>());
            if (!is_real && !is_cplx) err = "src and dst must both be float64 or both complex128";
            agree_on_arguments(h.plan->comm(), err, false);
            return is_real ? run_exchange(*h.real, *h.plan, src, dst, dir, op, split)
                           : run_exchange(*h.cplx, *h.plan, src, dst, dir, op, split);
          },
          py::arg("src"), py::arg("dst"), py::arg("reverse") = false, py::arg("add") = false,
          py::arg("split") = false,
          "One exchange; split: start(), test() until complete, finish() (returns the tests made).")
      .def_property_readonly(
          "component",
          [](const PyExchange& h) {
            // Collective (test hook): the members of this rank's component, sorted.
            const int root = h.plan->component_root();
            std::vector<int> roots(static_cast<std::size_t>(h.plan->size()));
            check_mpi(MPI_Allgather(&root, 1, MPI_INT, roots.data(), 1, MPI_INT, h.plan->comm()), "MPI_Allgather");
            std::vector<int> members;
            for (int r = 0; r < h.plan->size(); ++r)
              if (roots[static_cast<std::size_t>(r)] == root) members.push_back(r);
            return members;
          },
          "Collective: the sorted ranks of this rank's connected component of the exchange graph.")
      .def("stats", [](const PyExchange& h, bool reverse, bool complex_data) {
             const Direction dir = reverse ? Direction::Reverse : Direction::Forward;
             return exchange_stats_to_python(complex_data ? h.cplx->stats(dir) : h.real->stats(dir));
           },
           py::arg("reverse") = false, py::arg("complex_data") = false);
}

}  // namespace pmewald::bindings
