// pmewald from C++: a rock-salt crystal (512 ions, Gaussian units) in each
// communication mode against its Madelung energy, and the distributed FFTs on a
// plane wave. Run under mpirun on any number of ranks; exits non-zero on a mismatch.
//
//   mpirun -n 2 ./rocksalt [--own-kokkos]
//
// --own-kokkos: the program initialises (and finalises) Kokkos itself; otherwise the
// first pmewald object does.
#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <pmewald/pmewald.hpp>

#include <cmath>
#include <complex>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr double kMadelung = 1.747564594633182;  // rock salt, per ion pair distance
constexpr double kPi = 3.14159265358979323846;

int g_failures = 0;

void check(bool ok, const char* what, double value, double limit) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int all_ok = ok ? 1 : 0, every = 0;
  MPI_Allreduce(&all_ok, &every, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (!every) ++g_failures;
  if (rank == 0) std::printf("  %-58s %10.3e (limit %.3g) %s\n", what, value, limit, every ? "ok" : "MISMATCH");
}

double global_max(double v) {
  double m = 0;
  MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

// The NaCl crystal of `cells`^3 conventional cells (lattice constant a): this rank's
// share of the ions (every size-th, from its rank on), with ids and charges +-1.
struct Crystal {
  double L = 0;
  std::vector<double> x, q;
  std::vector<std::int64_t> ids;
  std::int64_t n_total = 0;
};

Crystal rock_salt(int cells, double a, int rank, int size) {
  const double basis[8][3] = {{0, 0, 0}, {0, .5, .5}, {.5, 0, .5}, {.5, .5, 0},
                              {.5, 0, 0}, {0, .5, 0}, {0, 0, .5}, {.5, .5, .5}};
  Crystal c;
  c.L = cells * a;
  std::int64_t id = 0;
  for (int i = 0; i < cells; ++i)
    for (int j = 0; j < cells; ++j)
      for (int k = 0; k < cells; ++k)
        for (int b = 0; b < 8; ++b, ++id) {
          if (id % size != rank) continue;
          c.x.push_back((i + basis[b][0]) * a);
          c.x.push_back((j + basis[b][1]) * a);
          c.x.push_back((k + basis[b][2]) * a);
          c.q.push_back(b < 4 ? 1.0 : -1.0);  // Na on the fcc sites, Cl on the others
          c.ids.push_back(id);
        }
  c.n_total = id;
  return c;
}

void solver(int rank, int size) {
  const double a = 5.64;
  const Crystal c = rock_salt(4, a, rank, size);
  const double exact = -static_cast<double>(c.n_total) * kMadelung / a;  // -N M q^2 / (2 r0), r0 = a / 2
  if (rank == 0) std::printf("rock salt: %lld ions, box %.2f, Madelung energy %.10f\n",
                             static_cast<long long>(c.n_total), c.L, exact);
  pmewald::SolverOptions o;
  o.box = {c.L, 0, 0, 0, c.L, 0, 0, 0, c.L};
  o.mesh = {48, 48, 48};
  o.order = 8;
  o.alpha = 0.40;
  o.cutoff = 10.0;
  o.differentiation = pmewald::Differentiation::AD;
  double first = 0;
  for (const char* mode : {"pt2pt", "nonblocking", "collective"}) {
    o.mode = pmewald::comm_mode_from_string(mode);
    pmewald::PMESolver pme(MPI_COMM_WORLD, o);
    const std::size_t n = c.q.size();
    std::vector<double> f(3 * n);
    const pmewald::SolverResult r = pme.compute(c.x.data(), c.q.data(), c.ids.data(), n, nullptr, 0, f.data());
    if (rank == 0)
      std::printf("%s: energy %.10f (real %.6f, reciprocal %.6f, self %.6f)\n", mode, r.energy, r.terms.at("real"),
                  r.terms.at("reciprocal"), r.terms.at("self"));
    double fmax = 0;
    for (double v : f) fmax = std::fmax(fmax, std::fabs(v));
    const auto w = r.virial.matrix();
    check(std::fabs(r.energy - exact) <= 1e-7 * std::fabs(exact), "energy vs Madelung (relative)",
          std::fabs(r.energy - exact) / std::fabs(exact), 1e-7);
    check(global_max(fmax) <= 1e-9, "largest force (zero by symmetry)", global_max(fmax), 1e-9);
    check(std::fabs(w[0] + w[4] + w[8] - r.energy) <= 1e-6 * std::fabs(exact), "trace of the virial - energy (relative)",
          std::fabs(w[0] + w[4] + w[8] - r.energy) / std::fabs(exact), 1e-6);
    check(r.n_atoms == c.n_total, "atoms counted", static_cast<double>(r.n_atoms), static_cast<double>(c.n_total));
    if (mode == std::string("pt2pt")) first = r.energy;
    check(std::fabs(r.energy - first) <= 1e-12 * std::fabs(exact), "energy vs pt2pt (relative)",
          std::fabs(r.energy - first) / std::fabs(exact), 1e-12);
  }
}

// Value of the plane wave exp(2 pi i k.p / K) at mesh point p.
std::complex<double> wave(const pmewald::Int3& k, const pmewald::Int3& K, int x, int y, int z) {
  const double ph = 2 * kPi * (double(k[0]) * x / K[0] + double(k[1]) * y / K[1] + double(k[2]) * z / K[2]);
  return {std::cos(ph), std::sin(ph)};
}

// Largest deviation of a spectrum (this rank's `box`, C order) from `height` at
// frequency k and zero elsewhere.
double spike_error(const pmewald::Box3& box, const std::vector<pmewald::Complex>& spec, const pmewald::Int3& k,
                   double height) {
  double err = 0;
  std::size_t t = 0;
  for (int x = box.lo[0]; x < box.hi[0]; ++x)
    for (int y = box.lo[1]; y < box.hi[1]; ++y)
      for (int z = box.lo[2]; z < box.hi[2]; ++z, ++t) {
        const double want = (x == k[0] && y == k[1] && z == k[2]) ? height : 0.0;
        err = std::fmax(err, std::abs(std::complex<double>(spec[t].real() - want, spec[t].imag())));
      }
  return err;
}

void ffts(int rank, int size) {
  const pmewald::Int3 K{12, 10, 8}, k{2, 3, 1};
  const double N = double(K[0]) * K[1] * K[2];
  const pmewald::Box3 brick = pmewald::brick_box(size, K, rank);
  if (rank == 0) std::printf("distributed FFTs: mesh %dx%dx%d, bricks to z-pencils\n", K[0], K[1], K[2]);

  // Complex: the transform of a plane wave is N at m = k, zero elsewhere.
  pmewald::FFT3d fft(MPI_COMM_WORLD, K, brick, pmewald::FFT3d::z_pencil_box(K, size, rank));
  std::vector<pmewald::Complex> a, spec(static_cast<std::size_t>(fft.outbox().volume())), back;
  for (int x = brick.lo[0]; x < brick.hi[0]; ++x)
    for (int y = brick.lo[1]; y < brick.hi[1]; ++y)
      for (int z = brick.lo[2]; z < brick.hi[2]; ++z) {
        const auto v = wave(k, K, x, y, z);
        a.emplace_back(v.real(), v.imag());
      }
  back.resize(a.size());
  fft.forward(a.data(), spec.data());
  double err = spike_error(fft.outbox(), spec, k, N);
  check(global_max(err) <= 1e-9 * N, "FFT3d of a plane wave: largest error", global_max(err) / N, 1e-9);
  fft.backward(spec.data(), back.data());
  err = 0;
  for (std::size_t i = 0; i < a.size(); ++i) err = std::fmax(err, Kokkos::abs(back[i] - a[i]));
  check(global_max(err) <= 1e-12, "FFT3d backward(forward(a)) - a", global_max(err), 1e-12);

  // Real-to-complex: cos(2 pi k.p / K) has N/2 at m = k of the half spectrum (halved along x).
  pmewald::RealFFT3d rfft(MPI_COMM_WORLD, K, brick, pmewald::RealFFT3d::z_pencil_box(K, size, rank));
  std::vector<double> r, rback;
  for (const auto& v : a) r.push_back(v.real());
  rback.assign(r.size(), 0.0);
  std::vector<pmewald::Complex> half(static_cast<std::size_t>(rfft.outbox().volume()));
  rfft.forward(r.data(), half.data());
  err = spike_error(rfft.outbox(), half, k, N / 2);
  check(global_max(err) <= 1e-9 * N, "RealFFT3d of a cosine: largest error", global_max(err) / N, 1e-9);
  rfft.backward(half.data(), rback.data());
  err = 0;
  for (std::size_t i = 0; i < r.size(); ++i) err = std::fmax(err, std::fabs(rback[i] - r[i]));
  check(global_max(err) <= 1e-12, "RealFFT3d backward(forward(a)) - a", global_max(err), 1e-12);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const bool own_kokkos = argc > 1 && std::strcmp(argv[1], "--own-kokkos") == 0;
  if (own_kokkos) Kokkos::initialize(argc, argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0)
    std::printf("pmewald C++ example on %d ranks (Kokkos initialised by %s)\n", size,
                own_kokkos ? "the program" : "pmewald");
  try {
    solver(rank, size);
    ffts(rank, size);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (rank == 0) std::printf("%s\n", g_failures ? "FAILED" : "all checks passed");
  // pmewald objects are gone: a program that initialised Kokkos may finalise it now.
  if (own_kokkos) Kokkos::finalize();
  MPI_Finalize();
  return g_failures ? 1 : 0;
}
