#include "particles/staged_ghosts.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "comm/mpi_helpers.hpp"
#include "comm/tags.hpp"
#include "particles/migration.hpp"

namespace pmewald {
inline namespace particles {

using detail::GhostRecord;

namespace {

// Records a swap's first message may carry: both sides know the swap's last count.
std::int64_t cap_of(std::int64_t last) { return std::max<std::int64_t>(64, last + last / 4); }

constexpr std::size_t kHeader = sizeof(std::int64_t);

int dir_index(int dir) { return dir > 0 ? 0 : 1; }

}  // namespace

void StagedGhosts::build(const Migration& mig) {
  MPI_Comm_rank(comm_, &rank_);
  const DomainGrid& dom = mig.domains();
  const PeriodicCell& cell = mig.cell();
  const Int3 g = dom.coords(rank_);
  n_own_ = mig.n_owned();
  const auto own_s = mig.owned_fractional();
  const auto own_r = mig.owned_positions();
  const auto own_q = mig.owned_charges();
  const auto own_id = mig.owned_ids();
  std::vector<Swap> old = std::move(swaps_);
  swaps_.clear();
  ghosts_.clear();
  auto record_of = [&](std::int64_t e) {
    if (e >= static_cast<std::int64_t>(n_own_)) return ghosts_[static_cast<std::size_t>(e) - n_own_];
    const std::size_t i = static_cast<std::size_t>(e);
    GhostRecord rec{};
    for (int a = 0; a < 3; ++a) {
      rec.s[a] = own_s(i, a);
      rec.r[a] = own_r(i, a);
    }
    rec.q = own_q(i);
    rec.id = own_id(i);
    rec.key = mig.owned_key(i);
    return rec;
  };
  for (int d = 0; d < 3; ++d) {
    const int p = dom.grid()[d];
    const int K = dom.resolution()[d];
    const double c = mig.ghost_margin(d);
    pulses_[d] = dom.pulses(d, c * K);
    // Candidates of each direction: pulse 1 everything held before this axis.
    const std::int64_t before = static_cast<std::int64_t>(n_own_ + ghosts_.size());
    std::int64_t cand_lo[2] = {0, 0}, cand_hi[2] = {before, before};
    for (int k = 0; k < pulses_[d]; ++k) {
      Swap pair[2];
      std::vector<char>* out[2];
      if (out_bytes_.size() < swaps_.size() + 2) out_bytes_.resize(swaps_.size() + 2);  // before taking pointers
      for (int di = 0; di < 2; ++di) {
        const int dir = di == 0 ? +1 : -1;
        Swap& sw = pair[di];
        sw.axis = d;
        sw.dir = dir;
        const int gd = ((g[d] + dir) % p + p) % p;  // the neighbour's coordinate
        const int gs = ((g[d] - dir) % p + p) % p;  // the coordinate that sends to me
        Int3 to = g, from = g;
        to[d] = gd;
        from[d] = gs;
        sw.to = dom.rank_of(to[0], to[1], to[2]);
        sw.from = dom.rank_of(from[0], from[1], from[2]);
        // Crossing the periodic boundary moves the image by one period.
        const int shift = dir > 0 && g[d] == p - 1 ? -1 : dir < 0 && g[d] == 0 ? +1 : 0;
        const int L = dom.lo(d, gd), H = dom.hi(d, gd);
        const std::size_t idx = swaps_.size() + static_cast<std::size_t>(di);
        if (idx < old.size() && old[idx].axis == d && old[idx].dir == dir) {
          sw.last_sent = old[idx].last_sent;
          sw.last_recv = old[idx].last_recv;
        }
        std::vector<char>& bytes = out_bytes_[idx];
        bytes.resize(kHeader);
        for (std::int64_t e = cand_lo[di]; e < cand_hi[di]; ++e) {
          GhostRecord rec = record_of(e);
          const double x = rec.s[d] + shift;
          const long long m_lo = static_cast<long long>(std::floor(K * (x - c)));
          const long long m_hi = static_cast<long long>(std::floor(K * (x + c)));
          if (!(m_lo <= H - 1 && m_hi >= L)) continue;
          sw.send.push_back(e);
          if (shift != 0) {
            rec.s[d] = x;
            for (int a = 0; a < 3; ++a) rec.r[a] += shift * cell.box[d][a];
          }
          const char* b = reinterpret_cast<const char*>(&rec);
          bytes.insert(bytes.end(), b, b + sizeof(rec));
        }
        const std::int64_t n = static_cast<std::int64_t>(sw.send.size());
        std::memcpy(bytes.data(), &n, kHeader);
        out[di] = &bytes;
      }
      exchange_records(pair[0], pair[1], *out[0], *out[1]);
      // What came in moves on in the same direction at the next pulse.
      for (int di = 0; di < 2; ++di) {
        cand_lo[di] = static_cast<std::int64_t>(n_own_ + pair[di].recv_first);
        cand_hi[di] = cand_lo[di] + static_cast<std::int64_t>(pair[di].recv_count);
        swaps_.push_back(std::move(pair[di]));
      }
    }
  }
}

// Both directions of one pulse at once: a header with the count and up to cap
// records in the first message, the rest (if any) in a second one.
void StagedGhosts::exchange_records(Swap& a, Swap& b, const std::vector<char>& out_a, const std::vector<char>& out_b) {
  Swap* sw[2] = {&a, &b};
  const std::vector<char>* out[2] = {&out_a, &out_b};
  std::vector<char> in[2];
  const std::size_t rec = sizeof(GhostRecord);
  if (sw[0]->to == rank_) {  // one rank along the axis: both messages are to myself
    for (int i = 0; i < 2; ++i) in[i] = *out[i];
  } else {
    MPI_Request reqs[6];
    int nreq = 0;
    for (int i = 0; i < 2; ++i) {
      const std::int64_t cap = cap_of(sw[i]->last_recv);
      in[i].resize(kHeader + static_cast<std::size_t>(cap) * rec);
      check_mpi(MPI_Irecv(in[i].data(), static_cast<int>(in[i].size()), MPI_BYTE, sw[i]->from,
                          tags::kStagedGhosts + dir_index(sw[i]->dir), comm_, &reqs[nreq++]),
                "MPI_Irecv");
    }
    MPI_Request sends[4];
    int nsend = 0;
    for (int i = 0; i < 2; ++i) {
      const std::int64_t n = static_cast<std::int64_t>(sw[i]->send.size());
      const std::int64_t cap = cap_of(sw[i]->last_sent);
      const std::int64_t first = std::min(n, cap);
      const int tag = tags::kStagedGhosts + dir_index(sw[i]->dir);
      const std::size_t len1 = kHeader + static_cast<std::size_t>(first) * rec;
      check_mpi(MPI_Isend(out[i]->data(), static_cast<int>(len1), MPI_BYTE, sw[i]->to, tag, comm_, &sends[nsend++]),
                "MPI_Isend");
      messages_ += 1;
      bytes_ += static_cast<std::int64_t>(len1);
      if (n > cap) {
        const std::size_t len2 = static_cast<std::size_t>(n - cap) * rec;
        check_mpi(MPI_Isend(out[i]->data() + len1, static_cast<int>(len2), MPI_BYTE, sw[i]->to, tag, comm_,
                            &sends[nsend++]),
                  "MPI_Isend");
        messages_ += 1;
        bytes_ += static_cast<std::int64_t>(len2);
      }
    }
    check_mpi(MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE), "MPI_Waitall");
    for (int i = 0; i < 2; ++i) {
      std::int64_t n = 0;
      std::memcpy(&n, in[i].data(), kHeader);
      const std::int64_t cap = cap_of(sw[i]->last_recv);
      if (n > cap) {
        const std::size_t len1 = kHeader + static_cast<std::size_t>(cap) * rec;
        in[i].resize(kHeader + static_cast<std::size_t>(n) * rec);
        check_mpi(MPI_Recv(in[i].data() + len1, static_cast<int>(static_cast<std::size_t>(n - cap) * rec), MPI_BYTE,
                           sw[i]->from, tags::kStagedGhosts + dir_index(sw[i]->dir), comm_, MPI_STATUS_IGNORE),
                  "MPI_Recv");
      }
    }
    check_mpi(MPI_Waitall(nsend, sends, MPI_STATUSES_IGNORE), "MPI_Waitall");
  }
  for (int i = 0; i < 2; ++i) {
    std::int64_t n = 0;
    std::memcpy(&n, in[i].data(), kHeader);
    sw[i]->last_sent = static_cast<std::int64_t>(sw[i]->send.size());
    sw[i]->last_recv = n;
    sw[i]->recv_first = ghosts_.size();
    sw[i]->recv_count = static_cast<std::size_t>(n);
    const std::size_t at = ghosts_.size();
    ghosts_.resize(at + static_cast<std::size_t>(n));
    if (n > 0) std::memcpy(ghosts_.data() + at, in[i].data() + kHeader, static_cast<std::size_t>(n) * rec);
  }
}

// Rows of one pulse's two swaps: forwards (route: entries' rows to `to`, ghosts'
// rows from `from`) or backwards (reverse: ghosts' rows to `from`, entries' rows
// from `to`). Counts are known on both sides.
void StagedGhosts::exchange_rows(const std::vector<Swap*>& pair, int tag, const std::vector<std::vector<double>>& out,
                                 std::vector<std::vector<double>>& in, int nc, bool backwards) {
  const std::size_t w = static_cast<std::size_t>(nc);
  for (std::size_t i = 0; i < pair.size(); ++i) {
    const Swap& s = *pair[i];
    in[i].resize(w * (backwards ? s.send.size() : s.recv_count));
  }
  if (pair[0]->to == rank_) {  // to myself: what goes out comes in
    for (std::size_t i = 0; i < pair.size(); ++i) in[i] = out[i];
    return;
  }
  MPI_Request reqs[4];
  int nreq = 0;
  for (std::size_t i = 0; i < pair.size(); ++i) {
    const Swap& s = *pair[i];
    check_mpi(MPI_Irecv(in[i].data(), static_cast<int>(in[i].size()), MPI_DOUBLE, backwards ? s.to : s.from,
                        tag + dir_index(s.dir), comm_, &reqs[nreq++]),
              "MPI_Irecv");
  }
  for (std::size_t i = 0; i < pair.size(); ++i) {
    const Swap& s = *pair[i];
    check_mpi(MPI_Isend(out[i].data(), static_cast<int>(out[i].size()), MPI_DOUBLE, backwards ? s.from : s.to,
                        tag + dir_index(s.dir), comm_, &reqs[nreq++]),
              "MPI_Isend");
    messages_ += 1;
    bytes_ += static_cast<std::int64_t>(out[i].size() * sizeof(double));
  }
  check_mpi(MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE), "MPI_Waitall");
}

void StagedGhosts::reverse(const double* ghost_values, double* owned_inout, int nc) {
  const std::size_t w = static_cast<std::size_t>(nc);
  acc_.assign(ghost_values, ghost_values + w * ghosts_.size());
  rows_out_.resize(2);
  rows_in_.resize(2);
  for (std::size_t p = swaps_.size(); p >= 2; p -= 2) {
    std::vector<Swap*> pair{&swaps_[p - 2], &swaps_[p - 1]};
    for (std::size_t i = 0; i < 2; ++i) {
      const Swap& s = *pair[i];
      rows_out_[i].assign(acc_.begin() + static_cast<std::ptrdiff_t>(w * s.recv_first),
                          acc_.begin() + static_cast<std::ptrdiff_t>(w * (s.recv_first + s.recv_count)));
    }
    exchange_rows(pair, tags::kStagedGhostForces, rows_out_, rows_in_, nc, true);
    for (std::size_t i = 0; i < 2; ++i) {
      const Swap& s = *pair[i];
      for (std::size_t j = 0; j < s.send.size(); ++j) {
        const std::size_t e = static_cast<std::size_t>(s.send[j]);
        double* row = e < n_own_ ? owned_inout + w * e : acc_.data() + w * (e - n_own_);
        for (std::size_t k = 0; k < w; ++k) row[k] += rows_in_[i][w * j + k];
      }
    }
  }
}

void StagedGhosts::route(const double* owned_values, int nc, double* ghost_out) {
  const std::size_t w = static_cast<std::size_t>(nc);
  rows_out_.resize(2);
  rows_in_.resize(2);
  for (std::size_t p = 0; p + 1 < swaps_.size(); p += 2) {
    std::vector<Swap*> pair{&swaps_[p], &swaps_[p + 1]};
    for (std::size_t i = 0; i < 2; ++i) {
      const Swap& s = *pair[i];
      rows_out_[i].resize(w * s.send.size());
      for (std::size_t j = 0; j < s.send.size(); ++j) {
        const std::size_t e = static_cast<std::size_t>(s.send[j]);
        const double* row = e < n_own_ ? owned_values + w * e : ghost_out + w * (e - n_own_);
        std::copy(row, row + w, rows_out_[i].data() + w * j);
      }
    }
    exchange_rows(pair, tags::kStagedGhostRoute, rows_out_, rows_in_, nc, false);
    for (std::size_t i = 0; i < 2; ++i) {
      const Swap& s = *pair[i];
      std::copy(rows_in_[i].begin(), rows_in_[i].end(), ghost_out + w * s.recv_first);
    }
  }
}

}  // namespace particles
}  // namespace pmewald
