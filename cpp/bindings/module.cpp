// The pybind11 module pmewald._core: thin glue over the C++ core.
#include <pybind11/pybind11.h>

#include <Kokkos_Core.hpp>

#include "base/errors.hpp"
#include "bindings/bindings.hpp"
#include "bindings/pycomm.hpp"

namespace py = pybind11;
using namespace pmewald::bindings;

PYBIND11_MODULE(_core, m) {
  m.doc() = "pmewald C++ core (Kokkos kernels, FFTW, MPI).";
  import_mpi4py_api();
  if (!Kokkos::is_initialized()) {
    // Kokkos is initialised once per process and left running: views owned by
    // Python objects may outlive interpreter shutdown hooks.
#if KOKKOS_VERSION >= 40000
    Kokkos::initialize(Kokkos::InitializationSettings().set_disable_warnings(true));
#else
    Kokkos::InitArguments args;
    args.disable_warnings = true;
    Kokkos::initialize(args);
#endif
  }
  py::register_exception<pmewald::TypeError>(m, "CoreTypeError", PyExc_TypeError);
  bind_config(m);
  bind_geometry(m);
  bind_realspace(m);
  bind_fft(m);
  bind_kernels(m);
  bind_pme(m);
}
