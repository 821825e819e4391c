// Turning a Python object into an MPI communicator through mpi4py's C API.
#pragma once

#include <mpi.h>

#include <string>
#include <pybind11/pybind11.h>

namespace pmewald::bindings {

// Returns the MPI_Comm inside an mpi4py intracommunicator. `None` means
// mpi4py's MPI.COMM_WORLD. Raises TypeError (pybind11::type_error) naming
// `argument` for anything else: a non-communicator, MPI.COMM_NULL or an
// intercommunicator.
MPI_Comm comm_from_python(const pybind11::object& obj, const char* argument = "comm");

// Imports mpi4py's C API; called once when the module loads.
void import_mpi4py_api();

// Raises RuntimeError unless MPI is initialized and not yet finalized: an MPI
// call after MPI_Finalize aborts the process, so every binding entry point that
// communicates checks first. comm_from_python calls it.
void require_mpi_running();

// An mpi4py communicator object wrapping `comm`; the caller (Python) owns it.
// Never hand out a communicator a C++ object owns and frees in its destructor:
// mpi4py attaches a lock to a communicator at its first pickled collective
// (bcast, allgather, ...) and removes it, under a registry lock of its own,
// when the communicator is freed. A C++ object that dies in a reference cycle
// is destroyed by Python's cyclic GC, which can run inside that registry lock
// (any allocation can start it): the free then waits for a lock its own thread
// holds, and the other ranks wait in their next collective (docs/reliability.md).
pybind11::object comm_to_python(MPI_Comm comm);

// The collective verdict on a local argument check: agreed over `comm` with the
// GIL released (other Python threads may need it to reach their collectives),
// or, when the Python layer has agreed already (`agreed`), raised locally.
void agree_on_arguments(MPI_Comm comm, const std::string& err, bool agreed);

}  // namespace pmewald::bindings
