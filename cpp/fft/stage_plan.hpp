// The stages of a distributed 3-D FFT, for every rank, without MPI: one plan for the
// complex FFT3d and the real-to-complex RealFFT3d.
//
// Stages s = 0..4 and the remaps t = 0..3 between them (t goes from stage t to t+1):
//
//   0 inbox (C order) --in->x--> 1 x-pencils --x->y--> 2 y-pencils --y->z-->
//   3 z-pencils (C order) --z->out--> 4 outbox (C order)
//
// with 1-D FFTs along x at stage 1, y at stage 2 and z at stage 3. A pencil stage is
// stored with its FFT axis fastest (x-pencils [y][z][x], y-pencils [z][x][y],
// z-pencils C order) so each batch of 1-D FFTs is contiguous, except that when a
// rank's x- or y-pencil box equals its previous box the data stays where and as it
// is. A remap that moves nothing on a rank (same box and order) is an identity there;
// FFT stages joined by identities form a group that FFTW transforms with one
// multi-dimensional plan (group_first / group_last).
//
// Real-to-complex: stage 0 is the real inbox, remap 0 moves doubles to the real
// x-pencil (real_x), whose r2c is stage 1's transform; stages 1..4 are boxes of the
// half spectrum (spectrum_mesh: K_h -> K_h/2 + 1 along the halved axis, x except on
// one rank). Every other rule is the complex one, so the real FFT adds only its real
// stage (remap 0 and the r2c/c2r) to the shared pencil pipeline (pencil_pipeline.hpp).
//
// Everything here is a pure function of the mesh and every rank's inbox and outbox:
// the FFTs gather those once and plan from them; tests and a communication model
// plan any number of virtual ranks the same way.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "comm/exchange_plan.hpp"
#include "fft/remap.hpp"
#include "geometry/index_box.hpp"

namespace pmewald {
inline namespace fft {

enum class FFTKind { Complex, RealToComplex };

// The mesh of the half spectrum of a real mesh halved along `halved_axis`.
Int3 spectrum_mesh(const Int3& mesh, int halved_axis);

// Remap t (0..3): "in->x", "x->y", "y->z", "z->out" forward; a backward transform
// runs them reversed as "x->in", "y->x", "z->y", "out->z".
std::string remap_name(int t, Direction d);

// One rank's stages.
struct RankStages {
  std::array<Box3, 5> box;      // stage boxes (real FFT: 0 on the real mesh, 1..4 on the spectrum)
  std::array<Order3, 5> order;  // storage orders (slowest axis first)
  Box3 real_x;                  // remap 0's output box: box[1] (complex), the real x-pencil (real)
  Order3 real_x_order{0, 1, 2};
  std::array<bool, 4> identity{};  // remap t moves nothing on this rank
  // FFT stages 1..3 joined by identities share one plan: group_first[s] / group_last[s].
  std::array<int, 5> group_first{}, group_last{};
  // The groups on this rank, e.g. "xyz" (one rank: one 3-D plan) or "xy,z".
  std::string groups() const;
};

struct FFTStages {
  FFTKind kind = FFTKind::Complex;
  Int3 mesh{0, 0, 0};      // the (real) mesh
  Int3 spectrum{0, 0, 0};  // the mesh of stages 1..4 (the mesh itself for a complex FFT)
  int halved_axis = 0;
  std::vector<RankStages> ranks;  // one per rank
  int size() const { return static_cast<int>(ranks.size()); }
  // Every rank's boxes and orders at the two ends of remap t (indexed: BoxIndex).
  RemapLayout remap_layout(int t) const;
};

// The stages of every rank. inboxes[r] / outboxes[r]: rank r's boxes of the (real)
// mesh and of the spectrum mesh (complex: the same mesh); the caller checks that each
// set tiles its mesh (tiling_problem). halved_axis: the real FFT's, 0 unless one rank.
// contiguous_real_x (real FFT): remap 0 copies a rank's inbox into the x-fastest real
// x-pencil even where the boxes are equal (a local transposing copy), so the r2c reads
// contiguous x lines instead of the caller's C-order array.
FFTStages plan_stages(FFTKind kind, const Int3& mesh, int halved_axis, const std::vector<Box3>& inboxes,
                      const std::vector<Box3>& outboxes, bool contiguous_real_x = false);

// The pencil of `rank` of `nranks` along `axis` (decomposition.hpp's pencil_box),
// normalised: what plan_stages uses.
Box3 pencil_of(int axis, const Int3& mesh, int nranks, int rank);

// "" when the inboxes tile `in_mesh` and the outboxes tile `out_mesh` exactly, else
// what is wrong (the first problem found).
std::string tiling_problem(const std::vector<Box3>& inboxes, const Int3& in_mesh,
                           const std::vector<Box3>& outboxes, const Int3& out_mesh);

}  // namespace fft
}  // namespace pmewald
