// Turning a Python object into an MPI communicator through mpi4py's C API.
#pragma once

#include <mpi.h>
#include <pybind11/pybind11.h>

namespace pmewald::bindings {

// Returns the MPI_Comm inside an mpi4py intracommunicator. `None` means
// mpi4py's MPI.COMM_WORLD. Raises TypeError (pybind11::type_error) naming
// `argument` for anything else: a non-communicator, MPI.COMM_NULL or an
// intercommunicator.
MPI_Comm comm_from_python(const pybind11::object& obj, const char* argument = "comm");

// Imports mpi4py's C API; called once when the module loads.
void import_mpi4py_api();

}  // namespace pmewald::bindings
