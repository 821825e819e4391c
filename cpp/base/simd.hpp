// Run-time choice of the x86-64 instruction set for the hand-vectorised
// kernels (real-space pair kernel and selection, B-spline spreading and
// gathering). Each is compiled for x86-64-v4 (AVX-512), x86-64-v3 (AVX2+FMA)
// and the baseline with target attributes, and the widest set the CPU supports
// is used; builds stay portable (no -march=native).
//
// PMEWALD_SIMD=x86-64-v3 or =baseline in the environment caps the choice (the
// tests run every version this way); other values are ignored. The choice is
// made once per process. Define PMEWALD_NO_MULTIVERSION to build only the
// baseline (a compiler without those target attributes; non-x86 targets get
// it automatically).
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(PMEWALD_NO_MULTIVERSION)
#define PMEWALD_X86_DISPATCH 1
#include <immintrin.h>
#define PMEWALD_TARGET_V4 __attribute__((target("arch=x86-64-v4")))
#define PMEWALD_TARGET_V3 __attribute__((target("arch=x86-64-v3")))
#define PMEWALD_SIMD_VERSIONS(v4, v3, baseline) v4, v3, baseline
#else
#define PMEWALD_X86_DISPATCH 0
#define PMEWALD_SIMD_VERSIONS(v4, v3, baseline) baseline, baseline, baseline
#endif

namespace pmewald {
inline namespace base {
namespace simd {

enum class Isa { Baseline, V3, V4 };

// The instruction set chosen for this process.
Isa isa();
// Its description, e.g. "x86-64-v4 (AVX-512, 8 lanes)".
const char* isa_name();

// The one dispatch of every hand-vectorised kernel: the version of a function
// compiled for this process's instruction set, written
//
//   simd::choose(PMEWALD_SIMD_VERSIONS(f_v4, f_v3, f_baseline))(args...)
//
// (the macro drops the v4 and v3 names in builds without them). Each version is a
// whole function with its hot loops inside, specialised and inlined as written
// there: only the call into it goes through the choice (a lambda around the loops
// instead lost their inlining, measured ~1 ms per call in the neighbour selection).
// A caller on a hot path keeps the chosen pointer (the pair kernel does).
template <class F>
inline F choose(F v4, F v3, F baseline) {
  switch (isa()) {
    case Isa::V4: return v4;
    case Isa::V3: return v3;
    case Isa::Baseline: break;
  }
  return baseline;
}

}  // namespace simd
}  // namespace base
}  // namespace pmewald
