// Remaps: moving a distributed 3-D array from one set of per-rank boxes to
// another, permuting the storage order on the way.
//
// Storage order: an Order3 lists the axes from slowest to fastest varying, so
// {0, 1, 2} is C order of [x][y][z] (z fastest) and {1, 2, 0} stores x fastest.
// Every rank stores its box densely in its own order.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "comm/exchange_plan.hpp"
#include "geometry/box_index.hpp"
#include "geometry/index_box.hpp"

namespace pmewald {
inline namespace fft {

using Order3 = Int3;
inline constexpr Order3 kCOrder{0, 1, 2};

// True when `order` is a permutation of {0, 1, 2}.
bool valid_order(const Order3& order);

// Element stride of each axis (indexed by axis, not by position) of `box` stored
// densely in `order`.
std::array<std::int64_t, 3> strides_of(const Box3& box, const Order3& order);

// Visits every point of `box` in the order used for messages from a sender that
// stores in `src_order` to a receiver that stores in `dst_order`: along the
// sender's order when both have the same fastest axis, else tiled in the plane of
// the two fastest axes (tiles of `tile` x `tile`) so both sides touch memory in
// cache-sized blocks. Both sides of a message compute the same sequence.
template <class F>
void for_each_in_message_order(const Box3& box, const Order3& src_order, const Order3& dst_order, F&& f,
                               int tile = 16);

// Every rank's two ends of one remap: its input box and storage order, its output box
// and order (empty boxes normalised to hi = lo), the boxes indexed once (BoxIndex) so
// that any rank's lists cost O(its partners + the points it moves). Pure: no MPI.
class RemapLayout {
 public:
  RemapLayout(std::vector<Box3> inboxes, std::vector<Order3> in_orders, std::vector<Box3> outboxes,
              std::vector<Order3> out_orders);

  int size() const { return in_.size(); }
  const Box3& inbox(int r) const { return in_.boxes()[r]; }
  const Box3& outbox(int r) const { return out_.boxes()[r]; }
  const Order3& in_order(int r) const { return in_order_[r]; }
  const Order3& out_order(int r) const { return out_order_[r]; }
  // Rank r's data stays where it is (same box and order): no partners, no self copy.
  bool identity(int r) const;
  // Every rank is an identity: the remap moves nothing anywhere.
  bool all_identity() const { return all_identity_; }
  const BoxIndex& in_index() const { return in_; }
  const BoxIndex& out_index() const { return out_; }

 private:
  BoxIndex in_, out_;
  std::vector<Order3> in_order_, out_order_;
  bool all_identity_ = true;
};

// The exchange lists of rank `me` for a remap (pure: what RemapPlan builds its
// ExchangePlan from, and what the tests check for virtual rank counts). Partners are
// found by box intersection and visited in ring order from me + 1 (so the self piece,
// kept apart, comes last); pack lists read `in_storage` (C order, holding the inbox:
// e.g. a brick with ghost layers; the inbox itself when equal) and unpack lists write
// the outbox in its order, so the permutation happens on unpack. Empty lists for an
// identity rank. `examined` (optional) is increased by the candidate boxes looked at.
ExchangeLists remap_lists(const RemapLayout& layout, int me, const Box3& in_storage,
                          std::int64_t* examined = nullptr);

// A remap plan of this rank: its lists from remap_lists over every rank's boxes
// (gathered once by the caller), and the ExchangePlan built from them (collective
// over `comm`: the plan's own check).
//
// The caller guarantees that the input boxes tile the same index set as the output
// boxes (the FFTs check tilings collectively before building remaps).
//
// `in_storage`: the input array holds this box (C order), of which the inbox is a
// part, e.g. a brick with ghost layers; the pack lists then index that array and
// the reverse direction writes only the inbox's elements of it. Requires
// in_order = kCOrder. Absent: the input array is the inbox itself.
class RemapPlan {
 public:
  RemapPlan(MPI_Comm comm, const RemapLayout& layout, const std::optional<Box3>& in_storage = std::nullopt);

  const Box3& inbox() const { return inbox_; }
  const Box3& outbox() const { return outbox_; }
  const Order3& in_order() const { return in_order_; }
  const Order3& out_order() const { return out_order_; }
  const Box3& in_storage() const { return in_storage_; }

  // This rank's data stays where it is (same box, same order, no partners). Its
  // exchange plan then has no self piece: do not execute it, or pass src == dst.
  bool identity() const { return identity_; }
  // Every rank is an identity: no exchange plan was built (exchange() is null).
  bool all_identity() const { return all_identity_; }
  std::shared_ptr<const ExchangePlan> exchange() const { return exchange_; }

 private:
  Box3 inbox_, outbox_, in_storage_;
  Order3 in_order_, out_order_;
  bool identity_ = false, all_identity_ = false;
  std::shared_ptr<const ExchangePlan> exchange_;
};

// ---------------------------------------------------------------------------

template <class F>
void for_each_in_message_order(const Box3& box, const Order3& so, const Order3& dord, F&& f, int tile) {
  if (box.empty()) return;
  const int fs = so[2], fd = dord[2];
  if (fs == fd) {
    const int a = so[0], b = so[1], c = so[2];
    Int3 p;
    for (p[a] = box.lo[a]; p[a] < box.hi[a]; ++p[a])
      for (p[b] = box.lo[b]; p[b] < box.hi[b]; ++p[b])
        for (p[c] = box.lo[c]; p[c] < box.hi[c]; ++p[c]) f(p);
    return;
  }
  const int t = 3 - fs - fd;
  Int3 p;
  for (p[t] = box.lo[t]; p[t] < box.hi[t]; ++p[t])
    for (int d0 = box.lo[fd]; d0 < box.hi[fd]; d0 += tile)
      for (int s0 = box.lo[fs]; s0 < box.hi[fs]; s0 += tile) {
        const int d1 = std::min(d0 + tile, box.hi[fd]), s1 = std::min(s0 + tile, box.hi[fs]);
        for (p[fd] = d0; p[fd] < d1; ++p[fd])
          for (p[fs] = s0; p[fs] < s1; ++p[fs]) f(p);
      }
}

}  // namespace fft
}  // namespace pmewald
