"""Issue 28's simulated-scale studies (SimGrid SMPI; docs/scaling.md, "Staged ghosts, balance and
the accelerator regime"): ``python benchmarks/scale_regime.py STUDY [options]``.

Studies (each simulation cached as JSON under ``scale/results/regime/``, committed; ``--force``
reruns; ``report`` prints the markdown tables of docs/scaling.md from the cache):

* ``ghosts``  water98k, communication only, nonblocking: the ghost atoms direct against staged at
  each rank count, with the per-message CPU overhead ``--overhead`` (SimGrid's smpi/os, ois and or,
  seconds per send and per receive; 0 is the study's default platform) -- the step, the ghost
  exchange's share, the simulation's own wall time and memory.
* ``balance`` a water slab (water98k's lattice with ``--vacuum`` of it empty along z), modelled
  computation, nonblocking: balance off, once and dynamic (by the pairs), after
  ``--balance-warmup`` warm-up calls.
* ``regime``  water98k, modelled computation divided by ``--speedup`` K (ranks K times faster than
  this machine's core: docs/scaling.md says what K stands for), every mode with and without
  overlap and auto, on each platform.
* ``auto``    ``comm_mode="auto"`` alone in the regime's configurations (it tries the variants on its
  first calls since 2026-12-07); ``report`` puts its pick beside the regime's variants.
* ``model``   the communication model calibrated on each K's 64-rank regime run, against the regime
  runs at every rank count, and its predictions at 1,024-65,536 ranks (``model_water98k.json``).
* ``wall``    the earlier study's 256-rank modelled water98k run (three modes, two timed calls),
  the ghosts direct and staged: what a simulation costs in wall time and memory.
* ``strong``  the 1,024-rank runs with computation (K = 1): water98k and water1.03M, both
  platforms, every mode with and without overlap and auto.

Each simulation runs one warm-up and ``--steps`` timed calls per variant. A progress call costs
1 us of simulated time, once per call (``--progress-cost per-call``, the default; result names end
in ``_percall``) or, as in every study before 2026-12-07, once per request it tests
(``per-request``, SimGrid's smpi/test alone). ``--poll ROWS,US`` sets the overlap's interval.
``--one-solver`` builds one solver for the fixed-mode variants and switches it between them.
``--tag T`` adds ``_T`` to every result's name (a rerun with changed solver code beside the
committed results of the code before: ``r3`` is the solver with three reductions a call,
2026-12-07); ``model`` then calibrates and validates on the tagged runs only
(``model_water98k_T.json``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from pmewald.bench import scale as bs
from pmewald.bench.scale.build import ROOT
from pmewald.bench.scale.compute_costs import calibrate
from pmewald.bench.scale.study import System

RESULTS = ROOT / "scale" / "results" / "regime"
WATER98K = System("water98k", "water", 32)
WATER1M = System("water1.03M", "water", 70)
PARAMS = {  # docs/scaling.md: pmewald's choice at 1e-4 with a 9 A cutoff, carried by its mesh spacing
    "water98k": {"mesh": 125, "alpha": 0.3533, "order": 7, "differentiation": "ad", "cutoff": 9.0},
    "water1.03M": {"mesh": 270, "alpha": 0.3533, "order": 7, "differentiation": "ad", "cutoff": 9.0},
}
MODES = ("pt2pt", "nonblocking", "collective")
VARIANTS = [m + s for m in MODES for s in ("", "+overlap")] + ["auto"]
# Progress calls cost 1 us of simulated time (docs/scaling.md, "Overlap ... at scale"):
# "per-call" (the default), 1 us per MPI_Test* call, charged by the driver, with smpi/test at
# 1 ns (docs/scaling.md, "What a progress call costs"; result names end in _percall);
# "per-request", SimGrid's smpi/test alone, charged for every request an MPI_Test* call tests
# (the studies before 2026-12-07, whose results keep their names).
PROGRESS_CALL_SECONDS = 1e-6
BALANCE_WARMUP = 5  # the balance study's warm-up calls (other counts: names end in _w<count>)


def progress_cfg(per_call: bool):
    """SimGrid's settings for the progress calls: smpi/test at 1 ns where the driver charges
    each call (per call), else 1 us per request tested; never growing."""
    return [("smpi/test", "1e-09" if per_call else "1e-06"), ("smpi/grow-injected-times", "no")]


def overhead_cfg(o: float):
    """SimGrid's per-message CPU cost: o seconds in every send (blocking or not) and receive."""
    if o <= 0:
        return []
    v = f"0:{o:g}:0"
    return [("smpi/os", v), ("smpi/ois", v), ("smpi/or", v)]


def costs_for(system, params, args):
    """The modelled computation's seconds per unit of work: the committed file
    (scale/results/regime/compute-costs-<system>.json) that the committed results used, so a new
    run compares with them; measured on this machine (compute_costs.calibrate) and committed where
    there is none, or again with --recalibrate (then rerun what is compared with it)."""
    committed = RESULTS / f"compute-costs-{system.name}.json"
    if committed.exists() and not args.recalibrate:
        return committed
    committed.write_text(calibrate(system, params, force=args.recalibrate).read_text())
    return committed


def simulate(name, P, platform, system, params, args, *, modes, costs=None, ghosts="auto", balance="off",
             speedup=1.0, comm_only=False, extra=(), warmup=1):
    per_call = args.progress_cost == "per-call"
    if args.tag:
        name += f"_{args.tag}"
    if per_call:
        name += "_percall"
    poll = args.poll
    if poll:
        name += f"_poll{poll[0]}-{poll[1]:g}us"
    if args.one_solver:
        name += "_onesolver"
    if bs.build.simgrid_prefix() is not None:  # another SimGrid ($PMEWALD_SIMGRID): results of its own
        name += f"_simgrid{bs.build.simgrid_version()}"
    out = RESULTS / f"{name}.json"
    if out.exists() and not args.force:
        return json.loads(out.read_text())
    exe = bs.build_driver()
    sys.stderr.write(f"simulating {name} ...\n")
    res = bs.run_simulation(exe, P, platform, system, params, out, modes=modes, warmup=warmup, steps=args.steps,
                            timeout=args.timeout, comm_only=comm_only, compute_costs=costs,
                            extra_cfg=[*progress_cfg(per_call), *extra],
                            ghosts=ghosts, balance=balance, compute_speedup=speedup,
                            progress_call_seconds=PROGRESS_CALL_SECONDS if per_call else 0.0,
                            overlap_poll=(poll[0], poll[1] * 1e-6) if poll else None,
                            one_solver=args.one_solver)
    for suffix in (".driver.json",):
        Path(str(out.with_suffix(suffix))).unlink(missing_ok=True)
    return res


def study_ghosts(args):
    for P in args.ranks:
        for o in args.overhead:
            for g in ("direct", "staged"):
                simulate(f"ghosts_water98k_P{P}_o{o:g}_{g}", P, "fat_tree", WATER98K, PARAMS["water98k"], args,
                         modes=("nonblocking",), ghosts=g, comm_only=True, extra=overhead_cfg(o))


def slab(vacuum):
    return System(f"water98k-slab{vacuum:g}", "water", 32, vacuum=vacuum)


def study_balance(args):
    s = slab(args.vacuum)
    costs = costs_for(s, PARAMS["water98k"], args)
    for P in args.ranks:
        for b in args.balances:
            # Warm-up calls place the cuts (once: up to three corrections; dynamic: half way each call).
            w = "" if args.balance_warmup == BALANCE_WARMUP else f"_w{args.balance_warmup}"
            simulate(f"balance_{s.name}_P{P}_{b}{w}", P, "fat_tree", s, PARAMS["water98k"], args,
                     modes=("nonblocking",), costs=costs, balance=b, warmup=args.balance_warmup)


def _regime_runs(args, study, modes):
    """water98k with modelled computation / K, for every platform, rank count and K asked for; with
    --variants, only those, each in a simulation of its own (names with _v<variant>, merged again by
    the report and the model study)."""
    costs = costs_for(WATER98K, PARAMS["water98k"], args)
    for platform in args.platforms:
        for P in args.ranks:
            for k in args.speedup:
                name = f"{study}_water98k_{platform}_P{P}_K{k:g}"
                if args.variants:
                    for v in args.variants:
                        simulate(f"{name}_v{v}", P, platform, WATER98K, PARAMS["water98k"], args, modes=(v,),
                                 costs=costs, speedup=k)
                else:
                    simulate(name, P, platform, WATER98K, PARAMS["water98k"], args, modes=modes, costs=costs,
                             speedup=k)


def study_regime(args):
    _regime_runs(args, "regime", VARIANTS)


def study_auto(args):
    """comm_mode="auto" alone in the regime's configurations (its trial of the variants on the
    first calls, 2026-12-07): the other variants' results (study_regime) stand, the report puts
    this run's pick beside them."""
    _regime_runs(args, "regime-auto", ("auto",))


def study_model(args):
    """The communication model (pmewald.bench.scale.comm_model: staged ghosts, the plans' census)
    calibrated on the 64-rank regime run of each K against the regime runs at every rank count
    (model / simulated step, per mode), and its predictions at 1,024-65,536 ranks (fat tree), into
    scale/results/regime/model_water98k.json; `report` prints them."""
    from pmewald.bench.scale import predict
    out = {"calibration_ranks": 64, "speedups": {}}
    for k in args.speedup:
        runs = {}
        # the separate solvers' run where a one-solver run of the same ranks exists too
        merged = _merged(f"regime_water98k_fat_tree_P*_K{k:g}_*.json")
        tagged = re.compile(rf"_K{k:g}_{re.escape(args.tag)}_" if args.tag else rf"_K{k:g}_percall")
        for name in sorted(merged, key=lambda n: "_onesolver" in n):
            if "_percall" in name and "_simgrid" in name and "_poll" not in name and tagged.search(name):
                runs.setdefault(merged[name]["ranks"], merged[name])
        if 64 not in runs:
            sys.exit(f"no 64-rank regime run at K = {k:g} to calibrate on (run the regime study first)")
        cal = runs[64]
        allreduces = predict.allreduces_per_step([cal])
        rows = [predict.model_row(res, cal, m, allreduces) for P, res in sorted(runs.items()) for m in MODES
                if any(r["variant"] == m for r in res["runs"])]
        pred = predict.predictions(WATER98K, PARAMS["water98k"], "fat_tree", [1024, 4096, 16384, 65536], cal,
                                   allreduces)
        out["speedups"][f"{k:g}"] = {"validation": rows, "predictions": pred}
    model = RESULTS / (f"model_water98k_{args.tag}.json" if args.tag else "model_water98k.json")
    model.write_text(json.dumps(out, indent=1) + "\n")
    print(report_model(model))


def study_wall(args):
    """The earlier study's 256-rank run as it was (water98k, modelled computation, the three modes,
    one warm-up and two timed calls), the ghosts direct and staged: what a simulation costs."""
    costs = costs_for(WATER98K, PARAMS["water98k"], args)
    for P in args.ranks:
        for g in ("direct", "staged"):
            simulate(f"wall_water98k_P{P}_{g}", P, "fat_tree", WATER98K, PARAMS["water98k"], args, modes=MODES,
                     costs=costs, ghosts=g)


def study_strong(args):
    for system in (WATER98K, WATER1M):
        costs = costs_for(system, PARAMS[system.name], args)
        for platform in args.platforms:
            for P in args.ranks:
                simulate(f"strong_{system.name}_{platform}_P{P}", P, platform, system, PARAMS[system.name], args,
                         modes=VARIANTS, costs=costs)


# --------------------------------------------------------------------------- report


def _load(pattern):
    return {p.stem: json.loads(p.read_text()) for p in sorted(RESULTS.glob(pattern))}


_VARIANT = re.compile(r"_v([a-z0-9+]+)(?=_|$)")


def _merged(pattern):
    """_load, with the simulations of one variant each (--variants: names with _v<variant>) merged
    into one result per configuration, under the name without the variant; the simulation's wall
    time is their sum and its memory their largest. A variant simulated on its own replaces the
    same variant of a whole run (a rerun of one variant after a change that touched it alone)."""
    out = {}
    loaded = _load(pattern)
    for name in sorted(loaded, key=lambda n: _VARIANT.search(n) is not None):  # whole runs first
        res = loaded[name]
        base = _VARIANT.sub("", name)
        if base == name:
            out[name] = res
            continue
        have = out.setdefault(base, {**res, "runs": [], "simulation": {**res["simulation"], "wall_s": 0.0}})
        mine = {r["variant"] for r in res["runs"]}
        have["runs"] = [r for r in have["runs"] if r["variant"] not in mine] + res["runs"]
        sim = have["simulation"]
        sim["wall_s"] += res["simulation"]["wall_s"]
        rss = [m for m in (sim.get("max_rss_kb"), res["simulation"].get("max_rss_kb")) if m]
        sim["max_rss_kb"] = max(rss) if rss else None
    return out


def _sim(res):
    s = res["simulation"]
    mem = s.get("max_rss_kb")
    return f"{s['wall_s'] / 60:.1f} min", f"{mem / 1e6:.2f} GB" if mem else "?"


def report_ghosts():
    rows = ["| ranks | per-message overhead | exchange | step ms | ghost atoms + forces ms (max) | ghost msgs/rank/call "
            "| MPI msgs/rank/call | sim. wall | peak memory |", "|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for name, res in _load("ghosts_*.json").items():
        r = res["runs"][0]
        ph = r["phases"]
        wall, mem = _sim(res)
        o = name.split("_o")[1].split("_")[0]
        rows.append(f"| {res['ranks']:,} | {float(o) * 1e6:g} us | {r['ghost_exchange']} | {r['step_s'] * 1e3:.3f} | "
                    f"{ph['ghost_atoms']['max'] * 1e3:.3f} | {ph['ghost_atoms_messages']['max']:.0f} | "
                    f"{r['mpi']['messages']['max']:.0f} | {wall} | {mem} |")
    return "\n".join(rows)


def report_balance():
    rows = ["| ranks | balance | step ms | real space ms (slowest / mean) | pairs slowest / mean | migrate ms (max) "
            "| sim. wall |", "|---:|---|---:|---:|---:|---:|---:|"]
    for name, res in _load("balance_*.json").items():
        r = res["runs"][0]
        ph = r["phases"]
        wall, _ = _sim(res)
        rows.append(f"| {res['ranks']:,} | {r['balance']} | {r['step_s'] * 1e3:.2f} | "
                    f"{ph['real_space']['max'] * 1e3:.2f} / {ph['real_space']['mean'] * 1e3:.2f} | "
                    f"{r['real_space_pairs_imbalance_last']:.3f} | {ph['migrate']['max'] * 1e3:.2f} | {wall} |")
    return "\n".join(rows)


def _auto_pick(runs, auto):
    """auto's pick and its step against the fastest variant's: 'collective+overlap (0.256; +0.4%)'."""
    if not auto:
        return ""
    fastest = min(r["step_s"] for v, r in runs.items() if v != "auto")
    name = auto["mode"] + ("+overlap" if auto["overlap"] else "")
    return f"{name} ({auto['step_s'] * 1e3:.3f}; {100 * (auto['step_s'] / fastest - 1):+.1f}% of the fastest)"


def report_variants(pattern):
    """Per run the modes plain and overlapped, and auto's pick: from the run itself, or where the
    `auto` study ran it again (its trial of the variants on the calls), from that run."""
    rows = ["| run | mode | step plain ms | step overlap ms | comm share plain | exposed comm plain -> overlap ms "
            "| auto picked (its step) | sim. wall |", "|---|---|---:|---:|---:|---:|---|---:|"]
    for name, res in _merged(pattern).items():
        runs = {r["variant"]: r for r in res["runs"]}
        if any(m not in runs or m + "+overlap" not in runs for m in MODES):
            rows.append(f"| {name} | (variants run so far: {', '.join(sorted(runs))}) | | | | | | |")
            continue
        again = RESULTS / f"{name.replace('regime_', 'regime-auto_', 1)}.json"
        auto = json.loads(again.read_text())["runs"][0] if again.exists() else runs.get("auto")
        wall, mem = _sim(res)
        for m in MODES:
            a, b = runs[m], runs[m + "+overlap"]
            share = a["mpi"]["share"]["max"]
            ea, eb = a["phases"]["comm_wait"]["mean"], b["phases"]["comm_wait"]["mean"]
            pick = _auto_pick(runs, auto) if m == MODES[0] else ""
            rows.append(f"| {name if m == MODES[0] else ''} | {m} | {a['step_s'] * 1e3:.3f} | {b['step_s'] * 1e3:.3f} | "
                        f"{share:.2f} | {ea * 1e3:.3f} -> {eb * 1e3:.3f} | {pick} | {wall if m == MODES[0] else ''} |")
    return "\n".join(rows)


def report_wall():
    rows = ["| ranks | ghosts | SimGrid | pt2pt ms | nonblocking ms | collective ms | sim. wall | peak memory |",
            "|---:|---|---|---:|---:|---:|---:|---:|"]
    for name, res in _load("wall_*.json").items():
        runs = {r["variant"]: r for r in res["runs"]}
        wall, mem = _sim(res)
        simgrid = res["simulation"].get("simgrid", "3.32.0")  # (recorded since 13bebb1; 3.32 before)
        rows.append(f"| {res['ranks']:,} | {res['runs'][0]['ghost_exchange']} | {simgrid} | "
                    + " | ".join(f"{runs[m]['step_s'] * 1e3:.3f}" for m in MODES) + f" | {wall} | {mem} |")
    return "\n".join(rows)


def report_model(path=None):
    path = path or RESULTS / "model_water98k.json"
    if not path.exists():
        return "(no model study yet)"
    doc = json.loads(path.read_text())
    rows = ["| K | ranks | " + " | ".join(f"{m}: simulated / model ms (ratio)" for m in MODES) + " |",
            "|---:|---:|" + "---|" * len(MODES)]
    for k, d in doc["speedups"].items():
        for P in sorted({r["ranks"] for r in d["validation"]}):
            cells = []
            for m in MODES:  # (a mode not simulated at this rank count: -)
                rs = [r for r in d["validation"] if r["ranks"] == P and r["mode"] == m]
                cells.append(" ".join(f"{r['simulated'] * 1e3:.3f} / {r['model'] * 1e3:.3f} ({r['ratio']:.3f})"
                                      for r in rs) or "-")
            rows.append(f"| {k} | {P:,} | " + " | ".join(cells) + " |")
    rows += ["", "| K | ranks | messages (max) | kB (max) | " + " | ".join(f"{m} ms" for m in MODES)
             + " | comm share (nonblocking) |", "|---:|---:|---:|---:|" + "---:|" * (len(MODES) + 1)]
    for k, d in doc["speedups"].items():
        for r in d["predictions"]:
            rows.append(f"| {k} | {r['ranks']:,} | {r['messages_max']:.0f} | {r['bytes_max'] / 1e3:.0f} | "
                        + " | ".join(f"{r[m] * 1e3:.3f}" for m in MODES)
                        + f" | {100 * r['nonblocking_comm'] / r['nonblocking']:.0f}% |")
    return "\n".join(rows)


def report_tagged(tag):
    """The regime runs tagged `tag` against the same runs before the change (names without the
    tag): each variant's step before -> after, the reductions a call, overlap's share of the exposed
    communication recovered (where that is >= 20% of the plain step), auto's pick."""
    rows = ["| run | variant | step before ms | step after ms | change | Allreduce a call | exposed comm "
            "(share of plain) | recovered by overlap | auto's pick (off the fastest) |",
            "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    before_all = _merged("regime_*.json")
    for name, res in _merged(f"regime_*_{tag}_*.json").items():
        runs = {r["variant"]: r for r in res["runs"]}
        old = before_all.get(name.replace(f"_{tag}_", "_", 1), {"runs": []})
        before = {r["variant"]: r for r in old["runs"]}
        again = RESULTS / f"{name.replace('regime_', 'regime-auto_', 1)}.json"
        auto = json.loads(again.read_text())["runs"][0] if again.exists() else runs.get("auto")
        fixed = {v: r for v, r in runs.items() if v != "auto"}
        first = True
        for v in VARIANTS[:-1]:
            if v not in fixed:
                continue
            r, b = fixed[v], before.get(v)
            exposed = share = recovered = ""
            if not r["overlap"]:
                e = r["phases"]["comm_wait"]["mean"]
                exposed = f"{e * 1e3:.3f} ({100 * e / r['step_s']:.0f}%)"
                o = fixed.get(v + "+overlap")
                if o is not None and e >= 0.2 * r["step_s"]:
                    recovered = f"{100 * (r['step_s'] - o['step_s']) / e:.0f}%"
            pick = _auto_pick(fixed, auto) if first else ""
            rows.append(f"| {name if first else ''} | {v} | {b['step_s'] * 1e3:.4f} | " if b else
                        f"| {name if first else ''} | {v} | - | ")
            rows[-1] += (f"{r['step_s'] * 1e3:.4f} | {100 * (r['step_s'] / b['step_s'] - 1):+.1f}% | " if b else
                         f"{r['step_s'] * 1e3:.4f} | | ")
            rows[-1] += f"{r['mpi']['calls'].get('Allreduce', {}).get('max', 0):.0f} | {exposed} | {recovered} | {pick} |"
            first = False
    return "\n".join(rows)


def report(args):
    if args.tag:
        print(f"### Regime runs tagged {args.tag} against before\n\n" + report_tagged(args.tag) + "\n")
        print("### The model on the tagged runs\n\n" + report_model(RESULTS / f"model_water98k_{args.tag}.json"))
        return
    print("### What a simulation costs\n\n" + report_wall() + "\n")
    print("### Ghost exchange\n\n" + report_ghosts() + "\n")
    print("### Balance\n\n" + report_balance() + "\n")
    print("### Regime\n\n" + report_variants("regime_*.json") + "\n")
    print("### Strong, 1,024 ranks\n\n" + report_variants("strong_*.json") + "\n")
    print("### The model against the regime runs, and its predictions\n\n" + report_model() + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study", choices=("ghosts", "balance", "regime", "auto", "model", "wall", "strong", "report"))
    ap.add_argument("--ranks", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--platforms", nargs="+", default=["fat_tree"])
    ap.add_argument("--overhead", type=float, nargs="+", default=[0.0, 5e-7])
    ap.add_argument("--speedup", type=float, nargs="+", default=[1.0, 30.0, 100.0])
    ap.add_argument("--vacuum", type=float, default=0.35)
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--balance-warmup", type=int, default=BALANCE_WARMUP)
    ap.add_argument("--balances", nargs="+", default=["off", "once", "dynamic"], choices=("off", "once", "dynamic"))
    ap.add_argument("--timeout", type=float, default=6 * 3600)
    ap.add_argument("--progress-cost", choices=("per-request", "per-call"), default="per-call",
                    help="what a progress call (MPI_Test*) costs in the simulation: 1 us per call (default "
                         "since 2026-12-07; result names end in _percall) or 1 us per request tested "
                         "(SimGrid's smpi/test alone; the studies before)")
    ap.add_argument("--poll", type=lambda t: (int(t.split(",")[0]), float(t.split(",")[1])), default=None,
                    metavar="ROWS,US", help="the overlap's progress-call interval (default: the solver's, 256 rows "
                                            "or 100 us)")
    ap.add_argument("--one-solver", action="store_true",
                    help="one solver for every fixed-mode variant, switched between them (its plans built once; "
                         "result names end in _onesolver)")
    ap.add_argument("--recalibrate", action="store_true",
                    help="measure the computation's costs again (else the committed compute-costs-<system>.json)")
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=None,
                    help="regime and auto studies: only these variants, each in a simulation of its own (cached "
                         "apart: a 1,024-rank simulation of all of them did not finish in two hours)")
    ap.add_argument("--tag", default="", help="a suffix for the results' names (_TAG): solver code changed since "
                                              "the committed results")
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    {"ghosts": study_ghosts, "balance": study_balance, "regime": study_regime, "auto": study_auto, "model": study_model,
     "wall": study_wall,
     "strong": study_strong, "report": report}[args.study](args)


if __name__ == "__main__":
    main()
