// Every MPI message tag of the library, in one place.
//
// Two exchanges that can be in flight at the same time on one communicator must not
// share a tag, so no file picks a tag of its own. An exchange that alternates
// between two tags (NBX rounds: a fast rank's next round must not be taken for the
// current one by a slow rank) owns the tag and the one after it. The library's
// messages travel on its own duplicates of the callers' communicators (Comm), so
// these never meet a caller's tags.
#pragma once

namespace pmewald {
inline namespace comm {
namespace tags {

// particles/migration: atoms to their owners (NBX, + 1; to adjacent domains by
// NeighborExchange, sizes + 1 data), ghost atoms (NeighborExchange, + 1), results back
// to the callers, forces on ghosts back to their owners.
inline constexpr int kMigrationForward = 3100;
inline constexpr int kMigrationAdjacent = 3102;
inline constexpr int kGhostAtoms = 3110;
inline constexpr int kMigrationReverse = 3120;
inline constexpr int kGhostForces = 3125;
// particles/migration route / route_ghosts (a reused pair list's positions along the frozen plans).
inline constexpr int kMigrationRoute = 3122;
inline constexpr int kGhostRoute = 3127;
// particles/staged_ghosts: each pulse's two directions (+ 0 toward higher grid
// coordinates, + 1 toward lower ones) for the ghosts, the forces back and the route.
inline constexpr int kStagedGhosts = 3150;
inline constexpr int kStagedGhostForces = 3152;
inline constexpr int kStagedGhostRoute = 3154;
// particles/exclusions: the id directory round and the pairs to the atoms' holders (NBX, + 1 each).
inline constexpr int kExclusionDirectory = 3130;
inline constexpr int kExclusionHolders = 3140;
// comm/exchange: every message of a plan's executors (FFT remaps, tests' plans) ...
inline constexpr int kExchange = 7301;
// ... except the halo's (comm/halo).
inline constexpr int kHalo = 7411;
// comm/exchange_plan: component labels between a plan's partners (component_root).
inline constexpr int kComponentLabels = 7421;

}  // namespace tags
}  // namespace comm
}  // namespace pmewald
