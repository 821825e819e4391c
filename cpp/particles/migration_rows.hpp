// Shared by migration.cpp, ghost_atoms.cpp and staged_ghosts.cpp (Migration's
// stages): the ghost record, and views resized only when their row count
// changes, uninitialised (every row is written).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/kokkos_types.hpp"

namespace pmewald {
inline namespace particles {
namespace detail {

// One ghost atom as it travels: fractional and Cartesian position of the image,
// charge, id, and the original's owned key (Migration::owned_key).
struct GhostRecord {
  double s[3];
  double r[3];
  double q;
  std::int64_t id;
  std::int64_t key;
};

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
