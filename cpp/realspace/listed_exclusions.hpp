// The end of both list layouts' rows (pair_list.cpp, cluster_sweep.hpp): the
// stored excluded pairs of one sorted atom. Internal to realspace/.
#pragma once

#include <Kokkos_Core.hpp>

#include "realspace/pair_list.hpp"
#include "realspace/pair_search.hpp"

namespace pmewald {
inline namespace realspace {
namespace detail {

// The stored excluded pairs [e0, e1) of sorted atom a closer than the cutoff: their erf
// corrections added (HalfPairKernel::add_excluded). One beyond the cutoff is counted in
// `beyond`, and the list's finish() then names it (PairList::check_exclusions): the
// build recorded every excluded pair once (checked there), so a stored pair beyond the
// cutoff is the only way a call can miss one.
template <class Access>
void add_listed_exclusions(const HalfPairKernel& kern, const PairTable::Excluded* e0, const PairTable::Excluded* e1,
                           int a, double rc2, double& e_excl, double* excl_sums, double& beyond, Access& access) {
  for (const PairTable::Excluded* e = e0; e < e1; ++e) {
    const double dx = kern.x(a) - kern.x(e->j), dy = kern.y(a) - kern.y(e->j), dz = kern.z(a) - kern.z(e->j);
    if (!(dx * dx + dy * dy + dz * dz < rc2)) {
      beyond += 1;
      continue;
    }
    kern.add_excluded(a, e->j, kern.own(a), e_excl, excl_sums, access);
  }
}

}  // namespace detail
}  // namespace realspace
}  // namespace pmewald
