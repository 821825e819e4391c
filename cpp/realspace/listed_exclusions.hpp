// The end of both list layouts' rows (pair_list.cpp, cluster_sweep.hpp): the
// stored excluded pairs of one sorted atom. Internal to realspace/.
#pragma once

#include <Kokkos_Core.hpp>

#include "base/virial.hpp"
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
//
// `applied` (with `centre`; may be null): where the caller forms the pairs' virial from
// the forces on its atoms, sum_a F_a (r_a - centre) (Virial's order, F first), the
// exclusions' share of that sum is added here: the force on a (added by the caller
// where a is owned) and on j (added here where j is owned), so the caller can take it
// out; their own, ownership-weighted virial is in excl_sums as always.
template <class Access>
void add_listed_exclusions(const HalfPairKernel& kern, const PairTable::Excluded* e0, const PairTable::Excluded* e1,
                           int a, double rc2, double& e_excl, double* excl_sums, double& beyond, Access& access,
                           const double* centre = nullptr, double* applied = nullptr) {
  for (const PairTable::Excluded* e = e0; e < e1; ++e) {
    const double dx = kern.x(a) - kern.x(e->j), dy = kern.y(a) - kern.y(e->j), dz = kern.z(a) - kern.z(e->j);
    if (!(dx * dx + dy * dy + dz * dz < rc2)) {
      beyond += 1;
      continue;
    }
    double f[3];
    kern.add_excluded(a, e->j, kern.own(a), e_excl, excl_sums, access, f);
    if (!applied) continue;
    double r[3] = {0, 0, 0};  // the applied forces' positions: +f at a, -f at j
    if (kern.sowner(a) >= 0) {
      r[0] += kern.x(a) - centre[0];
      r[1] += kern.y(a) - centre[1];
      r[2] += kern.z(a) - centre[2];
    }
    if (kern.own(e->j) != 0.0) {
      r[0] -= kern.x(e->j) - centre[0];
      r[1] -= kern.y(e->j) - centre[1];
      r[2] -= kern.z(e->j) - centre[2];
    }
    Virial::add_outer(applied, f, r);
  }
}

}  // namespace detail
}  // namespace realspace
}  // namespace pmewald
