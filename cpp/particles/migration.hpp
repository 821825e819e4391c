// Atom migration to the ranks that own their mesh region, results back to the
// caller's rank and order, and ghost atoms (periodic images within the cutoff
// of another rank's domain).
//
// Ownership (fixed convention): fractional s = r @ inv(box), wrapped into
// [0, 1); u_d = K_d * s_d; the atom belongs to the rank whose brick
// brick_box(grid, K, rank) contains the mesh point floor(u). A rank's domain is
// therefore the fractional slab product [lo_d/K_d, hi_d/K_d): a parallelepiped.
//
// All communication is sparse, and the per-step exchanges complete by blocking
// waits. The ranks a domain can send ghosts to, and the owners of atoms that
// moved at most into an adjacent domain, are known from the decomposition
// alone (neighborhood.hpp): those exchanges go to known partners
// (neighbor_exchange.hpp: sizes, then data). Forward migration uses them when
// every atom goes to its own or an adjacent domain (the usual case from one MD
// step to the next, agreed in the Allreduce that checks the input anyway), skips
// communication when no atom moves anywhere, and falls back to NBX (MPI_Issend +
// MPI_Iprobe + MPI_Ibarrier, for partners nobody can know) otherwise. The
// reverse paths reuse the forward partners and counts. No per-step array is O(P).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "geometry/domain_grid.hpp"
#include "geometry/index_box.hpp"
#include "geometry/lattice.hpp"
#include "geometry/neighborhood.hpp"
#include "base/kokkos_types.hpp"
#include "comm/neighbor_exchange.hpp"
#include "comm/sparse_exchange.hpp"
#include "particles/staged_ghosts.hpp"

namespace pmewald {
inline namespace particles {

class Migration {
 public:
  // Uses `comm` as given (the caller owns it, normally a pmewald::Comm dup).
  explicit Migration(MPI_Comm comm);

  // Box and mesh define ownership: the domains are the mesh's bricks
  // (DomainGrid::bricks over processor_grid_3d). Collective only in the sense
  // that every rank must pass the same values; no communication.
  void set_geometry(const PeriodicCell& cell, const Int3& mesh);
  // Box and any domain grid of size() ranks (balanced cuts: particles/balance.hpp).
  void set_domains(const PeriodicCell& cell, const DomainGrid& domains);

  // Collective. Moves the caller's atoms (positions n x 3 row-major, any
  // place in space; charges n; ids n) to their owners. Non-finite positions
  // or charges raise ValueError on every rank. Owned atoms are ordered by
  // (id, origin rank, origin index), so the owned order is independent of
  // message arrival order. Optional per-atom payload (CSR over the local
  // atoms: payload[payload_offsets[i] .. payload_offsets[i+1]) travels with
  // atom i; the real-space part sends each atom's excluded partner ids this
  // way, so exclusions need no per-step routing).
  // `vote` rides on the Allreduce forward does anyway (its input check):
  // agreed_vote() is then the largest vote of any rank (the solver's pair list
  // agrees on a rebuild this way, with no collective of its own).
  //
  // `shared`: another stage's agreement folded into the same Allreduce (one
  // reduction for both; the solver's exclusions use it): its flags (this rank's
  // in; the maxima over the ranks out), then `settle` runs on every rank with
  // them before any atom moves (it may be collective, and may throw on every
  // rank), and the payload is re-read from `payload` afterwards (settle may
  // replace it; payload_offsets as passed only says whether one existed).
  struct SharedAgreement {
    static constexpr int kFlags = 3;
    int flags[kFlags] = {0, 0, 0};
    bool changes_plan = false;  // this rank's flags change its payload: no plan reuse anywhere
    std::function<void(const int* agreed)> settle;
    std::function<std::pair<const std::int64_t*, const std::int64_t*>()> payload;
  };
  void forward(const double* positions, const double* charges, const std::int64_t* ids,
               std::size_t n_local, const std::int64_t* payload_offsets = nullptr,
               const std::int64_t* payload = nullptr, int vote = 0, SharedAgreement* shared = nullptr);
  int agreed_vote() const { return agreed_vote_; }

  // Collective. `owned_values` is n_owned x ncomp (row-major), one row per
  // owned atom; `local_out` (n_local x ncomp) receives the rows of this
  // rank's atoms in the order they were passed to forward().
  void reverse(const double* owned_values, int ncomp, double* local_out);

  // Collective, the mirror image of reverse(): rows of the caller's atoms
  // (n_local x ncomp, the same n_local and order as the last forward()) go to
  // their owners along the last forward's plan, whatever the atoms' positions
  // now; owned_out (n_owned x ncomp) gets one row per owned slot. With it a
  // caller keeps the owners of the last forward (a reused pair list moves
  // displacements and charges this way, migration frozen between rebuilds).
  void route(const double* local_values, int ncomp, double* owned_out);

  // Collective. Builds the ghost atoms of this rank: every periodic image of
  // every atom (owned anywhere) that lies within `cutoff` of this rank's
  // domain, except the owned atoms themselves (identity image). Requires
  // forward() first; cutoff <= min height / 2. The same images either way of
  // exchanging them (set_ghost_exchange), in another order.
  void exchange_ghosts(double cutoff);

  // How exchange_ghosts (and reverse_ghosts, route_ghosts along its plan) move
  // the ghosts: Direct sends each image straight to every domain that needs it
  // (one message per partner: all domains within the cutoff); Staged goes axis
  // by axis through the neighbours (particles/staged_ghosts.hpp: 2 messages per
  // axis and pulse). Every rank must choose the same; takes effect at the next
  // exchange_ghosts.
  enum class GhostExchange : int { Direct = 0, Staged = 1 };
  void set_ghost_exchange(GhostExchange how) {
    ghost_exchange_ = how;
    have_ghosts_ = false;
  }
  GhostExchange ghost_exchange() const { return ghost_exchange_; }
  // Staged: pulses per axis of the last exchange_ghosts.
  const int* staged_pulses() const { return staged_.pulses(); }

  // Collective (point-to-point with the partners of the last
  // exchange_ghosts). ghost_values: n_ghost x 3, one row per ghost; each row
  // is ADDED to the row of the ghost's original in owned_inout (n_owned x 3),
  // on its owner. The real-space part returns forces on ghosts this way, so an
  // owned-ghost pair is evaluated on one rank only. Every rank must call it,
  // also one without owned atoms (its ghosts' rows, zeros, are still expected).
  // ncomp: values per row (3 for forces; the potentials send 4).
  void reverse_ghosts(const double* ghost_values, double* owned_inout, int ncomp = 3);

  // Collective, the mirror image of reverse_ghosts(): each ghost's row of
  // ghost_out (n_ghost x ncomp) becomes the row of its original in owned_values
  // (n_owned x ncomp), along the plan of the last exchange_ghosts (the same
  // partners and records). A reused pair list refreshes its ghosts this way
  // (the displacement of an image is its original's).
  void route_ghosts(const double* owned_values, int ncomp, double* ghost_out);

  // How the last forward() moved atoms: no atom changed rank anywhere (no
  // messages), every atom went to its own or an adjacent domain (known
  // partners), or some went further (NBX). The same atoms end up owned in the
  // same order either way.
  enum class ForwardPath : int { None = 0, Neighbors = 1, Sparse = 2 };
  ForwardPath last_forward_path() const { return forward_path_; }
  // Whether the last forward() kept the plan of the one before: on every rank
  // the same atoms (ids, in the same order) with the same owners, and no
  // payload then or now. The positions and charges then go along the kept plan
  // (route: one message per partner, no sizes, no sort) into the same owned
  // slots; everything else about the owned atoms is as it was. An MD step
  // whose atoms stay in their domains, and repeated calls at fixed positions.
  bool last_forward_reused() const { return reused_; }

  // Incremented by every forward(): data derived from the owned order (for
  // example routed exclusions) is stale when the generation differs.
  std::uint64_t generation() const { return generation_; }

  // Point-to-point messages this rank sent and their bytes, since the last reset:
  // atoms to owners and results back (forward + reverse), ghost atoms and the
  // forces on them (exchange_ghosts, with its size messages, + reverse_ghosts).
  struct Traffic {
    std::int64_t messages = 0, bytes = 0;
  };
  const Traffic& migration_traffic() const { return migration_traffic_; }
  const Traffic& ghost_traffic() const { return ghost_traffic_; }
  void reset_traffic() { migration_traffic_ = ghost_traffic_ = Traffic{}; }

  // After forward(): this rank's owned atoms.
  std::size_t n_owned() const { return n_owned_; }
  View2<double> owned_positions() const { return own_r_; }   // wrapped Cartesian, n_owned x 3
  View2<double> owned_fractional() const { return own_s_; }  // s in [0, 1), n_owned x 3
  View1<double> owned_charges() const { return own_q_; }
  View1<std::int64_t> owned_ids() const { return own_id_; }
  // Payload of each owned atom (CSR over owned slots; empty lists when none).
  const std::vector<std::int64_t>& owned_payload_offsets() const { return own_pay_off_; }
  const std::vector<std::int64_t>& owned_payload() const { return own_pay_; }
  // Where each owned atom came from (rank, index in that rank's input).
  const std::vector<std::int32_t>& owned_origin_rank() const { return own_origin_rank_; }
  const std::vector<std::int64_t>& owned_origin_index() const { return own_origin_index_; }

  // A key unique over all owned atoms of all ranks (rank + size * slot), the
  // same for an atom and its ghosts: the real-space part's rule for which
  // rank evaluates a pair of an owned atom and a ghost.
  std::int64_t owned_key(std::size_t slot) const {
    return rank_ + static_cast<std::int64_t>(size_) * static_cast<std::int64_t>(slot);
  }

  // After exchange_ghosts(): image-shifted copies near this rank's domain.
  std::size_t n_ghost() const { return n_ghost_; }
  View2<double> ghost_positions() const { return gh_r_; }
  View2<double> ghost_fractional() const { return gh_s_; }  // may lie outside [0, 1)
  View1<double> ghost_charges() const { return gh_q_; }
  View1<std::int64_t> ghost_ids() const { return gh_id_; }
  View1<std::int64_t> ghost_keys() const { return gh_key_; }  // owned_key of the original

  // Geometry.
  MPI_Comm comm() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  const PeriodicCell& cell() const { return cell_; }
  // The domains: their index resolution per axis (the mesh for bricks), the
  // processor grid, and this rank's index box.
  const Int3& mesh() const { return mesh_; }
  const Int3& grid() const { return grid_; }
  const Box3& my_brick() const { return brick_; }
  const DomainGrid& domains() const { return domains_; }
  // Fractional extent of this rank's domain along axis d: [lo/K, hi/K).
  double domain_lo(int d) const { return double(brick_.lo[d]) / mesh_[d]; }
  double domain_hi(int d) const { return double(brick_.hi[d]) / mesh_[d]; }
  // Ghost margin in fractional units along axis d used by the last
  // exchange_ghosts (slightly above cutoff / height[d]).
  double ghost_margin(int d) const { return margin_[d]; }

  // Owner rank of a wrapped fractional point (s_d in [0, 1)).
  int owner_of(const double s[3]) const;
  // Grid coordinate along axis d owning index m.
  int grid_coord_of(int d, int m) const { return domains_.coord_of(d, m); }

  // Wrap a Cartesian position: s in [0, 1), r_wrapped = r - n @ box with
  // integer n (exact for atoms already inside the box).
  void wrap(const double r[3], double s_out[3], double r_out[3]) const;

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  PeriodicCell cell_;
  DomainGrid domains_;
  Int3 mesh_{0, 0, 0}, grid_{1, 1, 1};  // domains_.resolution(), domains_.grid()
  Box3 brick_;
  bool have_geometry_ = false;
  bool have_atoms_ = false;
  ForwardPath forward_path_ = ForwardPath::None;
  Traffic migration_traffic_, ghost_traffic_;
  std::uint64_t generation_ = 0;
  int agreed_vote_ = 0;
  double margin_[3] = {0, 0, 0};

  GhostExchange ghost_exchange_ = GhostExchange::Direct;
  StagedGhosts staged_;
  SparseExchange nbx_forward_;
  // Known-partner exchanges: atoms moving to adjacent domains (partners: the
  // neighbourhood of reach 0), ghost atoms (reach: the ghost margin, recomputed
  // when the margin changes).
  NeighborExchange near_forward_, near_ghost_;
  Neighborhood adjacent_;
  double ghost_reach_[3] = {-1, -1, -1};

  // Forward plan, kept for the reverse path.
  std::size_t n_local_ = 0;
  // The plan's reuse (last_forward_reused): each local atom's owner and id at
  // the last full forward, and its `far` flag; reusable while that forward had
  // no payload and no set_domains came after it.
  std::vector<int> plan_owner_;
  std::vector<std::int64_t> plan_ids_;
  int plan_far_ = 0;
  bool plan_reusable_ = false;
  bool reused_ = false;
  std::vector<double> reuse_in_, reuse_out_;  // r, s, q per atom along the kept plan
  std::vector<int> send_dests_;                    // partner ranks (excluding self)
  std::vector<std::vector<std::int64_t>> send_idx_;  // local indices sent to each partner
  std::vector<std::int64_t> self_idx_;               // local indices kept here
  std::vector<int> recv_srcs_;                     // ranks that sent to me (excluding self)
  std::vector<std::vector<std::int64_t>> recv_slot_;  // owned slot of each record received
  std::vector<std::int64_t> self_slot_;               // owned slot of each kept atom

  // Owned atoms.
  std::size_t n_owned_ = 0;
  View2<double> own_r_, own_s_;
  View1<double> own_q_;
  View1<std::int64_t> own_id_;
  std::vector<std::int32_t> own_origin_rank_;
  std::vector<std::int64_t> own_origin_index_;
  std::vector<std::int64_t> own_pay_off_, own_pay_;

  // Ghosts, and the plan of the last exchange_ghosts for reverse_ghosts:
  // owned index of each image kept here and of each record sent to each
  // destination; sources and record counts of what arrived.
  bool have_ghosts_ = false;
  std::size_t n_ghost_ = 0;
  View2<double> gh_r_, gh_s_;
  View1<double> gh_q_;
  View1<std::int64_t> gh_id_, gh_key_;
  std::vector<std::int64_t> ghost_self_idx_;
  std::vector<int> ghost_dests_, ghost_srcs_;
  std::vector<std::vector<std::int64_t>> ghost_send_idx_;
  std::vector<std::size_t> ghost_recv_count_;
  // exchange_ghosts()'s work space: each owned atom's first image (a prefix sum
  // of counts), every image's destination, owned index and GhostRecord bytes in
  // the serial order, and the images that stay here (when some do not).
  std::vector<std::int64_t> gh_count_, gh_ent_idx_, gh_self_ent_;
  std::vector<int> gh_ent_dest_;
  std::vector<char> gh_ent_rec_;


  // Rows of `in` (ncomp each) to the ranks `to` (rows to_rows[k] to to[k]) and
  // rows from the ranks `from` into `out` (rows from_rows[k]), the self rows
  // in[self_in[j]] -> out[self_out[j]]: plain Irecv/Isend with counts known on
  // both sides (reverse and route, each the other's mirror image).
  void move_rows(const double* in, int ncomp, double* out, int tag, const std::vector<int>& to,
                 const std::vector<std::vector<std::int64_t>>& to_rows, const std::vector<int>& from,
                 const std::vector<std::vector<std::int64_t>>& from_rows, const std::vector<std::int64_t>& self_in,
                 const std::vector<std::int64_t>& self_out);

  // forward()'s work space, kept for its capacity: each local atom's wrapped
  // fractional and Cartesian position and owner; each atom owned after it, as a
  // sort key (id, origin rank, origin index) pointing at its data (a kept atom:
  // msg -1, at its index in self_idx_; a received one: its record and payload in
  // message msg), and their order.
  struct Incoming {
    std::int64_t id, origin_index;
    std::int32_t origin_rank, msg;
    std::int64_t at;
    const char* record;  // MigrationRecord bytes (received atoms only)
    const char* pay;     // pay_count std::int64_t values (maybe unaligned)
    std::int64_t pay_count;
  };
  std::vector<double> loc_s_, loc_r_;
  std::vector<int> loc_owner_;
  std::vector<Incoming> incoming_;
  std::vector<std::size_t> order_;
  std::vector<std::int64_t*> recv_slot_ptr_;
  std::int64_t** recv_slot_ptrs(std::vector<std::vector<std::int64_t>>& slots);

  // forward()'s steps, in order.
  // The first non-finite position or charge, as an error message (empty when none).
  std::string forward_input_error(const double* positions, const double* charges, std::size_t n_local) const;
  // Wraps the atoms and finds their owners (loc_s_, loc_r_, loc_owner_).
  void forward_wrap(const double* positions, std::size_t n_local, bool valid);
  // Whether this rank's atoms are those of the last full forward, owned where they were.
  bool forward_same_plan(const std::int64_t* ids, std::size_t n_local, const std::int64_t* payload_offsets) const;
  // The plan: the kept atoms and the partners; returns `far`.
  int forward_owners(std::size_t n_local, bool valid, std::unordered_map<int, int>& slot_of);
  // The Allreduce: throws on bad input anywhere, picks the path, agrees on the vote
  // and on whether every rank keeps its plan (`changed`: this one does not).
  void forward_agree(const std::string& err, int far, int vote, int changed, SharedAgreement* shared);
  // The atoms sent to each partner, and their messages (counts, records, payload).
  void forward_messages(const double* charges, const std::int64_t* ids, const std::int64_t* payload_offsets,
                        const std::int64_t* payload, std::unordered_map<int, int>& slot_of);
  // The exchange along the agreed path (none, known partners or NBX).
  void forward_exchange();
  // Unpack: the owned atoms as sort keys (kept and received), in owned order.
  void forward_incoming(const std::int64_t* ids, const std::int64_t* payload_offsets, const std::int64_t* payload);
  // The owned atoms' rows, payload and origins, and each incoming atom's slot.
  void forward_owned(const double* charges);
  // Every rank kept its plan: positions and charges along it into the same slots.
  void forward_reused(const double* charges);

  // exchange_ghosts()'s steps, in order.
  // The checks, the margins and (when they changed) the partners.
  void ghost_geometry(double cutoff);
  // Every image of owned atom i that some domain needs, in a fixed order (image
  // shifts z, y, x, then destinations z, y, x): emit(dest, GhostRecord) for each.
  // The identity image stays off this rank's own list (the owned atom itself).
  template <class Emit>
  void images_of(std::size_t i, Emit&& emit) const;
  // All images in the serial order (gh_count_, gh_ent_*); returns how many leave this rank.
  int ghost_images();
  // The images kept here and one message per destination.
  void ghost_messages(int n_remote);
  // The ghost rows: this rank's own images first, then each source's records.
  void ghost_rows(int n_remote);
  // The ghost views from n records (the staged exchange's).
  void ghost_rows_from(const detail::GhostRecord* records, std::size_t n);
  // The ghost views sized for n ghosts; the functor writes row `at` from a
  // GhostRecord's bytes.
  struct GhostRows {
    View2<double> r, s;
    View1<double> q;
    View1<std::int64_t> id, key;
    void operator()(std::size_t at, const char* src) const;
  };
  GhostRows ghost_views(std::size_t n);

  // Reused buffers.
  std::vector<std::vector<char>> sendbufs_, recvbufs_;
  std::vector<int> srcs_;
  std::vector<double> rbuf_, sbuf_;
  std::vector<MPI_Request> reqs_;
};

}  // namespace particles
}  // namespace pmewald
