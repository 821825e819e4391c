// Build configuration and the communicator checks, for show_config() and tests;
// the virial conversion the other binding files share.
#include <mpi.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>

#include "comm/mpi_helpers.hpp"
#include "base/config.hpp"
#include "base/kokkos_runtime.hpp"
#include "base/threads.hpp"
#include "comm/thread_placement.hpp"
#include "comm/communicators.hpp"
#include "bindings/bindings.hpp"
#include "bindings/pycomm.hpp"

namespace py = pybind11;

namespace pmewald::bindings {

py::array_t<double> virial_to_python(const Virial& v) {
  py::array_t<double> W({3, 3});
  const auto w = v.matrix();
  std::copy(w.begin(), w.end(), W.mutable_data());
  return W;
}

void bind_base(py::module_& m) {
  m.def("build_config", &build_config,
        "Versions of pmewald, MPI, FFTW and Kokkos this extension was built with.");
  m.def("comm_info",
        [](py::object comm) {
          MPI_Comm c = comm_from_python(comm);
          int rank = 0, size = 1;
          MPI_Comm_rank(c, &rank);
          MPI_Comm_size(c, &size);
          return py::make_tuple(rank, size);
        },
        py::arg("comm") = py::none(),
        "(rank, size) of a communicator as the core sees it; raises TypeError for a non-communicator.");
  m.def("thread_placement",
        [](py::object comm) {
          MPI_Comm c = comm_from_python(comm);
          ensure_kokkos_initialized();
          ThreadPlacement p;
          {
            py::gil_scoped_release nogil;  // collective: other Python threads may need the GIL
            p = thread_placement(c);
          }
          py::dict d;
          d["threads_per_rank"] = p.threads_per_rank;
          d["ranks_on_node"] = p.ranks_on_node;
          d["threads_on_node"] = p.threads_on_node;
          d["cores_on_node"] = p.cores_on_node;
          d["min_rank_cores"] = p.min_rank_cores;
          d["max_rank_threads"] = p.max_rank_threads;
          d["oversubscribed"] = p.oversubscribed();
          d["description"] = p.describe();
          return d;
        },
        py::arg("comm") = py::none(),
        "Collective: the job's threads and cores on its busiest node (comm/thread_placement.hpp), as a dict.");
  // Communicators (comm/communicators.hpp): every one the package creates comes from here.
  m.def("duplicate_communicator",
        [](py::object comm) {
          MPI_Comm c = comm_from_python(comm);
          MPI_Comm dup = MPI_COMM_NULL;
          {
            py::gil_scoped_release nogil;
            dup = duplicate_communicator(c);
          }
          return comm_to_python(dup);
        },
        py::arg("comm"),
        "Collective: a duplicate of comm, created safely while other threads create theirs "
        "(comm/communicators.hpp). The caller owns it (Free() it on every rank).");
  m.def("ranks_on_node",
        [](py::object comm) {
          MPI_Comm c = comm_from_python(comm);
          py::gil_scoped_release nogil;
          MPI_Comm node = node_communicator(c);
          int n = 1;
          MPI_Comm_size(node, &n);
          free_comm(node);
          return n;
        },
        py::arg("comm"), "Collective: how many ranks of comm share this rank's node.");
  m.def("communicator_creation_stats",
        []() {
          const CreationStats s = communicator_creation_stats();
          py::dict d;
          d["created"] = s.created;
          d["retries"] = s.retries;
          return d;
        },
        "This process's communicators created by the core, and the attempts retried because "
        "another thread held the creation lock on some member rank.");
  m.def("agree_or_throw",
        [](py::object comm, const std::string& local_error) {
          MPI_Comm c = comm_from_python(comm);
          py::gil_scoped_release nogil;  // other Python threads may need the GIL to reach their collectives
          agree_or_throw(c, local_error);
        },
        py::arg("comm"), py::arg("local_error"),
        "Collective error agreement: raises ValueError on every rank if any rank passes a message.");
}

}  // namespace pmewald::bindings
