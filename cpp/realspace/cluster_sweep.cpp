#include "realspace/cluster_sweep.hpp"

#include <algorithm>

#include "base/virial.hpp"
#include "realspace/listed_exclusions.hpp"

namespace pmewald {
inline namespace realspace {

using detail::HalfPairKernel;

void detail::ClusterListKernel::operator()(const int c, double* acc) const {
  constexpr int K = ClusterTable::kSize;
  auto access = kern.sforces.access();
  const int t = token.acquire();
  double* cf = &cforce(static_cast<std::size_t>(t), 0, 0);
  ClusterRowArgs ra;
  ra.ci = c;
  ra.k = kern.k;
  ra.alpha = kern.alpha;
  ra.rc2 = rc2;
  double fi[3 * K] = {};
  ClusterBlockSums s;
  const int p0 = pair_off[c], p1 = pair_off[c + 1];
  for (int q0 = p0; q0 < p1; q0 += kChunk) {
    ra.n = std::min(kChunk, p1 - q0);
    ra.cj = cj + q0;
    ra.mask = mask + q0;
    if (fdata)
      cluster_row_mixed(ra, centres, fdata, fi, cf, s);
    else
      cluster_row_double(ra, ddata, fi, cf, s);
  }
  for (int k = 0; k < 3 * K; ++k) cf[3 * K * c + k] += fi[k];
  token.release(t);
  double e_excl = 0, beyond = 0, excl_w[Virial::kComponents] = {};
  for (int l = 0; l < K; ++l) {
    const int a = atom[K * c + l];
    if (a < 0) continue;
    double excl_sums[PairBatchAcc::kSize] = {};
    add_listed_exclusions(kern, ex + ex_off[a], ex + ex_off[a + 1], a, rc2, e_excl, excl_sums, beyond, access);
    if (kern.sowner(a) >= 0)
      for (int d = 0; d < 3; ++d) access(a, d) += excl_sums[7 + d];
    for (int v = 0; v < Virial::kComponents; ++v) excl_w[v] += excl_sums[PairBatchAcc::kVirial + v];
  }
  acc[0] += s.e;
  acc[1] += e_excl;
  for (int v = 0; v < Virial::kComponents; ++v) acc[2 + v] += excl_w[v];
  acc[8] += row_pairs[c];
  acc[9] += s.evaluated;
  acc[10] += s.f2;
  acc[11] += beyond;
}

void PairList::ClusterSweep::add_forces(const View2<double>& sforce, double* w) {
  constexpr int K = ClusterTable::kSize;
  const HalfPairKernel& k = kern.kern;
  const std::size_t threads = static_cast<std::size_t>(kern.token.size());
  double sum[Virial::kComponents] = {};
  for (int c = 0; c < rows; ++c)
    for (int l = 0; l < K; ++l) {
      const int a = kern.atom[K * c + l];
      if (a < 0) continue;
      double f[3] = {0, 0, 0};
      for (std::size_t t = 0; t < threads; ++t)
        for (int d = 0; d < 3; ++d) f[d] += cforce(t, static_cast<std::size_t>(c), 4 * d + l);
      const double r[3] = {k.x(a), k.y(a), k.z(a)};
      for (int d = 0; d < 3; ++d) sforce(static_cast<std::size_t>(a), d) += f[d];
      Virial::add_outer(sum, f, r);
    }
  for (int v = 0; v < Virial::kComponents; ++v) w[v] += sum[v];
}

// The cluster data of this call (positions refreshed by begin) and the cluster sweep.
void PairList::begin_clusters(double cutoff) {
  constexpr int K = ClusterTable::kSize;
  ClusterSweep& cs = *csweep_;
  const HalfPairKernel& kern = list_kernel();
  const int C = clusters_.clusters;
  const bool mixed = precision_ == PairPrecision::Mixed;
  cs.data.resize(mixed ? 0 : 16 * static_cast<std::size_t>(C));
  cs.fdata.resize(mixed ? 16 * static_cast<std::size_t>(C) : 0);
  cs.centres.resize(mixed ? 3 * static_cast<std::size_t>(C) : 0);
  for (int c = 0; c < C; ++c) {
    const int* at = clusters_.atom.data() + K * c;
    double r[3][K], q[K], centre[3] = {0, 0, 0};
    int real = 0;
    for (int l = 0; l < K; ++l) {
      const int a = at[l] >= 0 ? at[l] : at[0];  // padding: the first atom's position, no charge
      r[0][l] = kern.x(a);
      r[1][l] = kern.y(a);
      r[2][l] = kern.z(a);
      q[l] = at[l] >= 0 ? kern.q(a) : 0.0;
      if (at[l] >= 0) {
        ++real;
        for (int d = 0; d < 3; ++d) centre[d] += r[d][l];
      }
    }
    if (mixed) {
      float* o = cs.fdata.data() + 16 * static_cast<std::size_t>(c);
      for (int d = 0; d < 3; ++d) {
        centre[d] /= real;
        cs.centres[3 * static_cast<std::size_t>(c) + d] = centre[d];
        for (int l = 0; l < K; ++l) o[4 * d + l] = static_cast<float>(r[d][l] - centre[d]);
      }
      for (int l = 0; l < K; ++l) o[12 + l] = static_cast<float>(q[l]);
    } else {
      double* o = cs.data.data() + 16 * static_cast<std::size_t>(c);
      for (int d = 0; d < 3; ++d)
        for (int l = 0; l < K; ++l) o[4 * d + l] = r[d][l];
      for (int l = 0; l < K; ++l) o[12 + l] = q[l];
    }
  }
  detail::ClusterListKernel& ck = cs.kern;
  const std::size_t threads = static_cast<std::size_t>(ck.token.size());
  if (cs.cforce.extent(0) < threads || cs.cforce.extent(1) < static_cast<std::size_t>(C))
    cs.cforce = View3<double>("cluster_forces", threads, static_cast<std::size_t>(C + C / 4 + 16), 12);
  Kokkos::deep_copy(cs.cforce, 0.0);
  ck.kern = kern;
  ck.cforce = cs.cforce;
  ck.atom = clusters_.atom.data();
  ck.pair_off = clusters_.pair_off.data();
  ck.row_pairs = clusters_.row_pairs.data();
  ck.cj = clusters_.cj.data();
  ck.mask = clusters_.mask.data();
  ck.ex_off = table_.ex_off.data();
  ck.ex = table_.ex.data();
  ck.ddata = mixed ? nullptr : cs.data.data();
  ck.fdata = mixed ? cs.fdata.data() : nullptr;
  ck.centres = mixed ? cs.centres.data() : nullptr;
  ck.rc2 = cutoff * cutoff;
  cs.reset(C);
}

}  // namespace realspace
}  // namespace pmewald
