#include "realspace/realspace.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <unordered_map>

#include "comm/communicators.hpp"
#include "comm/mpi_helpers.hpp"
#include "realspace/erfc_table.hpp"
#include "base/errors.hpp"
#include "base/timers.hpp"
#include "realspace/pair_kernel.hpp"
#include "realspace/pair_search.hpp"
#include "realspace/row_blocks.hpp"

#include <Kokkos_ScatterView.hpp>

namespace pmewald {
inline namespace realspace {

namespace {

constexpr double kPi = 3.14159265358979323846;

using detail::ConstI64;
using detail::HalfPairKernel;
using detail::ScatterForces;

// A per-sorted-atom array (nc values per row) back to the owned atoms' rows
// (owned, n_o x nc) and the ghosts' (ghosts, n_g x nc).
template <class Sorted>
void unsort_rows(const Sorted& sorted, const View1<int>& slot_of, std::size_t n_o, std::size_t n_g, int nc,
                 double* owned, double* ghosts) {
  const std::size_t c = static_cast<std::size_t>(nc);
  for (std::size_t i = 0; i < n_o + n_g; ++i) {
    double* row = i < n_o ? owned + c * i : ghosts + c * (i - n_o);
    for (std::size_t k = 0; k < c; ++k) row[k] = sorted(static_cast<std::size_t>(slot_of(i)), k);
  }
}

template <class V>
void ensure1(V& v, std::size_t n, const char* label) {
  if (v.extent(0) < n) v = V(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), n + n / 4 + 16);
}

}  // namespace

// The pair loop of one compute_local (row_blocks.hpp: fixed blocks of
// kPairBlockRows rows, run in pieces or at once), and what finish_local needs of
// begin_local.
class RealSpace::PairSweep final : public detail::RowBlocks<HalfPairKernel, 11> {
 public:
  using SortedForces =
      decltype(Kokkos::subview(View2<double>(), std::make_pair(std::size_t(0), std::size_t(0)), Kokkos::ALL()));
  static_assert(kBlockRows == RealSpace::kPairBlockRows, "one block size for every pair loop");

  Migration* mig = nullptr;
  View2<double> forces;
  bool pair_terms = true;
  double cutoff = 0;
  RealSpaceTerms terms;  // sum_q, sum_q2 and the set-up times
  SortedForces sforce;
};

static_assert(RealSpace::kSetCols == HalfPairKernel::kSetCols, "one layout of the charge sets' columns");

RealSpace::RealSpace(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

RealSpace::~RealSpace() = default;

BackgroundWork& RealSpace::pairs() {
  if (!sweep_ || !sweep_->mig) throw std::logic_error("RealSpace::pairs: no begin_local");
  return *sweep_;
}

RealSpaceTerms RealSpace::compute_local(Migration& mig, double cutoff, double alpha,
                                        double coulomb_constant, View2<double> forces, bool pair_terms) {
  begin_local(mig, cutoff, alpha, coulomb_constant, forces, pair_terms);
  return finish_local();
}

void RealSpace::begin_local(Migration& mig, double cutoff, double alpha, double coulomb_constant,
                            View2<double> forces, bool pair_terms) {
  if (!sweep_) sweep_ = std::make_unique<PairSweep>();
  PairSweep& sw = *sweep_;
  sw.mig = &mig;
  sw.forces = forces;
  sw.pair_terms = pair_terms;
  sw.cutoff = cutoff;
  sw.terms = RealSpaceTerms{};
  sw.reset(0);
  RealSpaceTerms& t = sw.terms;
  const std::size_t n_o = mig.n_owned(), n_g = mig.n_ghost();
  if (forces.extent(0) < n_o || forces.extent(1) != 3 || (n_o > 0 && forces.stride(0) != 3))
    throw std::logic_error("RealSpace::compute_local: forces must be n_owned x 3, row-major");
  ghost_force_.assign(3 * n_g, 0.0);
  if (want_pot_ && (pot_out_.extent(0) != n_o || pot_out_.extent(1) != 4 || (n_o > 0 && pot_out_.stride(0) != 4)))
    throw std::logic_error("RealSpace::request_potentials: the output must be n_owned x 4, row-major");
  ghost_pot_.assign(want_pot_ ? 4 * n_g : 0, 0.0);
  const std::size_t set_cols = static_cast<std::size_t>(kSetCols) * static_cast<std::size_t>(n_sets_);
  if (n_sets_ > 0 &&
      (sets_owned_q_.extent(0) != n_o || sets_owned_q_.extent(1) != static_cast<std::size_t>(n_sets_) ||
       sets_ghost_q_.extent(0) != n_g || sets_ghost_q_.extent(1) != static_cast<std::size_t>(n_sets_) ||
       sets_out_.extent(0) != n_o || sets_out_.extent(1) != set_cols))
    throw std::logic_error("RealSpace::request_sets: charges n_owned (n_ghost) x n_sets, output n_owned x 11 n_sets");
  ghost_sets_.assign(set_cols * n_g, 0.0);
  const auto own_q = mig.owned_charges();
  for (std::size_t i = 0; i < n_o; ++i) {
    t.sum_q += own_q(i);
    t.sum_q2 += own_q(i) * own_q(i);
  }
  const double t0 = wall_seconds();
  HalfPairKernel& kern = sw.kern;
  const std::size_t N = sort_atoms(mig, cutoff, kern);
  if (N == 0) return;
  auto sforce = Kokkos::subview(sforce_, std::make_pair(std::size_t(0), N), Kokkos::ALL());
  Kokkos::deep_copy(sforce, 0.0);
  t.t_cells = wall_seconds() - t0;
  kern.sforces = ScatterForces(sforce);
  kern.alpha = alpha;
  kern.k = coulomb_constant;
  kern.pairs = pair_terms;
  kern.vector_kernel = alpha * cutoff < kMaxAlphaR;
  kern.kernels = pair_kernels(precision_, alpha * cutoff);
  // Potentials (request_potentials): a 4-column scatter target per sorted atom
  // (a one-row placeholder when off, never written).
  kern.potentials = want_pot_;
  const std::size_t pot_rows = kern.potentials ? N : 1;
  if (spot_.extent(0) < pot_rows)
    spot_ = View2<double>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "sorted_potentials"),
                          pot_rows + pot_rows / 4 + 16, 4);
  auto spot = Kokkos::subview(spot_, std::make_pair(std::size_t(0), pot_rows), Kokkos::ALL());
  Kokkos::deep_copy(spot, 0.0);
  kern.spot = ScatterForces(spot);
  // Charge sets (request_sets): their charges in the sorted order and a scatter
  // target of kSetCols columns per set (one-row placeholders when off).
  kern.n_sets = n_sets_;
  const std::size_t set_rows = n_sets_ > 0 ? N : 1, set_width = std::max<std::size_t>(1, set_cols);
  const std::size_t q_width = std::max(1, n_sets_);
  if (sq_sets_.extent(0) < set_rows || sq_sets_.extent(1) != q_width)
    sq_sets_ = View2<double>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "sorted_set_charges"),
                             set_rows + set_rows / 4 + 16, q_width);
  if (ssets_.extent(0) < set_rows || ssets_.extent(1) != set_width)
    ssets_ = View2<double>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "sorted_set_terms"),
                           set_rows + set_rows / 4 + 16, set_width);
  auto ssets = Kokkos::subview(ssets_, std::make_pair(std::size_t(0), set_rows), Kokkos::ALL());
  Kokkos::deep_copy(ssets, 0.0);
  if (n_sets_ > 0) {
    auto sq = sq_sets_;
    auto slot = slot_of_;
    auto oq = sets_owned_q_, gq = sets_ghost_q_;
    const int m = n_sets_;
    Kokkos::parallel_for(
        "pmewald::sort_set_charges", Range(0, N), KOKKOS_LAMBDA(const std::size_t i) {
          const std::size_t at = static_cast<std::size_t>(slot(i));
          for (int c = 0; c < m; ++c) sq(at, c) = i < n_o ? oq(i, c) : gq(i - n_o, c);
        });
    Kokkos::fence();
  }
  kern.qs = sq_sets_;
  kern.ssets = ScatterForces(ssets);
  sw.sforce = sforce;
  sw.rows = static_cast<int>(N);
  if (want_row_work_ && sw.row_work.extent(0) < N)
    sw.row_work = View1<double>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "row_work"), N + N / 4 + 16);
  if (!want_row_work_) sw.row_work = View1<double>();
}

// Cell grid over this rank's domain grown by the ghost margin, in fractional
// coordinates; cell edges >= (cutoff / height) / reach along each axis, so any
// pair within the cutoff is at most `reach` cells apart along every axis
// (triclinic-correct: |ds_d| <= r / height_d). reach = 2 searches (5 rc/2)^3
// instead of (3 rc)^3 per atom.
struct RealSpace::CellGrid {
  bool ortho = false;  // the orthorhombic row trimming (positive edges only)
  int nc[3] = {1, 1, 1};
  double flo[3] = {0, 0, 0}, inv_w[3] = {1, 1, 1};

  explicit CellGrid(const Migration& mig) {
    const PeriodicCell& cell = mig.cell();
    // The orthorhombic row trimming needs positive edges (a negative diagonal, a
    // legitimate lattice, takes the general path).
    ortho = cell.box[0][1] == 0 && cell.box[0][2] == 0 && cell.box[1][0] == 0 && cell.box[1][2] == 0 &&
            cell.box[2][0] == 0 && cell.box[2][1] == 0 && cell.box[0][0] > 0 && cell.box[1][1] > 0 &&
            cell.box[2][2] > 0;
    for (int d = 0; d < 3; ++d) {
      const int reach = ortho && d == 0 ? HalfPairKernel::kReachXOrtho : HalfPairKernel::kReach;
      const double c = mig.ghost_margin(d);
      flo[d] = mig.domain_lo(d) - c;
      const double width = mig.domain_hi(d) + c - flo[d];
      nc[d] = std::max(1, static_cast<int>(std::floor(width * reach / c)));
      nc[d] = std::min(nc[d], 1 << 10);
      inv_w[d] = nc[d] / width;
    }
  }
  int cells() const { return nc[0] * nc[1] * nc[2]; }
  int index(double s0, double s1, double s2) const {
    const double s[3] = {s0, s1, s2};
    int ci[3];
    for (int d = 0; d < 3; ++d) {
      int c = static_cast<int>(std::floor((s[d] - flo[d]) * inv_w[d]));
      ci[d] = std::min(std::max(c, 0), nc[d] - 1);
    }
    return ci[0] + nc[0] * (ci[1] + nc[1] * ci[2]);
  }
};

std::size_t RealSpace::sort_atoms(Migration& mig, double radius, HalfPairKernel& kern) {
  const std::size_t n_o = mig.n_owned(), n_g = mig.n_ghost();
  if (n_o == 0) return 0;
  const CellGrid grid(mig);
  const std::size_t N = n_o + n_g;
  const bool any_excl = !mig.owned_payload().empty();
  sorted_views(N, grid.cells(), any_excl);
  bin_atoms(mig, grid);
  write_sorted_rows(mig, any_excl);
  point_kernel(mig, grid, radius, kern);
  return N;
}

// The cell starts and the sorted atoms' rows for N atoms in ncell cells (kept
// while large enough).
void RealSpace::sorted_views(std::size_t N, int ncell, bool any_excl) {
  ensure1(cell_start_, static_cast<std::size_t>(ncell) + 1, "cell_start");
  ensure1(cell_owned_, static_cast<std::size_t>(ncell) + 1, "cell_owned");
  ensure1(slot_of_, N, "slot_of_atom");
  for (View1<double>* v : {&sx_, &sy_, &sz_, &sq_, &sown_}) ensure1(*v, N, "sorted_atoms");
  ensure1(sid_, N, "sorted_id");
  ensure1(skey_, N, "sorted_key");
  if (any_excl) {
    ensure1(selo_, N, "sorted_excl_lo");
    ensure1(sehi_, N, "sorted_excl_hi");
    ensure1(semask_, N, "sorted_excl_mask");
  }
  ensure1(scell_, N, "sorted_cell");
  ensure1(sowner_, N, "sorted_owner");
  if (sforce_.extent(0) < N)
    sforce_ = View2<double>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "sorted_forces"), N + N / 4 + 16, 3);
}

// Each atom's cell, the cells' starts (all atoms, and the owned ones), and each
// atom's slot: a stable counting sort, the slots on one thread (one increment
// per atom).
void RealSpace::bin_atoms(Migration& mig, const CellGrid& grid) {
  const std::size_t n_o = mig.n_owned(), N = n_o + mig.n_ghost();
  const int ncell = grid.cells();
  const auto own_s = mig.owned_fractional();
  const auto gh_s = mig.ghost_fractional();
  cell_of_.resize(N);
  int* const cell_of = cell_of_.data();
  Kokkos::parallel_for("pmewald::cell_of_atoms", Range(0, N), [&](const std::size_t a) {
    cell_of[a] = a < n_o ? grid.index(own_s(a, 0), own_s(a, 1), own_s(a, 2))
                         : grid.index(gh_s(a - n_o, 0), gh_s(a - n_o, 1), gh_s(a - n_o, 2));
  });
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
  for (std::size_t a = 0; a < N; ++a) slot_of_(a) = fill_[static_cast<std::size_t>(cell_of_[a])]++;
}

// Every atom's sorted row at its slot, on all threads (each slot is written
// once): position, charge, id, key, owned flag and owner, and for an owned atom
// its excluded partners' id range and mask (the migration payload).
void RealSpace::write_sorted_rows(Migration& mig, bool any_excl) {
  const std::size_t n_o = mig.n_owned(), N = n_o + mig.n_ghost();
  const std::vector<std::int64_t>& excl_off = mig.owned_payload_offsets();
  const std::vector<std::int64_t>& excl_ids = mig.owned_payload();
  const auto own_r = mig.owned_positions();
  const auto own_q = mig.owned_charges();
  const auto own_id = mig.owned_ids();
  const auto gh_r = mig.ghost_positions();
  const auto gh_q = mig.ghost_charges();
  const auto gh_id = mig.ghost_ids();
  const auto gh_key = mig.ghost_keys();
  const int* const cell_of = cell_of_.data();
  Kokkos::parallel_for("pmewald::sorted_rows", Range(0, N), [&](const std::size_t a) {
    const int c = cell_of[a];
    const int at = slot_of_(a);
    scell_(at) = c;
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
  });
}

// kern's atom, cell and exclusion arrays at the sorted atoms, and the grid's
// geometry for its search of radius `radius`.
void RealSpace::point_kernel(Migration& mig, const CellGrid& grid, double radius, HalfPairKernel& kern) {
  const std::vector<std::int64_t>& excl_off = mig.owned_payload_offsets();
  const std::vector<std::int64_t>& excl_ids = mig.owned_payload();
  ensure1(found_, std::max<std::size_t>(excl_ids.size(), 1), "exclusion_found");
  for (std::size_t e = 0; e < excl_ids.size(); ++e) found_(e) = 0;
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
  kern.any_excl = !excl_ids.empty();
  kern.elo = selo_;
  kern.ehi = sehi_;
  kern.emask = semask_;
  kern.erfc_coef = ErfcTable::instance().coefficients();
  kern.nc0 = grid.nc[0];
  kern.nc1 = grid.nc[1];
  kern.nc2 = grid.nc[2];
  kern.ortho = grid.ortho;
  const PeriodicCell& cell = mig.cell();
  kern.x_origin = grid.flo[0] * cell.box[0][0];
  kern.inv_x_width = grid.inv_w[0] / cell.box[0][0];
  for (int d = 0; d < 3; ++d) {
    kern.len[d] = cell.box[d][d];
    kern.flo[d] = grid.flo[d];
    kern.wf[d] = 1.0 / grid.inv_w[d];
  }
  kern.rc2 = radius * radius;
}

void RealSpace::row_work(const PeriodicCell& cell, std::vector<double>& s, std::vector<double>& w) const {
  const std::size_t n = sweep_ && sweep_->row_work.extent(0) >= static_cast<std::size_t>(sweep_->rows)
                            ? static_cast<std::size_t>(sweep_->rows)
                            : 0;
  s.clear();
  w.clear();
  for (std::size_t a = 0; a < n; ++a) {
    if (!(sown_(a) > 0)) continue;  // owned rows: the work stays inside the domain
    const double r[3] = {sx_(a), sy_(a), sz_(a)};
    for (int d = 0; d < 3; ++d) {
      const double x = r[0] * cell.recip[0][d] + r[1] * cell.recip[1][d] + r[2] * cell.recip[2][d];
      s.push_back(x - std::floor(x));
    }
    w.push_back(sweep_->row_work(a));
  }
}

RealSpaceTerms RealSpace::finish_local(std::string* deferred_error) {
  if (!sweep_ || !sweep_->mig) throw std::logic_error("RealSpace::finish_local: no begin_local");
  PairSweep& sw = *sweep_;
  sw.run_rest();
  Migration& mig = *sw.mig;
  RealSpaceTerms t = sw.terms;
  t.t_pairs += sw.seconds;
  View2<double> forces = sw.forces;
  const std::size_t n_o = mig.n_owned(), n_g = mig.n_ghost();
  const std::vector<std::int64_t>& excl_off = mig.owned_payload_offsets();
  const std::vector<std::int64_t>& excl_ids = mig.owned_payload();
  const auto own_id = mig.owned_ids();
  std::string err;
  if (sw.rows > 0) {
    const double t1 = wall_seconds();
    auto sforce = sw.sforce;
    Kokkos::Experimental::contribute(sforce, sw.kern.sforces);
    Kokkos::fence();
    unsort_rows(sforce, slot_of_, n_o, n_g, 3, forces.data(), ghost_force_.data());
    if (sw.kern.potentials) {
      auto spot = Kokkos::subview(spot_, std::make_pair(std::size_t(0), static_cast<std::size_t>(sw.rows)),
                                  Kokkos::ALL());
      Kokkos::Experimental::contribute(spot, sw.kern.spot);
      Kokkos::fence();
      unsort_rows(spot, slot_of_, n_o, n_g, 4, pot_out_.data(), ghost_pot_.data());
    }
    if (sw.kern.n_sets > 0) {
      auto ssets = Kokkos::subview(ssets_, std::make_pair(std::size_t(0), static_cast<std::size_t>(sw.rows)),
                                   Kokkos::ALL());
      Kokkos::Experimental::contribute(ssets, sw.kern.ssets);
      Kokkos::fence();
      unsort_rows(ssets, slot_of_, n_o, n_g, kSetCols * sw.kern.n_sets, sets_out_.data(), ghost_sets_.data());
    }
    t.t_pairs += wall_seconds() - t1;
    const double* sums = sw.sums;
    t.real = sums[0];
    t.exclusion = sums[1];
    t.candidates = sums[8];
    t.pairs = sums[9];
    t.pair_force2 = sums[10];
    for (int k = 0; k < Virial::kComponents; ++k) t.virial[k] = sums[2 + k];

    for (std::size_t i = 0; i < n_o && err.empty(); ++i)
      for (std::int64_t e = excl_off[i]; e < excl_off[i + 1]; ++e)
        if (found_(e) != 1) {
          err = "excluded pair (" + std::to_string(own_id(i)) + ", " +
                std::to_string(excl_ids[static_cast<std::size_t>(e)]) +
                ") is not closer than the cutoff (" + std::to_string(sw.cutoff) +
                "); excluded pairs must lie within the cutoff";
          break;
        }
  }
  sw.mig = nullptr;
  // Forces on ghosts (pairs evaluated here for their owners) go home; every
  // rank takes part, also one without owned atoms (its ghost rows are zeros).
  // Without pair terms only excluded pairs were seen, which never move
  // forces to ghosts.
  if (sw.pair_terms) {
    ScopedTimer timer(t.t_pairs);
    mig.reverse_ghosts(ghost_force_.data(), forces.data());
    if (want_pot_) mig.reverse_ghosts(ghost_pot_.data(), pot_out_.data(), 4);
    if (n_sets_ > 0) mig.reverse_ghosts(ghost_sets_.data(), sets_out_.data(), kSetCols * n_sets_);
  }
  if (deferred_error)
    *deferred_error = std::move(err);
  else
    agree_or_throw(comm_, err);
  return t;
}

RealSpaceTerms RealSpace::reduce_terms(MPI_Comm comm, const RealSpaceTerms& local,
                                       const PeriodicCell& cell, double alpha,
                                       double coulomb_constant) {
  double in[kSums], out[kSums];
  terms_to_sum(local, in);
  check_mpi(MPI_Allreduce(in, out, kSums, MPI_DOUBLE, MPI_SUM, comm), "MPI_Allreduce");
  return terms_from_sums(out, cell, alpha, coulomb_constant);
}

void RealSpace::terms_to_sum(const RealSpaceTerms& local, double* in) {
  in[0] = local.real;
  in[1] = local.exclusion;
  in[2] = local.sum_q;
  in[3] = local.sum_q2;
  for (int k = 0; k < Virial::kComponents; ++k) in[4 + k] = local.virial[k];
  in[4 + Virial::kComponents] = local.pair_force2;
}

RealSpaceTerms RealSpace::terms_from_sums(const double* out, const PeriodicCell& cell, double alpha,
                                          double coulomb_constant) {
  RealSpaceTerms t;
  t.real = out[0];
  t.exclusion = out[1];
  t.sum_q = out[2];
  t.sum_q2 = out[3];
  for (int k = 0; k < Virial::kComponents; ++k) t.virial[k] = out[4 + k];
  t.pair_force2 = out[4 + Virial::kComponents];
  t.self = -coulomb_constant * alpha / std::sqrt(kPi) * t.sum_q2;
  t.background = -coulomb_constant * kPi * t.sum_q * t.sum_q / (2.0 * cell.volume * alpha * alpha);
  t.virial.add_isotropic(t.background);
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
  double t = wall_seconds();
  ExclusionList excl(dup.get());
  excl.update(ids, n_local, exclusions, n_exclusions);
  const double t_excl = wall_seconds() - t;
  t = wall_seconds();
  Migration mig(dup.get());
  mig.set_geometry(cell, mesh);
  mig.forward(positions, charges, ids, n_local, excl.offsets(), excl.partners());
  const double t_migrate = wall_seconds() - t;
  RealSpace rs(dup.get());
  t = wall_seconds();
  mig.exchange_ghosts(cutoff);
  const double t_ghosts = wall_seconds() - t;
  View2<double> f("realspace_forces", mig.n_owned(), 3);
  const RealSpaceTerms local = rs.compute_local(mig, cutoff, alpha, coulomb_constant, f);
  t = wall_seconds();
  mig.reverse(f.data(), 3, forces_out);
  const double t_reverse = wall_seconds() - t;
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
