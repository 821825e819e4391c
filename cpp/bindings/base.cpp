// Build configuration and the communicator checks, for show_config() and tests;
// the virial conversion the other binding files share.
#include <mpi.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>

#include "comm/mpi_helpers.hpp"
#include "base/config.hpp"
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
