#include "realspace/erfc_table.hpp"

namespace pmewald {
inline namespace realspace {

const ErfcTable& ErfcTable::instance() {
  static const ErfcTable table;
  return table;
}

ErfcTable::ErfcTable() {
  const int nodes = static_cast<int>(kMax * kInvSpacing) + 2;
  coef_.assign(static_cast<std::size_t>(nodes) * kStride, 0.0);
  const double two_over_sqrt_pi = 1.12837916709551257390;
  for (int k = 0; k < nodes; ++k) {
    const double x = k / kInvSpacing;
    const double e = std::exp(-x * x);
    double* c = coef_.data() + static_cast<std::size_t>(k) * kStride;
    c[0] = std::erfc(x);
    // H_0 = 1, H_1 = 2x, H_(m+1) = 2x H_m - 2m H_(m-1).
    double h_prev = 1.0, h = 2.0 * x;  // H_0, H_1
    double fact = 1.0;                 // n!
    for (int n = 1; n <= kDegree; ++n) {
      fact *= n;
      const int m = n - 1;  // need H_m
      double hm;
      if (m == 0) {
        hm = 1.0;
      } else if (m == 1) {
        hm = 2.0 * x;
      } else {
        // advance (h_prev, h) = (H_(m-2), H_(m-1)) -> H_m
        hm = 2.0 * x * h - 2.0 * (m - 1) * h_prev;
        h_prev = h;
        h = hm;
      }
      const double sign = (m % 2 == 0) ? -1.0 : 1.0;  // -(-1)^(n-1) = -(-1)^m
      c[n] = sign * two_over_sqrt_pi * hm * e / fact;
    }
  }
}

}  // namespace realspace
}  // namespace pmewald
