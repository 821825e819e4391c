// The differentiation scheme of the reciprocal-space forces: analytical (ad: one
// backward FFT of the potential, forces from the B-spline derivatives) or ik (three
// backward FFTs of the field components).
#pragma once

#include <string>

#include "base/errors.hpp"

namespace pmewald {
inline namespace pme {

enum class Differentiation { AD, IK };

inline Differentiation parse_differentiation(const std::string& s) {
  if (s == "ad") return Differentiation::AD;
  if (s == "ik") return Differentiation::IK;
  throw ValueError("differentiation must be \"ad\" or \"ik\", got \"" + s + "\"");
}

}  // namespace pme
}  // namespace pmewald
