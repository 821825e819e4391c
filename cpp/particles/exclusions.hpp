// Excluded pairs (bonded partners whose erfc term the real-space sum leaves out):
// the lists of each caller's atom, routed once through a distributed directory.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/sparse_exchange.hpp"

namespace pmewald {
inline namespace particles {

// Excluded partners of the caller's atoms, from (m x 2) id pairs held on any
// ranks. Routed once through a distributed directory (id -> rank at
// hash(id) % P: two NBX rounds, no O(P) data) to the ranks that hold the atoms
// in the caller's split, as a CSR list per local atom. Migration::forward then
// carries each atom's list to its owner as payload, so steady-state steps
// (same ids and pairs on every rank) cost no routing, and no reduction of their
// own where the caller folds check() into another agreement (the solver: the
// migration's), else one small allreduce (update()).
class ExclusionList {
 public:
  explicit ExclusionList(MPI_Comm comm);

  // Collective. ids: this rank's atom ids (caller order); pairs: m x 2
  // row-major, any rank, each pair once. Re-routes only when some rank's ids
  // or pairs changed since the last successful update. Self-pairs, unknown
  // ids and (when any exclusions exist) duplicate atom ids raise ValueError on
  // every rank.
  void update(const std::int64_t* ids, std::size_t n_local, const std::int64_t* pairs,
              std::size_t m);

  // update() in two halves around an agreement someone else makes (the solver
  // folds it into the migration's: Migration::SharedAgreement), so that an
  // unchanged step costs no reduction of its own. check() is local: this rank's
  // flags (kFlags ints: changed here, pairs here, a problem here); the arrays must
  // stay valid until settle(), which takes the flags' maxima over the ranks and
  // does the rest of update() (collective when some rank changed or failed).
  static constexpr int kFlags = 3;
  void check(const std::int64_t* ids, std::size_t n_local, const std::int64_t* pairs, std::size_t m,
             int flags[kFlags]);
  void settle(const int agreed[kFlags]);

  // CSR over the local atoms (n_local + 1 offsets), or nullptr when no rank
  // has exclusions.
  const std::int64_t* offsets() const { return any_ ? off_.data() : nullptr; }
  const std::int64_t* partners() const { return any_ ? ids_.data() : nullptr; }
  bool any() const { return any_; }
  // Whether the last update() changed the lists: rerouted them, or emptied them
  // because no rank has pairs any more (false: the cached lists were reused).
  bool changed() const { return changed_; }

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  SparseExchange nbx_dir_, nbx_origin_;
  bool valid_ = false, any_ = false, changed_ = false;
  std::uint64_t fingerprint_ = 0;
  // Between check() and settle(): the arrays, this call's fingerprint, its problem.
  struct Pending {
    const std::int64_t *ids = nullptr, *pairs = nullptr;
    std::size_t n_local = 0, m = 0;
    std::uint64_t fp = 0;
    std::string err;
  } pending_;
  std::vector<std::int64_t> off_, ids_;
};

}  // namespace particles
}  // namespace pmewald
