#include "realspace.hpp"

#include <chrono>
#include <cmath>
#include <sstream>
#include <unordered_map>

#include "comm.hpp"
#include "erfc_table.hpp"
#include "errors.hpp"

namespace pmewald {

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

struct PairKernel {
  using value_type = double[];
  unsigned value_count = 8;  // E_real, E_excl, W00, W01, W02, W11, W12, W22

  View2<double> own_r;
  View1<double> own_q;
  View1<int> cell_of_owned, slot_of_owned, cell_start, visit;
  View2<double> sr;
  View1<double> sq;
  View1<std::int64_t> sid;
  ConstI64 excl_off, excl_ids;
  View1<int> found;
  View2<double> forces;
  const double* erfc_coef;
  int nc0, nc1, nc2;
  int reach;  // cells per cutoff: pairs within the cutoff are <= reach cells apart
  double rc2, alpha, k;
  bool pairs = true;  // false: only the exclusion corrections (real_space=False)

  // Excluded pair (rare): no erfc term; -k q_i q_j erf(alpha r)/r instead.
  void excluded_pair(double kqq, double dx, double dy, double dz, double r2, double& e,
                     double& fr) const {
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
    (void)dx;
    (void)dy;
    (void)dz;
  }

  // Two phases per atom: gather the partners within the cutoff (branchy,
  // cheap), then evaluate them in a branch-free loop the CPU can pipeline.
  static constexpr int kBatch = 128;

  void operator()(const int k_iter, double* acc) const {
    const int i = visit(k_iter);  // owned atoms in cell order: neighbours stay in cache
    const double xi = own_r(i, 0), yi = own_r(i, 1), zi = own_r(i, 2);
    const double kqi = k * own_q(i);
    const int self = slot_of_owned(i);
    const int c = cell_of_owned(i);
    const int cx = c % nc0, cy = (c / nc0) % nc1, cz = c / (nc0 * nc1);
    const std::int64_t e0 = excl_off(i), e1 = excl_off(i + 1);
    double fx = 0, fy = 0, fz = 0;
    double er = 0, ee = 0, w00 = 0, w01 = 0, w02 = 0, w11 = 0, w12 = 0, w22 = 0;
    int batch[kBatch];
    int nb = 0;
    const double a_tsp = alpha * kTwoOverSqrtPi;

    // Force on i and half the pair's virial (the other half comes from j's side).
    auto add_pair = [&](double fr, double dx, double dy, double dz) {
      fx += fr * dx;
      fy += fr * dy;
      fz += fr * dz;
      const double hf = 0.5 * fr;
      w00 += hf * dx * dx;
      w01 += hf * dx * dy;
      w02 += hf * dx * dz;
      w11 += hf * dy * dy;
      w12 += hf * dy * dz;
      w22 += hf * dz * dz;
    };

    auto flush = [&]() {
      for (int b = 0; b < nb; ++b) {
        const int j = batch[b];
        const double dx = xi - sr(j, 0), dy = yi - sr(j, 1), dz = zi - sr(j, 2);
        const double r2 = dx * dx + dy * dy + dz * dz;
        const double inv_r = 1.0 / std::sqrt(r2);
        const double r = r2 * inv_r;
        double erfc_ar, exp_mar2;
        ErfcTable::eval(erfc_coef, alpha * r, erfc_ar, exp_mar2);
        const double kqq = kqi * sq(j);
        const double e = kqq * erfc_ar * inv_r;
        const double fr = (e + kqq * a_tsp * exp_mar2) * inv_r * inv_r;
        add_pair(fr, dx, dy, dz);
        er += 0.5 * e;
      }
      nb = 0;
    };

    const int m = reach;
    for (int z = (cz > m ? cz - m : 0); z <= (cz + m < nc2 ? cz + m : nc2 - 1); ++z)
      for (int y = (cy > m ? cy - m : 0); y <= (cy + m < nc1 ? cy + m : nc1 - 1); ++y) {
        const int x0 = cx > m ? cx - m : 0, x1 = cx + m < nc0 ? cx + m : nc0 - 1;
        // Cells x0..x1 of one row are contiguous in the sorted arrays.
        const int row = nc0 * (y + nc1 * z);
        const int jb = cell_start(row + x0), je = cell_start(row + x1 + 1);
        for (int j = jb; j < je; ++j) {
          const double dx = xi - sr(j, 0), dy = yi - sr(j, 1), dz = zi - sr(j, 2);
          const double r2 = dx * dx + dy * dy + dz * dz;
          if (r2 >= rc2 || j == self) continue;
          if (e1 > e0) {
            bool excluded = false;
            for (std::int64_t e = e0; e < e1; ++e)
              if (excl_ids(e) == sid(j)) {
                excluded = true;
                found(e) += 1;
                break;
              }
            if (excluded) {
              double epair, fr;
              excluded_pair(kqi * sq(j), dx, dy, dz, r2, epair, fr);
              add_pair(fr, dx, dy, dz);
              ee += 0.5 * epair;
              continue;
            }
          }
          if (!pairs) continue;
          batch[nb++] = j;
          if (nb == kBatch) flush();
        }
      }
    flush();
    forces(i, 0) = fx;
    forces(i, 1) = fy;
    forces(i, 2) = fz;
    acc[0] += er;
    acc[1] += ee;
    acc[2] += w00;
    acc[3] += w01;
    acc[4] += w02;
    acc[5] += w11;
    acc[6] += w12;
    acc[7] += w22;
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

RealSpaceTerms RealSpace::compute_local(const Migration& mig, double cutoff, double alpha,
                                        double coulomb_constant, View2<double> forces, bool pair_terms) {
  RealSpaceTerms t;
  const std::size_t n_o = mig.n_owned(), n_g = mig.n_ghost();
  // Excluded partners of each owned atom: the migration payload.
  const std::vector<std::int64_t>& excl_off = mig.owned_payload_offsets();
  const std::vector<std::int64_t>& excl_ids = mig.owned_payload();
  if (forces.extent(0) < n_o || forces.extent(1) != 3)
    throw std::logic_error("RealSpace::compute_local: forces must be n_owned x 3");

  const auto own_r = mig.owned_positions();
  const auto own_s = mig.owned_fractional();
  const auto own_q = mig.owned_charges();
  const auto own_id = mig.owned_ids();
  const auto gh_r = mig.ghost_positions();
  const auto gh_s = mig.ghost_fractional();
  const auto gh_q = mig.ghost_charges();
  const auto gh_id = mig.ghost_ids();

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
    constexpr int reach = 2;
    int nc[3];
    double flo[3], inv_w[3];
    for (int d = 0; d < 3; ++d) {
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
    ensure1(cell_of_owned_, n_o, "cell_of_owned");
    ensure1(slot_of_owned_, n_o, "slot_of_owned");
    if (sr_.extent(0) < N) sr_ = View2<double>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "sorted_r"), N + N / 4 + 16, 3);
    ensure1(sq_, N, "sorted_q");
    ensure1(sid_, N, "sorted_id");
    std::vector<int> cell_of(N), sorted_owner(N);
    for (std::size_t i = 0; i < n_o; ++i) cell_of[i] = cell_index(own_s(i, 0), own_s(i, 1), own_s(i, 2));
    for (std::size_t g = 0; g < n_g; ++g)
      cell_of[n_o + g] = cell_index(gh_s(g, 0), gh_s(g, 1), gh_s(g, 2));
    for (int c = 0; c <= ncell; ++c) cell_start_(c) = 0;
    for (std::size_t a = 0; a < N; ++a) cell_start_(cell_of[a] + 1) += 1;
    for (int c = 0; c < ncell; ++c) cell_start_(c + 1) += cell_start_(c);
    std::vector<int> fill(cell_start_.data(), cell_start_.data() + ncell);
    for (std::size_t a = 0; a < N; ++a) {
      const int at = fill[static_cast<std::size_t>(cell_of[a])]++;
      if (a < n_o) {
        for (int d = 0; d < 3; ++d) sr_(at, d) = own_r(a, d);
        sq_(at) = own_q(a);
        sid_(at) = own_id(a);
        slot_of_owned_(a) = at;
        cell_of_owned_(a) = cell_of[a];
      } else {
        const std::size_t g = a - n_o;
        for (int d = 0; d < 3; ++d) sr_(at, d) = gh_r(g, d);
        sq_(at) = gh_q(g);
        sid_(at) = gh_id(g);
      }
    }
    ensure1(visit_, n_o, "visit_order");
    {
      int k = 0;
      for (std::size_t a = 0; a < N; ++a) sorted_owner[a] = -1;
      for (std::size_t i = 0; i < n_o; ++i) sorted_owner[static_cast<std::size_t>(slot_of_owned_(i))] = static_cast<int>(i);
      for (std::size_t a = 0; a < N; ++a)
        if (sorted_owner[a] >= 0) visit_(k++) = sorted_owner[a];
    }
    ensure1(found_, std::max<std::size_t>(excl_ids.size(), 1), "exclusion_found");
    for (std::size_t e = 0; e < excl_ids.size(); ++e) found_(e) = 0;

    t.t_cells = now() - t0;
    const double t1 = now();
    PairKernel kern;
    kern.own_r = own_r;
    kern.own_q = own_q;
    kern.cell_of_owned = cell_of_owned_;
    kern.slot_of_owned = slot_of_owned_;
    kern.cell_start = cell_start_;
    kern.visit = visit_;
    kern.sr = sr_;
    kern.sq = sq_;
    kern.sid = sid_;
    kern.excl_off = ConstI64(excl_off.data(), excl_off.size());
    kern.excl_ids = ConstI64(excl_ids.data(), excl_ids.size());
    kern.found = found_;
    kern.forces = forces;
    kern.erfc_coef = ErfcTable::instance().coefficients();
    kern.nc0 = nc[0];
    kern.nc1 = nc[1];
    kern.nc2 = nc[2];
    kern.reach = reach;
    kern.rc2 = cutoff * cutoff;
    kern.alpha = alpha;
    kern.k = coulomb_constant;
    kern.pairs = pair_terms;
    View1<double> sums("realspace_sums", 8);
    Kokkos::parallel_reduce("pmewald::realspace_pairs", Range(0, static_cast<int>(n_o)), kern, sums);
    Kokkos::fence();
    t.t_pairs = now() - t1;
    t.real = sums(0);
    t.exclusion = sums(1);
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
  return out;
}

}  // namespace pmewald
