#include "particles/migration.hpp"

#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "comm/mpi_helpers.hpp"
#include "comm/tags.hpp"
#include "geometry/decomposition.hpp"
#include "base/errors.hpp"
#include "particles/migration_rows.hpp"

namespace pmewald {
inline namespace particles {

using detail::ensure_rows;
using detail::ensure_rows3;

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

// Payload values of local atom i (none without a payload).
std::int64_t pay_count(const std::int64_t* payload_offsets, std::size_t i) {
  return payload_offsets ? payload_offsets[i + 1] - payload_offsets[i] : 0;
}

}  // namespace

// ---------------------------------------------------------------------------
// Migration
// ---------------------------------------------------------------------------

Migration::Migration(MPI_Comm comm)
    : comm_(comm), staged_(comm), nbx_forward_(comm, tags::kMigrationForward), near_forward_(comm, tags::kMigrationAdjacent),
      near_ghost_(comm, tags::kGhostAtoms) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

void Migration::set_geometry(const PeriodicCell& cell, const Int3& mesh) {
  for (int d = 0; d < 3; ++d)
    if (mesh[d] < 1) throw ValueError("mesh sizes must be positive");
  set_domains(cell, mesh == mesh_ && domains_.ranks() == size_ && domains_ == DomainGrid::bricks(grid_, mesh_)
                        ? domains_
                        : DomainGrid::bricks(processor_grid_3d(size_, mesh), mesh));
}

void Migration::set_domains(const PeriodicCell& cell, const DomainGrid& domains) {
  if (domains.ranks() != size_) throw std::logic_error("Migration::set_domains: a domain grid of another rank count");
  cell_ = cell;
  if (!have_geometry_ || domains != domains_) {
    domains_ = domains;
    mesh_ = domains_.resolution();
    grid_ = domains_.grid();
    brick_ = domains_.box(rank_);
    adjacent_ = domain_neighborhood(domains_, rank_, {0.0, 0.0, 0.0});
    near_forward_.set_partners(adjacent_.send, adjacent_.recv);
    for (double& r : ghost_reach_) r = -1;
  }
  have_geometry_ = true;
  have_atoms_ = false;
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
                        const std::int64_t* payload, int vote, SharedAgreement* shared) {
  if (!have_geometry_) throw std::logic_error("Migration::forward before set_geometry");
  const std::string err = forward_input_error(positions, charges, n_local);
  forward_wrap(positions, n_local, err.empty());
  const bool same = err.empty() && !(shared && shared->changes_plan) &&
                    forward_same_plan(ids, n_local, payload_offsets);
  std::unordered_map<int, int> slot_of;
  const int far = same ? plan_far_ : forward_owners(n_local, err.empty(), slot_of);
  forward_agree(err, far, vote, same ? 0 : 1, shared);
  if (shared) {
    if (shared->settle) shared->settle(shared->flags);  // (every rank, the agreed flags)
    if (shared->payload) std::tie(payload_offsets, payload) = shared->payload();
  }
  if (reused_) {
    forward_reused(charges);
  } else {
    if (same) forward_owners(n_local, true, slot_of);  // another rank's plan changed: the full path for all
    forward_messages(charges, ids, payload_offsets, payload, slot_of);
    forward_exchange();
    forward_incoming(ids, payload_offsets, payload);
    forward_owned(charges);
    plan_owner_.assign(loc_owner_.begin(), loc_owner_.begin() + static_cast<std::ptrdiff_t>(n_local));
    plan_ids_.assign(ids, ids + n_local);
    plan_far_ = far;
    plan_reusable_ = payload_offsets == nullptr;
  }
  have_atoms_ = true;
  have_ghosts_ = false;
  ++generation_;
  n_ghost_ = 0;
}

std::string Migration::forward_input_error(const double* positions, const double* charges,
                                           std::size_t n_local) const {
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
  return err;
}

void Migration::forward_wrap(const double* positions, std::size_t n_local, bool valid) {
  // Wrap every atom and find its owner (threaded: each atom writes only its own rows).
  loc_s_.resize(3 * n_local);
  loc_r_.resize(3 * n_local);
  loc_owner_.resize(n_local);
  double* const sw = loc_s_.data();
  double* const rw = loc_r_.data();
  int* const owner = loc_owner_.data();
  if (valid)
    Kokkos::parallel_for("pmewald::migration_owners", Range(0, n_local), [=](const std::size_t i) {
      wrap(positions + 3 * i, sw + 3 * i, rw + 3 * i);
      owner[i] = owner_of(sw + 3 * i);
    });
}

bool Migration::forward_same_plan(const std::int64_t* ids, std::size_t n_local,
                                  const std::int64_t* payload_offsets) const {
  return plan_reusable_ && have_atoms_ && payload_offsets == nullptr && n_local == plan_ids_.size() &&
         std::equal(plan_owner_.begin(), plan_owner_.end(), loc_owner_.begin()) &&
         std::equal(plan_ids_.begin(), plan_ids_.end(), ids);
}

int Migration::forward_owners(std::size_t n_local, bool valid, std::unordered_map<int, int>& slot_of) {
  // Plan: group the local atoms by owner in input order (the plan of the last
  // forward is gone from here on, until this one succeeds).
  plan_reusable_ = false;
  n_local_ = n_local;
  send_dests_.clear();
  self_idx_.clear();
  slot_of.clear();
  const int* const owner = loc_owner_.data();
  int far = 0;  // some atom goes beyond the adjacent domains
  self_idx_.reserve(n_local);
  for (std::size_t i = 0; i < n_local && valid; ++i) {
    if (owner[i] == rank_) {
      self_idx_.push_back(static_cast<std::int64_t>(i));
    } else if (slot_of.emplace(owner[i], static_cast<int>(send_dests_.size())).second) {
      send_dests_.push_back(owner[i]);
      if (!std::binary_search(adjacent_.send.begin(), adjacent_.send.end(), owner[i])) far = 1;
    }
  }
  return far;
}

void Migration::forward_agree(const std::string& err, int far, int vote, int changed, SharedAgreement* shared) {
  // One collective decides everything: bad input anywhere (then every rank
  // raises), whether any atom changes rank, whether all stay adjacent, the
  // caller's vote, and whether every rank keeps its plan; and another stage's
  // flags where it shares the reduction.
  constexpr int kOwn = 5, kAll = kOwn + SharedAgreement::kFlags;
  int flags[kAll] = {err.empty() ? 0 : 1, send_dests_.empty() ? 0 : 1, far, vote, changed};
  int any[kAll] = {};
  const int n = shared ? kAll : kOwn;
  if (shared) std::copy(shared->flags, shared->flags + SharedAgreement::kFlags, flags + kOwn);
  check_mpi(MPI_Allreduce(flags, any, n, MPI_INT, MPI_MAX, comm_), "MPI_Allreduce");
  if (shared) std::copy(any + kOwn, any + kAll, shared->flags);
  if (any[0]) agree_or_throw(comm_, err);
  agreed_vote_ = any[3];
  reused_ = any[4] == 0;
  forward_path_ = !any[1] ? ForwardPath::None : (any[2] ? ForwardPath::Sparse : ForwardPath::Neighbors);
}

void Migration::forward_messages(const double* charges, const std::int64_t* ids, const std::int64_t* payload_offsets,
                                 const std::int64_t* payload, std::unordered_map<int, int>& slot_of) {
  const double* const sw = loc_s_.data();
  const double* const rw = loc_r_.data();
  const int* const owner = loc_owner_.data();
  const std::size_t nd = send_dests_.size();
  send_idx_.resize(nd);
  if (sendbufs_.size() < nd) sendbufs_.resize(nd);
  for (std::size_t k = 0; k < nd; ++k) send_idx_[k].clear();
  if (nd > 0)
    for (std::size_t i = 0; i < n_local_; ++i)
      if (owner[i] != rank_)
        send_idx_[static_cast<std::size_t>(slot_of[owner[i]])].push_back(static_cast<std::int64_t>(i));
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
    for (const std::int64_t i : send_idx_[k])
      append_bytes(buf, pay_count(payload_offsets, static_cast<std::size_t>(i)));
    if (payload_offsets)
      for (const std::int64_t i : send_idx_[k])
        for (std::int64_t p = payload_offsets[i]; p < payload_offsets[i + 1]; ++p) append_bytes(buf, payload[p]);
  }
}

void Migration::forward_exchange() {
  const std::size_t nd = send_dests_.size();
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
}

void Migration::forward_incoming(const std::int64_t* ids, const std::int64_t* payload_offsets,
                                 const std::int64_t* payload) {
  // Everything this rank now owns, as sort keys that point at the data (the
  // kept atoms' rows of the caller's arrays, the received records in their
  // messages) and remember where each came from.
  recv_srcs_.assign(srcs_.begin(), srcs_.end());
  const std::size_t n_self = self_idx_.size();
  std::size_t n_all = n_self;
  for (const auto& buf : recvbufs_) n_all += static_cast<std::size_t>(read_record<std::int64_t>(buf, 0));
  incoming_.resize(n_all);
  Incoming* const all = incoming_.data();
  const std::int64_t* const kept = self_idx_.data();
  const int me = rank_;
  Kokkos::parallel_for("pmewald::migration_kept", Range(0, n_self), [=](const std::size_t j) {
    const std::size_t i = static_cast<std::size_t>(kept[j]);
    all[j] = {ids[i], static_cast<std::int64_t>(i), me, -1, static_cast<std::int64_t>(j), nullptr,
              payload_offsets ? reinterpret_cast<const char*>(payload + payload_offsets[i]) : nullptr,
              pay_count(payload_offsets, i)};
  });
  std::size_t at = n_self;
  for (std::size_t k = 0; k < recvbufs_.size(); ++k) {
    const auto& buf = recvbufs_[k];
    const std::size_t n = static_cast<std::size_t>(read_record<std::int64_t>(buf, 0));
    const char* p = buf.data() + sizeof(std::int64_t);
    const char* counts = p + n * sizeof(MigrationRecord);
    const char* values = counts + n * sizeof(std::int64_t);
    for (std::size_t j = 0; j < n; ++j, ++at) {
      MigrationRecord rec;
      std::memcpy(&rec, p + j * sizeof(MigrationRecord), sizeof(rec));
      std::int64_t c;
      std::memcpy(&c, counts + j * sizeof(std::int64_t), sizeof(c));
      all[at] = {rec.id, rec.origin_index, rec.origin_rank, static_cast<int>(k), static_cast<std::int64_t>(j),
                 p + j * sizeof(MigrationRecord), values, c};
      values += static_cast<std::size_t>(c) * sizeof(std::int64_t);
    }
  }
  order_.resize(n_all);
  std::iota(order_.begin(), order_.end(), std::size_t{0});
  const auto before = [all](std::size_t x, std::size_t y) {
    const Incoming& a = all[x];
    const Incoming& b = all[y];
    if (a.id != b.id) return a.id < b.id;
    if (a.origin_rank != b.origin_rank) return a.origin_rank < b.origin_rank;
    return a.origin_index < b.origin_index;
  };
  // Often already in order (one rank, or atoms passed sorted by id): O(N) check first.
  if (!std::is_sorted(order_.begin(), order_.end(), before)) std::sort(order_.begin(), order_.end(), before);
}

void Migration::forward_owned(const double* charges) {
  const double* const sw = loc_s_.data();
  const double* const rw = loc_r_.data();
  const Incoming* const all = incoming_.data();
  n_owned_ = incoming_.size();
  ensure_rows3(own_r_, n_owned_, "owned_positions");
  ensure_rows3(own_s_, n_owned_, "owned_fractional");
  ensure_rows(own_q_, n_owned_, "owned_charges");
  ensure_rows(own_id_, n_owned_, "owned_ids");
  own_origin_rank_.resize(n_owned_);
  own_origin_index_.resize(n_owned_);
  own_pay_off_.resize(n_owned_ + 1);
  own_pay_off_[0] = 0;
  for (std::size_t slot = 0; slot < n_owned_; ++slot)
    own_pay_off_[slot + 1] = own_pay_off_[slot] + all[order_[slot]].pay_count;
  own_pay_.resize(static_cast<std::size_t>(own_pay_off_[n_owned_]));
  recv_slot_.resize(recv_srcs_.size());
  for (std::size_t k = 0; k < recv_srcs_.size(); ++k)
    recv_slot_[k].resize(static_cast<std::size_t>(read_record<std::int64_t>(recvbufs_[k], 0)));
  self_slot_.resize(self_idx_.size());
  // Each slot writes its own rows; self_slot_ and recv_slot_ get one slot per
  // entry (every incoming atom has exactly one slot).
  auto own_r = own_r_;
  auto own_s = own_s_;
  auto own_q = own_q_;
  auto own_id = own_id_;
  std::int32_t* const o_rank = own_origin_rank_.data();
  std::int64_t* const o_index = own_origin_index_.data();
  const std::int64_t* const pay_off = own_pay_off_.data();
  std::int64_t* const pay_out = own_pay_.data();
  std::int64_t* const self_slot = self_slot_.data();
  std::int64_t** const recv_slot = recv_slot_ptrs(recv_slot_);
  const std::size_t* const ord = order_.data();
  Kokkos::parallel_for("pmewald::migration_owned", Range(0, n_owned_), [=](const std::size_t slot) {
    const Incoming& in = all[ord[slot]];
    double r[3], s[3], q;
    if (in.msg < 0) {
      const std::size_t i = static_cast<std::size_t>(in.origin_index);
      for (int a = 0; a < 3; ++a) {
        r[a] = rw[3 * i + a];
        s[a] = sw[3 * i + a];
      }
      q = charges[i];
      self_slot[in.at] = static_cast<std::int64_t>(slot);
    } else {
      MigrationRecord rec;
      std::memcpy(&rec, in.record, sizeof(rec));
      for (int a = 0; a < 3; ++a) {
        r[a] = rec.r[a];
        s[a] = rec.s[a];
      }
      q = rec.q;
      recv_slot[in.msg][in.at] = static_cast<std::int64_t>(slot);
    }
    for (int a = 0; a < 3; ++a) {
      own_r(slot, a) = r[a];
      own_s(slot, a) = s[a];
    }
    own_q(slot) = q;
    own_id(slot) = in.id;
    o_rank[slot] = in.origin_rank;
    o_index[slot] = in.origin_index;
    if (in.pay_count > 0)
      std::memcpy(pay_out + pay_off[slot], in.pay, static_cast<std::size_t>(in.pay_count) * sizeof(std::int64_t));
  });
}

void Migration::forward_reused(const double* charges) {
  // The same atoms in the same slots: only their (wrapped) positions and charges
  // change, and they take the route() the results take back, reversed.
  const std::size_t n = n_local_;
  reuse_in_.resize(7 * n);
  reuse_out_.resize(7 * n_owned_);
  const double* const sw = loc_s_.data();
  const double* const rw = loc_r_.data();
  double* const in = reuse_in_.data();
  Kokkos::parallel_for("pmewald::migration_reuse_pack", Range(0, n), [=](const std::size_t i) {
    for (int a = 0; a < 3; ++a) {
      in[7 * i + a] = rw[3 * i + a];
      in[7 * i + 3 + a] = sw[3 * i + a];
    }
    in[7 * i + 6] = charges[i];
  });
  route(reuse_in_.data(), 7, reuse_out_.data());
  const double* const out = reuse_out_.data();
  auto own_r = own_r_;
  auto own_s = own_s_;
  auto own_q = own_q_;
  Kokkos::parallel_for("pmewald::migration_reuse_rows", Range(0, n_owned_), [=](const std::size_t slot) {
    for (int a = 0; a < 3; ++a) {
      own_r(slot, a) = out[7 * slot + a];
      own_s(slot, a) = out[7 * slot + 3 + a];
    }
    own_q(slot) = out[7 * slot + 6];
  });
}

std::int64_t** Migration::recv_slot_ptrs(std::vector<std::vector<std::int64_t>>& slots) {
  recv_slot_ptr_.resize(slots.size());
  for (std::size_t k = 0; k < slots.size(); ++k) recv_slot_ptr_[k] = slots[k].data();
  return recv_slot_ptr_.data();
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
  // The self rows (threaded: every row of `out` is written once).
  const std::int64_t* const s_in = self_in.data();
  const std::int64_t* const s_out = self_out.data();
  Kokkos::parallel_for("pmewald::migration_self_rows", Range(0, self_in.size()), [=](const std::size_t j) {
    for (std::size_t c = 0; c < nc; ++c)
      out[static_cast<std::size_t>(s_out[j]) * nc + c] = in[static_cast<std::size_t>(s_in[j]) * nc + c];
  });
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

}  // namespace particles
}  // namespace pmewald
