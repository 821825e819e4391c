// pmewald_scale: the PME solver on P MPI ranks, every communication mode, timed by
// MPI_Wtime (simulated time under SimGrid's SMPI; docs/scaling.md).
//
//   smpirun -np 256 -platform scale/platforms/fat_tree_1024.xml -hostfile HOSTS
//       [SMPI options: pmewald.bench scale prints them] build-smpi/scale/pmewald_scale
//       --system water --cells 32 --mesh 125 --alpha 0.3711 --order 7 --cutoff 9 --json out.json
//
// Each rank generates only its own atoms (systems.hpp); every mode builds its solver,
// runs --warmup untimed and --steps timed compute calls, and the driver reports
// (rank 0, JSON): the step time (max over ranks), per-phase times and the solver's
// message and byte counters per rank (max and mean over ranks), the time each rank
// spends inside MPI and its MPI calls (mpi_profile.hpp), energy terms, virial and a
// force checksum, and optionally dumps every force (id order) for comparison with
// the one-rank result.
//
// Where later variants go: `Variant` below is one configuration the driver times
// (a communication mode or "auto", with or without overlap). A new solver option is
// a new field of Variant filled in parse_variants(), applied in solver_options(); the
// JSON records the variant's name, the mode used and whether it overlapped.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <pmewald/pmewald.hpp>

#include "compute_costs.hpp"
#include "mpi_profile.hpp"
#include "systems.hpp"

namespace {

using pmewald_scale::LocalAtoms;
using pmewald_scale::SystemSpec;

struct Variant {
  std::string name;            // as reported: a mode or "auto", "+overlap" when overlapped
  pmewald::CommMode mode = pmewald::CommMode::Nonblocking;
  bool choose_mode = false;    // "auto": the solver's first calls try the variants (mode_choice.hpp)
  // A mode: explicit either way. "auto": unset (the solver tries every mode with and
  // without overlap, as PME(comm_mode="auto") does), "auto+overlap": on.
  std::optional<bool> overlap = false;
};

struct Args {
  SystemSpec system;
  pmewald::Int3 mesh{0, 0, 0};
  int order = 5;
  double alpha = 0, cutoff = 9.0, coulomb = 1.0;
  std::string diff = "ad";
  std::vector<Variant> variants;
  int warmup = 1, steps = 2;
  std::string json, dump;
  std::string compute_costs;  // modelled computation (compute_costs.hpp); "" = SMPI times the bursts
  double compute_speedup = 1.0;  // the modelled computation divided by this (compute_costs.hpp)
  double progress_call_seconds = 0;  // each MPI_Test* call's cost (mpi_profile.hpp)
  std::int64_t poll_rows = 0;        // the overlap's progress-call interval (0: the solver's default)
  double poll_seconds = 0;
  std::string ghosts = "auto";   // ghost exchange: auto, direct, staged
  std::string balance = "off";   // real-space load balancing: off, once, dynamic
  std::string balance_by = "pairs";
  // One solver for every fixed-mode variant, switched with set_comm_mode (plans built
  // once: at 1,024 simulated ranks the set-ups were 64% of a run's wall time); "auto"
  // always builds its own, whose first calls try the variants.
  bool one_solver = false;
};

[[noreturn]] void usage(const std::string& why) {
  throw std::invalid_argument(
      why +
      "\nusage: pmewald_scale --system rocksalt|water --cells N [--vacuum F] [--displacement A] [--seed S]\n"
      "         --mesh K|Kx,Ky,Kz --alpha A [--cutoff RC] [--order P] [--diff ad|ik] [--coulomb K]\n"
      "         [--modes pt2pt,nonblocking,collective,auto (each optionally +overlap)] [--warmup W] [--steps S] [--json PATH] [--dump PREFIX]\n"
      "         [--compute-costs FILE (SMPI: modelled computation, run with smpi/simulate-computation:no)]\n"
      "         [--compute-speedup K (modelled computation / K)] [--ghosts auto|direct|staged]\n"
      "         [--progress-call-seconds S (each MPI_Test, MPI_Testsome, MPI_Testall costs S under SMPI)]\n"
      "         [--overlap-poll ROWS,SECONDS (the overlap's progress-call interval)]\n"
      "         [--balance off|once|dynamic] [--balance-by pairs|time] [--one-solver]");
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// "pt2pt", "nonblocking", "collective" or "auto", each optionally with "+overlap".
std::vector<Variant> parse_variants(const std::string& list) {
  std::vector<Variant> out;
  const std::string suffix = "+overlap";
  for (const std::string& name : split_commas(list)) {
    Variant v{name};
    std::string base = name;
    if (base.size() > suffix.size() && base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0) {
      v.overlap = true;
      base.resize(base.size() - suffix.size());
    }
    v.choose_mode = base == "auto";
    if (!v.choose_mode) v.mode = pmewald::comm_mode_from_string(base);
    if (v.choose_mode && !v.overlap.value_or(false)) v.overlap.reset();
    out.push_back(v);
  }
  if (out.empty()) usage("--modes names no mode");
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  a.variants = parse_variants("pt2pt,nonblocking,collective");
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage("missing value after " + k);
      return argv[++i];
    };
    if (k == "--system") a.system.kind = value();
    else if (k == "--cells") a.system.cells = std::stoi(value());
    else if (k == "--vacuum") a.system.vacuum = std::stod(value());
    else if (k == "--displacement") a.system.displacement = std::stod(value());
    else if (k == "--seed") a.system.seed = std::stoull(value());
    else if (k == "--mesh") {
      const auto parts = split_commas(value());
      if (parts.size() == 1) a.mesh = {std::stoi(parts[0]), std::stoi(parts[0]), std::stoi(parts[0])};
      else if (parts.size() == 3) a.mesh = {std::stoi(parts[0]), std::stoi(parts[1]), std::stoi(parts[2])};
      else usage("--mesh takes K or Kx,Ky,Kz");
    } else if (k == "--alpha") a.alpha = std::stod(value());
    else if (k == "--cutoff") a.cutoff = std::stod(value());
    else if (k == "--order") a.order = std::stoi(value());
    else if (k == "--diff") a.diff = value();
    else if (k == "--coulomb") a.coulomb = std::stod(value());
    else if (k == "--modes") a.variants = parse_variants(value());
    else if (k == "--warmup") a.warmup = std::stoi(value());
    else if (k == "--steps") a.steps = std::stoi(value());
    else if (k == "--json") a.json = value();
    else if (k == "--dump") a.dump = value();
    else if (k == "--compute-costs") a.compute_costs = value();
    else if (k == "--compute-speedup") a.compute_speedup = std::stod(value());
    else if (k == "--progress-call-seconds") a.progress_call_seconds = std::stod(value());
    else if (k == "--overlap-poll") {
      const std::string v = value();
      const auto comma = v.find(',');
      if (comma == std::string::npos) usage("--overlap-poll takes ROWS,SECONDS");
      a.poll_rows = std::stoll(v.substr(0, comma));
      a.poll_seconds = std::stod(v.substr(comma + 1));
      if (a.poll_rows < 1 || !(a.poll_seconds > 0)) usage("--overlap-poll: ROWS >= 1 and SECONDS > 0");
    }
    else if (k == "--ghosts") a.ghosts = value();
    else if (k == "--balance") a.balance = value();
    else if (k == "--balance-by") a.balance_by = value();
    else if (k == "--one-solver") a.one_solver = true;
    else usage("unknown argument " + k);
  }
  if (a.mesh[0] <= 0 || !(a.alpha > 0)) usage("--mesh and --alpha are required");
  if (a.steps < 1 || a.warmup < 0) usage("--steps must be >= 1 and --warmup >= 0");
  if (a.ghosts != "auto" && a.ghosts != "direct" && a.ghosts != "staged") usage("--ghosts must be auto, direct or staged");
  if (a.balance != "off" && a.balance != "once" && a.balance != "dynamic") usage("--balance must be off, once or dynamic");
  if (a.balance_by != "pairs" && a.balance_by != "time") usage("--balance-by must be pairs or time");
  if (!(a.compute_speedup > 0)) usage("--compute-speedup must be positive");
  if (!(a.progress_call_seconds >= 0)) usage("--progress-call-seconds must be >= 0");
  return a;
}

pmewald::SolverOptions solver_options(const Args& a, const Variant& v) {
  const double L = pmewald_scale::box_side(a.system);
  pmewald::SolverOptions o;
  o.box = {L, 0, 0, 0, L, 0, 0, 0, L};
  o.mesh = a.mesh;
  o.order = a.order;
  o.alpha = a.alpha;
  o.cutoff = a.cutoff;
  o.differentiation = pmewald::parse_differentiation(a.diff);
  o.coulomb_constant = a.coulomb;
  o.mode = v.mode;
  o.choose_mode = v.choose_mode;
  o.overlap = v.overlap;
  if (a.poll_rows > 0) o.overlap_poll = {a.poll_rows, a.poll_seconds};
  o.ghost_exchange = a.ghosts == "direct"   ? pmewald::GhostExchangeChoice::Direct
                     : a.ghosts == "staged" ? pmewald::GhostExchangeChoice::Staged
                                            : pmewald::GhostExchangeChoice::Auto;
  o.balance.mode = a.balance == "once"      ? pmewald::BalanceMode::Once
                   : a.balance == "dynamic" ? pmewald::BalanceMode::Dynamic
                                            : pmewald::BalanceMode::Off;
  o.balance.work = a.balance_by == "time" ? pmewald::BalanceWork::Time : pmewald::BalanceWork::Pairs;
  return o;
}

double wall_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// max and mean over ranks.
struct Stat {
  double max = 0, mean = 0;
};
Stat over_ranks(double x, MPI_Comm comm) {
  int P = 1;
  MPI_Comm_size(comm, &P);
  double mx = 0, sum = 0;
  MPI_Allreduce(&x, &mx, 1, MPI_DOUBLE, MPI_MAX, comm);
  MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, comm);
  return {mx, sum / P};
}

// Every statistic of a run reduced at once: two Allreduces (max and sum) for the
// whole report. One pair per number cost a 256-rank simulation more wall time than
// the timed calls themselves (~150 collectives of 2,048 simulated messages each).
class StatBatch {
 public:
  int add(double x) {
    v_.push_back(x);
    return static_cast<int>(v_.size()) - 1;
  }
  void reduce(MPI_Comm comm) {
    int P = 1;
    MPI_Comm_size(comm, &P);
    mx_.resize(v_.size());
    sm_.resize(v_.size());
    MPI_Allreduce(v_.data(), mx_.data(), static_cast<int>(v_.size()), MPI_DOUBLE, MPI_MAX, comm);
    MPI_Allreduce(v_.data(), sm_.data(), static_cast<int>(v_.size()), MPI_DOUBLE, MPI_SUM, comm);
    P_ = P;
  }
  Stat operator[](int i) const { return {mx_[static_cast<std::size_t>(i)], sm_[static_cast<std::size_t>(i)] / P_}; }

 private:
  std::vector<double> v_, mx_, sm_;
  int P_ = 1;
};

std::string num(double x) {
  if (!std::isfinite(x)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}
std::string stat_json(const Stat& s) { return "{\"max\": " + num(s.max) + ", \"mean\": " + num(s.mean) + "}"; }

// A position-independent checksum of the forces: sum over atoms and components of
// F_ic * (1 + (3 id + c) mod 7), so a force on the wrong atom changes it.
double force_checksum(const LocalAtoms& atoms, const std::vector<double>& f, MPI_Comm comm) {
  double s = 0;
  for (std::size_t j = 0; j < atoms.size(); ++j)
    for (int c = 0; c < 3; ++c) s += f[3 * j + c] * (1.0 + static_cast<double>((atoms.ids[j] * 3 + c) % 7));
  double total = 0;
  MPI_Allreduce(&s, &total, 1, MPI_DOUBLE, MPI_SUM, comm);
  return total;
}

// Rank 0 writes int64 N, then N records (int64 id, double fx, fy, fz) sorted by id.
void dump_forces(const std::string& path, const LocalAtoms& atoms, const std::vector<double>& f, MPI_Comm comm) {
  int me = 0, P = 1;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &P);
  const int n = static_cast<int>(atoms.size());
  std::vector<int> counts(static_cast<std::size_t>(P)), displs(static_cast<std::size_t>(P) + 1, 0);
  MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm);
  for (int r = 0; r < P; ++r) displs[r + 1] = displs[r] + counts[r];
  std::vector<std::int64_t> ids(me == 0 ? static_cast<std::size_t>(displs[P]) : 0);
  std::vector<double> all(me == 0 ? 3 * static_cast<std::size_t>(displs[P]) : 0);
  MPI_Gatherv(atoms.ids.data(), n, MPI_INT64_T, ids.data(), counts.data(), displs.data(), MPI_INT64_T, 0, comm);
  for (int r = 0; r < P; ++r) {
    counts[r] *= 3;
    displs[r] *= 3;
  }
  displs[P] *= 3;
  MPI_Gatherv(f.data(), 3 * n, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE, 0, comm);
  if (me != 0) return;
  std::vector<std::size_t> order(ids.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return ids[x] < ids[y]; });
  std::ofstream out(path, std::ios::binary);
  const std::int64_t N = static_cast<std::int64_t>(ids.size());
  out.write(reinterpret_cast<const char*>(&N), sizeof N);
  for (std::size_t k : order) {
    out.write(reinterpret_cast<const char*>(&ids[k]), sizeof(std::int64_t));
    out.write(reinterpret_cast<const char*>(&all[3 * k]), 3 * sizeof(double));
  }
  if (!out) throw std::runtime_error("could not write " + path);
}

// One variant's run: its solver (built, or with --one-solver the shared one switched
// to its mode), warm-up calls, timed calls, the report. setup_s is the building or
// the switch.
std::string run_variant(const Args& a, const Variant& v, const LocalAtoms& atoms, MPI_Comm comm,
                        std::unique_ptr<pmewald::PMESolver>& shared) {
  int me = 0, P = 1;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &P);
  const double w0 = wall_now();
  MPI_Barrier(comm);
  double t0 = MPI_Wtime();
  std::unique_ptr<pmewald::PMESolver> own;
  const bool share = a.one_solver && !v.choose_mode;
  if (share && shared) {
    shared->set_comm_mode(v.mode, v.overlap);
  } else {
    own = std::make_unique<pmewald::PMESolver>(comm, solver_options(a, v));
    if (share) shared = std::move(own);
  }
  pmewald::PMESolver& solver = own ? *own : *shared;
  const double setup_s = MPI_Wtime() - t0;
  const double w_setup = wall_now();
  std::vector<double> f(3 * atoms.size());
  const std::int64_t* excl = atoms.exclusions.empty() ? nullptr : atoms.exclusions.data();
  const std::size_t m = atoms.exclusions.size() / 2;
  pmewald::SolverResult res;
  std::vector<double> warm_imbalance;  // each warm-up call's slowest / mean candidate pairs
  // "auto": the warm-up lasts at least as long as the solver's trial of the variants.
  for (int k = 0; k < a.warmup || solver.mode_trial().running(); ++k) {
    res = solver.compute(atoms.positions.data(), atoms.charges.data(), atoms.ids.data(), atoms.size(), excl, m, f.data());
    warm_imbalance.push_back(solver.balancer().stats().last_pairs_imbalance);
  }
  MPI_Barrier(comm);
  const double w_warm = wall_now();
  solver.reset_timings();
  pmewald_scale::reset_work();
  auto& prof = pmewald_scale::mpi_profile();
  prof = pmewald_scale::MpiProfile{};
  std::vector<double> mine(static_cast<std::size_t>(a.steps)), steps(mine.size());
  double busy = 0;
  for (int k = 0; k < a.steps; ++k) {
    t0 = MPI_Wtime();
    res = solver.compute(atoms.positions.data(), atoms.charges.data(), atoms.ids.data(), atoms.size(), excl, m, f.data());
    mine[static_cast<std::size_t>(k)] = MPI_Wtime() - t0;
    busy += mine[static_cast<std::size_t>(k)];
  }
  // Snapshot the profile before the reductions below add to it.
  const pmewald_scale::MpiProfile p = prof;
  const double w_steps = wall_now();
  const auto tm = solver.timings();
  const double S = a.steps;
  // Every number of the report, reduced in one batch.
  StatBatch st;
  const int i_setup = st.add(setup_s), i_no_kspace = st.add(solver.kspace_box().empty() ? 1.0 : 0.0);
  std::vector<int> i_steps;
  for (double x : mine) i_steps.push_back(st.add(x));
  std::vector<std::pair<std::string, int>> i_phase;
  for (const auto& kv : tm) i_phase.emplace_back(kv.first, st.add(kv.second / S));  // the same keys on every rank
  const int i_compute = st.add((busy - p.seconds) / S), i_mpi = st.add(p.seconds / S),
            i_share = st.add(busy > 0 ? p.seconds / busy : 0), i_msgs = st.add(static_cast<double>(p.messages) / S),
            i_bytes = st.add(static_cast<double>(p.bytes) / S);
  std::vector<int> i_calls, i_units, i_modelled;
  for (int c = 0; c < pmewald_scale::kNumCalls; ++c)
    i_calls.push_back(st.add(static_cast<double>(p.calls[static_cast<std::size_t>(c)]) / S));
  const auto units = pmewald_scale::work_units();
  const auto modelled = pmewald_scale::work_seconds();
  for (int k = 0; k < pmewald::kWorkKinds; ++k) {
    i_units.push_back(st.add(units[static_cast<std::size_t>(k)] / S));
    i_modelled.push_back(st.add(modelled[static_cast<std::size_t>(k)] / S));
  }
  st.reduce(comm);
  // Each rank's candidate pairs per timed call, in rank order (the balance study's detail).
  const double my_candidates = tm.at("real_space_candidates") / S;
  std::vector<double> candidates(me == 0 ? static_cast<std::size_t>(P) : 0);
  MPI_Gather(&my_candidates, 1, MPI_DOUBLE, candidates.data(), 1, MPI_DOUBLE, 0, comm);
  std::ostringstream j;
  // The mode used (with "auto": the one the solver measured fastest).
  j << "{\"variant\": \"" << v.name << "\", \"mode\": \"" << pmewald::comm_mode_name(solver.comm_mode())
    << "\", \"overlap\": " << (solver.overlapping() ? "true" : "false");
  j << ", \"one_solver\": " << (share ? "true" : "false") << ", \"setup_s\": " << stat_json(st[i_setup])
    << ", \"ranks_without_kspace\": " << num(st[i_no_kspace].mean * P);
  // The ghost exchange in use, the real-space imbalance (slowest / mean pair-loop
  // seconds over the timed calls, and the last call's by pairs) and the re-balances.
  j << ", \"ghost_exchange\": \""
    << (solver.ghost_exchange_used() == pmewald::Migration::GhostExchange::Staged ? "staged" : "direct")
    << "\", \"balance\": \"" << a.balance << "\", \"real_space_imbalance\": " << num(tm.at("real_space_imbalance"))
    << ", \"real_space_pairs_imbalance_last\": " << num(tm.at("real_space_pairs_imbalance_last"))
    << ", \"balance_rebalances\": " << num(tm.at("balance_rebalances")) << ", \"warmup_pairs_imbalance\": [";
  for (std::size_t k = 0; k < warm_imbalance.size(); ++k) j << (k ? ", " : "") << num(warm_imbalance[k]);
  j << "], \"candidates_per_rank\": [";
  for (std::size_t k = 0; k < candidates.size(); ++k) j << (k ? ", " : "") << num(candidates[k]);
  j << "]";
  double mean_step = 0;
  for (int i : i_steps) mean_step += st[i].max / S;
  j << ", \"step_s\": " << num(mean_step) << ", \"steps_s\": [";
  for (std::size_t k = 0; k < i_steps.size(); ++k) j << (k ? ", " : "") << num(st[i_steps[k]].max);
  j << "], \"phases\": {";
  bool first = true;
  for (const auto& [name, i] : i_phase) {
    j << (first ? "" : ", ") << "\"" << name << "\": " << stat_json(st[i]);
    first = false;
  }
  j << "}, \"compute_s\": " << stat_json(st[i_compute]);
  j << ", \"mpi\": {\"seconds\": " << stat_json(st[i_mpi]);
  j << ", \"share\": " << stat_json(st[i_share]);
  j << ", \"messages\": " << stat_json(st[i_msgs]);
  j << ", \"bytes\": " << stat_json(st[i_bytes]) << ", \"calls\": {";
  first = true;
  for (int c = 0; c < pmewald_scale::kNumCalls; ++c) {
    const Stat s = st[i_calls[static_cast<std::size_t>(c)]];
    if (s.max == 0) continue;
    j << (first ? "" : ", ") << "\"" << pmewald_scale::mpi_call_name(c) << "\": " << stat_json(s);
    first = false;
  }
  j << "}}";
  // The work of the timed calls per kind (units per call) and, modelled, its seconds.
  j << ", \"work\": {";
  for (int k = 0; k < pmewald::kWorkKinds; ++k)
    j << (k ? ", " : "") << "\"" << pmewald::work_name(static_cast<pmewald::Work>(k))
      << "\": " << stat_json(st[i_units[static_cast<std::size_t>(k)]]);
  j << "}, \"modelled_s\": {";
  for (int k = 0; k < pmewald::kWorkKinds; ++k)
    j << (k ? ", " : "") << "\"" << pmewald::work_name(static_cast<pmewald::Work>(k))
      << "\": " << stat_json(st[i_modelled[static_cast<std::size_t>(k)]]);
  j << "}";
  j << ", \"energy\": " << num(res.energy) << ", \"terms\": {";
  first = true;
  for (const auto& kv : res.terms) {
    j << (first ? "" : ", ") << "\"" << kv.first << "\": " << num(kv.second);
    first = false;
  }
  const auto W = res.virial.matrix();
  j << "}, \"virial\": [";
  for (int k = 0; k < 9; ++k) j << (k ? ", " : "") << num(W[static_cast<std::size_t>(k)]);
  j << "], \"sum_force2\": " << num(res.sum_force2) << ", \"force_checksum\": " << num(force_checksum(atoms, f, comm));
  // The simulation's own (wall) seconds: building the solver, the warm-up calls, the rest.
  j << ", \"wall_s\": " << num(wall_now() - w0) << ", \"wall_setup_s\": " << num(w_setup - w0)
    << ", \"wall_warmup_s\": " << num(w_warm - w_setup) << ", \"wall_steps_s\": " << num(w_steps - w_warm) << "}";
  if (!a.dump.empty()) dump_forces(a.dump + "." + v.name + ".bin", atoms, f, comm);
  return j.str();
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me = 0, P = 1, rc = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  try {
    const Args a = parse(argc, argv);
    pmewald_scale::ComputeCosts costs;
    if (!a.compute_costs.empty()) costs = pmewald_scale::read_compute_costs(a.compute_costs);
    pmewald_scale::install_work_sink(a.compute_costs.empty() ? nullptr : &costs, a.compute_speedup);
    pmewald_scale::set_progress_call_seconds(a.progress_call_seconds);
    const pmewald::Int3 grid = pmewald::processor_grid_3d(P, a.mesh);
    const pmewald::Box3 brick = pmewald::brick_box(grid, a.mesh, me);
    const LocalAtoms atoms = pmewald_scale::generate_local(a.system, a.mesh, brick.lo, brick.hi);
    // Ranks without atoms, without a brick (a mesh share) and the extremes.
    const double n_local = static_cast<double>(atoms.size());
    const Stat per_rank = over_ranks(n_local, MPI_COMM_WORLD);
    double mn = 0, empty[2] = {atoms.size() == 0 ? 1.0 : 0.0, brick.empty() ? 1.0 : 0.0}, empties[2] = {0, 0};
    MPI_Allreduce(&n_local, &mn, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(empty, empties, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    std::ostringstream j;
    const double L = pmewald_scale::box_side(a.system);
    j << "{\"driver\": \"pmewald_scale\", \"ranks\": " << P << ", \"smpi\": "
#ifdef PMEWALD_SMPI
      << "true"
#else
      << "false"
#endif
      << ", \"system\": {\"kind\": \"" << a.system.kind << "\", \"cells\": " << a.system.cells
      << ", \"vacuum\": " << num(a.system.vacuum) << ", \"seed\": " << a.system.seed
      << ", \"atoms\": " << pmewald_scale::total_atoms(a.system) << ", \"box\": " << num(L) << "}"
      << ", \"parameters\": {\"mesh\": [" << a.mesh[0] << ", " << a.mesh[1] << ", " << a.mesh[2]
      << "], \"order\": " << a.order << ", \"alpha\": " << num(a.alpha) << ", \"cutoff\": " << num(a.cutoff)
      << ", \"differentiation\": \"" << a.diff << "\", \"coulomb_constant\": " << num(a.coulomb) << "}"
      << ", \"grid\": [" << grid[0] << ", " << grid[1] << ", " << grid[2] << "]"
      << ", \"atoms_per_rank\": {\"min\": " << num(mn) << ", \"max\": " << num(per_rank.max)
      << ", \"mean\": " << num(per_rank.mean) << "}, \"ranks_without_atoms\": " << num(empties[0])
      << ", \"ranks_without_brick\": " << num(empties[1]) << ", \"warmup\": " << a.warmup
      << ", \"steps\": " << a.steps << ", \"compute_costs\": "
      << (a.compute_costs.empty() ? std::string("null") : "\"" + a.compute_costs + "\"")
      << ", \"compute_speedup\": " << num(a.compute_speedup)
      << ", \"progress_call_seconds\": " << num(a.progress_call_seconds)
      << ", \"overlap_poll\": [" << a.poll_rows << ", " << num(a.poll_seconds) << "]" << ", \"ghosts\": \"" << a.ghosts
      << "\", \"balance\": \"" << a.balance << "\", \"balance_by\": \"" << a.balance_by << "\", \"runs\": [";
    std::unique_ptr<pmewald::PMESolver> shared;  // --one-solver
    for (std::size_t k = 0; k < a.variants.size(); ++k)
      j << (k ? ", " : "") << run_variant(a, a.variants[k], atoms, MPI_COMM_WORLD, shared);
    j << "]}\n";
    if (me == 0) {
      if (a.json.empty()) {
        std::fputs(j.str().c_str(), stdout);
      } else {
        std::ofstream out(a.json);
        out << j.str();
        if (!out) throw std::runtime_error("could not write " + a.json);
      }
    }
  } catch (const std::exception& e) {
    if (me == 0) std::fprintf(stderr, "pmewald_scale: %s\n", e.what());
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}
