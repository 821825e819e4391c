#include "base/simd.hpp"

#include <cstdlib>
#include <string>

namespace pmewald {
inline namespace base {
namespace simd {

namespace {

struct Choice {
  Isa isa = Isa::Baseline;
  const char* name = "baseline (2 lanes)";
  Choice() {
#if PMEWALD_X86_DISPATCH
    __builtin_cpu_init();
    const char* cap = std::getenv("PMEWALD_SIMD");
    const std::string limit = cap ? cap : "";
    if (limit == "baseline") return;
    if (limit != "x86-64-v3" && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      isa = Isa::V4;
      name = "x86-64-v4 (AVX-512, 8 lanes)";
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      isa = Isa::V3;
      name = "x86-64-v3 (AVX2+FMA, 4 lanes)";
    }
#endif
  }
};

const Choice& choice() {
  static const Choice c;
  return c;
}

}  // namespace

Isa isa() { return choice().isa; }
const char* isa_name() { return choice().name; }

}  // namespace simd
}  // namespace base
}  // namespace pmewald
