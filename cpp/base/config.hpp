// Build and runtime configuration of the core, for show_config().
#pragma once

#include <map>
#include <string>

namespace pmewald {
inline namespace base {

// Keys: version, mpi_vendor, mpi_version (compile-time, "major.minor.patch"),
// mpi_standard, mpi_library (runtime MPI_Get_library_version), fftw_version,
// kokkos_version, kokkos_execution_space, compiler, cxx_flags, build_type.
std::map<std::string, std::string> build_config();

}  // namespace base
}  // namespace pmewald
