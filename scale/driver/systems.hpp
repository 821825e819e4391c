// Test systems for the scale driver, generated rank by rank.
//
// Under SMPI all ranks live in one process, so no rank may build the whole system:
// each generates only the atoms it passes to the solver, in time and memory
// proportional to them. Every atom is a pure function of its id (its position's
// random displacement and orientation come from a hash of the id and the seed), and
// each rank keeps the atoms (whole molecules) whose owner point lies in its brick
// of the mesh decomposition, so the union over ranks is the same system for every
// rank count: forces can be compared atom by atom with the one-rank result.
//
//  - rock salt: n^3 cubic cells of side a (8 ions, charges +-1), every ion
//    displaced by a uniform random vector in [-disp, disp]^3 (so forces are not zero
//    by symmetry). ids 8 c + b, c = cx + n (cy + n cz).
//  - water: n^3 rigid 3-site molecules (O-H 1 A, H-O-H 109.47 deg, charges -0.8476,
//    +0.4238 x 2, SPC/E's) on a cubic lattice of spacing (1 / density)^(1/3), the
//    oxygen jittered by +-0.1 spacing, random orientations; ids 3 k, 3 k + 1, 3 k + 2;
//    the three intramolecular pairs excluded. Not equilibrated: a water-like charge
//    distribution with molecules and exclusions, not a liquid.
//
// vacuum: the top fraction of the cells (rock salt) or lattice planes (water) along z
// is left empty, so the ranks whose domains lie there own no atoms (the box is
// unchanged). Whole cells and molecules go, so the system stays neutral.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace pmewald_scale {

struct SystemSpec {
  std::string kind = "rocksalt";  // "rocksalt" | "water"
  int cells = 8;                   // per axis: unit cells (rock salt) or lattice sites (water)
  double lattice = 5.64;           // rock salt cell side, A
  double displacement = 0.1;       // rock salt: max displacement per axis, A
  double density = 0.0334;         // water molecules per A^3
  double vacuum = 0.0;             // empty fraction along z
  std::uint64_t seed = 1;
};

// Atoms for a cubic (side length) box. Call box_side(spec) for the side.
double box_side(const SystemSpec& spec);
// Total atoms of the system (after the vacuum cut).
std::int64_t total_atoms(const SystemSpec& spec);
// Sum of charges squared (for parameter choices).
double sum_q2(const SystemSpec& spec);

struct LocalAtoms {
  std::vector<double> positions;  // n x 3
  std::vector<double> charges;
  std::vector<std::int64_t> ids;
  std::vector<std::int64_t> exclusions;  // m x 2 (id pairs), water only
  std::size_t size() const { return charges.size(); }
};

// The atoms whose owner point lies in `brick` ([lo, hi) mesh indices of a mesh of
// `mesh` points per axis over the cubic box): the ion itself (rock salt) or the
// oxygen of the molecule (water). The owner mesh point is floor(K s) of the wrapped
// fractional coordinate s, as the solver's migration computes it (an atom whose
// rounding differs is simply migrated: the results do not depend on the split).
LocalAtoms generate_local(const SystemSpec& spec, const std::array<int, 3>& mesh,
                          const std::array<int, 3>& lo, const std::array<int, 3>& hi);

}  // namespace pmewald_scale
