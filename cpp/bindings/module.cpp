// The pybind11 module pmewald._core: thin glue over the C++ core, one binding file
// per folder of the core. pmewald._core._testing holds the hooks only the test suite
// calls (not an API: they change with the tests).
#include <pybind11/pybind11.h>

#include "base/errors.hpp"
#include "base/kokkos_runtime.hpp"
#include "bindings/bindings.hpp"
#include "bindings/pycomm.hpp"

namespace py = pybind11;
using namespace pmewald::bindings;

PYBIND11_MODULE(_core, m) {
  m.doc() = "pmewald C++ core (Kokkos kernels, FFTW, MPI).";
  import_mpi4py_api();
  // Kokkos is initialised once per process, if the program has not, and left running:
  // views owned by Python objects may outlive interpreter shutdown hooks.
  pmewald::ensure_kokkos_initialized();
  py::register_exception<pmewald::TypeError>(m, "CoreTypeError", PyExc_TypeError);
  auto testing = m.def_submodule("_testing", "Test hooks of the C++ core (pmewald's test suite only; not an API).");
  py::module_::import("sys").attr("modules")["pmewald._core._testing"] = testing;
  bind_base(m);
  bind_geometry(m);
  bind_comm(testing);
  bind_fft(m, testing);
  bind_pme(testing);
  bind_realspace(testing);
  bind_tuning(m);
  bind_solver(m, testing);
}
