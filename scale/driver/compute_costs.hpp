// Modelled computation for the scale driver (docs/scaling.md "Modelled computation").
//
// The core reports the work of each computation burst (pmewald::charge, base/
// compute_model.hpp). The driver always counts it per kind (the units a run did,
// reported in its JSON: what the calibration divides the phase times by); with
// --compute-costs FILE under SMPI it also turns every burst into simulated time,
// smpi_execute_benched(units x seconds per unit), while SimGrid runs with
// smpi/simulate-computation:no, so a step's simulated time is the model's
// computation plus the simulated communication, independent of the load of the
// machine that simulates it. Per simulated rank (SMPI privatises the executable's
// globals, and the library is linked into it).
#pragma once

#include <array>
#include <string>

#include <pmewald/pmewald.hpp>

namespace pmewald_scale {

struct ComputeCosts {
  std::array<double, pmewald::kWorkKinds> seconds_per_unit{};
};

// Reads {"seconds_per_unit": {"pairs": s, "spread": s, ...}, ...} (every kind
// present); throws std::runtime_error naming the problem.
ComputeCosts read_compute_costs(const std::string& path);

// Installs the driver's sink: counts units per kind, and with `costs` (SMPI builds
// only) executes their modelled time.
// speedup: the modelled seconds are divided by it (--compute-speedup: a rank that
// computes K times faster than this machine's core, e.g. one GPU per rank).
void install_work_sink(const ComputeCosts* costs, double speedup = 1.0);

// Units counted since the last reset, per kind, and the modelled seconds.
const std::array<double, pmewald::kWorkKinds>& work_units();
const std::array<double, pmewald::kWorkKinds>& work_seconds();
void reset_work();

}  // namespace pmewald_scale
