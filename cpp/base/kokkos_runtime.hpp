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
// It also sets FFTW's thread count once: in a build whose Kokkos has the OpenMP
// backend, FFTW (libfftw3_omp) plans on the kernels' thread count, so the FFTs
// are threaded like the kernels.
// Kokkos is per process: under one process that hosts many MPI ranks (SimGrid's
// SMPI) every rank shares it.
//
// Threads. Kokkos 3.x's OpenMP backend dispatches kernels only from the thread that
// initialised it: its instance is thread-local, and any other thread's first kernel
// throws "Kokkos::OpenMP parallel_for ERROR: in parallel or not initialized" (issue 26:
// every case of the threading contract failed so on the OpenMP build). So
// ensure_kokkos_initialized() also *attaches* the calling thread: a thread other than
// the initialising one gets its own OpenMP instance with the same pool size, as
// Kokkos's own OpenMP::partition_master gives its masters one, released when the
// thread ends. Each such thread's kernels then run on their own OpenMP team (two
// threads x N OpenMP threads each: mind the cores, docs/install.md). Nothing to do on
// Serial, inside an OpenMP parallel region, or on the initialising thread. It is called
// by every constructor and every compute/transform entry point, so a C++ program's
// std::threads need nothing extra; after the first call on a thread it costs a
// thread-local test.
#pragma once

namespace pmewald {
inline namespace base {

// Kokkos initialised, and usable from the calling thread (above). Thread-safe; throws
// std::runtime_error when Kokkos was already finalised (Kokkos cannot be initialised
// twice in one process).
void ensure_kokkos_initialized();

// Threads FFTW plans with (1 without libfftw3_omp; 0 before ensure_kokkos_initialized).
int fftw_threads();

}  // namespace base
}  // namespace pmewald
