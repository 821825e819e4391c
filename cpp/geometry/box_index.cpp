#include "geometry/box_index.hpp"

#include <algorithm>

namespace pmewald {
inline namespace geometry {

namespace {

// Interval of `cuts` holding coordinate x: the last k with cuts[k] <= x (clamped to
// the intervals, cuts.size() - 1 of them).
int interval_of(const std::vector<int>& cuts, int x) {
  const auto it = std::upper_bound(cuts.begin(), cuts.end(), x);
  const int k = static_cast<int>(it - cuts.begin()) - 1;
  return std::clamp(k, 0, static_cast<int>(cuts.size()) - 2);
}

// First interval past the half-open end x: the first k with cuts[k] >= x.
int end_interval(const std::vector<int>& cuts, int x) {
  const auto it = std::lower_bound(cuts.begin(), cuts.end(), x);
  return std::clamp(static_cast<int>(it - cuts.begin()), 0, static_cast<int>(cuts.size()) - 1);
}

}  // namespace

BoxIndex::BoxIndex(std::vector<Box3> boxes) : boxes_(std::move(boxes)) {
  std::int64_t n_nonempty = 0;
  for (int d = 0; d < 3; ++d) {
    std::vector<int>& c = cuts_[d];
    for (const Box3& b : boxes_) {
      if (b.empty()) continue;
      c.push_back(b.lo[d]);
      c.push_back(b.hi[d]);
    }
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
  }
  for (const Box3& b : boxes_) n_nonempty += b.empty() ? 0 : 1;
  if (n_nonempty == 0) return;
  // Thin the cuts of irregular sets, keeping both ends, until the buckets are few.
  const std::int64_t limit = kMaxBucketsPerBox * n_nonempty;
  auto buckets = [&]() {
    std::int64_t n = 1;
    for (const auto& c : cuts_) n *= static_cast<std::int64_t>(c.size()) - 1;
    return n;
  };
  while (buckets() > limit) {
    int d = 0;  // thin the axis with the most intervals
    for (int e = 1; e < 3; ++e)
      if (cuts_[e].size() > cuts_[d].size()) d = e;
    std::vector<int>& c = cuts_[d];
    std::vector<int> kept;
    for (std::size_t k = 0; k < c.size(); k += 2) kept.push_back(c[k]);
    if (kept.back() != c.back()) kept.push_back(c.back());
    c.swap(kept);
  }
  const int n0 = static_cast<int>(cuts_[0].size()) - 1, n1 = static_cast<int>(cuts_[1].size()) - 1;
  const int n2 = static_cast<int>(cuts_[2].size()) - 1;
  // Counting sort of (bucket, box) pairs into CSR.
  std::vector<std::int64_t> count(static_cast<std::size_t>(n0) * n1 * n2 + 1, 0);
  auto for_buckets = [&](const Box3& b, auto&& f) {
    Int3 lo, hi;
    for (int d = 0; d < 3; ++d) {
      lo[d] = interval_of(cuts_[d], b.lo[d]);
      hi[d] = end_interval(cuts_[d], b.hi[d]);
    }
    for (int i = lo[0]; i < hi[0]; ++i)
      for (int j = lo[1]; j < hi[1]; ++j)
        for (int k = lo[2]; k < hi[2]; ++k) f((static_cast<std::int64_t>(i) * n1 + j) * n2 + k);
  };
  for (const Box3& b : boxes_)
    if (!b.empty()) for_buckets(b, [&](std::int64_t bucket) { ++count[static_cast<std::size_t>(bucket) + 1]; });
  for (std::size_t b = 1; b < count.size(); ++b) count[b] += count[b - 1];
  start_ = count;
  members_.resize(static_cast<std::size_t>(count.back()));
  for (int r = 0; r < static_cast<int>(boxes_.size()); ++r)
    if (!boxes_[r].empty())
      for_buckets(boxes_[r], [&](std::int64_t bucket) { members_[static_cast<std::size_t>(count[bucket]++)] = r; });
}

std::vector<int> BoxIndex::overlapping(const Box3& q, std::int64_t* examined) const {
  std::vector<int> out;
  if (q.empty() || start_.empty()) return out;
  Int3 lo, hi;
  for (int d = 0; d < 3; ++d) {
    const std::vector<int>& c = cuts_[d];
    if (q.hi[d] <= c.front() || q.lo[d] >= c.back()) return out;  // outside every box
    lo[d] = interval_of(c, q.lo[d]);
    hi[d] = end_interval(c, q.hi[d]);
  }
  const std::int64_t n1 = static_cast<std::int64_t>(cuts_[1].size()) - 1;
  const std::int64_t n2 = static_cast<std::int64_t>(cuts_[2].size()) - 1;
  std::int64_t looked = 0;
  for (int i = lo[0]; i < hi[0]; ++i)
    for (int j = lo[1]; j < hi[1]; ++j)
      for (int k = lo[2]; k < hi[2]; ++k) {
        const std::int64_t b = (i * n1 + j) * n2 + k;
        for (std::int64_t m = start_[static_cast<std::size_t>(b)]; m < start_[static_cast<std::size_t>(b) + 1]; ++m) {
          const int r = members_[static_cast<std::size_t>(m)];
          ++looked;
          if (!intersect(boxes_[r], q).empty()) out.push_back(r);
        }
      }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (examined) *examined += looked;
  return out;
}

}  // namespace geometry
}  // namespace pmewald
