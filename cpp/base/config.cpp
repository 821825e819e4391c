#include "base/config.hpp"
#include "base/simd.hpp"

#include <fftw3.h>
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <string>

#ifndef PMEWALD_VERSION
#define PMEWALD_VERSION "unknown"
#endif
#ifndef PMEWALD_CXX_FLAGS
#define PMEWALD_CXX_FLAGS ""
#endif
#ifndef PMEWALD_BUILD_TYPE
#define PMEWALD_BUILD_TYPE ""
#endif
#ifndef PMEWALD_COMPILER
#define PMEWALD_COMPILER ""
#endif

namespace pmewald {
inline namespace base {

namespace {

std::string mpi_vendor() {
#if defined(OPEN_MPI)
  return "Open MPI";
#elif defined(MPICH_VERSION)
#if defined(I_MPI_VERSION)
  return "Intel MPI";
#else
  return "MPICH";
#endif
#else
  return "unknown";
#endif
}

std::string mpi_version() {
#if defined(OPEN_MPI)
  return std::to_string(OMPI_MAJOR_VERSION) + "." + std::to_string(OMPI_MINOR_VERSION) + "." +
         std::to_string(OMPI_RELEASE_VERSION);
#elif defined(MPICH_VERSION)
  return MPICH_VERSION;
#else
  return "unknown";
#endif
}

}  // namespace

std::map<std::string, std::string> build_config() {
  std::map<std::string, std::string> c;
  c["version"] = PMEWALD_VERSION;
  c["mpi_vendor"] = mpi_vendor();
  c["mpi_version"] = mpi_version();
  c["mpi_standard"] = std::to_string(MPI_VERSION) + "." + std::to_string(MPI_SUBVERSION);
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(lib, &len);
  std::string libs(lib, static_cast<size_t>(len));
  while (!libs.empty() && (libs.back() == '\n' || libs.back() == '\0')) libs.pop_back();
  c["mpi_library"] = libs;
  c["fftw_version"] = fftw_version;
  c["kokkos_version"] = std::to_string(KOKKOS_VERSION / 10000) + "." +
                        std::to_string(KOKKOS_VERSION / 100 % 100) + "." +
                        std::to_string(KOKKOS_VERSION % 100);
  c["kokkos_execution_space"] = Kokkos::DefaultExecutionSpace::name();
  c["pair_kernel_isa"] = simd::isa_name();
  c["compiler"] = PMEWALD_COMPILER;
  c["cxx_flags"] = PMEWALD_CXX_FLAGS;
  c["build_type"] = PMEWALD_BUILD_TYPE;
  return c;
}

}  // namespace base
}  // namespace pmewald
