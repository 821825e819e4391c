# The dependencies of pmewald::core (MPI, FFTW3, Kokkos), found the same way by
# pmewald's own build and by a project that uses the installed package
# (pmewaldConfig.cmake includes this file). Defines the imported target
# pmewald::fftw3 and repairs Debian's Kokkos::kokkos (FixKokkosIncludes.cmake).
include_guard(GLOBAL)

if(PMEWALD_SMPI)
  # smpicxx supplies SMPI's mpi.h and libraries. Its malloc/realloc/free macros
  # (smpi_helpers.h) break the Kokkos headers, so they are turned off.
  if(NOT TARGET MPI::MPI_CXX)
    add_library(MPI::MPI_CXX INTERFACE IMPORTED)
    set_property(TARGET MPI::MPI_CXX PROPERTY INTERFACE_COMPILE_DEFINITIONS SMPI_NO_OVERRIDE_MALLOC)
  endif()
else()
  find_package(MPI REQUIRED COMPONENTS CXX)
endif()

# FFTW3 (double precision): pkg-config's target when there is one, else a search.
if(NOT TARGET pmewald::fftw3)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(PMEWALD_FFTW3 QUIET IMPORTED_TARGET fftw3)
  endif()
  add_library(pmewald::fftw3 INTERFACE IMPORTED)
  if(TARGET PkgConfig::PMEWALD_FFTW3)
    set_property(TARGET pmewald::fftw3 PROPERTY INTERFACE_LINK_LIBRARIES PkgConfig::PMEWALD_FFTW3)
  else()
    find_path(PMEWALD_FFTW3_INCLUDE_DIR fftw3.h REQUIRED)
    find_library(PMEWALD_FFTW3_LIBRARY fftw3 REQUIRED)
    set_target_properties(pmewald::fftw3 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${PMEWALD_FFTW3_INCLUDE_DIR}"
                                                    INTERFACE_LINK_LIBRARIES "${PMEWALD_FFTW3_LIBRARY}")
  endif()
endif()

# Kokkos: a user's own installation (Kokkos_ROOT / CMAKE_PREFIX_PATH) is found
# first by find_package's normal search order. Debian's libtrilinos-kokkos-dev
# exports Kokkos::kokkos with an include directory that does not exist
# (<prefix>/lib/include); repair it when that is the case.
find_package(Kokkos REQUIRED)
include("${CMAKE_CURRENT_LIST_DIR}/FixKokkosIncludes.cmake")
pmewald_fix_kokkos_includes()
