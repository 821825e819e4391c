// Kokkos for a library call.
//
// Every pmewald object that owns Kokkos views or runs kernels (PMESolver, FFT3d,
// RealFFT3d, Halo, ExchangePlan and its executors) calls ensure_kokkos_initialized()
// first, so a program may use the library whether or not it initialised Kokkos:
//  - it did (its own Kokkos, its own settings): pmewald uses that, and the program
//    finalises Kokkos after destroying every pmewald object;
//  - it did not: the first such call initialises Kokkos (default settings, warnings
//    off) and leaves it running until the process ends (pmewald never finalises it:
//    objects may outlive any point where that would be safe, e.g. in Python).
// Kokkos is per process: under one process that hosts many MPI ranks (SimGrid's
// SMPI) every rank shares it.
#pragma once

namespace pmewald {
inline namespace base {

// Thread-safe; throws std::runtime_error when Kokkos was already finalised (Kokkos
// cannot be initialised twice in one process).
void ensure_kokkos_initialized();

}  // namespace base
}  // namespace pmewald
