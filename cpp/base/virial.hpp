// The virial: one type and one layout for the whole core.
//
// W = -dE/d(eps) under the homogeneous strain r -> (1 + eps) r of positions and box
// rows (so trace W = E for the Coulomb energy); for pairs W_ab = sum r_ij,a F_ij,b.
// W is symmetric: Virial keeps its six independent components in the order
// (xx, yy, zz, xy, xz, yz), every kernel accumulates in that order, and matrix() is
// the one conversion to the full 3x3 (row-major) that results and the Python
// module hand out.
#pragma once

#include <array>
#include <cstddef>

namespace pmewald {
inline namespace base {

struct Virial {
  enum Component { XX = 0, YY = 1, ZZ = 2, XY = 3, XZ = 4, YZ = 5 };
  static constexpr int kComponents = 6;

  std::array<double, kComponents> c{};  // xx, yy, zz, xy, xz, yz

  double& operator[](int k) { return c[static_cast<std::size_t>(k)]; }
  double operator[](int k) const { return c[static_cast<std::size_t>(k)]; }
  double* data() { return c.data(); }
  const double* data() const { return c.data(); }

  Virial& operator+=(const Virial& o) {
    for (std::size_t k = 0; k < kComponents; ++k) c[k] += o.c[k];
    return *this;
  }
  // Adds v * identity (a term whose virial is isotropic, e.g. the neutralising background).
  void add_isotropic(double v) {
    c[XX] += v;
    c[YY] += v;
    c[ZZ] += v;
  }
  // w (kComponents entries, this order) += f_a r_b: the outer product of a force and a
  // position (or separation), f first, as every pair virial here is summed.
  static void add_outer(double* w, const double f[3], const double r[3]) {
    w[XX] += f[0] * r[0];
    w[YY] += f[1] * r[1];
    w[ZZ] += f[2] * r[2];
    w[XY] += f[0] * r[1];
    w[XZ] += f[0] * r[2];
    w[YZ] += f[1] * r[2];
  }
  // The full 3x3 matrix, row-major.
  std::array<double, 9> matrix() const {
    return {c[XX], c[XY], c[XZ], c[XY], c[YY], c[YZ], c[XZ], c[YZ], c[ZZ]};
  }
};

}  // namespace base
}  // namespace pmewald
