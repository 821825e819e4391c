#include "bindings/pycomm.hpp"

#include <mpi4py/mpi4py.h>

#include <stdexcept>
#include <string>

#include "base/errors.hpp"
#include "comm/mpi_helpers.hpp"

namespace py = pybind11;

namespace pmewald::bindings {

void import_mpi4py_api() {
  if (import_mpi4py() < 0) throw py::error_already_set();
}

void require_mpi_running() {
  int finalized = 0, initialized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    throw std::runtime_error(
        "MPI has been finalized (MPI.Finalize() was called): pmewald needs MPI running; make every pmewald "
        "call before MPI.Finalize()");
  MPI_Initialized(&initialized);
  if (!initialized)
    throw std::runtime_error("MPI is not initialized (mpi4py.rc.initialize = False?): call MPI.Init() first");
}

void agree_on_arguments(MPI_Comm comm, const std::string& err, bool agreed) {
  if (agreed) {
    if (!err.empty()) throw ValueError(err);
    return;
  }
  py::gil_scoped_release nogil;
  agree_or_throw(comm, err);
}

py::object comm_to_python(MPI_Comm comm) {
  PyObject* obj = PyMPIComm_New(comm);
  if (obj == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(obj);
}

MPI_Comm comm_from_python(const py::object& obj, const char* argument) {
  require_mpi_running();
  py::object comm = obj;
  if (comm.is_none()) comm = py::module_::import("mpi4py.MPI").attr("COMM_WORLD");
  if (!PyObject_TypeCheck(comm.ptr(), &PyMPIComm_Type)) {
    const std::string type_name = py::str(py::type::of(comm).attr("__qualname__"));
    throw py::type_error(std::string(argument) +
                         " must be an mpi4py intracommunicator (for example MPI.COMM_WORLD or "
                         "a communicator from Split()), not an object of type '" +
                         type_name + "'");
  }
  MPI_Comm* handle = PyMPIComm_Get(comm.ptr());
  if (handle == nullptr) throw py::error_already_set();
  if (*handle == MPI_COMM_NULL)
    throw py::type_error(std::string(argument) + " is MPI.COMM_NULL; pass a valid intracommunicator");
  int inter = 0;
  MPI_Comm_test_inter(*handle, &inter);
  if (inter)
    throw py::type_error(std::string(argument) +
                         " is an intercommunicator; pmewald needs an intracommunicator");
  return *handle;
}

}  // namespace pmewald::bindings
