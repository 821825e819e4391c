#include "base/compute_model.hpp"

#include <stdexcept>

namespace pmewald {
inline namespace base {

namespace detail {
std::atomic<WorkSink> work_sink{nullptr};
void* work_sink_context = nullptr;
}  // namespace detail

namespace {
constexpr const char* kNames[kWorkKinds] = {"pairs",   "spread",      "gather",     "fft",   "solve",
                                            "pack",    "migrate",     "ghost_atoms", "exclusions", "reduce"};
}  // namespace

const char* work_name(Work kind) { return kNames[static_cast<int>(kind)]; }

Work work_from_name(const std::string& name) {
  for (int k = 0; k < kWorkKinds; ++k)
    if (name == kNames[k]) return static_cast<Work>(k);
  throw std::invalid_argument("unknown kind of work '" + name + "'");
}

void set_work_sink(WorkSink sink, void* context) {
  detail::work_sink_context = context;
  detail::work_sink.store(sink, std::memory_order_release);
}

}  // namespace base
}  // namespace pmewald
