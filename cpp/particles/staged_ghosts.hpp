// Staged ghost exchange (LAMMPS's comm_brick, GROMACS's pulses): the ghost atoms
// of a domain grid built axis by axis, each rank talking only to its two
// neighbours along the axis, forwarding in later stages and pulses what earlier
// ones brought, so corners and edges come for free.
//
// Along axis d (x, then y, then z), pulse k (1 .. pulses_d, DomainGrid::pulses)
// sends to each of the two neighbouring grid coordinates the entries that
// neighbour needs: pulse 1 looks at everything this rank holds before the stage
// (owned atoms and the ghosts of earlier axes), pulse k > 1 only at what pulse
// k - 1 brought from the opposite side. An entry crossing the periodic boundary
// is shifted by a lattice vector. "Needs" is the direct exchange's test along
// that axis (migration.hpp: the image's [x - c, x + c] meets the neighbour's
// slab in index units), so a rank ends with the same images as the direct
// exchange sends it (a product over the axes, the cuts being shared by all
// ranks along an axis); ranks with empty slabs forward what passes through.
// With one rank along an axis the "messages" are copies to this rank.
//
// Messages: 2 per pulse per axis with more than one rank along it, each carrying
// its record count in a header and at most `cap` records, cap = max(64, 1.25 x
// the count of the same swap's last exchange, which both sides know); a count
// above cap sends the rest in a second message (only when the ghosts grow). So
// in steady state a rank sends 2 (p_x>1) + 2 (p_y>1) + 2 (p_z>1) messages per
// pulse, blocking waits only (no probing: cheap under SMPI too).
//
// reverse() runs the swaps backwards (ghost rows accumulate what later swaps
// forwarded, then go back to their sender, which adds them to the entries it
// sent); route() runs them forwards with the entries' rows.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <vector>

#include "geometry/domain_grid.hpp"
#include "particles/migration_rows.hpp"

namespace pmewald {
inline namespace particles {

class Migration;


class StagedGhosts {
 public:
  explicit StagedGhosts(MPI_Comm comm) : comm_(comm) {}

  // Collective. The ghosts of `mig`'s owned atoms within its ghost margins
  // (Migration::ghost_margin), in swap order; records() holds them.
  void build(const Migration& mig);
  const std::vector<detail::GhostRecord>& records() const { return ghosts_; }
  // Owned index of each ghost's original is not needed: values travel back
  // along the swaps.

  // Collective. ghost_values (n_ghost x nc) are added to the owned rows
  // (owned_inout, n_owned x nc) of their originals, through every forwarding rank.
  void reverse(const double* ghost_values, double* owned_inout, int nc);
  // Collective. Each ghost's row of ghost_out becomes its original's row of
  // owned_values.
  void route(const double* owned_values, int nc, double* ghost_out);

  // Pulses per axis of the last build, and point-to-point messages / bytes sent.
  const int* pulses() const { return pulses_; }
  std::int64_t messages_sent() const { return messages_; }
  std::int64_t bytes_sent() const { return bytes_; }

 private:
  // One direction of one pulse along one axis: entries sent (indices into
  // owned [0, n_own) then ghosts [n_own, ...)), the neighbour they go to, and
  // the ghosts that came back from the opposite neighbour.
  struct Swap {
    int axis = 0, dir = +1;  // dir +1: to the higher coordinate, received from the lower one
    int to = 0, from = 0;    // ranks (this rank when one rank along the axis)
    std::vector<std::int64_t> send;
    std::size_t recv_first = 0, recv_count = 0;
    std::int64_t last_sent = 0, last_recv = 0;  // counts of the previous build: the caps
  };

  void exchange_records(Swap& sw, Swap& other, const std::vector<char>& out_a, const std::vector<char>& out_b);
  void exchange_rows(const std::vector<Swap*>& pair, int tag, const std::vector<std::vector<double>>& out,
                     std::vector<std::vector<double>>& in, int nc, bool backwards);

  MPI_Comm comm_;
  int rank_ = 0;
  std::size_t n_own_ = 0;
  int pulses_[3] = {0, 0, 0};
  std::vector<Swap> swaps_;
  std::vector<detail::GhostRecord> ghosts_;
  std::vector<std::vector<char>> out_bytes_;
  std::vector<std::vector<double>> rows_out_, rows_in_;
  std::vector<double> acc_;
  std::int64_t messages_ = 0, bytes_ = 0;
};

}  // namespace particles
}  // namespace pmewald
