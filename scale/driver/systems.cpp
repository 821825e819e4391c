#include "systems.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace pmewald_scale {

namespace {

// SplitMix64: a well-mixed 64-bit hash, so every atom's randomness depends on its id
// and the seed alone.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1) from (seed, id, k).
double uniform(std::uint64_t seed, std::int64_t id, int k) {
  const std::uint64_t h = mix(mix(seed * 0x632be59bd9b4e019ull + static_cast<std::uint64_t>(id)) + k);
  return static_cast<double>(h >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

constexpr double kOH = 1.0;                      // A
constexpr double kHOH = 109.47 * M_PI / 180.0;   // rad
constexpr double kQO = -0.8476, kQH = 0.4238;    // e (SPC/E)

const double kRockSaltBasis[8][3] = {{0, 0, 0},  {0, .5, .5}, {.5, 0, .5}, {.5, .5, 0},
                                     {.5, 0, 0}, {0, .5, 0},  {0, 0, .5},  {.5, .5, .5}};

int kept_planes(const SystemSpec& s) {
  if (!(s.vacuum >= 0.0 && s.vacuum < 1.0)) throw std::invalid_argument("vacuum must be in [0, 1)");
  return std::max(1, static_cast<int>(std::lround(s.cells * (1.0 - s.vacuum))));
}

double water_spacing(const SystemSpec& s) { return std::cbrt(1.0 / s.density); }

// Owner mesh index of a coordinate x in a cubic box of side L: floor(K s), s = x / L
// wrapped into [0, 1).
int owner_index(double x, double L, int K) {
  double s = x / L;
  s -= std::floor(s);
  if (s >= 1.0) s = 0.0;
  int m = static_cast<int>(std::floor(K * s));
  return std::min(std::max(m, 0), K - 1);
}

// Cells/sites c (may lie outside [0, n): wrapped by the caller) whose points can own
// a mesh index in [lo, hi): those within `reach` (A) of the slab.
void index_range(int lo, int hi, int K, double L, double unit, double reach, int& c0, int& c1) {
  const double x0 = static_cast<double>(lo) / K * L - reach, x1 = static_cast<double>(hi) / K * L + reach;
  c0 = static_cast<int>(std::floor(x0 / unit)) - 1;
  c1 = static_cast<int>(std::ceil(x1 / unit)) + 1;
}

}  // namespace

double box_side(const SystemSpec& s) {
  if (s.cells < 1) throw std::invalid_argument("cells must be positive");
  if (s.kind == "rocksalt") return s.cells * s.lattice;
  if (s.kind == "water") return s.cells * water_spacing(s);
  throw std::invalid_argument("system must be 'rocksalt' or 'water', not '" + s.kind + "'");
}

std::int64_t total_atoms(const SystemSpec& s) {
  const std::int64_t n = s.cells, kept = kept_planes(s);
  return (s.kind == "rocksalt" ? 8 : 3) * n * n * kept;
}

double sum_q2(const SystemSpec& s) {
  const double per = s.kind == "rocksalt" ? 1.0 : (kQO * kQO + 2 * kQH * kQH) / 3.0;
  return per * static_cast<double>(total_atoms(s));
}

LocalAtoms generate_local(const SystemSpec& s, const std::array<int, 3>& mesh, const std::array<int, 3>& lo,
                          const std::array<int, 3>& hi) {
  LocalAtoms out;
  const double L = box_side(s);
  const int n = s.cells, kept = kept_planes(s);
  for (int d = 0; d < 3; ++d)
    if (hi[d] <= lo[d]) return out;  // an empty brick owns nothing
  const bool salt = s.kind == "rocksalt";
  const double unit = salt ? s.lattice : water_spacing(s);
  const double reach = salt ? s.displacement : 0.1 * unit;
  int c0[3], c1[3];
  for (int d = 0; d < 3; ++d) index_range(lo[d], hi[d], mesh[d], L, unit, reach, c0[d], c1[d]);
  auto mine = [&](const double r[3]) {
    for (int d = 0; d < 3; ++d) {
      const int m = owner_index(r[d], L, mesh[d]);
      if (m < lo[d] || m >= hi[d]) return false;
    }
    return true;
  };
  // Each wrapped cell once, even when the range wraps around a small box.
  std::vector<char> seen_z(static_cast<std::size_t>(n), 0), seen_y(static_cast<std::size_t>(n), 0),
      seen_x(static_cast<std::size_t>(n), 0);
  auto wrapped = [n](int c) { return ((c % n) + n) % n; };
  std::fill(seen_z.begin(), seen_z.end(), 0);
  for (int zz = c0[2]; zz <= c1[2]; ++zz) {
    const int cz = wrapped(zz);
    if (seen_z[cz]++) continue;
    if (cz >= kept) continue;
    std::fill(seen_y.begin(), seen_y.end(), 0);
    for (int yy = c0[1]; yy <= c1[1]; ++yy) {
      const int cy = wrapped(yy);
      if (seen_y[cy]++) continue;
      std::fill(seen_x.begin(), seen_x.end(), 0);
      for (int xx = c0[0]; xx <= c1[0]; ++xx) {
        const int cx = wrapped(xx);
        if (seen_x[cx]++) continue;
        const std::int64_t cell = cx + static_cast<std::int64_t>(n) * (cy + static_cast<std::int64_t>(n) * cz);
        if (salt) {
          for (int b = 0; b < 8; ++b) {
            const std::int64_t id = 8 * cell + b;
            const double r[3] = {(cx + kRockSaltBasis[b][0]) * unit + s.displacement * uniform(s.seed, id, 0),
                                 (cy + kRockSaltBasis[b][1]) * unit + s.displacement * uniform(s.seed, id, 1),
                                 (cz + kRockSaltBasis[b][2]) * unit + s.displacement * uniform(s.seed, id, 2)};
            if (!mine(r)) continue;
            out.positions.insert(out.positions.end(), r, r + 3);
            out.charges.push_back(b < 4 ? 1.0 : -1.0);
            out.ids.push_back(id);
          }
        } else {
          const std::int64_t id = 3 * cell;
          const double o[3] = {(cx + 0.5) * unit + 0.1 * unit * uniform(s.seed, id, 0),
                               (cy + 0.5) * unit + 0.1 * unit * uniform(s.seed, id, 1),
                               (cz + 0.5) * unit + 0.1 * unit * uniform(s.seed, id, 2)};
          if (!mine(o)) continue;
          // Orientation: a random unit vector u (the HOH bisector) and a random unit
          // vector v normal to it (the molecular plane).
          double u[3], w[3];
          for (int k = 0; k < 3; ++k) u[k] = uniform(s.seed, id, 3 + k);
          for (int k = 0; k < 3; ++k) w[k] = uniform(s.seed, id, 6 + k);
          double nu = std::sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
          if (nu < 1e-3) u[0] = nu = 1.0;
          for (double& x : u) x /= nu;
          const double uw = u[0] * w[0] + u[1] * w[1] + u[2] * w[2];
          for (int k = 0; k < 3; ++k) w[k] -= uw * u[k];
          double nw = std::sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
          if (nw < 1e-3) {  // pick any normal
            w[0] = -u[1], w[1] = u[0], w[2] = 0;
            nw = std::sqrt(w[0] * w[0] + w[1] * w[1]);
            if (nw < 1e-3) w[0] = 0, w[1] = -u[2], w[2] = u[1], nw = std::sqrt(u[1] * u[1] + u[2] * u[2]);
          }
          for (double& x : w) x /= nw;
          const double c = std::cos(0.5 * kHOH) * kOH, sn = std::sin(0.5 * kHOH) * kOH;
          out.positions.insert(out.positions.end(), o, o + 3);
          for (int sign : {1, -1})
            for (int k = 0; k < 3; ++k) out.positions.push_back(o[k] + c * u[k] + sign * sn * w[k]);
          out.charges.insert(out.charges.end(), {kQO, kQH, kQH});
          out.ids.insert(out.ids.end(), {id, id + 1, id + 2});
          out.exclusions.insert(out.exclusions.end(), {id, id + 1, id, id + 2, id + 1, id + 2});
        }
      }
    }
  }
  return out;
}

}  // namespace pmewald_scale
