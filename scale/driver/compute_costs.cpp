#include "compute_costs.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#ifdef PMEWALD_SMPI
#include <smpi/smpi.h>
#endif

namespace pmewald_scale {

namespace {

struct Model {
  ComputeCosts costs;
  double speedup = 1.0;
  bool execute = false;
  std::array<double, pmewald::kWorkKinds> units{}, seconds{};
};
Model g_model;  // per simulated rank under SMPI (privatised executable globals)

void sink(pmewald::Work kind, double units, void*) {
  const int k = static_cast<int>(kind);
  g_model.units[k] += units;
  if (!g_model.execute || !(units > 0)) return;
  const double s = units * g_model.costs.seconds_per_unit[k] / g_model.speedup;
  g_model.seconds[k] += s;
#ifdef PMEWALD_SMPI
  // The benched variant: no smpi/cpu-threshold (bursts below it are not dropped).
  if (s > 0) smpi_execute_benched(s);
#endif
}

}  // namespace

ComputeCosts read_compute_costs(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("--compute-costs: cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const std::size_t at = text.find("\"seconds_per_unit\"");
  if (at == std::string::npos) throw std::runtime_error(path + ": no \"seconds_per_unit\" object");
  const std::size_t open = text.find('{', at), close = text.find('}', at);
  if (open == std::string::npos || close == std::string::npos || close < open)
    throw std::runtime_error(path + ": \"seconds_per_unit\" is not an object");
  const std::string body = text.substr(open + 1, close - open - 1);
  ComputeCosts c;
  std::array<bool, pmewald::kWorkKinds> seen{};
  std::size_t pos = 0;
  while ((pos = body.find('"', pos)) != std::string::npos) {
    const std::size_t end = body.find('"', pos + 1);
    const std::size_t colon = body.find(':', end);
    if (end == std::string::npos || colon == std::string::npos) throw std::runtime_error(path + ": bad entry");
    const std::string name = body.substr(pos + 1, end - pos - 1);
    char* stop = nullptr;
    const double v = std::strtod(body.c_str() + colon + 1, &stop);
    if (stop == body.c_str() + colon + 1 || !(v >= 0))
      throw std::runtime_error(path + ": seconds per unit of '" + name + "' must be a number >= 0");
    const pmewald::Work kind = pmewald::work_from_name(name);
    c.seconds_per_unit[static_cast<int>(kind)] = v;
    seen[static_cast<int>(kind)] = true;
    pos = static_cast<std::size_t>(stop - body.c_str());
  }
  for (int k = 0; k < pmewald::kWorkKinds; ++k)
    if (!seen[k])
      throw std::runtime_error(path + ": no seconds per unit for '" +
                               pmewald::work_name(static_cast<pmewald::Work>(k)) + "'");
  return c;
}

void install_work_sink(const ComputeCosts* costs, double speedup) {
#ifndef PMEWALD_SMPI
  if (costs) throw std::runtime_error("--compute-costs needs the SMPI build (it models simulated time)");
#endif
  if (!(speedup > 0)) throw std::runtime_error("--compute-speedup must be positive");
  g_model.speedup = speedup;
  g_model.execute = costs != nullptr;
  if (costs) g_model.costs = *costs;
  pmewald::set_work_sink(&sink);
}

const std::array<double, pmewald::kWorkKinds>& work_units() { return g_model.units; }
const std::array<double, pmewald::kWorkKinds>& work_seconds() { return g_model.seconds; }
void reset_work() {
  g_model.units.fill(0.0);
  g_model.seconds.fill(0.0);
}

}  // namespace pmewald_scale
