#include "fft/remap.hpp"

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

// Per-rank record: inbox lo/hi, outbox lo/hi (12 ints), then in and out orders (6).
constexpr int kRecordInts = 12;

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

}  // namespace

RemapPlan::RemapPlan(MPI_Comm comm, const Box3& inbox, const Box3& outbox, const Order3& out_order,
                     const Order3& in_order, const std::optional<Box3>& in_storage)
    : inbox_(inbox), outbox_(outbox), in_storage_(in_storage.value_or(inbox)), in_order_(in_order),
      out_order_(out_order) {
  int me = 0, P = 1;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &P);
  std::string err;
  if (!valid_order(in_order) || !valid_order(out_order)) err = "remap: storage order must be a permutation of (0, 1, 2)";
  if (inbox.volume() > INT32_MAX || outbox.volume() > INT32_MAX || in_storage_.volume() > INT32_MAX)
    err = "remap: box too large for 32-bit indices";
  if (in_storage && !contains(*in_storage, inbox)) err = "remap: the input storage box does not contain the inbox";
  if (in_storage && in_order != kCOrder) err = "remap: an input storage box needs C order";
  agree_or_throw(comm, err);
  // Normalise empty boxes so that every rank sees the same (lo = hi) shape.
  if (inbox_.empty()) inbox_.hi = inbox_.lo;
  if (outbox_.empty()) outbox_.hi = outbox_.lo;
  if (!in_storage) in_storage_ = inbox_;

  constexpr int R = kRecordInts + 6;
  std::array<int, R> rec{};
  for (int d = 0; d < 3; ++d) {
    rec[d] = inbox_.lo[d];
    rec[3 + d] = inbox_.hi[d];
    rec[6 + d] = outbox_.lo[d];
    rec[9 + d] = outbox_.hi[d];
    rec[12 + d] = in_order_[d];
    rec[15 + d] = out_order_[d];
  }
  std::vector<int> all(static_cast<size_t>(R) * P);
  check_mpi(MPI_Allgather(rec.data(), R, MPI_INT, all.data(), R, MPI_INT, comm), "MPI_Allgather");
  auto box_at = [&](int r, int off) {
    Box3 b;
    for (int d = 0; d < 3; ++d) {
      b.lo[d] = all[static_cast<size_t>(r) * R + off + d];
      b.hi[d] = all[static_cast<size_t>(r) * R + off + 3 + d];
    }
    return b;
  };
  auto order_at = [&](int r, int off) {
    return Order3{all[static_cast<size_t>(r) * R + off], all[static_cast<size_t>(r) * R + off + 1],
                  all[static_cast<size_t>(r) * R + off + 2]};
  };

  auto local_identity = [&](int r) {
    const Box3 a = box_at(r, 0), b = box_at(r, 6);
    return a == b && (a.empty() || order_at(r, 12) == order_at(r, 15));
  };
  identity_ = local_identity(me);
  all_identity_ = true;
  for (int r = 0; r < P; ++r) all_identity_ = all_identity_ && local_identity(r);
  if (all_identity_) return;

  ExchangeLists L;
  L.src_size = in_storage_.volume();
  L.dst_size = outbox_.volume();
  if (!identity_) {
    // Ring order from rank+1; the self piece (k = P) comes last.
    for (int k = 1; k <= P; ++k) {
      const int r = (me + k) % P;
      // What I send to r: my input inside r's output, in my storage, ordered for (me -> r).
      const Box3 out_r = box_at(r, 6);
      const Box3 s = intersect(inbox_, out_r);
      // What I receive from r: r's input inside my output, in my output storage, ordered for (r -> me).
      const Box3 in_r = box_at(r, 0);
      const Box3 q = intersect(in_r, outbox_);
      if (r == me) {
        if (!s.empty()) {
          L.self_src = indices_of(s, in_storage_, in_order_, in_order_, out_order_);
          L.self_dst = indices_of(s, outbox_, out_order_, in_order_, out_order_);
        }
        continue;
      }
      if (!s.empty()) {
        L.send_ranks.push_back(r);
        L.send_indices.push_back(indices_of(s, in_storage_, in_order_, in_order_, order_at(r, 15)));
      }
      if (!q.empty()) {
        L.recv_ranks.push_back(r);
        L.recv_indices.push_back(indices_of(q, outbox_, out_order_, order_at(r, 12), out_order_));
      }
    }
  }
  exchange_ = std::make_shared<const ExchangePlan>(comm, std::move(L));
}

}  // namespace fft
}  // namespace pmewald
