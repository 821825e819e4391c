#include "realspace/cluster_layout.hpp"

#include <algorithm>

#include "realspace/pair_list.hpp"

namespace pmewald {
inline namespace realspace {

namespace {

// Orders idx[b, e) (sorted atoms) so that each aligned group of kSize is compact:
// split at a multiple of kSize along the widest extent, recursively.
void bisect(int* b, int* e, const double* x, const double* y, const double* z) {
  constexpr int K = ClusterTable::kSize;
  const long n = e - b;
  if (n <= K) return;
  double lo[3] = {x[*b], y[*b], z[*b]}, hi[3] = {lo[0], lo[1], lo[2]};
  for (int* p = b; p < e; ++p) {
    const double r[3] = {x[*p], y[*p], z[*p]};
    for (int d = 0; d < 3; ++d) {
      lo[d] = std::min(lo[d], r[d]);
      hi[d] = std::max(hi[d], r[d]);
    }
  }
  int axis = 0;
  for (int d = 1; d < 3; ++d)
    if (hi[d] - lo[d] > hi[axis] - lo[axis]) axis = d;
  const double* c = axis == 0 ? x : axis == 1 ? y : z;
  const long half = (n + 2 * K - 1) / (2 * K) * K;  // a multiple of K, about n / 2
  int* mid = b + half;
  std::nth_element(b, mid, e, [c](int u, int v) { return c[u] < c[v] || (c[u] == c[v] && u < v); });
  bisect(b, mid, x, y, z);
  bisect(mid, e, x, y, z);
}

}  // namespace

void build_cluster_table(const PairTable& table, const double* x, const double* y, const double* z,
                         ClusterTable& out) {
  constexpr int K = ClusterTable::kSize;
  const int N = static_cast<int>(table.rows);
  // The order: recursive bisection of all the atoms (a k-d tree down to groups of K).
  std::vector<int> order(static_cast<std::size_t>(N));
  for (int a = 0; a < N; ++a) order[static_cast<std::size_t>(a)] = a;
  bisect(order.data(), order.data() + N, x, y, z);
  const int C = (N + K - 1) / K;
  out.clusters = C;
  out.atom.assign(static_cast<std::size_t>(C) * K, -1);
  std::vector<int> where(static_cast<std::size_t>(N));  // K * cluster + slot of each sorted atom
  for (int s = 0; s < N; ++s) {
    out.atom[static_cast<std::size_t>(s)] = order[static_cast<std::size_t>(s)];
    where[static_cast<std::size_t>(order[static_cast<std::size_t>(s)])] = s;
  }
  // Each table pair under its lower cluster (as i), counted, then placed.
  std::vector<int> count(static_cast<std::size_t>(C) + 1, 0);
  auto side = [&](int a, int j, int& ci, int& cj, int& bit) {
    const int wa = where[static_cast<std::size_t>(a)], wj = where[static_cast<std::size_t>(j)];
    int wi = wa, wo = wj;
    if (wj / K < wa / K) std::swap(wi, wo);
    ci = wi / K;
    cj = wo / K;
    bit = K * (wi % K) + wo % K;
  };
  for (int a = 0; a < N; ++a)
    for (int b = table.row_off[static_cast<std::size_t>(a)]; b < table.row_off[static_cast<std::size_t>(a) + 1]; ++b) {
      int ci, cj, bit;
      side(a, table.js[static_cast<std::size_t>(b)], ci, cj, bit);
      count[static_cast<std::size_t>(ci) + 1] += 1;
    }
  for (int c = 0; c < C; ++c) count[static_cast<std::size_t>(c) + 1] += count[static_cast<std::size_t>(c)];
  std::vector<int> ent_cj(table.js.size());
  std::vector<std::uint16_t> ent_bit(table.js.size());
  std::vector<int> fill(count.begin(), count.end() - 1);
  for (int a = 0; a < N; ++a)
    for (int b = table.row_off[static_cast<std::size_t>(a)]; b < table.row_off[static_cast<std::size_t>(a) + 1]; ++b) {
      int ci, cj, bit;
      side(a, table.js[static_cast<std::size_t>(b)], ci, cj, bit);
      const std::size_t at = static_cast<std::size_t>(fill[static_cast<std::size_t>(ci)]++);
      ent_cj[at] = cj;
      ent_bit[at] = static_cast<std::uint16_t>(1u << bit);
    }
  // Per i-cluster: its entries merged by j-cluster (ascending).
  out.pair_off.assign(static_cast<std::size_t>(C) + 1, 0);
  out.row_pairs.assign(static_cast<std::size_t>(C), 0);
  out.cj.clear();
  out.mask.clear();
  out.pairs = static_cast<double>(table.js.size());
  std::vector<int> slot(static_cast<std::size_t>(C), -1);
  std::vector<int> js_here;
  for (int c = 0; c < C; ++c) {
    js_here.clear();
    const std::size_t e0 = static_cast<std::size_t>(count[static_cast<std::size_t>(c)]);
    const std::size_t e1 = static_cast<std::size_t>(count[static_cast<std::size_t>(c) + 1]);
    for (std::size_t e = e0; e < e1; ++e)
      if (slot[static_cast<std::size_t>(ent_cj[e])] < 0) {
        slot[static_cast<std::size_t>(ent_cj[e])] = 0;
        js_here.push_back(ent_cj[e]);
      }
    std::sort(js_here.begin(), js_here.end());
    const std::size_t base = out.cj.size();
    for (std::size_t k = 0; k < js_here.size(); ++k) slot[static_cast<std::size_t>(js_here[k])] = static_cast<int>(base + k);
    out.cj.insert(out.cj.end(), js_here.begin(), js_here.end());
    out.mask.resize(out.cj.size(), 0);
    for (std::size_t e = e0; e < e1; ++e) out.mask[static_cast<std::size_t>(slot[static_cast<std::size_t>(ent_cj[e])])] |= ent_bit[e];
    for (int j : js_here) slot[static_cast<std::size_t>(j)] = -1;
    out.row_pairs[static_cast<std::size_t>(c)] = static_cast<int>(e1 - e0);
    out.pair_off[static_cast<std::size_t>(c) + 1] = static_cast<int>(out.cj.size());
  }
}

}  // namespace realspace
}  // namespace pmewald
