#include "fft/remap.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "comm/mpi_helpers.hpp"
#include "base/errors.hpp"

namespace pmewald {
inline namespace fft {

bool valid_order(const Order3& o) {
  bool seen[3] = {false, false, false};
  for (int a : o) {
    if (a < 0 || a > 2 || seen[a]) return false;
    seen[a] = true;
  }
  return true;
}

std::array<std::int64_t, 3> strides_of(const Box3& box, const Order3& order) {
  std::array<std::int64_t, 3> s{};
  std::int64_t stride = 1;
  for (int k = 2; k >= 0; --k) {
    s[order[k]] = stride;
    stride *= box.size(order[k]);
  }
  return s;
}

namespace {

std::vector<Index> indices_of(const Box3& region, const Box3& storage_box, const Order3& storage_order,
                              const Order3& src_order, const Order3& dst_order) {
  std::vector<Index> out;
  out.reserve(static_cast<size_t>(region.volume()));
  const auto st = strides_of(storage_box, storage_order);
  for_each_in_message_order(region, src_order, dst_order, [&](const Int3& p) {
    out.push_back(static_cast<Index>((p[0] - storage_box.lo[0]) * st[0] + (p[1] - storage_box.lo[1]) * st[1] +
                                     (p[2] - storage_box.lo[2]) * st[2]));
  });
  return out;
}

std::vector<Box3> normalised(std::vector<Box3> boxes) {
  for (Box3& b : boxes) b = geometry::normalised(b);
  return boxes;
}

}  // namespace

RemapLayout::RemapLayout(std::vector<Box3> inboxes, std::vector<Order3> in_orders, std::vector<Box3> outboxes,
                         std::vector<Order3> out_orders)
    : in_(normalised(std::move(inboxes))), out_(normalised(std::move(outboxes))), in_order_(std::move(in_orders)),
      out_order_(std::move(out_orders)) {
  if (in_order_.size() != static_cast<size_t>(in_.size()) || out_.size() != in_.size() ||
      out_order_.size() != in_order_.size())
    throw std::invalid_argument("RemapLayout: one box and one order per rank on both ends");
  for (int r = 0; r < size(); ++r) all_identity_ = all_identity_ && identity(r);
}

bool RemapLayout::identity(int r) const {
  return inbox(r) == outbox(r) && (inbox(r).empty() || in_order(r) == out_order(r));
}

ExchangeLists remap_lists(const RemapLayout& layout, int me, const Box3& in_storage, std::int64_t* examined) {
  const int P = layout.size();
  const Box3& inbox = layout.inbox(me);
  const Box3& outbox = layout.outbox(me);
  const Order3& in_order = layout.in_order(me);
  const Order3& out_order = layout.out_order(me);
  ExchangeLists L;
  L.src_size = in_storage.volume();
  L.dst_size = outbox.volume();
  if (layout.identity(me)) return L;
  // Ring order from me+1; the self piece (r = me) comes last.
  auto ring = [&](int r) { return (r - me - 1 + P) % P; };
  auto by_ring = [&](std::vector<int> ranks) {
    std::sort(ranks.begin(), ranks.end(), [&](int a, int b) { return ring(a) < ring(b); });
    return ranks;
  };
  // What I send to r: my input inside r's output, in my storage, ordered for (me -> r).
  for (const int r : by_ring(layout.out_index().overlapping(inbox, examined))) {
    const Box3 s = intersect(inbox, layout.outbox(r));
    if (r == me) {
      L.self_src = indices_of(s, in_storage, in_order, in_order, out_order);
      L.self_dst = indices_of(s, outbox, out_order, in_order, out_order);
      continue;
    }
    L.send_ranks.push_back(r);
    L.send_indices.push_back(indices_of(s, in_storage, in_order, in_order, layout.out_order(r)));
  }
  // What I receive from r: r's input inside my output, in my output storage, ordered for (r -> me).
  for (const int r : by_ring(layout.in_index().overlapping(outbox, examined))) {
    if (r == me) continue;
    const Box3 q = intersect(layout.inbox(r), outbox);
    L.recv_ranks.push_back(r);
    L.recv_indices.push_back(indices_of(q, outbox, out_order, layout.in_order(r), out_order));
  }
  return L;
}

RemapPlan::RemapPlan(MPI_Comm comm, const RemapLayout& layout, const std::optional<Box3>& in_storage) {
  int me = 0;
  MPI_Comm_rank(comm, &me);
  inbox_ = layout.inbox(me);
  outbox_ = layout.outbox(me);
  in_order_ = layout.in_order(me);
  out_order_ = layout.out_order(me);
  in_storage_ = in_storage.value_or(inbox_);
  std::string err;
  if (!valid_order(in_order_) || !valid_order(out_order_)) err = "remap: storage order must be a permutation of (0, 1, 2)";
  if (inbox_.volume() > INT32_MAX || outbox_.volume() > INT32_MAX || in_storage_.volume() > INT32_MAX)
    err = "remap: box too large for 32-bit indices";
  if (in_storage && !contains(*in_storage, inbox_)) err = "remap: the input storage box does not contain the inbox";
  if (in_storage && in_order_ != kCOrder) err = "remap: an input storage box needs C order";
  agree_or_throw(comm, err);
  identity_ = layout.identity(me);
  all_identity_ = layout.all_identity();
  if (all_identity_) return;
  exchange_ = std::make_shared<const ExchangePlan>(comm, remap_lists(layout, me, in_storage_));
}

}  // namespace fft
}  // namespace pmewald
