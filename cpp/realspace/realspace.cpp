#include "realspace/realspace.hpp"

#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>
#include <unordered_map>

#include "comm/mpi_helpers.hpp"
#include "realspace/erfc_table.hpp"
#include "base/errors.hpp"
#include "realspace/pair_kernel.hpp"

#include <Kokkos_ScatterView.hpp>

namespace pmewald {
inline namespace realspace {

namespace {

constexpr int kTagDirectory = 3130;  // and 3131
constexpr int kTagOwners = 3140;     // and 3141
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;
constexpr double kPi = 3.14159265358979323846;

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Directory rank of an atom id: a mixed hash, so consecutive ids spread out.
inline int directory_of(std::int64_t id, int P) {
  std::uint64_t z = static_cast<std::uint64_t>(id) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z = z ^ (z >> 31);
  return static_cast<int>(z % static_cast<std::uint64_t>(P));
}

struct DirRecord {
  std::int64_t kind;  // 0: register (a = id, b = owner rank); 1: excluded pair (a, b)
  std::int64_t a, b;
};

struct PairRecord {
  std::int64_t a, b;
};

using ConstI64 = Kokkos::View<const std::int64_t*, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

using ScatterForces = Kokkos::Experimental::ScatterView<double**, Kokkos::LayoutRight, ExecSpace,
                                                        Kokkos::Experimental::ScatterSum>;

// Half neighbour search and the batched pair kernel. Work item a is a sorted
// atom (owned or ghost); it pairs with the atoms after it in its own row of
// cells (up to `reach` cells on, or to the cutoff in orthorhombic boxes), and
// with every atom of the rows above it in
// the (2 * reach + 1)^3 stencil (dz > 0, or dz = 0 and dy > 0): each unordered
// pair of this rank's atoms (owned + ghost) is seen exactly once. Pairs of two
// ghosts are skipped (their owners count them); a pair of an owned atom and a
// ghost is evaluated here only if keeps_cross_pair says so (otherwise the
// ghost's owner evaluates the mirror pair). Both atoms of an evaluated pair
// get their force (Newton's third law) through a ScatterView (atomic or
// duplicated on threaded backends); forces on ghosts go back to their owners
// (Migration::reverse_ghosts). Excluded pairs are the exception: both sides
// see them (the `found` check needs that), so an excluded owned-ghost pair
// counts half on each side and only its owned atom gets the force.
struct HalfPairKernel {
  using value_type = double[];
  unsigned value_count = 10;  // E_real, E_excl, W00, W01, W02, W11, W12, W22, candidates, pairs
  static constexpr int kBatch = kMaxBatch;
  // Cells per cutoff along each axis (a pair within the cutoff is at most
  // that many cells apart); x cells are finer in orthorhombic boxes.
  static constexpr int kReach = 2;
  static constexpr int kReachXOrtho = 8;

  View1<double> x, y, z, q, own;      // sorted atoms: positions, charges, 1 owned / 0 ghost
  View1<std::int64_t> sid, skey;      // ids; Migration::owned_key (of the original, for a ghost)
  View1<std::int64_t> elo, ehi;       // id range of each sorted atom's excluded partners (empty: lo > hi)
  View1<std::int64_t> emask;          // their bits id mod 64 (0: none)
  View1<int> scell, sowner;           // cell, and owned index (-1 for a ghost), per sorted atom
  View1<int> cell_start, cell_owned;  // prefix sums over cells: atoms, owned atoms
  ConstI64 excl_off, excl_ids;        // excluded partner ids, CSR by owned index
  View1<int> found;                   // sightings per exclusion entry
  ScatterForces sforces;              // per sorted atom
  const double* erfc_coef;
  int nc0, nc1, nc2;
  // Orthorhombic boxes: rows are trimmed to the cells within the cutoff of
  // the atom (x cells are finer for that); box lengths, the grid's lower
  // fractional corner and fractional cell widths per axis.
  bool ortho = false;
  double len[3], flo[3], wf[3];
  double rc2, alpha, k;
  bool pairs = true;  // false: only the exclusion corrections (real_space=False)
  bool any_excl = false;
  bool vector_kernel = true;  // alpha * cutoff < kMaxAlphaR

  // Distance from coordinate v to cell c's slab along axis d (0 inside).
  double gap(double v, int c, int d) const {
    const double lo = (flo[d] + c * wf[d]) * len[d], hi = lo + wf[d] * len[d];
    return v < lo ? lo - v : (v > hi ? v - hi : 0.0);
  }
  double x_origin = 0, inv_x_width = 1;  // Cartesian start of the x cells, 1 / their width
  int x_cell(double xv) const {
    const double t = (xv - x_origin) * inv_x_width;
    const int c = t > 0 ? static_cast<int>(t) : 0;
    return c >= nc0 ? nc0 - 1 : c;
  }

  // Entry of `partner_id` in owned atom o's exclusion list, or -1.
  std::int64_t entry(int o, std::int64_t partner_id) const {
    for (std::int64_t e = excl_off(o), e1 = excl_off(o + 1); e < e1; ++e)
      if (excl_ids(e) == partner_id) return e;
    return -1;
  }

  // Whether the pair (a, j) is excluded; counts the sighting for every owned side.
  bool excluded(int a, int j) const {
    const int oa = sowner(a), oj = sowner(j);
    const std::int64_t e = oa >= 0 ? entry(oa, sid(j)) : entry(oj, sid(a));
    if (e < 0) return false;
    Kokkos::atomic_increment(&found(e));
    if (oa >= 0 && oj >= 0) {
      const std::int64_t f = entry(oj, sid(a));
      if (f >= 0) Kokkos::atomic_increment(&found(f));
    }
    return true;
  }

  // Whether this rank evaluates the (not excluded) pair (a, j) (pair_kernel.hpp).
  bool keeps(int a, int j) const {
    const bool oa = own(a) != 0.0, oj = own(j) != 0.0;
    if (oa && oj) return true;
    return oa ? keeps_cross_pair(skey(a), skey(j)) : keeps_cross_pair(skey(j), skey(a));
  }

  // Excluded pair (rare): no erfc term; -k q_i q_j erf(alpha r)/r instead.
  void excluded_pair(double kqq, double r2, double& e, double& fr) const {
    if (r2 == 0.0) {
      e = -kqq * alpha * kTwoOverSqrtPi;
      fr = 0;
      return;
    }
    const double r = std::sqrt(r2);
    const double ar = alpha * r;
    double erfc_ar, exp_mar2;
    ErfcTable::eval(erfc_coef, ar, erfc_ar, exp_mar2);
    const double erf_ar = ar < 0.5 ? std::erf(ar) : 1.0 - erfc_ar;
    e = -kqq * erf_ar / r;
    fr = kqq * (kTwoOverSqrtPi * ar * exp_mar2 - erf_ar) / (r * r2);
  }

  void operator()(const int a, double* acc) const {
    const int c = scell(a);
    const int cx = c % nc0, cy = (c / nc0) % nc1, cz = c / (nc0 * nc1);
    const bool a_owned = sowner(a) >= 0;
    const double xi = x(a), yi = y(a), zi = z(a), own_a = own(a);
    const double kqi = k * q(a);
    auto access = sforces.access();
    // Hits (list) and hits that might be excluded pairs (maybe); select_within
    // may store up to 8 entries past either count.
    int list[kBatch + 8], maybe[kBatch + 8];
    double bfx[kBatch], bfy[kBatch], bfz[kBatch];
    double sums[PairBatchAcc::kSize] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    double excl_sums[PairBatchAcc::kSize] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};  // excluded pairs
    double e_excl = 0, candidates = 0, evaluated = 0;
    int n = 0, n_maybe = 0;
    NeighbourQuery query{xi, yi, zi, rc2, !a_owned, x.data(), y.data(), z.data(), own.data(), skey.data(), skey(a)};
    if (any_excl) {
      query.ids = sid.data();
      query.elo = elo.data();
      query.ehi = ehi.data();
      query.id_i = sid(a);
      query.lo = elo(a);
      query.hi = ehi(a);
      query.emask = emask.data();
      query.mask = emask(a);
    }

    auto evaluate = [&](int* js, int count) {
      if (!pairs || count == 0) return;
      evaluated += count;
      (vector_kernel ? erfc_pair_batch : erfc_pair_batch_scalar)(count, js, xi, yi, zi, kqi, x.data(), y.data(),
                                                                  z.data(), q.data(), alpha, bfx, bfy, bfz, sums);
      for (int b = 0; b < count; ++b) {
        const int j = js[b];
        access(j, 0) -= bfx[b];
        access(j, 1) -= bfy[b];
        access(j, 2) -= bfz[b];
      }
    };
    auto flush = [&]() {
      // Candidates for exclusion: look them up; the excluded ones get the
      // erf correction (forces on owned atoms only), the others join the
      // ordinary pairs if this rank evaluates them.
      int kept = 0;
      for (int b = 0; b < n_maybe; ++b) {
        const int j = maybe[b];
        if (!excluded(a, j)) {
          if (keeps(a, j)) maybe[kept++] = j;
          continue;
        }
        const double dx = xi - x(j), dy = yi - y(j), dz = zi - z(j);
        double epair, fr;
        excluded_pair(kqi * q(j), dx * dx + dy * dy + dz * dz, epair, fr);
        const double w = 0.5 * (own_a + own(j));
        e_excl += w * epair;
        double f[3];
        PairBatchAcc::add_pair(w, fr, dx, dy, dz, excl_sums, f);
        if (own(j) != 0.0)
          for (int d = 0; d < 3; ++d) access(j, d) -= f[d];
      }
      evaluate(list, n);
      evaluate(maybe, kept);
      n = n_maybe = 0;
    };

    constexpr int m = kReach;
    // Squared distances from the atom to the neighbouring y and z slabs.
    double gy2[2 * m + 1], gz2[m + 1];
    if (ortho) {
      for (int d = -m; d <= m; ++d) {
        const double g = d != 0 && cy + d >= 0 && cy + d < nc1 ? gap(yi, cy + d, 1) : 0.0;
        gy2[d + m] = g * g;
      }
      for (int d = 0; d <= m; ++d) {
        const double g = d != 0 && cz + d < nc2 ? gap(zi, cz + d, 2) : 0.0;
        gz2[d] = g * g;
      }
    }
    for (int dz = 0; dz <= m && cz + dz < nc2; ++dz) {
      for (int dy = dz == 0 ? 0 : -m; dy <= m; ++dy) {
        const int yy = cy + dy;
        if (yy < 0 || yy >= nc1) continue;
        const bool home = dz == 0 && dy == 0;
        int x0, x1;
        if (ortho) {
          const double g2 = gy2[dy + m] + gz2[dz];
          if (g2 >= rc2) continue;
          const double rho = std::sqrt(rc2 - g2);
          x0 = home ? cx : x_cell(xi - rho);
          x1 = x_cell(xi + rho);
        } else {
          x0 = home ? cx : (cx > m ? cx - m : 0);
          x1 = cx + m < nc0 ? cx + m : nc0 - 1;
        }
        // Cells x0..x1 of a row are contiguous in the sorted arrays.
        const int row = nc0 * (yy + nc1 * (cz + dz));
        if (!a_owned && cell_owned(row + x1 + 1) == cell_owned(row + x0)) continue;  // ghosts only
        int j = home ? a + 1 : cell_start(row + x0);
        const int je = cell_start(row + x1 + 1);
        while (j < je) {
          const int room = kBatch - (n > n_maybe ? n : n_maybe);
          if (room == 0) {
            flush();
            continue;
          }
          const int chunk_end = je - j < room ? je : j + room;
          candidates += chunk_end - j;
          n = select_within(query, j, chunk_end, list, n, maybe, n_maybe);
          j = chunk_end;
        }
      }
    }
    flush();
    for (int d = 0; d < 3; ++d) access(a, d) += sums[7 + d] + (a_owned ? excl_sums[7 + d] : 0.0);
    acc[0] += sums[0];
    acc[1] += e_excl;
    for (int v = 1; v <= 6; ++v) acc[1 + v] += sums[v] + excl_sums[v];
    acc[8] += candidates;
    acc[9] += evaluated;
  }
};

template <class V>
void ensure1(V& v, std::size_t n, const char* label) {
  if (v.extent(0) < n) v = V(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), n + n / 4 + 16);
}

}  // namespace

RealSpace::RealSpace(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

ExclusionList::ExclusionList(MPI_Comm comm)
    : comm_(comm), nbx_dir_(comm, kTagDirectory), nbx_origin_(comm, kTagOwners) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

namespace {
std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}
}  // namespace

void ExclusionList::update(const std::int64_t* ids, std::size_t n_local, const std::int64_t* pairs,
                           std::size_t m) {
  std::string err;
  for (std::size_t k = 0; k < m && err.empty(); ++k)
    if (pairs[2 * k] == pairs[2 * k + 1])
      err = "exclusions[" + std::to_string(k) + "] pairs atom id " + std::to_string(pairs[2 * k]) +
            " with itself";
  std::uint64_t fp = mix(0x1234567ull, n_local);
  for (std::size_t i = 0; i < n_local; ++i) fp = mix(fp, static_cast<std::uint64_t>(ids[i]));
  fp = mix(fp, m);
  for (std::size_t k = 0; k < 2 * m; ++k) fp = mix(fp, static_cast<std::uint64_t>(pairs[k]));
  int flags[3] = {valid_ && fp == fingerprint_ ? 0 : 1, m > 0 ? 1 : 0, err.empty() ? 0 : 1};
  int all[3];
  check_mpi(MPI_Allreduce(flags, all, 3, MPI_INT, MPI_MAX, comm_), "MPI_Allreduce");
  if (all[2]) {
    valid_ = false;
    agree_or_throw(comm_, err);  // throws on every rank
  }
  rerouted_ = false;
  if (!all[0]) return;  // nothing changed anywhere: keep the lists
  valid_ = false;
  any_ = all[1] != 0;
  off_.assign(n_local + 1, 0);
  ids_.clear();
  if (!any_) {
    valid_ = true;
    fingerprint_ = fp;
    return;
  }
  rerouted_ = true;

  // Round A: every rank registers its atoms (id -> this rank) at their
  // directory ranks and sends each pair to the directory ranks of both ids.
  std::unordered_map<int, std::size_t> slot;
  std::vector<int> dests;
  std::vector<std::vector<char>> bufs;
  auto buffer_for = [&](int dest) -> std::vector<char>& {
    auto it = slot.find(dest);
    if (it != slot.end()) return bufs[it->second];
    slot.emplace(dest, bufs.size());
    dests.push_back(dest);
    bufs.emplace_back();
    return bufs.back();
  };
  for (std::size_t i = 0; i < n_local; ++i)
    append_bytes(buffer_for(directory_of(ids[i], size_)), DirRecord{0, ids[i], rank_});
  for (std::size_t k = 0; k < m; ++k) {
    const std::int64_t a = pairs[2 * k], b = pairs[2 * k + 1];
    const int da = directory_of(a, size_), db = directory_of(b, size_);
    append_bytes(buffer_for(da), DirRecord{1, a, b});
    if (db != da) append_bytes(buffer_for(db), DirRecord{1, a, b});
  }
  std::vector<int> srcs;
  std::vector<std::vector<char>> recv;
  nbx_dir_.exchange(dests, bufs, srcs, recv);

  // Directory: id -> holder rank; forward each pair to the holders of the
  // ids this rank is the directory of.
  std::unordered_map<std::int64_t, int> holder_of;
  for (const auto& b : recv)
    for (std::size_t j = 0, n = record_count<DirRecord>(b); j < n; ++j) {
      const DirRecord r = read_record<DirRecord>(b, j);
      if (r.kind != 0) continue;
      if (!holder_of.emplace(r.a, static_cast<int>(r.b)).second && err.empty())
        err = "atom id " + std::to_string(r.a) + " is used by more than one atom";
    }
  slot.clear();
  dests.clear();
  bufs.clear();
  for (const auto& b : recv)
    for (std::size_t j = 0, n = record_count<DirRecord>(b); j < n; ++j) {
      const DirRecord r = read_record<DirRecord>(b, j);
      if (r.kind != 1) continue;
      int sent_to = -1;
      for (const std::int64_t e : {r.a, r.b}) {
        if (directory_of(e, size_) != rank_) continue;
        auto it = holder_of.find(e);
        if (it == holder_of.end()) {
          if (err.empty())
            err = "exclusion (" + std::to_string(r.a) + ", " + std::to_string(r.b) +
                  ") names atom id " + std::to_string(e) + ", which no rank passed";
          continue;
        }
        if (it->second == sent_to) continue;
        sent_to = it->second;
        append_bytes(buffer_for(it->second), PairRecord{r.a, r.b});
      }
    }
  nbx_origin_.exchange(dests, bufs, srcs, recv);

  // Holder: CSR of excluded partners per local atom.
  std::unordered_map<std::int64_t, std::size_t> index_of;
  index_of.reserve(n_local);
  for (std::size_t i = 0; i < n_local; ++i) index_of.emplace(ids[i], i);
  std::vector<std::pair<std::size_t, std::int64_t>> entries;
  for (const auto& b : recv)
    for (std::size_t j = 0, n = record_count<PairRecord>(b); j < n; ++j) {
      const PairRecord p = read_record<PairRecord>(b, j);
      auto ia = index_of.find(p.a);
      if (ia != index_of.end()) entries.emplace_back(ia->second, p.b);
      auto ib = index_of.find(p.b);
      if (ib != index_of.end()) entries.emplace_back(ib->second, p.a);
    }
  std::sort(entries.begin(), entries.end());
  entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
  for (const auto& e : entries) off_[e.first + 1] += 1;
  for (std::size_t i = 0; i < n_local; ++i) off_[i + 1] += off_[i];
  ids_.resize(entries.size());
  for (std::size_t k = 0; k < entries.size(); ++k) ids_[k] = entries[k].second;
  agree_or_throw(comm_, err);
  valid_ = true;
  fingerprint_ = fp;
}

RealSpaceTerms RealSpace::compute_local(Migration& mig, double cutoff, double alpha,
                                        double coulomb_constant, View2<double> forces, bool pair_terms) {
  RealSpaceTerms t;
  const std::size_t n_o = mig.n_owned(), n_g = mig.n_ghost();
  // Excluded partners of each owned atom: the migration payload.
  const std::vector<std::int64_t>& excl_off = mig.owned_payload_offsets();
  const std::vector<std::int64_t>& excl_ids = mig.owned_payload();
  if (forces.extent(0) < n_o || forces.extent(1) != 3 || (n_o > 0 && forces.stride(0) != 3))
    throw std::logic_error("RealSpace::compute_local: forces must be n_owned x 3, row-major");
  ghost_force_.assign(3 * n_g, 0.0);

  const auto own_r = mig.owned_positions();
  const auto own_s = mig.owned_fractional();
  const auto own_q = mig.owned_charges();
  const auto own_id = mig.owned_ids();
  const auto gh_r = mig.ghost_positions();
  const auto gh_s = mig.ghost_fractional();
  const auto gh_q = mig.ghost_charges();
  const auto gh_id = mig.ghost_ids();
  const auto gh_key = mig.ghost_keys();

  for (std::size_t i = 0; i < n_o; ++i) {
    t.sum_q += own_q(i);
    t.sum_q2 += own_q(i) * own_q(i);
  }

  std::string err;
  const double t0 = now();
  if (n_o > 0) {
    // Cell grid over this rank's domain grown by the ghost margin, in
    // fractional coordinates; cell edges >= (cutoff / height) / reach along
    // each axis, so any pair within the cutoff is at most `reach` cells apart
    // along every axis (triclinic-correct: |ds_d| <= r / height_d). reach = 2
    // searches (5 rc/2)^3 instead of (3 rc)^3 per atom.
    const PeriodicCell& cell = mig.cell();
    const bool ortho = cell.box[0][1] == 0 && cell.box[0][2] == 0 && cell.box[1][0] == 0 &&
                       cell.box[1][2] == 0 && cell.box[2][0] == 0 && cell.box[2][1] == 0;
    int nc[3];
    double flo[3], inv_w[3];
    for (int d = 0; d < 3; ++d) {
      const int reach = ortho && d == 0 ? HalfPairKernel::kReachXOrtho : HalfPairKernel::kReach;
      const double c = mig.ghost_margin(d);
      flo[d] = mig.domain_lo(d) - c;
      const double width = mig.domain_hi(d) + c - flo[d];
      nc[d] = std::max(1, static_cast<int>(std::floor(width * reach / c)));
      nc[d] = std::min(nc[d], 1 << 10);
      inv_w[d] = nc[d] / width;
    }
    const int ncell = nc[0] * nc[1] * nc[2];
    const std::size_t N = n_o + n_g;
    auto cell_index = [&](double s0, double s1, double s2) {
      const double s[3] = {s0, s1, s2};
      int ci[3];
      for (int d = 0; d < 3; ++d) {
        int c = static_cast<int>(std::floor((s[d] - flo[d]) * inv_w[d]));
        ci[d] = std::min(std::max(c, 0), nc[d] - 1);
      }
      return ci[0] + nc[0] * (ci[1] + nc[1] * ci[2]);
    };
    ensure1(cell_start_, static_cast<std::size_t>(ncell) + 1, "cell_start");
    ensure1(cell_owned_, static_cast<std::size_t>(ncell) + 1, "cell_owned");
    ensure1(slot_of_, N, "slot_of_atom");
    for (View1<double>* v : {&sx_, &sy_, &sz_, &sq_, &sown_}) ensure1(*v, N, "sorted_atoms");
    ensure1(sid_, N, "sorted_id");
    ensure1(skey_, N, "sorted_key");
    const bool any_excl = !excl_ids.empty();
    if (any_excl) {
      ensure1(selo_, N, "sorted_excl_lo");
      ensure1(sehi_, N, "sorted_excl_hi");
      ensure1(semask_, N, "sorted_excl_mask");
    }
    ensure1(scell_, N, "sorted_cell");
    ensure1(sowner_, N, "sorted_owner");
    if (sforce_.extent(0) < N)
      sforce_ = View2<double>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "sorted_forces"), N + N / 4 + 16, 3);
    cell_of_.resize(N);
    for (std::size_t i = 0; i < n_o; ++i) cell_of_[i] = cell_index(own_s(i, 0), own_s(i, 1), own_s(i, 2));
    for (std::size_t g = 0; g < n_g; ++g)
      cell_of_[n_o + g] = cell_index(gh_s(g, 0), gh_s(g, 1), gh_s(g, 2));
    for (int c = 0; c <= ncell; ++c) {
      cell_start_(c) = 0;
      cell_owned_(c) = 0;
    }
    for (std::size_t a = 0; a < N; ++a) {
      cell_start_(cell_of_[a] + 1) += 1;
      if (a < n_o) cell_owned_(cell_of_[a] + 1) += 1;
    }
    for (int c = 0; c < ncell; ++c) {
      cell_start_(c + 1) += cell_start_(c);
      cell_owned_(c + 1) += cell_owned_(c);
    }
    fill_.assign(cell_start_.data(), cell_start_.data() + ncell);
    for (std::size_t a = 0; a < N; ++a) {
      const int c = cell_of_[a];
      const int at = fill_[static_cast<std::size_t>(c)]++;
      scell_(at) = c;
      slot_of_(a) = at;
      if (a < n_o) {
        sx_(at) = own_r(a, 0);
        sy_(at) = own_r(a, 1);
        sz_(at) = own_r(a, 2);
        sq_(at) = own_q(a);
        sid_(at) = own_id(a);
        skey_(at) = mig.owned_key(a);
        sown_(at) = 1.0;
        sowner_(at) = static_cast<int>(a);
        if (any_excl) {
          std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = std::numeric_limits<std::int64_t>::min();
          std::uint64_t mask = 0;
          for (std::int64_t e = excl_off[a]; e < excl_off[a + 1]; ++e) {
            const std::int64_t id = excl_ids[static_cast<std::size_t>(e)];
            lo = std::min(lo, id);
            hi = std::max(hi, id);
            mask |= std::uint64_t{1} << (static_cast<std::uint64_t>(id) & 63);
          }
          selo_(at) = lo;
          sehi_(at) = hi;
          semask_(at) = static_cast<std::int64_t>(mask);
        }
      } else {
        const std::size_t g = a - n_o;
        sx_(at) = gh_r(g, 0);
        sy_(at) = gh_r(g, 1);
        sz_(at) = gh_r(g, 2);
        sq_(at) = gh_q(g);
        sid_(at) = gh_id(g);
        skey_(at) = gh_key(g);
        sown_(at) = 0.0;
        sowner_(at) = -1;
        if (any_excl) {
          selo_(at) = std::numeric_limits<std::int64_t>::max();
          sehi_(at) = std::numeric_limits<std::int64_t>::min();
          semask_(at) = 0;
        }
      }
    }
    ensure1(found_, std::max<std::size_t>(excl_ids.size(), 1), "exclusion_found");
    for (std::size_t e = 0; e < excl_ids.size(); ++e) found_(e) = 0;
    auto sforce = Kokkos::subview(sforce_, std::make_pair(std::size_t(0), N), Kokkos::ALL());
    Kokkos::deep_copy(sforce, 0.0);

    t.t_cells = now() - t0;
    const double t1 = now();
    HalfPairKernel kern;
    kern.x = sx_;
    kern.y = sy_;
    kern.z = sz_;
    kern.q = sq_;
    kern.own = sown_;
    kern.sid = sid_;
    kern.skey = skey_;
    kern.scell = scell_;
    kern.sowner = sowner_;
    kern.cell_start = cell_start_;
    kern.cell_owned = cell_owned_;
    kern.excl_off = ConstI64(excl_off.data(), excl_off.size());
    kern.excl_ids = ConstI64(excl_ids.data(), excl_ids.size());
    kern.found = found_;
    kern.any_excl = any_excl;
    kern.elo = selo_;
    kern.ehi = sehi_;
    kern.emask = semask_;
    kern.sforces = ScatterForces(sforce);
    kern.erfc_coef = ErfcTable::instance().coefficients();
    kern.nc0 = nc[0];
    kern.nc1 = nc[1];
    kern.nc2 = nc[2];
    kern.ortho = ortho;
    kern.x_origin = flo[0] * cell.box[0][0];
    kern.inv_x_width = inv_w[0] / cell.box[0][0];
    for (int d = 0; d < 3; ++d) {
      kern.len[d] = cell.box[d][d];
      kern.flo[d] = flo[d];
      kern.wf[d] = 1.0 / inv_w[d];
    }
    kern.rc2 = cutoff * cutoff;
    kern.alpha = alpha;
    kern.k = coulomb_constant;
    kern.pairs = pair_terms;
    kern.vector_kernel = alpha * cutoff < kMaxAlphaR;
    View1<double> sums("realspace_sums", 10);
    Kokkos::parallel_reduce("pmewald::realspace_pairs", Range(0, static_cast<int>(N)), kern, sums);
    Kokkos::Experimental::contribute(sforce, kern.sforces);
    Kokkos::fence();
    for (std::size_t i = 0; i < n_o; ++i)
      for (int d = 0; d < 3; ++d) forces(i, d) = sforce(static_cast<std::size_t>(slot_of_(i)), d);
    for (std::size_t g = 0; g < n_g; ++g)
      for (int d = 0; d < 3; ++d) ghost_force_[3 * g + d] = sforce(static_cast<std::size_t>(slot_of_(n_o + g)), d);
    t.t_pairs = now() - t1;
    t.real = sums(0);
    t.exclusion = sums(1);
    t.candidates = sums(8);
    t.pairs = sums(9);
    const double w[6] = {sums(2), sums(3), sums(4), sums(5), sums(6), sums(7)};
    t.virial = {w[0], w[1], w[2], w[1], w[3], w[4], w[2], w[4], w[5]};

    for (std::size_t i = 0; i < n_o && err.empty(); ++i)
      for (std::int64_t e = excl_off[i]; e < excl_off[i + 1]; ++e)
        if (found_(e) != 1) {
          err = "excluded pair (" + std::to_string(own_id(i)) + ", " +
                std::to_string(excl_ids[static_cast<std::size_t>(e)]) +
                ") is not closer than the cutoff (" + std::to_string(cutoff) +
                "); excluded pairs must lie within the cutoff";
          break;
        }
  }
  // Forces on ghosts (pairs evaluated here for their owners) go home; every
  // rank takes part, also one without owned atoms (its ghost rows are zeros).
  // Without pair terms only excluded pairs were seen, which never move
  // forces to ghosts.
  if (pair_terms) {
    const double t2 = now();
    mig.reverse_ghosts(ghost_force_.data(), forces.data());
    t.t_pairs += now() - t2;
  }
  agree_or_throw(comm_, err);
  return t;
}

RealSpaceTerms RealSpace::reduce_terms(MPI_Comm comm, const RealSpaceTerms& local,
                                       const PeriodicCell& cell, double alpha,
                                       double coulomb_constant) {
  double in[13] = {local.real, local.exclusion, local.sum_q, local.sum_q2};
  for (int k = 0; k < 9; ++k) in[4 + k] = local.virial[static_cast<std::size_t>(k)];
  double out[13];
  check_mpi(MPI_Allreduce(in, out, 13, MPI_DOUBLE, MPI_SUM, comm), "MPI_Allreduce");
  RealSpaceTerms t;
  t.real = out[0];
  t.exclusion = out[1];
  t.sum_q = out[2];
  t.sum_q2 = out[3];
  for (int k = 0; k < 9; ++k) t.virial[static_cast<std::size_t>(k)] = out[4 + k];
  t.self = -coulomb_constant * alpha / std::sqrt(kPi) * t.sum_q2;
  t.background = -coulomb_constant * kPi * t.sum_q * t.sum_q / (2.0 * cell.volume * alpha * alpha);
  for (int d = 0; d < 3; ++d) t.virial[static_cast<std::size_t>(4 * d)] += t.background;
  return t;
}

RealSpaceTerms compute_realspace(MPI_Comm comm, const double* box9, const Int3& mesh,
                                 const double* positions, const double* charges,
                                 const std::int64_t* ids, std::size_t n_local,
                                 const std::int64_t* exclusions, std::size_t n_exclusions,
                                 double cutoff, double alpha, double coulomb_constant,
                                 double* forces_out) {
  Comm dup(comm);
  std::string err = PeriodicCell::check(box9);
  if (err.empty()) {
    PeriodicCell cell(box9);
    if (!(std::isfinite(cutoff) && cutoff > 0))
      err = "cutoff must be a positive finite number";
    else if (cutoff > 0.5 * cell.min_height() * (1 + 1e-12)) {
      std::ostringstream os;
      os.precision(10);
      os << "cutoff " << cutoff << " exceeds half the smallest box height ("
         << 0.5 * cell.min_height() << ")";
      err = os.str();
    } else if (!(std::isfinite(alpha) && alpha > 0))
      err = "alpha must be a positive finite number";
    else if (!std::isfinite(coulomb_constant))
      err = "coulomb_constant must be finite";
  }
  for (int d = 0; d < 3 && err.empty(); ++d)
    if (mesh[d] < 1) err = "mesh sizes must be positive";
  agree_or_throw(dup.get(), err);
  std::vector<double> shared(box9, box9 + 9);
  shared.insert(shared.end(), {double(mesh[0]), double(mesh[1]), double(mesh[2]), cutoff, alpha,
                               coulomb_constant});
  if (!same_on_all_ranks(dup.get(), shared))
    agree_or_throw(dup.get(), "box, mesh, cutoff, alpha and coulomb_constant must be the same on every rank");

  const PeriodicCell cell(box9);
  double t = now();
  ExclusionList excl(dup.get());
  excl.update(ids, n_local, exclusions, n_exclusions);
  const double t_excl = now() - t;
  t = now();
  Migration mig(dup.get());
  mig.set_geometry(cell, mesh);
  mig.forward(positions, charges, ids, n_local, excl.offsets(), excl.partners());
  const double t_migrate = now() - t;
  RealSpace rs(dup.get());
  t = now();
  mig.exchange_ghosts(cutoff);
  const double t_ghosts = now() - t;
  View2<double> f("realspace_forces", mig.n_owned(), 3);
  const RealSpaceTerms local = rs.compute_local(mig, cutoff, alpha, coulomb_constant, f);
  t = now();
  mig.reverse(f.data(), 3, forces_out);
  const double t_reverse = now() - t;
  RealSpaceTerms out = RealSpace::reduce_terms(dup.get(), local, cell, alpha, coulomb_constant);
  out.t_migrate = t_migrate;
  out.t_exclusions = t_excl;
  out.t_ghosts = t_ghosts;
  out.t_cells = local.t_cells;
  out.t_pairs = local.t_pairs;
  out.t_reverse = t_reverse;
  out.candidates = local.candidates;
  out.pairs = local.pairs;
  return out;
}

}  // namespace realspace
}  // namespace pmewald
