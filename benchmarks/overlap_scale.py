"""Overlap and comm_mode="auto" at simulated scale (SimGrid SMPI, the harness of
:mod:`pmewald.bench.scale`): ``python benchmarks/overlap_scale.py --ranks 64 256``.

One simulation per (platform, rank count) runs the driver's variants one after another on the
same atoms: each mode without and with overlap (``pt2pt``, ``pt2pt+overlap``, ...) and
``auto``. Per mode it reports the step time (the slowest rank's), the reciprocal part's
communication left exposed (``comm_wait``, mean over ranks, per step) without and with
overlap, the pair work hidden (``comm_hidden``) and the polling's cost, and whether auto's pick
is the fastest plain mode or within 5% of it. Results are cached next to bench_scale's
(``build-smpi/overlap-results/``; ``--force`` reruns). Progress calls cost ``--test-seconds``
of simulated time each (SimGrid's ``smpi/test``; its default, 1e-4 s and growing with repeated
calls, models a busy-polling loop, not a test made between pieces of work).

``--modelled-compute``: the computation's simulated time is modelled (units of work x
seconds per unit, calibrated once per system by native one-rank runs,
:mod:`pmewald.bench.scale.compute_costs`) instead of timed by SimGrid, so the step times are
deterministic and independent of this machine's load (results in
``build-smpi/overlap-results-modelled/``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pmewald.bench import scale as bs

MODES = ("pt2pt", "nonblocking", "collective")
VARIANTS = [m + s for m in MODES for s in ("", "+overlap")] + ["auto"]


def simulate(exe, P, platform, system, params, out, args, costs=None):
    if out.exists() and not args.force:
        return json.loads(out.read_text())
    extra = [("smpi/test", repr(args.test_seconds)), ("smpi/grow-injected-times", "no")]
    return bs.run_simulation(exe, P, platform, system, params, out, modes=VARIANTS, warmup=1, steps=args.steps,
                             extra_cfg=extra, timeout=args.timeout, compute_costs=costs)


def rows_of(res):
    runs = {r["variant"]: r for r in res["runs"]}

    def ph(run, key, stat="mean"):
        v = run["phases"].get(key)
        return v[stat] if v else 0.0

    rows = []
    for m in MODES:
        a, b = runs[m], runs[m + "+overlap"]
        exposed_a, exposed_b = ph(a, "comm_wait"), ph(b, "comm_wait")
        rows.append(dict(mode=m, plain=a["step_s"], overlap=b["step_s"], exposed_plain=exposed_a,
                         exposed_overlap=exposed_b, hidden=ph(b, "comm_hidden"),
                         poll=ph(b, "overlap_poll_seconds"), polls=ph(b, "overlap_polls"),
                         exposed_ratio=exposed_b / exposed_a if exposed_a > 0 else float("nan"),
                         gain=a["step_s"] - b["step_s"], hid=exposed_a - exposed_b))
    auto = runs["auto"]
    fastest = min(MODES, key=lambda m: runs[m]["step_s"])
    picked = auto["mode"]
    return rows, dict(picked=picked, fastest=fastest, picked_step=runs[picked]["step_s"],
                      fastest_step=runs[fastest]["step_s"], auto_step=auto["step_s"],
                      seconds={m: ph(auto, f"auto_{m}", "max") for m in MODES})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--platforms", nargs="+", default=["fat_tree", "dragonfly"])
    ap.add_argument("--system", default="water98k",
                    help="a strong-scaling system of pmewald.bench.scale (" + ", ".join(s.name for s in bs.STRONG)
                         + ") or waterN, a water box of about N atoms (the weak series' systems)")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--test-seconds", type=float, default=1e-6)
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--modelled-compute", action="store_true",
                    help="model the computation's simulated time (calibrated once by native one-rank runs)")
    args = ap.parse_args(argv)
    exe = bs.build_driver()
    system = next((s for s in bs.STRONG if s.name == args.system), None)
    if system is None:
        if not (args.system.startswith("water") and args.system[5:].isdigit()):
            ap.error(f"--system {args.system!r}: not one of {[s.name for s in bs.STRONG]} nor waterN")
        system = bs.water(int(args.system[5:]))
    params = bs.choose_parameters(system.kind, system.box, {})
    results = bs.ROOT / "build-smpi" / ("overlap-results-modelled" if args.modelled_compute else "overlap-results")
    costs = None
    if args.modelled_compute:
        from pmewald.bench.scale import compute_costs
        costs = compute_costs.calibrate(system, params)
        print(f"modelled computation: {costs}")
    for platform in args.platforms:
        for P in args.ranks:
            out = Path(results) / f"{system.name}_{platform}_{P}.json"
            res = simulate(exe, P, platform, system, params, out, args, costs)
            rows, auto = rows_of(res)
            wall = res.get("simulation", {}).get("wall_s")
            print(f"\n{system.name} ({system.atoms} atoms, mesh {params['mesh']}^3) on {P} ranks, {platform} "
                  f"(simulation wall {wall:.0f} s)" if wall else "")
            print("| mode | step plain ms | step overlap ms | exposed comm plain ms | exposed overlap ms | "
                  "exposed ratio | hidden ms | step gain ms | polls (ms) |")
            print("|---|---|---|---|---|---|---|---|---|")
            for r in rows:
                print(f"| {r['mode']} | {1e3 * r['plain']:.2f} | {1e3 * r['overlap']:.2f} | "
                      f"{1e3 * r['exposed_plain']:.2f} | {1e3 * r['exposed_overlap']:.2f} | "
                      f"{r['exposed_ratio']:.2f} | {1e3 * r['hidden']:.2f} | {1e3 * r['gain']:.2f} | "
                      f"{r['polls']:.0f} ({1e3 * r['poll']:.3f}) |")
            within = auto["picked_step"] <= 1.05 * auto["fastest_step"]
            print(f"auto picked {auto['picked']} (measured {', '.join(f'{m} {1e3 * s:.2f} ms' for m, s in auto['seconds'].items())}); "
                  f"fastest plain step: {auto['fastest']}; picked within 5%: {within}")


if __name__ == "__main__":
    main()
