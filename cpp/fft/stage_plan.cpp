#include "fft/stage_plan.hpp"

#include <stdexcept>

#include "geometry/decomposition.hpp"

namespace pmewald {
inline namespace fft {

namespace {

constexpr Order3 kXFastest{1, 2, 0};  // x-pencils: [y][z][x]
constexpr Order3 kYFastest{2, 0, 1};  // y-pencils: [z][x][y]

bool same_stage(const Box3& a, const Order3& oa, const Box3& b, const Order3& ob) {
  return a == b && (a.empty() || oa == ob);
}

}  // namespace

Int3 spectrum_mesh(const Int3& mesh, int halved_axis) {
  Int3 s = mesh;
  s[halved_axis] = mesh[halved_axis] / 2 + 1;
  return s;
}

std::string remap_name(int t, Direction d) {
  static const char* names[2][4] = {{"in->x", "x->y", "y->z", "z->out"}, {"x->in", "y->x", "z->y", "out->z"}};
  return names[static_cast<int>(d)][t];
}

Box3 pencil_of(int axis, const Int3& mesh, int nranks, int rank) {
  return normalised(pencil_box(axis, nranks, mesh, rank));
}

std::string RankStages::groups() const {
  std::string s;
  for (int st = 1; st <= 3; ++st) {
    if (group_first[st] != st) continue;
    if (!s.empty()) s += ",";
    for (int k = st; k <= group_last[st]; ++k) s += "xyz"[k - 1];
  }
  return s;
}

FFTStages plan_stages(FFTKind kind, const Int3& mesh, int halved_axis, const std::vector<Box3>& inboxes,
                      const std::vector<Box3>& outboxes, bool contiguous_real_x) {
  const int P = static_cast<int>(inboxes.size());
  if (static_cast<int>(outboxes.size()) != P) throw std::invalid_argument("plan_stages: one inbox and one outbox per rank");
  const bool real = kind == FFTKind::RealToComplex;
  FFTStages all;
  all.kind = kind;
  all.mesh = mesh;
  all.halved_axis = real ? halved_axis : 0;
  all.spectrum = real ? spectrum_mesh(mesh, halved_axis) : mesh;
  all.ranks.resize(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) {
    RankStages& s = all.ranks[static_cast<size_t>(r)];
    s.box[0] = normalised(inboxes[static_cast<size_t>(r)]);
    s.box[4] = normalised(outboxes[static_cast<size_t>(r)]);
    // The spectrum's x-pencil splits y and z as the real one does (pencil_box(0, ...)
    // does not depend on the x size; another halved axis means one rank, where every
    // box is the whole mesh).
    s.box[1] = pencil_of(0, all.spectrum, P, r);
    s.box[2] = pencil_of(1, all.spectrum, P, r);
    s.box[3] = pencil_of(2, all.spectrum, P, r);
    s.order[0] = kCOrder;
    if (real) {
      // When in->x is skipped the r2c reads the caller's C-order array; its output (a
      // fresh array either way) is C order if the y stage joins it (so the group can
      // reach the C-order z-pencils), else x fastest for the x->y remap.
      s.real_x = pencil_of(0, mesh, P, r);
      const bool in_x_skipped = s.real_x == s.box[0] && !contiguous_real_x;
      s.real_x_order = in_x_skipped ? kCOrder : kXFastest;
      s.order[1] = (in_x_skipped && s.box[2] == s.box[1]) ? kCOrder : kXFastest;
    } else {
      s.order[1] = s.box[1] == s.box[0] ? s.order[0] : kXFastest;
      s.real_x = s.box[1];
      s.real_x_order = s.order[1];
    }
    s.order[2] = s.box[2] == s.box[1] ? s.order[1] : kYFastest;
    s.order[3] = kCOrder;
    s.order[4] = kCOrder;
    s.identity[0] = same_stage(s.box[0], s.order[0], s.real_x, s.real_x_order);
    for (int t = 1; t < 4; ++t) s.identity[t] = same_stage(s.box[t], s.order[t], s.box[t + 1], s.order[t + 1]);
    for (int st = 1; st <= 3; ++st) s.group_first[st] = (st > 1 && s.identity[st - 1]) ? s.group_first[st - 1] : st;
    for (int st = 3; st >= 1; --st) s.group_last[st] = (st < 3 && s.identity[st]) ? s.group_last[st + 1] : st;
  }
  return all;
}

RemapLayout FFTStages::remap_layout(int t) const {
  std::vector<Box3> in, out;
  std::vector<Order3> in_order, out_order;
  for (const RankStages& s : ranks) {
    in.push_back(s.box[t]);
    in_order.push_back(s.order[t]);
    out.push_back(t == 0 ? s.real_x : s.box[t + 1]);
    out_order.push_back(t == 0 ? s.real_x_order : s.order[t + 1]);
  }
  return RemapLayout(std::move(in), std::move(in_order), std::move(out), std::move(out_order));
}

std::string tiling_problem(const std::vector<Box3>& inboxes, const Int3& in_mesh, const std::vector<Box3>& outboxes,
                           const Int3& out_mesh) {
  std::string why;
  if (!tiles_exactly(inboxes, in_mesh, &why)) return "inbox boxes do not tile the mesh: " + why;
  if (!tiles_exactly(outboxes, out_mesh, &why))
    return "outbox boxes do not tile the " + std::string(in_mesh == out_mesh ? "mesh" : "spectrum mesh") + ": " + why;
  return "";
}

}  // namespace fft
}  // namespace pmewald
