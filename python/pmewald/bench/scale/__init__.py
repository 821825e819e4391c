"""``python -m pmewald.bench scale``: pmewald on 16-1,024 simulated MPI ranks (SimGrid SMPI).

The C++ driver ``scale/driver`` (built here with ``smpicxx`` into ``build-smpi/``) runs the
real solver on P simulated ranks of a platform file (``scale/platforms/``): a non-blocking
fat tree and a Cray-EX-like dragonfly, 25 GB/s and ~2 us per endpoint. Computation is
executed and timed (thread CPU time, one second here = one simulated second), communication
is simulated by SimGrid's flow model; every time is ``MPI_Wtime``. For each system, platform
and rank count one simulation runs every communication mode; the results (JSON), tables,
plots and the communication model's validation and predictions go into ``docs/scaling.md``
and ``docs/scaling/``. See docs/scaling.md for what is simulated and how.

Runs are cached: a result file that exists is reused (``--force`` reruns), so an interrupted
sweep resumes where it stopped; ``--report`` only rebuilds the docs from the results.
One simulation runs at a time.

The study in files: :mod:`.study` (systems, platforms, SMPI settings, the sweep plan), :mod:`.build`
(the driver, from a source checkout), :mod:`.simulate` (one simulation and its comparison with the
one-rank reference), :mod:`.predict` (the communication model :mod:`.comm_model` calibrated, validated
and extrapolated), :mod:`.report` (the generated part of docs/scaling.md) and :mod:`.compute_costs`
(``--modelled-compute``); this module is the command line. Needs a source checkout: the driver is
built from ``cpp/`` and ``scale/driver``.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import predict
from .build import ROOT, build_driver, build_scale_driver
from .predict import census_of
from .report import report, write_report
from .simulate import (COMM_ONLY, Progress, driver_args, energy_error, force_error, run_of, run_simulation,
                       smpirun_command)
from .study import (CORRECTNESS, CORRECTNESS_PARAMS, MODES, PLATFORMS, STRONG, System, _tag, choose_parameters,
                    result_path, sweep_plan, weak_system)

# The study's names, importable from the package as the tests and benchmarks/ use them.
__all__ = ["COMM_ONLY", "CORRECTNESS", "CORRECTNESS_PARAMS", "MODES", "PLATFORMS", "ROOT", "STRONG", "System",
           "add_parser", "build_driver", "build_scale_driver", "census_of", "driver_args", "energy_error",
           "force_error", "main", "report", "result_path", "run_of", "run_simulation", "smpirun_command",
           "sweep_plan", "weak_system", "write_report"]

# ---------------------------------------------------------------------------- command line


def add_parser(sub):
    p = sub.add_parser("scale", help="the solver on 16-1,024 simulated ranks (SimGrid SMPI) and the "
                                     "communication model to 65,536 (docs/scaling.md)",
                       description=__doc__)
    p.add_argument("--ranks", default="16,64,256,1024", help="simulated rank counts (default %(default)s)")
    p.add_argument("--platforms", default="fat_tree,dragonfly", help="of: " + ", ".join(PLATFORMS))
    p.add_argument("--systems", default=",".join(s.name for s in STRONG),
                   help="strong-scaling systems (default %(default)s)")
    p.add_argument("--no-strong", action="store_true", help="skip the strong-scaling series")
    p.add_argument("--no-weak", action="store_true", help="skip the weak-scaling series (1,000 atoms per rank)")
    p.add_argument("--no-correctness", action="store_true",
                   help="skip the correctness series (rock salt with vacuum, empty ranks, fat tree)")
    p.add_argument("--steps", type=int, default=2, help="timed compute calls per mode (after one warm-up)")
    p.add_argument("--predict", default="1024,4096,16384,65536", help="rank counts the model predicts")
    p.add_argument("--work", default=None,
                   help="raw results and force dumps (default build-smpi/scale-results/, "
                        "build-smpi/scale-results-modelled/ with --modelled-compute)")
    p.add_argument("--docs", default=str(ROOT / "docs"), help="where scaling.md and scaling/ go")
    p.add_argument("--force", action="store_true", help="rerun simulations whose results exist")
    p.add_argument("--report", action="store_true", help="only rebuild the report from existing results")
    p.add_argument("--list", action="store_true", help="print the planned simulations and exit")
    p.add_argument("--modelled-compute", action="store_true",
                   help="model the computation's simulated time (units x seconds per unit, calibrated once per "
                        "system by native one-rank runs: pmewald.bench.scale.compute_costs) instead of timing it; "
                        "results go to build-smpi/scale-results-modelled/ unless --work says otherwise")
    p.set_defaults(func=main)
    return p


def _reference(exe, system, params, work, progress):
    """The one-rank run of a system (every mode), whose forces the others are compared with."""
    out = work / f"{_tag(system)}_reference_P1.json"
    dump = work / "dumps" / f"{_tag(system)}_P1"
    if not out.exists() or not Path(str(dump) + ".nonblocking.bin").exists():
        progress.show(f"{system.name}: 1-rank reference")
        (work / "dumps").mkdir(parents=True, exist_ok=True)
        run_simulation(exe, 1, "fat_tree", system, params, out, steps=1, warmup=0, dump=dump)
    return json.loads(out.read_text()), dump


def main(args) -> int:
    ranks = [int(x) for x in args.ranks.split(",") if x]
    platforms = [x for x in args.platforms.split(",") if x]
    by_name = {s.name: s for s in STRONG}
    systems = [by_name[n] for n in args.systems.split(",") if n]
    plan = sweep_plan(ranks, platforms, strong=not args.no_strong, weak=not args.no_weak, systems=systems,
                      correctness=not args.no_correctness)
    modelled = getattr(args, "modelled_compute", False)
    default_work = ROOT / "build-smpi" / ("scale-results-modelled" if modelled else "scale-results")
    work, docs = Path(args.work or default_work), Path(args.docs)
    work.mkdir(parents=True, exist_ok=True)
    predict.PREDICTION_CACHE = work / "predictions.json"
    pcache_path = work / "parameters.json"
    pcache = json.loads(pcache_path.read_text()) if pcache_path.exists() else {}
    params = {}
    for _, s, _, _ in plan.runs:
        params[s] = CORRECTNESS_PARAMS if s == CORRECTNESS else choose_parameters(s.kind, s.box, pcache)
    pcache_path.write_text(json.dumps(pcache, indent=1))
    if args.list:
        for kind, s, pf, P in plan.runs:
            print(f"{kind:6s} {s.name:12s} {s.atoms:9d} atoms  mesh {params[s]['mesh']}  {pf:9s} P={P}")
        return 0
    exe = None if args.report else build_driver()
    progress = Progress(len(plan.runs))
    results = {}
    refs = {}
    for kind, s, pf, P in plan.runs:
        path = result_path(work, s, pf, P)
        if not args.report and (args.force or not path.exists()):
            if s not in refs:
                refs[s] = _reference(exe, s, params[s], work, progress)
            progress.show(f"{s.name} {pf} P={P}")
            dump = work / "dumps" / f"{_tag(s)}_{pf}_P{P}"
            # The correctness series (communication only) needs no warm-up: its simulated time
            # has no computation, and its communication is the same on every call.
            check = kind == "correctness"
            costs = None
            if modelled and not check:
                from . import compute_costs
                costs = compute_costs.calibrate(s, params[s])
            res = run_simulation(exe, P, pf, s, params[s], path, steps=1 if check else args.steps,
                                 warmup=0 if check else 1, dump=dump, comm_only=check, compute_costs=costs)
            ref_res, ref_dump = refs[s]
            res["correctness"] = {
                m: {"force": force_error(Path(f"{ref_dump}.{m}.bin"), Path(f"{dump}.{m}.bin")),
                    "energy": energy_error(run_of(ref_res, m), run_of(res, m))} for m in MODES}
            path.write_text(json.dumps(res, indent=1))
            for m in MODES:  # the dumps are large; their comparison is kept
                Path(f"{dump}.{m}.bin").unlink(missing_ok=True)
        if path.exists():
            results[(kind, s, pf, P)] = json.loads(path.read_text())
        progress.step(f"{s.name} {pf} P={P}")
    progress.close()
    generated = report(results, params, ranks, [int(x) for x in args.predict.split(",") if x], docs)
    write_report(docs / "scaling.md", generated)
    print(f"wrote {docs / 'scaling.md'} and {docs / 'scaling'}/")
    return 0
