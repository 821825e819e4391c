// Exception types of the core. The bindings turn them into Python exceptions:
// ValueError (bad input), TypeError (wrong kind of object), RuntimeError (the rest).
#pragma once

#include <stdexcept>
#include <string>

namespace pmewald {
inline namespace base {

struct ValueError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
struct TypeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace base
}  // namespace pmewald
