#include "realspace/pair_list.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "base/errors.hpp"
#include "base/timers.hpp"
#include "comm/mpi_helpers.hpp"
#include "realspace/cluster_sweep.hpp"
#include "realspace/list_gather.hpp"
#include "realspace/listed_exclusions.hpp"
#include "realspace/pair_kernel.hpp"
#include "realspace/pair_search.hpp"
#include "realspace/row_blocks.hpp"

#include <Kokkos_ScatterView.hpp>

namespace pmewald {
inline namespace realspace {

using detail::HalfPairKernel;
using detail::ScatterForces;

namespace {

// One block of rows of the recording search (rows [begin, end) of the sorted atoms).
struct RecordedBlock {
  std::vector<int> js, row_n, row_inner;
  std::vector<PairTable::Excluded> ex;
  std::vector<int> ex_n;
  double candidates = 0;
};

}  // namespace

// ---------------------------------------------------------------------------
// The build: the search of pair_search.hpp, recording.
// ---------------------------------------------------------------------------

void RealSpace::record_pairs(Migration& mig, double radius, double inner_radius, PairTable& out,
                             HalfPairKernel& kern) {
  const std::size_t N = sort_atoms(mig, radius, kern);
  out.rows = N;
  out.candidates = 0;
  out.row_off.assign(N + 1, 0);
  out.row_mid.assign(N, 0);
  out.ex_off.assign(N + 1, 0);
  out.js.clear();
  out.ex.clear();
  out.slot.resize(N);
  for (std::size_t a = 0; a < N; ++a) out.slot[a] = slot_of_(a);
  if (N == 0) return;
  const int rows = static_cast<int>(N);
  const int nblocks = (rows + kPairBlockRows - 1) / kPairBlockRows;
  std::vector<RecordedBlock> blocks(static_cast<std::size_t>(nblocks));
  RecordedBlock* bp = blocks.data();
  // Each block writes only its own vectors (host memory: ExecSpace is a host space).
  const double inner2 = inner_radius > 0 ? inner_radius * inner_radius : -1.0;
  Kokkos::parallel_for(
      "pmewald::pair_list_build", Range(0, nblocks), [kern, bp, rows, inner2](const int blk) {
        RecordedBlock& B = bp[blk];
        std::vector<int> shell;
        const int a0 = blk * kPairBlockRows, a1 = std::min(rows, a0 + kPairBlockRows);
        for (int a = a0; a < a1; ++a) {
          const std::size_t js0 = B.js.size(), ex0 = B.ex.size();
          const double xi = kern.x(a), yi = kern.y(a), zi = kern.z(a);
          shell.clear();
          auto keep = [&](int j) {
            const double dx = xi - kern.x(j), dy = yi - kern.y(j), dz = zi - kern.z(j);
            if (dx * dx + dy * dy + dz * dz < inner2)
              B.js.push_back(j);
            else
              shell.push_back(j);
          };
          B.candidates += kern.walk(a, [&](int* list, int n, int* maybe, int n_maybe) {
            for (int b = 0; b < n; ++b) keep(list[b]);
            for (int b = 0; b < n_maybe; ++b) {
              const int j = maybe[b];
              std::int64_t e1, e2;
              if (kern.exclusion_entries(a, j, e1, e2))
                B.ex.push_back({j, e1, e2});
              else if (kern.keeps(a, j))
                keep(j);
            }
          });
          B.row_inner.push_back(static_cast<int>(B.js.size() - js0));
          B.js.insert(B.js.end(), shell.begin(), shell.end());
          B.row_n.push_back(static_cast<int>(B.js.size() - js0));
          B.ex_n.push_back(static_cast<int>(B.ex.size() - ex0));
        }
      });
  Kokkos::fence();
  std::size_t npairs = 0, nex = 0;
  for (const RecordedBlock& B : blocks) {
    npairs += B.js.size();
    nex += B.ex.size();
  }
  out.js.reserve(npairs);
  out.ex.reserve(nex);
  int a = 0;
  for (const RecordedBlock& B : blocks) {
    out.js.insert(out.js.end(), B.js.begin(), B.js.end());
    out.ex.insert(out.ex.end(), B.ex.begin(), B.ex.end());
    for (std::size_t r = 0; r < B.row_n.size(); ++r, ++a) {
      out.row_mid[static_cast<std::size_t>(a)] = out.row_off[static_cast<std::size_t>(a)] + B.row_inner[r];
      out.row_off[static_cast<std::size_t>(a) + 1] = out.row_off[static_cast<std::size_t>(a)] + B.row_n[r];
      out.ex_off[static_cast<std::size_t>(a) + 1] = out.ex_off[static_cast<std::size_t>(a)] + B.ex_n[r];
    }
    out.candidates += B.candidates;
  }
}

// ---------------------------------------------------------------------------
// The evaluation: the stored pairs closer than the cutoff.
// ---------------------------------------------------------------------------

namespace {

// The n x 3 array a scatter view adds into directly: its own (Serial's
// non-duplicated view); nullptr for a duplicating or atomic backend.
template <class SV>
double* raw_force_array(const SV&) {
  return nullptr;
}
template <class D, class L, class X, class Op, class C>
double* raw_force_array(const Kokkos::Experimental::ScatterView<D, L, X, Op, Kokkos::Experimental::ScatterNonDuplicated, C>& v) {
  if constexpr (std::is_same_v<C, Kokkos::Experimental::ScatterNonAtomic>) {
    const auto u = v.subview();
    return u.stride(0) == 3 && u.stride(1) == 1 ? u.data() : nullptr;
  } else {
    return nullptr;
  }
}

struct ListKernel {
  using value_type = double[];
  // As HalfPairKernel's, the excluded pairs beyond the cutoff, and (virial_from_forces)
  // the exclusions' share of sum_a F_a (r_a - centre) (add_listed_exclusions' `applied`).
  unsigned value_count = 18;
  static constexpr int kBatch = HalfPairKernel::kBatch;
  HalfPairKernel kern;  // the build's sorted atoms (positions refreshed), exclusions, constants
  const int *row_off = nullptr, *row_mid = nullptr, *js = nullptr, *ex_off = nullptr;
  const PairTable::Excluded* ex = nullptr;
  const double* xyzq = nullptr;  // the sorted atoms' x, y, z, q interleaved (one cache line per partner)
  // The forces' own n x 3 array where the scatter view writes straight into it (a
  // backend that does not duplicate per thread, e.g. Serial): the batch's partner
  // forces go in without the view's accessor. nullptr: through the accessor.
  double* raw_forces = nullptr;
  double rc2 = 0;
  // The block kernel without the pairs' virial: PairList::finish forms it from the
  // forces on the sorted atoms, sum_a F_a (r_a - centre), less the exclusions' share.
  bool virial_from_forces = false;
  double centre[3] = {0, 0, 0};

  void operator()(const int a, double* acc) const {
    const bool a_owned = kern.sowner(a) >= 0;
    const double xi = kern.x(a), yi = kern.y(a), zi = kern.z(a);
    const double kqi = kern.k * kern.q(a);
    auto access = kern.sforces.access();
    // Room for the vector gather's stores past the count (list_gather.hpp).
    alignas(64) int sel[kBatch + 8];
    double bfx[kBatch], bfy[kBatch], bfz[kBatch];
    alignas(64) double bx[kBatch + 8], by[kBatch + 8], bz[kBatch + 8], bq[kBatch + 8];
    const ListBatch batch{sel, bx, by, bz, bq};
    double sums[PairBatchAcc::kSize] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    double excl_sums[PairBatchAcc::kSize] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    double e_excl = 0, evaluated = 0, beyond = 0, applied[Virial::kComponents] = {0, 0, 0, 0, 0, 0};
    const PairKernels::Block block = virial_from_forces ? kern.kernels.block_no_virial : kern.kernels.block;
    const int b0 = row_off[a], bm = row_mid[a], b1 = row_off[a + 1];
    if (kern.pairs) {
      for (int c0 = b0; c0 < b1; c0 += kBatch) {
        const int c1 = std::min(b1, c0 + kBatch), cm = std::max(c0, std::min(bm, c1));
        // The inner partners as they are, the shell's within the cutoff now.
        const int n = gather_listed(js, c0, cm, c1, xyzq, xi, yi, zi, rc2, batch);
        if (n == 0) continue;
        evaluated += n;
        if (block) {
          block(n, bx, by, bz, bq, xi, yi, zi, kqi, kern.alpha, bfx, bfy, bfz, sums);
          if (raw_forces) {
            scatter_listed(sel, n, bfx, bfy, bfz, raw_forces);
          } else {
            for (int b = 0; b < n; ++b) {
              access(sel[b], 0) -= bfx[b];
              access(sel[b], 1) -= bfy[b];
              access(sel[b], 2) -= bfz[b];
            }
          }
        } else {
          kern.evaluate_batch(sel, n, xi, yi, zi, kqi, bfx, bfy, bfz, sums, access);
        }
      }
    }
    add_listed_exclusions(kern, ex + ex_off[a], ex + ex_off[a + 1], a, rc2, e_excl, excl_sums, beyond, access,
                          centre, virial_from_forces ? applied : nullptr);
    for (int d = 0; d < 3; ++d) access(a, d) += sums[7 + d] + (a_owned ? excl_sums[7 + d] : 0.0);
    acc[0] += sums[0];
    acc[1] += e_excl;
    for (int v = 0; v < Virial::kComponents; ++v)
      acc[2 + v] += sums[PairBatchAcc::kVirial + v] + excl_sums[PairBatchAcc::kVirial + v];
    acc[8] += b1 - b0;
    acc[9] += evaluated;
    acc[10] += sums[PairBatchAcc::kPairForce2];
    acc[11] += beyond;
    for (int v = 0; v < Virial::kComponents; ++v) acc[12 + v] += applied[v];
  }
};

}  // namespace

const char* layout_name(PairLayout l) { return l == PairLayout::Clusters ? "clusters" : "atoms"; }

// The evaluation of one call (row_blocks.hpp: fixed blocks of kPairBlockRows rows,
// sums added in block order, so the result does not depend on when the pieces run
// nor on the number of threads).
class PairList::Sweep final : public detail::RowBlocks<ListKernel, 18> {
 public:
  static_assert(kBlockRows == RealSpace::kPairBlockRows, "one block size for every pair loop");
  View2<double> sforce{"pair_list_forces", 0, 3};
  std::vector<double> xyzq;  // ListKernel::xyzq
  double cutoff = 0;
  bool active = false;
  RealSpaceTerms terms;  // sum_q, sum_q2
};

PairList::PairList(MPI_Comm comm)
    : comm_(comm), mig_(comm), builder_(comm), sweep_(std::make_unique<Sweep>()), csweep_(std::make_unique<ClusterSweep>()) {}

PairList::~PairList() = default;

void PairList::set_geometry(const PeriodicCell& cell, const Int3& mesh) {
  mig_.set_geometry(cell, mesh);
  cell_ = cell;
  have_geometry_ = true;
  valid_ = false;
}

void PairList::set_domains(const PeriodicCell& cell, const DomainGrid& domains) {
  mig_.set_domains(cell, domains);
  cell_ = cell;
  have_geometry_ = true;
  valid_ = false;
}

void PairList::set_ghost_exchange(Migration::GhostExchange how) {
  mig_.set_ghost_exchange(how);
  valid_ = false;
}

int PairList::vote(const double* positions, const std::int64_t* ids, std::size_t n, double skin) {
  if (!have_geometry_) throw std::logic_error("PairList::vote before set_geometry");
  ScopedTimer timer(stats_.refresh_seconds);
  moved_.resize(4 * n);
  if (!valid_ || n != ref_id_.size() || (n > 0 && std::memcmp(ids, ref_id_.data(), n * sizeof(std::int64_t)) != 0))
    return 1;
  // Displacement since the build, minimum image (fractional rounding): an atom
  // the caller wrapped back into the box has not jumped.
  const double limit2 = 0.25 * skin * skin;
  int far = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double d[3], m[3];
    for (int a = 0; a < 3; ++a) d[a] = positions[3 * i + a] - ref_r_[3 * i + a];
    for (int c = 0; c < 3; ++c)
      m[c] = std::nearbyint(d[0] * cell_.recip[0][c] + d[1] * cell_.recip[1][c] + d[2] * cell_.recip[2][c]);
    double r2 = 0;
    for (int a = 0; a < 3; ++a) {
      d[a] -= m[0] * cell_.box[0][a] + m[1] * cell_.box[1][a] + m[2] * cell_.box[2][a];
      moved_[4 * i + a] = d[a];
      r2 += d[a] * d[a];
    }
    far |= !(r2 <= limit2);  // NaN too: a rebuild, whose migration names it
  }
  return far;
}

void PairList::build(const double* positions, const double* charges, const std::int64_t* ids, std::size_t n,
                     const std::int64_t* excl_offsets, const std::int64_t* excl_partners, double radius,
                     double inner_radius) {
  valid_ = false;  // until the build has completed (a failed one leaves no list)
  mig_.forward(positions, charges, ids, n, excl_offsets, excl_partners);
  mig_.exchange_ghosts(radius);
  builder_.record_pairs(mig_, radius, inner_radius, table_, list_kernel());
  exclusions_recorded_once_ = count_exclusions(-1.0);
  // (built for clusters on every rank alike, whether or not it holds atoms: set_layout
  // then invalidates on every rank or on none)
  clusters_built_ = layout_ == PairLayout::Clusters;
  if (clusters_built_ && table_.rows > 0) {
    HalfPairKernel& kern = list_kernel();
    build_cluster_table(table_, kern.x.data(), kern.y.data(), kern.z.data(), clusters_);
  }
  const std::size_t n_o = mig_.n_owned(), n_g = mig_.n_ghost();
  base_own_.resize(3 * n_o);
  base_ghost_.resize(3 * n_g);
  const auto own_r = mig_.owned_positions();
  const auto gh_r = mig_.ghost_positions();
  for (std::size_t i = 0; i < n_o; ++i)
    for (int a = 0; a < 3; ++a) base_own_[3 * i + a] = own_r(i, a);
  for (std::size_t g = 0; g < n_g; ++g)
    for (int a = 0; a < 3; ++a) base_ghost_[3 * g + a] = gh_r(g, a);
  ref_r_.assign(positions, positions + 3 * n);
  ref_id_.assign(ids, ids + n);
  stats_.builds += 1;
  valid_ = true;
}

void PairList::refresh(const double* charges, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) moved_[4 * i + 3] = charges[i];
  const std::size_t n_o = mig_.n_owned(), n_g = mig_.n_ghost();
  own4_.resize(4 * n_o);
  ghost4_.resize(4 * n_g);
  mig_.route(moved_.data(), 4, own4_.data());
  mig_.route_ghosts(own4_.data(), 4, ghost4_.data());
  if (table_.rows == 0) return;
  HalfPairKernel& kern = list_kernel();
  auto put = [&](std::size_t slot, const double* base, const double* now) {
    kern.x(slot) = base[0] + now[0];
    kern.y(slot) = base[1] + now[1];
    kern.z(slot) = base[2] + now[2];
    kern.q(slot) = now[3];
  };
  for (std::size_t i = 0; i < n_o; ++i) put(static_cast<std::size_t>(table_.slot[i]), &base_own_[3 * i], &own4_[4 * i]);
  for (std::size_t g = 0; g < n_g; ++g)
    put(static_cast<std::size_t>(table_.slot[n_o + g]), &base_ghost_[3 * g], &ghost4_[4 * g]);
}

void PairList::begin(bool rebuild, const double* positions, const double* charges, const std::int64_t* ids,
                     std::size_t n, const std::int64_t* excl_offsets, const std::int64_t* excl_partners,
                     double cutoff, double skin, double alpha, double coulomb_constant) {
  Sweep& sw = *sweep_;
  sw.active = false;
  active_layout_ = PairLayout::Atoms;  // until the list is ready for clusters
  const double t0 = wall_seconds();
  if (rebuild) {
    // Inner pairs: closer than cutoff - skin at the build, so closer than the cutoff
    // while no atom has moved more than skin / 2 (vote() checks that, in rounded
    // arithmetic: hence the margin of 1e-3 skin).
    build(positions, charges, ids, n, excl_offsets, excl_partners, cutoff + skin, cutoff - 1.001 * skin);
    stats_.build_seconds += wall_seconds() - t0;
  } else {
    if (!valid_) throw std::logic_error("PairList::begin: reuse without a list");
    refresh(charges, n);
    stats_.refresh_seconds += wall_seconds() - t0;
  }
  sw.terms = RealSpaceTerms{};
  const std::size_t n_o = mig_.n_owned();
  if (rebuild) {
    const auto q = mig_.owned_charges();
    for (std::size_t i = 0; i < n_o; ++i) {
      sw.terms.sum_q += q(i);
      sw.terms.sum_q2 += q(i) * q(i);
    }
  } else {
    for (std::size_t i = 0; i < n_o; ++i) {
      sw.terms.sum_q += own4_[4 * i + 3];
      sw.terms.sum_q2 += own4_[4 * i + 3] * own4_[4 * i + 3];
    }
  }
  sw.reset(static_cast<int>(table_.rows));
  sw.cutoff = cutoff;
  sw.active = true;
  if (sw.rows == 0) return;
  const std::size_t N = table_.rows;
  if (sw.sforce.extent(0) < N) sw.sforce = View2<double>("pair_list_forces", N + N / 4 + 16, 3);
  auto sforce = Kokkos::subview(sw.sforce, std::make_pair(std::size_t(0), N), Kokkos::ALL());
  Kokkos::deep_copy(sforce, 0.0);
  HalfPairKernel& kern = list_kernel();
  kern.sforces = ScatterForces(sforce);
  sw.kern.raw_forces = raw_force_array(kern.sforces);
  kern.alpha = alpha;
  kern.k = coulomb_constant;
  kern.pairs = true;
  kern.vector_kernel = alpha * cutoff < kMaxAlphaR;
  kern.kernels = pair_kernels(precision_, alpha * cutoff);
  sw.kern.row_off = table_.row_off.data();
  sw.kern.row_mid = table_.row_mid.data();
  sw.kern.js = table_.js.data();
  sw.kern.ex_off = table_.ex_off.data();
  sw.kern.ex = table_.ex.data();
  sw.kern.rc2 = cutoff * cutoff;
  sw.kern.virial_from_forces = kern.kernels.block_no_virial != nullptr;
  sw.kern.centre[0] = kern.x(0);  // any atom of the rank's: the sum's terms stay domain-sized
  sw.kern.centre[1] = kern.y(0);
  sw.kern.centre[2] = kern.z(0);
  active_layout_ = layout_ == PairLayout::Clusters && clusters_built_ && table_.rows > 0 && alpha * cutoff < kMaxAlphaR
                       ? PairLayout::Clusters
                       : PairLayout::Atoms;
  if (active_layout_ == PairLayout::Clusters) {
    begin_clusters(cutoff);
    return;
  }
  sw.xyzq.resize(4 * N);
  for (std::size_t a = 0; a < N; ++a) {
    sw.xyzq[4 * a] = kern.x(a);
    sw.xyzq[4 * a + 1] = kern.y(a);
    sw.xyzq[4 * a + 2] = kern.z(a);
    sw.xyzq[4 * a + 3] = kern.q(a);
  }
  sw.kern.xyzq = sw.xyzq.data();
}

HalfPairKernel& PairList::list_kernel() { return sweep_->kern.kern; }

BackgroundWork& PairList::pairs() {
  if (!sweep_->active) throw std::logic_error("PairList::pairs: no begin");
  if (active_layout_ == PairLayout::Clusters) return *csweep_;
  return *sweep_;
}

// The pairs' virial of an atom-layout evaluation by the kernel without it: sum over the
// sorted atoms (owned and ghost) of F_a (r_a - centre), F_a the forces the pairs put on a
// (each pair +f on i, -f on j: sum_pairs f (r_i - r_j)), less the excluded pairs' share
// (`applied`, summed by the rows; their own virial is in the rows' sums). One pass in
// atom order, so the sum does not depend on the threads. Added to w (Virial's order).
void PairList::pair_virial_from_forces(const View2<double>& sforce, const double* applied, double* w) {
  const HalfPairKernel& kern = list_kernel();
  const double* c = sweep_->kern.centre;
  double s[Virial::kComponents] = {0, 0, 0, 0, 0, 0};
  for (std::size_t a = 0; a < table_.rows; ++a) {
    const double f[3] = {sforce(a, 0), sforce(a, 1), sforce(a, 2)};
    const double r[3] = {kern.x(a) - c[0], kern.y(a) - c[1], kern.z(a) - c[2]};
    Virial::add_outer(s, f, r);
  }
  for (int k = 0; k < Virial::kComponents; ++k) w[k] += s[k] - applied[k];
}

// The stored excluded pairs closer than sqrt(rc2) (all of them: rc2 < 0) counted per
// owned exclusion entry into the builder's found_; whether each entry counts once.
bool PairList::count_exclusions(double rc2) {
  HalfPairKernel& kern = list_kernel();
  const std::size_t n_entries = mig_.owned_payload().size();
  for (std::size_t e = 0; e < n_entries; ++e) kern.found(e) = 0;
  for (std::size_t a = 0; a < table_.rows; ++a)
    for (int k = table_.ex_off[a]; k < table_.ex_off[a + 1]; ++k) {
      const PairTable::Excluded& e = table_.ex[static_cast<std::size_t>(k)];
      const int i = static_cast<int>(a);
      const double dx = kern.x(i) - kern.x(e.j), dy = kern.y(i) - kern.y(e.j), dz = kern.z(i) - kern.z(e.j);
      if (rc2 >= 0 && !(dx * dx + dy * dy + dz * dz < rc2)) continue;
      kern.found(e.e1) += 1;
      if (e.e2 >= 0) kern.found(e.e2) += 1;
    }
  for (std::size_t e = 0; e < n_entries; ++e)
    if (kern.found(e) != 1) return false;
  return true;
}

// The first owned exclusion (in owned order) that this call did not see exactly once at
// `cutoff`, as the error every rank raises (the slow path: only when something is wrong).
std::string PairList::exclusion_problem(double cutoff) {
  count_exclusions(cutoff * cutoff);
  const std::vector<std::int64_t>& off = mig_.owned_payload_offsets();
  const std::vector<std::int64_t>& partners = mig_.owned_payload();
  const auto own_id = mig_.owned_ids();
  const auto& found = list_kernel().found;
  for (std::size_t i = 0; i < mig_.n_owned(); ++i)
    for (std::int64_t e = off[i]; e < off[i + 1]; ++e)
      if (found(e) != 1)
        return "excluded pair (" + std::to_string(own_id(i)) + ", " +
               std::to_string(partners[static_cast<std::size_t>(e)]) + ") is not closer than the cutoff (" +
               std::to_string(cutoff) + "); excluded pairs must lie within the cutoff";
  return "";
}

RealSpaceTerms PairList::finish(double* forces_out, std::string* deferred_error) {
  Sweep& sw = *sweep_;
  if (!sw.active) throw std::logic_error("PairList::finish: no begin");
  const bool by_clusters = active_layout_ == PairLayout::Clusters && sw.rows > 0;
  ClusterSweep& cs = *csweep_;
  if (by_clusters)
    cs.run_rest();
  else
    sw.run_rest();
  const double* sums = by_clusters ? cs.sums : sw.sums;
  const double seconds = by_clusters ? cs.seconds : sw.seconds;
  sw.active = false;
  RealSpaceTerms t = sw.terms;
  const std::size_t n_o = mig_.n_owned(), n_g = mig_.n_ghost();
  f_owned_.assign(3 * n_o, 0.0);
  f_ghost_.assign(3 * n_g, 0.0);
  std::string err;
  const double t0 = wall_seconds();
  if (sw.rows > 0) {
    const std::size_t N = table_.rows;
    auto sforce = Kokkos::subview(sw.sforce, std::make_pair(std::size_t(0), N), Kokkos::ALL());
    Kokkos::Experimental::contribute(sforce, by_clusters ? cs.kern.kern.sforces : sw.kern.kern.sforces);
    Kokkos::fence();
    double w[Virial::kComponents] = {};
    if (by_clusters) cs.add_forces(sw.sforce, w);  // the pair forces by cluster, and their virial
    for (std::size_t i = 0; i < n_o; ++i)
      for (int d = 0; d < 3; ++d) f_owned_[3 * i + d] = sforce(static_cast<std::size_t>(table_.slot[i]), d);
    for (std::size_t g = 0; g < n_g; ++g)
      for (int d = 0; d < 3; ++d) f_ghost_[3 * g + d] = sforce(static_cast<std::size_t>(table_.slot[n_o + g]), d);
    t.real = sums[0];
    t.exclusion = sums[1];
    if (!by_clusters && sw.kern.virial_from_forces) pair_virial_from_forces(sforce, sums + 12, w);
    for (int k = 0; k < Virial::kComponents; ++k) t.virial[k] = sums[2 + k] + w[k];
    t.candidates = sums[8];
    t.pairs = sums[9];
    t.pair_force2 = sums[10];
    if (sums[11] > 0 || !exclusions_recorded_once_) err = exclusion_problem(sw.cutoff);
  }
  stats_.evaluate_seconds += seconds + (wall_seconds() - t0);
  mig_.reverse_ghosts(f_ghost_.data(), f_owned_.data());
  if (deferred_error)
    *deferred_error = std::move(err);
  else
    agree_or_throw(comm_, err);
  mig_.reverse(f_owned_.data(), 3, forces_out);
  t.t_pairs = seconds;
  return t;
}

}  // namespace realspace
}  // namespace pmewald
