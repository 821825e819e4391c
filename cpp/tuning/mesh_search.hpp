// The mesh search shared by choose_parameters and choose_cheapest (parameter_choice.cpp,
// cheapest_choice.cpp): the mesh of a density along the cell's plane spacings, and the
// smallest one meeting an estimate goal. Internal to tuning/. No MPI.
#pragma once

#include <array>

#include "geometry/index_box.hpp"
#include "geometry/lattice.hpp"
#include "tuning/charge_correlation.hpp"
#include "tuning/error_estimates.hpp"

namespace pmewald {
inline namespace tuning {
namespace detail {

// K_d = fft_friendly(ceil(s h_d)), at least p (h_d the plane spacings).
Int3 mesh_for_density(double s, const std::array<double, 3>& h, int p);

struct MeshChoice {
  Int3 mesh;
  double err;
};

// The smallest mesh (on a 2% grid of densities) whose reciprocal estimate at alpha, order p
// and differentiation diff meets goal; ValueError when none up to 512 per axis does.
MeshChoice smallest_mesh(const Mat3& box, double alpha, int p, Differentiation diff, double sum_q2, int n,
                         double kc, double sum_q4, double goal, const ChargeCorrelation* corr);

}  // namespace detail
}  // namespace tuning
}  // namespace pmewald
