#include "solver/plan_census.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "comm/halo.hpp"
#include "fft/remap.hpp"
#include "fft/stage_plan.hpp"
#include "geometry/decomposition.hpp"
#include "geometry/lattice.hpp"
#include "geometry/domain_grid.hpp"
#include "geometry/neighborhood.hpp"

namespace pmewald {
inline namespace solver {

namespace {

// Sizes of the GhostRecord / forces the migration sends (particles/migration.cpp):
// s[3], r[3], q, id, key; and a 3-vector per ghost on the way back.
constexpr int kGhostRecordBytes = 9 * 8;
constexpr int kGhostForceBytes = 3 * 8;
constexpr int kSizeMessageBytes = 8;

// Union-find over ranks: the connected components of an exchange graph.
void components(ExchangeCensus& c, int P) {
  std::vector<int> parent(static_cast<std::size_t>(P));
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (int r = 0; r < P; ++r)
    for (std::int64_t k = c.start[r]; k < c.start[r + 1]; ++k) parent[find(r)] = find(c.dst[k]);
  std::vector<int> root(static_cast<std::size_t>(P)), count(static_cast<std::size_t>(P), 0);
  for (int r = 0; r < P; ++r) count[root[r] = find(r)]++;
  // Place in the component: members sorted by rank, so a prefix count per root.
  std::vector<int> seen(static_cast<std::size_t>(P), 0);
  c.component_size.resize(static_cast<std::size_t>(P));
  c.component_rank.resize(static_cast<std::size_t>(P));
  for (int r = 0; r < P; ++r) {
    c.component_size[r] = count[root[r]];
    c.component_rank[r] = seen[root[r]]++;
  }
}

// The messages of exchange lists, as a census (elements; self piece apart).
template <class ListsOf>
ExchangeCensus from_lists(const std::string& name, int element_bytes, int P, ListsOf&& lists_of) {
  ExchangeCensus c;
  c.name = name;
  c.element_bytes = element_bytes;
  c.start.assign(static_cast<std::size_t>(P) + 1, 0);
  c.self_elements.assign(static_cast<std::size_t>(P), 0);
  for (int r = 0; r < P; ++r) {
    const ExchangeLists L = lists_of(r);
    for (std::size_t m = 0; m < L.send_ranks.size(); ++m) {
      if (L.send_indices[m].empty()) continue;
      c.dst.push_back(L.send_ranks[m]);
      c.elements.push_back(static_cast<std::int64_t>(L.send_indices[m].size()));
    }
    c.self_elements[r] = static_cast<std::int64_t>(L.self_src.size());
    c.start[r + 1] = static_cast<std::int64_t>(c.dst.size());
  }
  components(c, P);
  return c;
}

// Along one axis (index units): how much of slab [a0, a1), over the periodic images
// n = -1, 0, 1, lies in [b0 - R, b1 + R).
double overlap_length(double a0, double a1, double b0, double b1, double R, int K) {
  double len = 0;
  for (int n = -1; n <= 1; ++n) {
    const double lo = std::max(a0 + n * K, b0 - R), hi = std::min(a1 + n * K, b1 + R);
    len += std::max(0.0, hi - lo);
  }
  return len;
}

// One ghost exchange and the forces' way back: the atoms' messages rank by rank
// (send(), then close() after each rank's), the forces from each ghost holder to
// the ghosts' owner collected on the way and laid out at finish().
class GhostCensus {
 public:
  GhostCensus(const std::string& atoms_name, const std::string& forces_name, int P) : P_(P), back_(P) {
    for (ExchangeCensus* c : {&atoms_, &forces_}) {
      c->element_bytes = 0;  // bytes
      c->forward_calls = 1;
      c->start.assign(static_cast<std::size_t>(P) + 1, 0);
      c->self_elements.assign(static_cast<std::size_t>(P), 0);
    }
    atoms_.name = atoms_name;
    forces_.name = forces_name;
  }
  // Rank `from` sends `bytes` to `to`, which (`returns`) sends `force_bytes` back.
  void send(int from, int to, std::int64_t bytes, std::int64_t force_bytes, bool returns) {
    atoms_.dst.push_back(to);
    atoms_.elements.push_back(bytes);
    if (returns) back_[to].emplace_back(from, force_bytes);
  }
  void close(int r) { atoms_.start[r + 1] = static_cast<std::int64_t>(atoms_.dst.size()); }
  void finish(std::vector<ExchangeCensus>& out) {
    for (int s = 0; s < P_; ++s) {
      for (const auto& [r, bytes] : back_[s]) {
        forces_.dst.push_back(r);
        forces_.elements.push_back(bytes);
      }
      forces_.start[s + 1] = static_cast<std::int64_t>(forces_.dst.size());
    }
    components(atoms_, P_);
    components(forces_, P_);
    out.push_back(std::move(atoms_));
    out.push_back(std::move(forces_));
  }

 private:
  int P_;
  ExchangeCensus atoms_, forces_;
  std::vector<std::vector<std::pair<int, std::int64_t>>> back_;
};

// The direct exchange: every domain within reach gets a size message and (when it
// gets any) one message of ghost records; the forces come back in one message each.
void direct_ghosts(std::vector<ExchangeCensus>& out, const Int3& grid, const Int3& mesh,
                   const std::vector<Box3>& bricks, const std::array<double, 3>& reach, double per_point) {
  const int P = static_cast<int>(bricks.size());
  GhostCensus census("ghost atoms", "ghost forces", P);
  for (int r = 0; r < P; ++r) {
    const Box3& a = bricks[r];
    const Neighborhood nb = brick_neighborhood(grid, mesh, r, reach);
    for (const int s : nb.send) {
      const Box3& b = bricks[s];
      double expected = per_point;
      for (int d = 0; d < 3; ++d) expected *= overlap_length(a.lo[d], a.hi[d], b.lo[d], b.hi[d], reach[d], mesh[d]);
      const std::int64_t ghosts = std::llround(expected);
      // Sizes go to every partner; records to those that get any.
      census.send(r, s, kSizeMessageBytes, 0, false);
      if (ghosts > 0) census.send(r, s, ghosts * kGhostRecordBytes, ghosts * kGhostForceBytes, true);
    }
    census.close(r);
  }
  census.finish(out);
}

// The staged exchange (particles/staged_ghosts.hpp): per axis with more than one
// rank and per pulse one round of two messages per rank (to the lower and the
// higher neighbour), each a header and the records that neighbour needs: along
// the axis the part of the sender's slab (pulse 1) or of what came in the last
// pulse within reach, across it the slab grown by the reach along the axes
// already done. The forces come back along the same rounds, backwards.
void staged_ghosts(std::vector<ExchangeCensus>& out, const DomainGrid& dom, const std::array<double, 3>& reach,
                   double per_point) {
  const int P = dom.ranks();
  const Int3& grid = dom.grid();
  static const char axis_name[3] = {'x', 'y', 'z'};
  for (int d = 0; d < 3; ++d) {
    if (grid[d] == 1) continue;
    const int pulses = dom.pulses(d, reach[d]);
    for (int k = 1; k <= pulses; ++k) {
      const std::string round = std::string(1, axis_name[d]) + std::to_string(k);
      GhostCensus census("ghost atoms " + round, "ghost forces " + round, P);
      for (int r = 0; r < P; ++r) {
        const Int3 g = dom.coords(r);
        double across = per_point;
        for (int e = 0; e < 3; ++e) {
          if (e == d) continue;
          const double w = dom.hi(e, g[e]) - dom.lo(e, g[e]);
          across *= e < d ? w + 2 * reach[e] : w;  // the axes done: grown by their ghosts
        }
        const double w = dom.hi(d, g[d]) - dom.lo(d, g[d]);
        const double along = std::max(0.0, std::min(w, reach[d] - (k - 1) * w));
        const std::int64_t ghosts = std::llround(across * along);
        for (int dir : {+1, -1}) {
          Int3 n = g;
          n[d] = ((g[d] + dir) % grid[d] + grid[d]) % grid[d];
          census.send(r, dom.rank_of(n[0], n[1], n[2]), kSizeMessageBytes + ghosts * kGhostRecordBytes,
                      ghosts * kGhostForceBytes, true);  // every swap returns, empty or not
        }
        census.close(r);
      }
      census.finish(out);
    }
  }
}

}  // namespace

std::vector<ExchangeCensus> solver_census(const CensusInput& in) {
  const int P = in.ranks;
  if (P < 1) throw std::invalid_argument("solver_census: ranks must be positive");
  const Int3& mesh = in.mesh;
  const Int3 grid = processor_grid_3d(P, mesh);
  std::vector<Box3> bricks, pencils;
  const int halved = P == 1 ? 2 : 0;
  const Int3 spectrum = [&] {
    Int3 s = mesh;
    s[halved] = mesh[halved] / 2 + 1;
    return s;
  }();
  for (int r = 0; r < P; ++r) {
    bricks.push_back(normalised(brick_box(grid, mesh, r)));
    pencils.push_back(pencil_of(2, spectrum, P, r));  // RealFFT3d::z_pencil_box, normalised
  }
  const int backward = in.ik ? 3 : 1;
  std::vector<ExchangeCensus> out;

  // The halo: reduce (reverse) before the forward FFT, fill (forward) after each backward one.
  const HaloLayout halo(bricks, mesh, in.order - 1);
  out.push_back(from_lists("halo", 8, P, [&](int r) { return halo_lists(halo, r); }));
  out.back().forward_calls = backward;
  out.back().reverse_calls = 1;

  // The real FFT's remaps (the last, z->out, is an identity: the solver's outbox is the
  // z-pencil); the backward transforms run them reversed.
  const FFTStages stages = plan_stages(FFTKind::RealToComplex, mesh, halved, bricks, pencils);
  static const char* names[4] = {"in->x", "x->y", "y->z", "z->out"};
  for (int t = 0; t < 4; ++t) {
    const RemapLayout layout = stages.remap_layout(t);
    if (layout.all_identity()) continue;
    const std::vector<Box3> ext = halo.extended.boxes();
    out.push_back(from_lists(names[t], t == 0 ? 8 : 16, P, [&](int r) {
      return remap_lists(layout, r, t == 0 ? ext[static_cast<std::size_t>(r)] : layout.inbox(r));
    }));
    out.back().forward_calls = 1;
    out.back().reverse_calls = backward;
  }

  // Ghost atoms: each rank's atoms within the margin of a partner's domain, at a uniform
  // density (migration.cpp: margin = cutoff / height * (1 + 1e-9), reach = margin * K).
  const PeriodicCell cell(in.box);
  std::array<double, 3> reach{};
  for (int d = 0; d < 3; ++d) reach[d] = in.cutoff / cell.height[d] * (1.0 + 1e-9) * mesh[d];
  const double per_point = static_cast<double>(in.atoms) / (static_cast<double>(mesh[0]) * mesh[1] * mesh[2]);
  const DomainGrid domains = DomainGrid::bricks(grid, mesh);
  const bool staged = in.ghost_exchange == 1 || (in.ghost_exchange == 2 && staged_preferred(domains, reach));
  if (staged)
    staged_ghosts(out, domains, reach, per_point);
  else
    direct_ghosts(out, grid, mesh, bricks, reach, per_point);
  return out;
}

}  // namespace solver
}  // namespace pmewald
