#include "bindings/pycomm.hpp"

#include <mpi4py/mpi4py.h>

#include <string>

namespace py = pybind11;

namespace pmewald::bindings {

void import_mpi4py_api() {
  if (import_mpi4py() < 0) throw py::error_already_set();
}

MPI_Comm comm_from_python(const py::object& obj, const char* argument) {
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
