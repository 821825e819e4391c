// Shared by migration.cpp and ghost_atoms.cpp (Migration's two stages): views
// resized only when their row count changes, uninitialised (every row is written).
#pragma once

#include <cstddef>
#include <string>

#include "base/kokkos_types.hpp"

namespace pmewald {
inline namespace particles {
namespace detail {

template <class V>
void ensure_rows(V& v, std::size_t n, const char* label) {
  if (v.extent(0) != n) v = V(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), n);
}
template <class V>
void ensure_rows3(V& v, std::size_t n, const char* label) {
  if (v.extent(0) != n) v = V(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), n, 3);
}

}  // namespace detail
}  // namespace particles
}  // namespace pmewald
