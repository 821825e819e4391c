// Migration's ghost atoms (migration.hpp): the periodic images of every owned
// atom that another domain (or this one, shifted) needs within the cutoff, their
// exchange with the known neighbours, and the ghosts' values back to the owners
// (reverse_ghosts) or out to the ghosts (route_ghosts). Threaded where the work
// is per atom, each list in the one-thread order.
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "base/errors.hpp"
#include "comm/tags.hpp"
#include "comm/mpi_helpers.hpp"
#include "particles/migration.hpp"
#include "particles/migration_rows.hpp"

namespace pmewald {
inline namespace particles {

using detail::ensure_rows;
using detail::ensure_rows3;

using detail::GhostRecord;

void Migration::exchange_ghosts(double cutoff) {
  if (!have_atoms_) throw std::logic_error("Migration::exchange_ghosts before forward");
  ghost_geometry(cutoff);
  if (ghost_exchange_ == GhostExchange::Staged) {
    const auto m0 = staged_.messages_sent(), b0 = staged_.bytes_sent();
    staged_.build(*this);
    ghost_traffic_.messages += staged_.messages_sent() - m0;
    ghost_traffic_.bytes += staged_.bytes_sent() - b0;
    ghost_rows_from(staged_.records().data(), staged_.records().size());
    have_ghosts_ = true;
    return;
  }
  const int n_remote = ghost_images();
  ghost_messages(n_remote);
  // exchange() reads only the first dests.size() buffers; the rest keep their capacity.
  const auto m0 = near_ghost_.messages_sent(), b0 = near_ghost_.bytes_sent();
  near_ghost_.exchange(ghost_dests_, sendbufs_, srcs_, recvbufs_);
  ghost_traffic_.messages += near_ghost_.messages_sent() - m0;
  ghost_traffic_.bytes += near_ghost_.bytes_sent() - b0;
  ghost_rows(n_remote);
  have_ghosts_ = true;
}

void Migration::ghost_geometry(double cutoff) {
  if (!(cutoff > 0) || !(cutoff <= 0.5 * cell_.min_height() * (1 + 1e-12)))
    throw ValueError("cutoff must be positive and at most half the smallest box height");
  for (int d = 0; d < 3; ++d) margin_[d] = cutoff / cell_.height[d] * (1.0 + 1e-9);
  // Partners: every non-empty domain within the margin (a pure function of the
  // decomposition, so senders and receivers agree without asking).
  if (margin_[0] * mesh_[0] != ghost_reach_[0] || margin_[1] * mesh_[1] != ghost_reach_[1] ||
      margin_[2] * mesh_[2] != ghost_reach_[2]) {
    for (int d = 0; d < 3; ++d) ghost_reach_[d] = margin_[d] * mesh_[d];
    Neighborhood nb = domain_neighborhood(domains_, rank_, {ghost_reach_[0], ghost_reach_[1], ghost_reach_[2]});
    near_ghost_.set_partners(std::move(nb.send), std::move(nb.recv));
  }
}

template <class Emit>
void Migration::images_of(std::size_t i, Emit&& emit) const {
  struct AxisHit {
    int g_lo, g_hi, shift;
  };
  // Grid coordinate g of axis d owns no mesh point (more ranks than points).
  auto slab_empty = [this](int d, int g) { return domains_.empty(d, g); };
  AxisHit hits[3][8];
  int nhits[3];
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
      hits[d][nhits[d]++] = {grid_coord_of(d, static_cast<int>(m_lo)), grid_coord_of(d, static_cast<int>(m_hi)), n};
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
          rec.r[a] = own_r_(i, a) + sh[0] * cell_.box[0][a] + sh[1] * cell_.box[1][a] + sh[2] * cell_.box[2][a];
        }
        const bool identity = sh[0] == 0 && sh[1] == 0 && sh[2] == 0;
        for (int gz = Z.g_lo; gz <= Z.g_hi; ++gz)
          for (int gy = Y.g_lo; gy <= Y.g_hi; ++gy)
            for (int gx = X.g_lo; gx <= X.g_hi; ++gx) {
              if (slab_empty(0, gx) || slab_empty(1, gy) || slab_empty(2, gz)) continue;  // needs no ghosts
              const int dest = gx + grid_[0] * (gy + grid_[1] * gz);
              if (dest == rank_ && identity) continue;
              emit(dest, rec);
            }
      }
}

int Migration::ghost_images() {
  // Threaded in two passes over the owned atoms (count, then write at each
  // atom's offset), so the images come out in the serial order: the order of
  // every list below is independent of the threads.
  const std::size_t n_own = n_owned_;
  gh_count_.resize(n_own + 1);
  std::int64_t* const count = gh_count_.data();
  Kokkos::parallel_for("pmewald::ghost_count", Range(0, n_own), [=](const std::size_t i) {
    std::int64_t c = 0;
    images_of(i, [&c](int, const GhostRecord&) { ++c; });
    count[i] = c;
  });
  std::int64_t total = 0;
  for (std::size_t i = 0; i < n_own; ++i) {
    const std::int64_t c = count[i];
    count[i] = total;
    total += c;
  }
  count[n_own] = total;
  gh_ent_dest_.resize(static_cast<std::size_t>(total));
  gh_ent_idx_.resize(static_cast<std::size_t>(total));
  gh_ent_rec_.resize(static_cast<std::size_t>(total) * sizeof(GhostRecord));
  int* const ent_dest = gh_ent_dest_.data();
  std::int64_t* const ent_idx = gh_ent_idx_.data();
  char* const ent_rec = gh_ent_rec_.data();
  const int me = rank_;
  int n_remote = 0;
  parallel_reduce_locked(
      "pmewald::ghost_images", Range(0, n_own),
      [=](const std::size_t i, int& remote) {
        std::int64_t e = count[i];
        images_of(i, [&](int dest, const GhostRecord& rec) {
          ent_dest[e] = dest;
          ent_idx[e] = static_cast<std::int64_t>(i);
          std::memcpy(ent_rec + e * sizeof(GhostRecord), &rec, sizeof(rec));
          remote += dest != me ? 1 : 0;
          ++e;
        });
      },
      n_remote);
  return n_remote;
}

void Migration::ghost_messages(int n_remote) {
  // The images kept here (in image order) and one message per destination
  // (destinations in order of first appearance, records in image order).
  const std::int64_t total = gh_count_.back();
  std::vector<int>& dests = ghost_dests_;
  dests.clear();
  ghost_self_idx_.clear();
  gh_self_ent_.clear();
  for (auto& b : sendbufs_) b.clear();
  for (auto& v : ghost_send_idx_) v.clear();
  if (n_remote == 0) {
    ghost_self_idx_.assign(gh_ent_idx_.begin(), gh_ent_idx_.end());
    return;
  }
  std::unordered_map<int, int> slot_of;
  for (std::int64_t e = 0; e < total; ++e) {
    const int dest = gh_ent_dest_[e];
    if (dest == rank_) {
      gh_self_ent_.push_back(e);
      ghost_self_idx_.push_back(gh_ent_idx_[e]);
      continue;
    }
    auto it = slot_of.find(dest);
    std::size_t k;
    if (it == slot_of.end()) {
      k = dests.size();
      slot_of.emplace(dest, static_cast<int>(k));
      dests.push_back(dest);
      if (sendbufs_.size() < dests.size()) sendbufs_.emplace_back();
      if (ghost_send_idx_.size() < dests.size()) ghost_send_idx_.emplace_back();
    } else {
      k = static_cast<std::size_t>(it->second);
    }
    const char* const rec = gh_ent_rec_.data() + e * sizeof(GhostRecord);
    sendbufs_[k].insert(sendbufs_[k].end(), rec, rec + sizeof(GhostRecord));
    ghost_send_idx_[k].push_back(gh_ent_idx_[e]);
  }
}

void Migration::ghost_rows(int n_remote) {
  // Ghost order: this rank's own images first, then each source's records.
  ghost_srcs_ = srcs_;
  ghost_recv_count_.clear();
  const std::size_t n_self = ghost_self_idx_.size();
  std::size_t n = n_self;
  for (const auto& b : recvbufs_) {
    ghost_recv_count_.push_back(record_count<GhostRecord>(b));
    n += ghost_recv_count_.back();
  }
  const GhostRows put = ghost_views(n);
  const char* const ent_rec = gh_ent_rec_.data();
  const std::int64_t* const self_ent = gh_self_ent_.data();
  const bool all_self = n_remote == 0;
  Kokkos::parallel_for("pmewald::ghost_rows_self", Range(0, n_self), [=](const std::size_t j) {
    const std::int64_t e = all_self ? static_cast<std::int64_t>(j) : self_ent[j];
    put(j, ent_rec + e * sizeof(GhostRecord));
  });
  std::size_t at = n_self;
  for (const auto& b : recvbufs_) {
    const std::size_t m = record_count<GhostRecord>(b);
    const char* const base = b.data();
    Kokkos::parallel_for("pmewald::ghost_rows_received", Range(0, m),
                         [=](const std::size_t j) { put(at + j, base + j * sizeof(GhostRecord)); });
    at += m;
  }
}

void Migration::ghost_rows_from(const GhostRecord* records, std::size_t n) {
  const GhostRows put = ghost_views(n);
  Kokkos::parallel_for("pmewald::ghost_rows_staged", Range(0, n), [=](const std::size_t j) {
    put(j, reinterpret_cast<const char*>(records + j));
  });
}

Migration::GhostRows Migration::ghost_views(std::size_t n) {
  n_ghost_ = n;
  ensure_rows3(gh_r_, n, "ghost_positions");
  ensure_rows3(gh_s_, n, "ghost_fractional");
  ensure_rows(gh_q_, n, "ghost_charges");
  ensure_rows(gh_id_, n, "ghost_ids");
  ensure_rows(gh_key_, n, "ghost_keys");
  return GhostRows{gh_r_, gh_s_, gh_q_, gh_id_, gh_key_};
}

void Migration::GhostRows::operator()(std::size_t at, const char* src) const {
  GhostRecord g;
  std::memcpy(&g, src, sizeof(g));  // (records in receive buffers may be unaligned)
  for (int a = 0; a < 3; ++a) {
    r(at, a) = g.r[a];
    s(at, a) = g.s[a];
  }
  q(at) = g.q;
  id(at) = g.id;
  key(at) = g.key;
}

void Migration::reverse_ghosts(const double* ghost_values, double* owned_inout, int ncomp) {
  const std::size_t nc = static_cast<std::size_t>(ncomp);
  if (!have_ghosts_) throw std::logic_error("Migration::reverse_ghosts before exchange_ghosts");
  if (ghost_exchange_ == GhostExchange::Staged) {
    const auto m0 = staged_.messages_sent(), b0 = staged_.bytes_sent();
    staged_.reverse(ghost_values, owned_inout, ncomp);
    ghost_traffic_.messages += staged_.messages_sent() - m0;
    ghost_traffic_.bytes += staged_.bytes_sent() - b0;
    return;
  }
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
  if (ghost_exchange_ == GhostExchange::Staged) {
    const auto m0 = staged_.messages_sent(), b0 = staged_.bytes_sent();
    staged_.route(owned_values, ncomp, ghost_out);
    ghost_traffic_.messages += staged_.messages_sent() - m0;
    ghost_traffic_.bytes += staged_.bytes_sent() - b0;
    return;
  }
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

}  // namespace particles
}  // namespace pmewald
