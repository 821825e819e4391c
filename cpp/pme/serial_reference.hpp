// The whole local reciprocal-space pipeline on ONE rank (the single-rank
// reference path of the distributed solver): stencils -> spread onto the
// extended grid [-(p-1), K) -> periodic fold of the low ghost layers into the
// top of the mesh -> FFTW c2c forward -> KSpaceSolver -> FFTW backward (/N)
// -> periodic ghost fill -> gather. No MPI.
#pragma once

#include "base/kokkos_types.hpp"
#include "base/virial.hpp"
#include "geometry/lattice.hpp"
#include "pme/differentiation.hpp"

namespace pmewald {
inline namespace pme {

struct SerialReferenceResult {
  double energy = 0;
  Virial virial;
};

// positions (n,3), charges (n); forces (n,3) and potential (n) are overwritten
// (potential = dE_rec/dq_i, the reciprocal potential at atom i including its
// own mesh contribution; for "ik" it is interpolated from the same phi mesh).
SerialReferenceResult serial_reference(const Mat3& box, View2<const double> positions,
                                   View1<const double> charges, double alpha,
                                   const Int3& mesh, int order, Differentiation diff,
                                   double coulomb_constant, View2<double> forces,
                                   View1<double> potential);

}  // namespace pme
}  // namespace pmewald
