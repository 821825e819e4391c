#include "realspace/migration.hpp"

#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>
#include <unordered_map>

#include "comm/mpi_helpers.hpp"
#include "comm/tags.hpp"
#include "geometry/decomposition.hpp"
#include "base/errors.hpp"

namespace pmewald {
inline namespace realspace {

namespace {

struct MigrationRecord {
  double s[3];
  double r[3];
  double q;
  std::int64_t id;
  std::int64_t origin_index;
  std::int32_t origin_rank;
  std::int32_t pad;
};

struct GhostRecord {
  double s[3];
  double r[3];
  double q;
  std::int64_t id;
  std::int64_t key;  // the original's owned key (Migration::owned_key)
};

template <class V>
void ensure_rows(V& v, std::size_t n, const char* label) {
  if (v.extent(0) != n) v = V(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), n);
}
template <class V>
void ensure_rows3(V& v, std::size_t n, const char* label) {
  if (v.extent(0) != n) v = V(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), n, 3);
}

}  // namespace

// ---------------------------------------------------------------------------
// Migration
// ---------------------------------------------------------------------------

Migration::Migration(MPI_Comm comm)
    : comm_(comm), nbx_forward_(comm, tags::kMigrationForward), near_forward_(comm, tags::kMigrationAdjacent),
      near_ghost_(comm, tags::kGhostAtoms) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

void Migration::set_geometry(const PeriodicCell& cell, const Int3& mesh) {
  for (int d = 0; d < 3; ++d)
    if (mesh[d] < 1) throw ValueError("mesh sizes must be positive");
  cell_ = cell;
  if (!(mesh_ == mesh)) {
    mesh_ = mesh;
    grid_ = processor_grid_3d(size_, mesh_);
    brick_ = brick_box(grid_, mesh_, rank_);
    adjacent_ = brick_neighborhood(grid_, mesh_, rank_, {0.0, 0.0, 0.0});
    near_forward_.set_partners(adjacent_.send, adjacent_.recv);
    for (double& r : ghost_reach_) r = -1;
  }
  have_geometry_ = true;
  have_atoms_ = false;
}

int Migration::grid_coord_of(int d, int m) const {
  // split_range(K, p, g) = [g*K/p, (g+1)*K/p): g owns m iff floor(g*K/p) <= m,
  // i.e. g*K < (m+1)*p; the largest such g.
  const std::int64_t p = grid_[d], K = mesh_[d];
  return static_cast<int>(((static_cast<std::int64_t>(m) + 1) * p - 1) / K);
}

int Migration::owner_of(const double s[3]) const {
  int g[3];
  for (int d = 0; d < 3; ++d) {
    int m = static_cast<int>(std::floor(mesh_[d] * s[d]));
    m = std::min(std::max(m, 0), mesh_[d] - 1);
    g[d] = grid_coord_of(d, m);
  }
  return g[0] + grid_[0] * (g[1] + grid_[1] * g[2]);
}

void Migration::wrap(const double r[3], double s_out[3], double r_out[3]) const {
  double n[3];
  for (int d = 0; d < 3; ++d) {
    const double s = r[0] * cell_.recip[0][d] + r[1] * cell_.recip[1][d] + r[2] * cell_.recip[2][d];
    n[d] = std::floor(s);
    double w = s - n[d];
    if (w >= 1.0) {  // s just below an integer, rounded up
      w = 0.0;
      n[d] += 1.0;
    }
    if (w < 0.0) w = 0.0;
    s_out[d] = w;
  }
  for (int a = 0; a < 3; ++a)
    r_out[a] = r[a] - (n[0] * cell_.box[0][a] + n[1] * cell_.box[1][a] + n[2] * cell_.box[2][a]);
}

void Migration::forward(const double* positions, const double* charges, const std::int64_t* ids,
                        std::size_t n_local, const std::int64_t* payload_offsets,
                        const std::int64_t* payload, int vote) {
  if (!have_geometry_) throw std::logic_error("Migration::forward before set_geometry");
  std::string err;
  for (std::size_t i = 0; i < n_local && err.empty(); ++i) {
    for (int a = 0; a < 3; ++a)
      if (!std::isfinite(positions[3 * i + a])) {
        err = "positions[" + std::to_string(i) + "] is not finite";
        break;
      }
    if (err.empty() && !std::isfinite(charges[i]))
      err = "charges[" + std::to_string(i) + "] is not finite";
  }
  auto pay_count = [&](std::size_t i) -> std::int64_t {
    return payload_offsets ? payload_offsets[i + 1] - payload_offsets[i] : 0;
  };

  // Plan: group local atoms by owner.
  n_local_ = n_local;
  send_dests_.clear();
  self_idx_.clear();
  std::unordered_map<int, int> slot_of;
  std::vector<int> owner(n_local);
  std::vector<double> sw(3 * n_local), rw(3 * n_local);
  int far = 0;  // some atom goes beyond the adjacent domains
  for (std::size_t i = 0; i < n_local && err.empty(); ++i) {
    wrap(positions + 3 * i, &sw[3 * i], &rw[3 * i]);
    owner[i] = owner_of(&sw[3 * i]);
    if (owner[i] == rank_) {
      self_idx_.push_back(static_cast<std::int64_t>(i));
    } else if (slot_of.emplace(owner[i], static_cast<int>(send_dests_.size())).second) {
      send_dests_.push_back(owner[i]);
      if (!std::binary_search(adjacent_.send.begin(), adjacent_.send.end(), owner[i])) far = 1;
    }
  }
  // One collective decides everything: bad input anywhere (then every rank
  // raises), whether any atom changes rank, whether all stay adjacent, and the
  // caller's vote.
  int flags[4] = {err.empty() ? 0 : 1, send_dests_.empty() ? 0 : 1, far, vote};
  int any[4] = {0, 0, 0, 0};
  check_mpi(MPI_Allreduce(flags, any, 4, MPI_INT, MPI_MAX, comm_), "MPI_Allreduce");
  if (any[0]) agree_or_throw(comm_, err);
  agreed_vote_ = any[3];
  forward_path_ = !any[1] ? ForwardPath::None : (any[2] ? ForwardPath::Sparse : ForwardPath::Neighbors);
  const std::size_t nd = send_dests_.size();
  send_idx_.resize(nd);
  if (sendbufs_.size() < nd) sendbufs_.resize(nd);
  for (std::size_t k = 0; k < nd; ++k) send_idx_[k].clear();
  for (std::size_t i = 0; i < n_local; ++i)
    if (owner[i] != rank_) send_idx_[static_cast<std::size_t>(slot_of[owner[i]])].push_back(static_cast<std::int64_t>(i));
  auto make_record = [&](std::size_t i) {
    MigrationRecord rec{};
    for (int a = 0; a < 3; ++a) {
      rec.s[a] = sw[3 * i + a];
      rec.r[a] = rw[3 * i + a];
    }
    rec.q = charges[i];
    rec.id = ids[i];
    rec.origin_index = static_cast<std::int64_t>(i);
    rec.origin_rank = rank_;
    return rec;
  };
  // Message: [count][records][payload count per record][payload values].
  for (std::size_t k = 0; k < nd; ++k) {
    auto& buf = sendbufs_[k];
    buf.clear();
    append_bytes(buf, static_cast<std::int64_t>(send_idx_[k].size()));
    for (const std::int64_t i : send_idx_[k]) append_bytes(buf, make_record(static_cast<std::size_t>(i)));
    for (const std::int64_t i : send_idx_[k]) append_bytes(buf, pay_count(static_cast<std::size_t>(i)));
    if (payload_offsets)
      for (const std::int64_t i : send_idx_[k])
        for (std::int64_t p = payload_offsets[i]; p < payload_offsets[i + 1]; ++p) append_bytes(buf, payload[p]);
  }

  switch (forward_path_) {
    case ForwardPath::None:
      srcs_.clear();
      recvbufs_.clear();
      break;
    case ForwardPath::Neighbors: {
      const auto m0 = near_forward_.messages_sent(), b0 = near_forward_.bytes_sent();
      near_forward_.exchange(send_dests_, sendbufs_, srcs_, recvbufs_);
      migration_traffic_.messages += near_forward_.messages_sent() - m0;
      migration_traffic_.bytes += near_forward_.bytes_sent() - b0;
      break;
    }
    case ForwardPath::Sparse:
      nbx_forward_.exchange(send_dests_, sendbufs_, srcs_, recvbufs_);
      migration_traffic_.messages += static_cast<std::int64_t>(nd);
      for (std::size_t k = 0; k < nd; ++k) migration_traffic_.bytes += static_cast<std::int64_t>(sendbufs_[k].size());
      break;
  }

  // Gather everything this rank now owns; remember where each came from.
  struct Incoming {
    MigrationRecord rec;
    int msg;          // -1: kept locally; else index into recv_srcs_
    std::int64_t at;  // position within that message / self list
    std::int64_t pay_begin, pay_count;  // into pay_flat
  };
  std::vector<Incoming> all;
  std::vector<std::int64_t> pay_flat;
  all.reserve(self_idx_.size());
  for (std::size_t j = 0; j < self_idx_.size(); ++j) {
    const std::size_t i = static_cast<std::size_t>(self_idx_[j]);
    const std::int64_t pb = static_cast<std::int64_t>(pay_flat.size());
    if (payload_offsets)
      pay_flat.insert(pay_flat.end(), payload + payload_offsets[i], payload + payload_offsets[i + 1]);
    all.push_back({make_record(i), -1, static_cast<std::int64_t>(j), pb, pay_count(i)});
  }
  recv_srcs_.clear();
  for (std::size_t k = 0; k < srcs_.size(); ++k) {
    const int msg = static_cast<int>(recv_srcs_.size());
    recv_srcs_.push_back(srcs_[k]);
    const auto& buf = recvbufs_[k];
    const std::size_t n = static_cast<std::size_t>(read_record<std::int64_t>(buf, 0));
    const char* p = buf.data() + sizeof(std::int64_t);
    const char* counts = p + n * sizeof(MigrationRecord);
    const char* values = counts + n * sizeof(std::int64_t);
    for (std::size_t j = 0; j < n; ++j) {
      MigrationRecord rec;
      std::memcpy(&rec, p + j * sizeof(MigrationRecord), sizeof(rec));
      std::int64_t c;
      std::memcpy(&c, counts + j * sizeof(std::int64_t), sizeof(c));
      const std::int64_t pb = static_cast<std::int64_t>(pay_flat.size());
      const std::size_t old = pay_flat.size();
      pay_flat.resize(old + static_cast<std::size_t>(c));
      if (c > 0) std::memcpy(pay_flat.data() + old, values, static_cast<std::size_t>(c) * sizeof(std::int64_t));
      values += static_cast<std::size_t>(c) * sizeof(std::int64_t);
      all.push_back({rec, msg, static_cast<std::int64_t>(j), pb, c});
    }
  }
  std::vector<std::size_t> order(all.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  const auto before = [&all](std::size_t x, std::size_t y) {
    const auto& a = all[x].rec;
    const auto& b = all[y].rec;
    if (a.id != b.id) return a.id < b.id;
    if (a.origin_rank != b.origin_rank) return a.origin_rank < b.origin_rank;
    return a.origin_index < b.origin_index;
  };
  // Often already in order (one rank, or atoms passed sorted by id): O(N) check first.
  if (!std::is_sorted(order.begin(), order.end(), before)) std::sort(order.begin(), order.end(), before);

  n_owned_ = all.size();
  ensure_rows3(own_r_, n_owned_, "owned_positions");
  ensure_rows3(own_s_, n_owned_, "owned_fractional");
  ensure_rows(own_q_, n_owned_, "owned_charges");
  ensure_rows(own_id_, n_owned_, "owned_ids");
  own_origin_rank_.resize(n_owned_);
  own_origin_index_.resize(n_owned_);
  own_pay_off_.assign(n_owned_ + 1, 0);
  own_pay_.clear();
  own_pay_.reserve(pay_flat.size());
  recv_slot_.resize(recv_srcs_.size());
  for (std::size_t k = 0; k < recv_srcs_.size(); ++k)
    recv_slot_[k].assign(static_cast<std::size_t>(read_record<std::int64_t>(recvbufs_[k], 0)), 0);
  self_slot_.assign(self_idx_.size(), 0);
  for (std::size_t slot = 0; slot < n_owned_; ++slot) {
    const Incoming& in = all[order[slot]];
    for (int a = 0; a < 3; ++a) {
      own_r_(slot, a) = in.rec.r[a];
      own_s_(slot, a) = in.rec.s[a];
    }
    own_q_(slot) = in.rec.q;
    own_id_(slot) = in.rec.id;
    own_origin_rank_[slot] = in.rec.origin_rank;
    own_origin_index_[slot] = in.rec.origin_index;
    own_pay_.insert(own_pay_.end(), pay_flat.begin() + in.pay_begin,
                    pay_flat.begin() + in.pay_begin + in.pay_count);
    own_pay_off_[slot + 1] = static_cast<std::int64_t>(own_pay_.size());
    if (in.msg < 0)
      self_slot_[static_cast<std::size_t>(in.at)] = static_cast<std::int64_t>(slot);
    else
      recv_slot_[static_cast<std::size_t>(in.msg)][static_cast<std::size_t>(in.at)] =
          static_cast<std::int64_t>(slot);
  }
  have_atoms_ = true;
  have_ghosts_ = false;
  ++generation_;
  n_ghost_ = 0;
}

void Migration::reverse(const double* owned_values, int ncomp, double* local_out) {
  if (!have_atoms_) throw std::logic_error("Migration::reverse before forward");
  // What I sent out comes back; what I received goes home.
  move_rows(owned_values, ncomp, local_out, tags::kMigrationReverse, recv_srcs_, recv_slot_, send_dests_,
            send_idx_, self_slot_, self_idx_);
}

void Migration::route(const double* local_values, int ncomp, double* owned_out) {
  if (!have_atoms_) throw std::logic_error("Migration::route before forward");
  move_rows(local_values, ncomp, owned_out, tags::kMigrationRoute, send_dests_, send_idx_, recv_srcs_,
            recv_slot_, self_idx_, self_slot_);
}

void Migration::move_rows(const double* in, int ncomp, double* out, int tag, const std::vector<int>& to,
                          const std::vector<std::vector<std::int64_t>>& to_rows, const std::vector<int>& from,
                          const std::vector<std::vector<std::int64_t>>& from_rows,
                          const std::vector<std::int64_t>& self_in, const std::vector<std::int64_t>& self_out) {
  const std::size_t nc = static_cast<std::size_t>(ncomp);
  std::size_t nrecv = 0, nsend = 0;
  for (const auto& v : from_rows) nrecv += v.size();
  for (const auto& v : to_rows) nsend += v.size();
  rbuf_.resize(nrecv * nc);
  sbuf_.resize(nsend * nc);
  reqs_.clear();
  std::size_t off = 0;
  for (std::size_t k = 0; k < from.size(); ++k) {
    reqs_.emplace_back();
    check_mpi(MPI_Irecv(rbuf_.data() + off, static_cast<int>(from_rows[k].size() * nc), MPI_DOUBLE, from[k], tag,
                        comm_, &reqs_.back()),
              "MPI_Irecv");
    off += from_rows[k].size() * nc;
  }
  off = 0;
  for (std::size_t k = 0; k < to.size(); ++k) {
    double* p = sbuf_.data() + off;
    for (std::size_t j = 0; j < to_rows[k].size(); ++j)
      for (std::size_t c = 0; c < nc; ++c) p[j * nc + c] = in[static_cast<std::size_t>(to_rows[k][j]) * nc + c];
    reqs_.emplace_back();
    check_mpi(MPI_Isend(p, static_cast<int>(to_rows[k].size() * nc), MPI_DOUBLE, to[k], tag, comm_, &reqs_.back()),
              "MPI_Isend");
    migration_traffic_.messages += 1;
    migration_traffic_.bytes += static_cast<std::int64_t>(to_rows[k].size() * nc * sizeof(double));
    off += to_rows[k].size() * nc;
  }
  for (std::size_t j = 0; j < self_in.size(); ++j)
    for (std::size_t c = 0; c < nc; ++c)
      out[static_cast<std::size_t>(self_out[j]) * nc + c] = in[static_cast<std::size_t>(self_in[j]) * nc + c];
  if (!reqs_.empty())
    check_mpi(MPI_Waitall(static_cast<int>(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
  off = 0;
  for (std::size_t k = 0; k < from.size(); ++k) {
    for (std::size_t j = 0; j < from_rows[k].size(); ++j)
      for (std::size_t c = 0; c < nc; ++c)
        out[static_cast<std::size_t>(from_rows[k][j]) * nc + c] = rbuf_[off + j * nc + c];
    off += from_rows[k].size() * nc;
  }
}

void Migration::exchange_ghosts(double cutoff) {
  if (!have_atoms_) throw std::logic_error("Migration::exchange_ghosts before forward");
  if (!(cutoff > 0) || !(cutoff <= 0.5 * cell_.min_height() * (1 + 1e-12)))
    throw ValueError("cutoff must be positive and at most half the smallest box height");
  for (int d = 0; d < 3; ++d) margin_[d] = cutoff / cell_.height[d] * (1.0 + 1e-9);
  // Partners: every non-empty domain within the margin (a pure function of the
  // decomposition, so senders and receivers agree without asking).
  if (margin_[0] * mesh_[0] != ghost_reach_[0] || margin_[1] * mesh_[1] != ghost_reach_[1] ||
      margin_[2] * mesh_[2] != ghost_reach_[2]) {
    for (int d = 0; d < 3; ++d) ghost_reach_[d] = margin_[d] * mesh_[d];
    Neighborhood nb = brick_neighborhood(grid_, mesh_, rank_, {ghost_reach_[0], ghost_reach_[1], ghost_reach_[2]});
    near_ghost_.set_partners(std::move(nb.send), std::move(nb.recv));
  }

  struct AxisHit {
    int g_lo, g_hi, shift;
  };
  std::vector<GhostRecord> self_images;
  std::unordered_map<int, int> slot_of;
  std::vector<int>& dests = ghost_dests_;
  dests.clear();
  ghost_self_idx_.clear();
  for (auto& b : sendbufs_) b.clear();
  for (auto& v : ghost_send_idx_) v.clear();
  std::size_t nbuf = 0;

  // Grid coordinate g of axis d owns no mesh point (more ranks than points).
  auto slab_empty = [&](int d, int g) {
    return static_cast<std::int64_t>(g) * mesh_[d] / grid_[d] == static_cast<std::int64_t>(g + 1) * mesh_[d] / grid_[d];
  };
  auto brick_empty = [&](int gx, int gy, int gz) { return slab_empty(0, gx) || slab_empty(1, gy) || slab_empty(2, gz); };
  AxisHit hits[3][8];
  int nhits[3];
  for (std::size_t i = 0; i < n_owned_; ++i) {
    for (int d = 0; d < 3; ++d) {
      nhits[d] = 0;
      const double s = own_s_(i, d), c = margin_[d];
      const int n_min = static_cast<int>(std::ceil(-s - c));
      const int n_max = static_cast<int>(std::ceil(1.0 + c - s)) - 1;
      for (int n = n_min; n <= n_max && nhits[d] < 8; ++n) {
        const double x = s + n;
        long long m_lo = static_cast<long long>(std::floor(mesh_[d] * (x - c)));
        long long m_hi = static_cast<long long>(std::floor(mesh_[d] * (x + c)));
        m_lo = std::max<long long>(m_lo, 0);
        m_hi = std::min<long long>(m_hi, mesh_[d] - 1);
        if (m_lo > m_hi) continue;
        hits[d][nhits[d]++] = {grid_coord_of(d, static_cast<int>(m_lo)),
                               grid_coord_of(d, static_cast<int>(m_hi)), n};
      }
    }
    GhostRecord rec{};
    rec.q = own_q_(i);
    rec.id = own_id_(i);
    rec.key = owned_key(i);
    for (int hz = 0; hz < nhits[2]; ++hz)
      for (int hy = 0; hy < nhits[1]; ++hy)
        for (int hx = 0; hx < nhits[0]; ++hx) {
          const AxisHit& X = hits[0][hx];
          const AxisHit& Y = hits[1][hy];
          const AxisHit& Z = hits[2][hz];
          const int sh[3] = {X.shift, Y.shift, Z.shift};
          for (int a = 0; a < 3; ++a) {
            rec.s[a] = own_s_(i, a) + sh[a];
            rec.r[a] = own_r_(i, a) + sh[0] * cell_.box[0][a] + sh[1] * cell_.box[1][a] +
                       sh[2] * cell_.box[2][a];
          }
          const bool identity = sh[0] == 0 && sh[1] == 0 && sh[2] == 0;
          for (int gz = Z.g_lo; gz <= Z.g_hi; ++gz)
            for (int gy = Y.g_lo; gy <= Y.g_hi; ++gy)
              for (int gx = X.g_lo; gx <= X.g_hi; ++gx) {
                const int dest = gx + grid_[0] * (gy + grid_[1] * gz);
                if (brick_empty(gx, gy, gz)) continue;  // owns nothing, needs no ghosts
                if (dest == rank_) {
                  if (!identity) {
                    self_images.push_back(rec);
                    ghost_self_idx_.push_back(static_cast<std::int64_t>(i));
                  }
                  continue;
                }
                auto it = slot_of.find(dest);
                int k;
                if (it == slot_of.end()) {
                  k = static_cast<int>(nbuf++);
                  slot_of.emplace(dest, k);
                  dests.push_back(dest);
                  if (sendbufs_.size() < nbuf) sendbufs_.emplace_back();
                  if (ghost_send_idx_.size() < nbuf) ghost_send_idx_.emplace_back();
                } else {
                  k = it->second;
                }
                append_bytes(sendbufs_[static_cast<std::size_t>(k)], rec);
                ghost_send_idx_[static_cast<std::size_t>(k)].push_back(static_cast<std::int64_t>(i));
              }
        }
  }
  // exchange() reads only the first dests.size() buffers; the rest keep their capacity.
  const auto m0 = near_ghost_.messages_sent(), b0 = near_ghost_.bytes_sent();
  near_ghost_.exchange(dests, sendbufs_, srcs_, recvbufs_);
  ghost_traffic_.messages += near_ghost_.messages_sent() - m0;
  ghost_traffic_.bytes += near_ghost_.bytes_sent() - b0;

  ghost_srcs_ = srcs_;
  ghost_recv_count_.clear();
  std::size_t n = self_images.size();
  for (const auto& b : recvbufs_) {
    ghost_recv_count_.push_back(record_count<GhostRecord>(b));
    n += ghost_recv_count_.back();
  }
  n_ghost_ = n;
  ensure_rows3(gh_r_, n, "ghost_positions");
  ensure_rows3(gh_s_, n, "ghost_fractional");
  ensure_rows(gh_q_, n, "ghost_charges");
  ensure_rows(gh_id_, n, "ghost_ids");
  ensure_rows(gh_key_, n, "ghost_keys");
  std::size_t at = 0;
  auto put = [&](const GhostRecord& g) {
    for (int a = 0; a < 3; ++a) {
      gh_r_(at, a) = g.r[a];
      gh_s_(at, a) = g.s[a];
    }
    gh_q_(at) = g.q;
    gh_id_(at) = g.id;
    gh_key_(at) = g.key;
    ++at;
  };
  for (const auto& g : self_images) put(g);
  have_ghosts_ = true;
  for (const auto& b : recvbufs_) {
    const std::size_t m = record_count<GhostRecord>(b);
    for (std::size_t j = 0; j < m; ++j) put(read_record<GhostRecord>(b, j));
  }
}

void Migration::reverse_ghosts(const double* ghost_values, double* owned_inout, int ncomp) {
  const std::size_t nc = static_cast<std::size_t>(ncomp);
  if (!have_ghosts_) throw std::logic_error("Migration::reverse_ghosts before exchange_ghosts");
  // The ghosts' senders receive exactly the records they sent (their counts
  // are known on both sides), so this is plain point-to-point.
  std::size_t nrecv = 0;
  for (std::size_t k = 0; k < ghost_dests_.size(); ++k) nrecv += ghost_send_idx_[k].size();
  rbuf_.resize(nc * nrecv);
  reqs_.clear();
  std::size_t off = 0;
  for (std::size_t k = 0; k < ghost_dests_.size(); ++k) {
    reqs_.emplace_back();
    check_mpi(MPI_Irecv(rbuf_.data() + off, static_cast<int>(nc * ghost_send_idx_[k].size()), MPI_DOUBLE,
                        ghost_dests_[k], tags::kGhostForces, comm_, &reqs_.back()),
              "MPI_Irecv");
    off += nc * ghost_send_idx_[k].size();
  }
  // Ghost order: this rank's own images first, then each source's records.
  const std::size_t n_self = ghost_self_idx_.size();
  off = nc * n_self;
  for (std::size_t k = 0; k < ghost_srcs_.size(); ++k) {
    reqs_.emplace_back();
    check_mpi(MPI_Isend(ghost_values + off, static_cast<int>(nc * ghost_recv_count_[k]), MPI_DOUBLE,
                        ghost_srcs_[k], tags::kGhostForces, comm_, &reqs_.back()),
              "MPI_Isend");
    ghost_traffic_.messages += 1;
    ghost_traffic_.bytes += static_cast<std::int64_t>(nc * ghost_recv_count_[k] * sizeof(double));
    off += nc * ghost_recv_count_[k];
  }
  for (std::size_t g = 0; g < n_self; ++g)
    for (std::size_t c = 0; c < nc; ++c)
      owned_inout[nc * static_cast<std::size_t>(ghost_self_idx_[g]) + c] += ghost_values[nc * g + c];
  if (!reqs_.empty())
    check_mpi(MPI_Waitall(static_cast<int>(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
  off = 0;
  for (std::size_t k = 0; k < ghost_dests_.size(); ++k)
    for (const std::int64_t i : ghost_send_idx_[k]) {
      for (std::size_t c = 0; c < nc; ++c) owned_inout[nc * static_cast<std::size_t>(i) + c] += rbuf_[off + c];
      off += nc;
    }
}

void Migration::route_ghosts(const double* owned_values, int ncomp, double* ghost_out) {
  if (!have_ghosts_) throw std::logic_error("Migration::route_ghosts before exchange_ghosts");
  const std::size_t nc = static_cast<std::size_t>(ncomp);
  std::size_t nsend = 0;
  for (std::size_t k = 0; k < ghost_dests_.size(); ++k) nsend += ghost_send_idx_[k].size();
  sbuf_.resize(nc * nsend);
  reqs_.clear();
  // Ghost order: this rank's own images first, then each source's records.
  const std::size_t n_self = ghost_self_idx_.size();
  std::size_t off = nc * n_self;
  for (std::size_t k = 0; k < ghost_srcs_.size(); ++k) {
    reqs_.emplace_back();
    check_mpi(MPI_Irecv(ghost_out + off, static_cast<int>(nc * ghost_recv_count_[k]), MPI_DOUBLE, ghost_srcs_[k],
                        tags::kGhostRoute, comm_, &reqs_.back()),
              "MPI_Irecv");
    off += nc * ghost_recv_count_[k];
  }
  off = 0;
  for (std::size_t k = 0; k < ghost_dests_.size(); ++k) {
    double* p = sbuf_.data() + off;
    for (std::size_t j = 0; j < ghost_send_idx_[k].size(); ++j)
      for (std::size_t c = 0; c < nc; ++c)
        p[j * nc + c] = owned_values[static_cast<std::size_t>(ghost_send_idx_[k][j]) * nc + c];
    reqs_.emplace_back();
    check_mpi(MPI_Isend(p, static_cast<int>(nc * ghost_send_idx_[k].size()), MPI_DOUBLE, ghost_dests_[k],
                        tags::kGhostRoute, comm_, &reqs_.back()),
              "MPI_Isend");
    ghost_traffic_.messages += 1;
    ghost_traffic_.bytes += static_cast<std::int64_t>(nc * ghost_send_idx_[k].size() * sizeof(double));
    off += nc * ghost_send_idx_[k].size();
  }
  for (std::size_t g = 0; g < n_self; ++g)
    for (std::size_t c = 0; c < nc; ++c)
      ghost_out[nc * g + c] = owned_values[nc * static_cast<std::size_t>(ghost_self_idx_[g]) + c];
  if (!reqs_.empty())
    check_mpi(MPI_Waitall(static_cast<int>(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
}

}  // namespace realspace
}  // namespace pmewald
