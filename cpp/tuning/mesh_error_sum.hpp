// The sum over the mesh of the reciprocal error functional of error_estimates.hpp
// (the formulas are written out there): S(m) of every visited mesh point (with
// the charges' correlation table, the alias-weighted excess), the self-force
// coefficients and the neighbours' weighted ones. One Kokkos reduction over the
// mesh, or over the ellipsoid part of it where the aliases are negligible; in
// orthorhombic cells the aliases' |k|^2 and Gaussians come from per-axis tables.
// No MPI.
#pragma once

#include <array>

#include "geometry/index_box.hpp"
#include "geometry/lattice.hpp"
#include "pme/differentiation.hpp"
#include "tuning/charge_correlation.hpp"

namespace pmewald {
inline namespace tuning {

struct MeshErrorSums {
  double pair = 0;                    // sum_m S(m) (unit charges; with the table, its excess added)
  std::array<double, 18> self{};      // the self-force coefficients c_n of the six n = +-e_d, 3 components each
  std::array<double, 18> neighbours{};  // the same weighted by the neighbours' correlation chi (with a table)
};

MeshErrorSums mesh_error_sums(const Mat3& box, double alpha, const Int3& mesh, int order, Differentiation diff,
                              const ChargeCorrelation* correlation);

}  // namespace tuning
}  // namespace pmewald
