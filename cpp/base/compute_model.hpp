// Modelled computation: the work of each computation burst, reported to an
// optional process-wide sink.
//
// At the end of each computation burst the host-side driver of its kernels calls
// charge(kind, units) with the burst's work (pair kernel: candidate pairs; spread and
// gather: atoms x order^3; FFT: points of each batch of 1-D transforms; k-space solve:
// points; packing and unpacking: bytes; migration, ghost atoms, exclusions, the force
// sum: atoms). Nothing listens by default, and a call then costs one relaxed atomic
// load and a branch. The SMPI scale driver (scale/driver, docs/scaling.md "Modelled
// computation") installs a sink that turns the work into simulated time
// (smpi_execute(units x seconds per unit)), so step times under SimGrid do not
// depend on how loaded the simulating machine is; a counting sink
// (WorkCounter) gives the units a native run did, for the calibration.
//
// Each kind is named after the timings() phase it is calibrated from.
#pragma once

#include <array>
#include <atomic>
#include <string>

namespace pmewald {
inline namespace base {

enum class Work : int { Pairs, Spread, Gather, FFT, Solve, Pack, Migrate, GhostAtoms, Exclusions, Reduce };
constexpr int kWorkKinds = 10;

// "pairs", "spread", ... (the names the driver's --compute-costs file uses).
const char* work_name(Work kind);
// The kind named `name`; throws std::invalid_argument for an unknown name.
Work work_from_name(const std::string& name);

// A sink: called with the kind, the units and the context it was installed with.
using WorkSink = void (*)(Work kind, double units, void* context);

// Installs (or, with nullptr, removes) the process-wide sink. Not for use while
// another thread computes.
void set_work_sink(WorkSink sink, void* context = nullptr);

namespace detail {
extern std::atomic<WorkSink> work_sink;
extern void* work_sink_context;
}  // namespace detail

inline void charge(Work kind, double units) {
  if (const WorkSink s = detail::work_sink.load(std::memory_order_relaxed)) s(kind, units, detail::work_sink_context);
}

// A sink that adds up the units per kind (install with install(), remove with
// uninstall() or by destruction).
class WorkCounter {
 public:
  WorkCounter() = default;
  WorkCounter(const WorkCounter&) = delete;
  WorkCounter& operator=(const WorkCounter&) = delete;
  ~WorkCounter() { uninstall(); }
  void install() {
    set_work_sink(&WorkCounter::add, this);
    installed_ = true;
  }
  void uninstall() {
    if (installed_) set_work_sink(nullptr);
    installed_ = false;
  }
  void reset() { units_.fill(0.0); }
  double units(Work kind) const { return units_[static_cast<int>(kind)]; }

 private:
  static void add(Work kind, double units, void* self) {
    static_cast<WorkCounter*>(self)->units_[static_cast<int>(kind)] += units;
  }
  std::array<double, kWorkKinds> units_{};
  bool installed_ = false;
};

}  // namespace base
}  // namespace pmewald
