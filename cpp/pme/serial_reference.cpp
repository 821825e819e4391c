#include "pme/serial_reference.hpp"

#include <fftw3.h>

#include <vector>

#include "base/errors.hpp"
#include "base/fftw_planner.hpp"
#include "base/kokkos_runtime.hpp"
#include "pme/gather.hpp"
#include "pme/kspace_solve.hpp"
#include "pme/spread.hpp"

namespace pmewald {
inline namespace pme {

namespace {

// f(i, j, k, t) for every point (i, j, k) of the extended grid over `eb` (ghosts
// included), t its periodic image's index in the full C-order mesh K.
template <class F>
void for_each_periodic_point(const Box3& eb, const Int3& K, F&& f) {
  const Int3 s = eb.shape();
  for (int i = 0; i < s[0]; ++i) {
    const int gi = ((eb.lo[0] + i) % K[0] + K[0]) % K[0];
    for (int j = 0; j < s[1]; ++j) {
      const int gj = ((eb.lo[1] + j) % K[1] + K[1]) % K[1];
      for (int k = 0; k < s[2]; ++k) {
        const int gk = ((eb.lo[2] + k) % K[2] + K[2]) % K[2];
        f(i, j, k, (static_cast<std::size_t>(gi) * K[1] + gj) * K[2] + gk);
      }
    }
  }
}

// Sum the extended grid (ghosts included) periodically into the full mesh.
void fold(const View3<double>& ext, const Box3& eb, const Int3& K, Complex* mesh) {
  const std::size_t N = static_cast<std::size_t>(K[0]) * K[1] * K[2];
  for (std::size_t t = 0; t < N; ++t) mesh[t] = Complex(0, 0);
  for_each_periodic_point(eb, K, [&](int i, int j, int k, std::size_t t) { mesh[t] += ext(i, j, k); });
}

// Fill the extended grid (ghosts included) from the real part of the mesh.
void fill(const Complex* mesh, const Box3& eb, const Int3& K, View3<double>& ext) {
  for_each_periodic_point(eb, K, [&](int i, int j, int k, std::size_t t) { ext(i, j, k) = mesh[t].real(); });
}

struct Plan {
  fftw_plan p = nullptr;
  Plan(const Int3& K, Complex* data, int sign) {
    auto* d = reinterpret_cast<fftw_complex*>(data);
    const std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    p = fftw_plan_dft_3d(K[0], K[1], K[2], d, d, sign, FFTW_ESTIMATE);
    if (!p) throw std::runtime_error("FFTW planning failed");
  }
  void exec(Complex* data) const {
    auto* d = reinterpret_cast<fftw_complex*>(data);
    fftw_execute_dft(p, d, d);
  }
  ~Plan() { destroy_fftw_plan(p); }
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
};

}  // namespace

SerialReferenceResult serial_reference(const Mat3& box, View2<const double> positions,
                                   View1<const double> charges, double alpha,
                                   const Int3& mesh, int order, Differentiation diff,
                                   double coulomb_constant, View2<double> forces,
                                   View1<double> potential) {
  ensure_kokkos_initialized();  // this thread may run kernels (base/kokkos_runtime.hpp)
  const std::size_t n = positions.extent(0);
  if (charges.extent(0) != n || forces.extent(0) != n || potential.extent(0) != n)
    throw ValueError("serial_reference: positions, charges, forces and potential lengths differ");
  const Mat3 recip = reciprocal_of(box);
  const Box3 brick = full_box(mesh);
  const Box3 eb = extended_box(brick, order);
  Stencil st;
  compute_stencils(recip, mesh, order, positions, brick, true, st);
  const Int3 es = eb.shape();
  View3<double> ext("ext_grid", es[0], es[1], es[2]);
  spread(st, charges, eb, ext, true);

  const std::size_t N = static_cast<std::size_t>(mesh[0]) * mesh[1] * mesh[2];
  // fftw_malloc'd buffers (aligned) for the mesh spectra.
  auto alloc = [N]() {
    return static_cast<Complex*>(fftw_malloc(sizeof(Complex) * N));
  };
  struct Buf {
    Complex* p;
    ~Buf() { if (p) fftw_free(p); }
  };
  Buf q{alloc()};
  fold(ext, eb, mesh, q.p);
  Plan fwd(mesh, q.p, FFTW_FORWARD), bwd(mesh, q.p, FFTW_BACKWARD);
  fwd.exec(q.p);

  KSpaceSolver solver(box, mesh, alpha, order, coulomb_constant, brick);
  SerialReferenceResult res;
  const double invN = 1.0 / static_cast<double>(N);
  auto backward = [&](Complex* d) {
    bwd.exec(d);
    for (std::size_t t = 0; t < N; ++t) d[t] *= invN;
  };
  if (diff == Differentiation::AD) {
    res.energy = solver.apply_ad(q.p, &res.virial);
    backward(q.p);
    fill(q.p, eb, mesh, ext);
    gather_ad(st, recip, mesh, charges, eb, ext, forces, potential);
  } else {
    Buf ex{alloc()}, ey{alloc()}, ez{alloc()};
    res.energy = solver.apply_ik(q.p, ex.p, ey.p, ez.p, &res.virial);
    View3<double> gx("ex", es[0], es[1], es[2]), gy("ey", es[0], es[1], es[2]),
        gz("ez", es[0], es[1], es[2]);
    backward(ex.p);
    fill(ex.p, eb, mesh, gx);
    backward(ey.p);
    fill(ey.p, eb, mesh, gy);
    backward(ez.p);
    fill(ez.p, eb, mesh, gz);
    gather_ik(st, charges, eb, gx, gy, gz, forces);
    // potential from phi = backward(2 N G Q^)
    solver.apply_ad(q.p, nullptr);
    backward(q.p);
    fill(q.p, eb, mesh, ext);
    gather_potential(st, eb, ext, potential);
  }
  return res;
}

}  // namespace pme
}  // namespace pmewald
