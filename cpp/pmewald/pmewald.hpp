// pmewald's C++ API: smooth particle-mesh Ewald electrostatics over MPI, and the
// distributed 3-D FFTs it is built on (docs/cpp_api.md).
//
//   #include <pmewald/pmewald.hpp>      // CMake: find_package(pmewald), link pmewald::core
//
//   pmewald::SolverOptions o;           // box (rows = lattice vectors), mesh, order, alpha, cutoff, ...
//   pmewald::PMESolver pme(MPI_COMM_WORLD, o);                          // collective
//   pmewald::SolverResult r = pme.compute(x, q, ids, n, excl, m, f);    // collective
//   r.energy, r.terms, r.virial.matrix(), f (forces, n x 3, this rank's atoms in their order)
//
//   pmewald::FFT3d fft(comm, mesh, inbox, outbox);      // complex; RealFFT3d: real-to-complex
//   fft.forward(in, out); fft.backward(out, in);
//
// The program initialises MPI (the library never does); Kokkos is initialised by the
// first pmewald object if the program has not done it (base/kokkos_runtime.hpp).
// Every constructor and compute/transform call is collective over its communicator
// (the library works on its own duplicate of it); invalid input throws
// pmewald::ValueError on every rank. Parameters are explicit here: choose them from
// an accuracy target with pmewald::choose_cheapest (tuning/parameter_choice.hpp), as
// the Python pmewald.PME does.
#pragma once

#include "base/compute_model.hpp"   // charge, set_work_sink, WorkCounter (modelled computation)
#include "base/errors.hpp"          // ValueError, TypeError
#include "base/kokkos_runtime.hpp"  // ensure_kokkos_initialized
#include "base/virial.hpp"          // Virial
#include "comm/exchange_plan.hpp"   // CommMode, Direction
#include "fft/fft3d.hpp"            // FFT3d, FFTOptions
#include "fft/rfft3d.hpp"           // RealFFT3d, RealFFTOptions
#include "geometry/decomposition.hpp"  // brick_box, pencil_box, processor grids
#include "geometry/index_box.hpp"   // Box3, Int3
#include "geometry/lattice.hpp"     // Mat3
#include "solver/pme_solver.hpp"    // PMESolver, SolverOptions, SolverResult
#include "tuning/error_estimates.hpp"   // real_space_error, reciprocal_error
#include "tuning/parameter_choice.hpp"  // choose_cheapest, choose_parameters
