// The neighbour search's selection: which partners of one atom lie within the
// cutoff, which of them this rank evaluates, and which might be excluded pairs;
// vectorised for several instruction sets like the pair kernel (pair_kernel.hpp)
// and chosen at run time (base/simd.hpp).
#pragma once

#include <cstdint>

namespace pmewald {
inline namespace realspace {

// The neighbour search's inner loop for atom i over sorted atoms [jb, je):
// appends to list[n..] each j with |r_j - r_i|^2 < rc2 (and own[j] != 0 when
// need_owned, i.e. i is a ghost) that this rank evaluates, in order, and
// returns the new count. With ids != nullptr a hit that might be an excluded
// pair goes to maybe[n_maybe..] instead, whichever rank evaluates it: for an
// owned i when ids[j] lies in i's excluded-id range [lo, hi] and bit ids[j] mod
// 64 is set in i's partner mask, for a ghost i when id_i lies in j's range
// [elo[j], ehi[j]] and bit id_i mod 64 is set in emask[j] (the mask catches
// molecules whose ids are far apart, e.g. files that list atoms by type, where
// the range alone lets almost every pair through). The caller guarantees room for
// je - jb + 8 more entries in both lists (vector stores may write up to 8
// slots past the new counts).
//
// Which rank evaluates a pair of an owned atom o and a ghost g (the ghost's
// owner sees the mirror pair: its own atom and a ghost of o): the one where
// keeps_cross_pair(key_o, key_g), with keys unique per atom and shared by its
// ghosts (Migration::owned_key). Exactly one side keeps a pair, since the rule
// flips when the keys swap. The parity term makes the choice independent of
// how slots are numbered, so two ranks split their pairs about evenly (a plain
// key_o < key_g follows the slot order, i.e. the id order, and can hand a whole
// boundary's pairs to one side when the ids run along the split axis).
inline bool keeps_cross_pair(std::int64_t key_owned, std::int64_t key_ghost) {
  return (((key_owned ^ key_ghost) & 1) != 0) != (key_owned < key_ghost);
}
struct NeighbourQuery {
  double xi, yi, zi, rc2;
  bool need_owned;
  const double *x, *y, *z, *own;
  const std::int64_t* key;  // Migration::owned_key of each atom (a ghost: of its original)
  std::int64_t key_i;
  const std::int64_t* ids = nullptr;
  const std::int64_t *elo = nullptr, *ehi = nullptr;
  const std::int64_t* emask = nullptr;  // bit (id mod 64) of every excluded partner, per atom
  std::int64_t id_i = 0, lo = 0, hi = -1, mask = 0;
};
int select_within(const NeighbourQuery& query, int jb, int je, int* list, int n, int* maybe, int& n_maybe);

}  // namespace realspace
}  // namespace pmewald
