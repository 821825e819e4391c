"""Hybrid MPI x threads: the same PME calls on 1 x 1, 1 x 2 and 2 x 1 (ranks x threads).

    .venv-openmp/bin/python benchmarks/hybrid.py                # the table, ~10 min on 2 cores
    .venv-openmp/bin/python benchmarks/hybrid.py --rounds 1 --repeat 3   # a quick look

Needs the OpenMP build (``PMEWALD_KOKKOS=openmp bash scripts/dev.sh setup``). Systems: water
(30,000 atoms, intramolecular pairs excluded) and rock salt (32,768 ions, 0.1 A displacements),
cutoff 10 A, kcal/mol/A, each at tolerance 1e-4 and 1e-5. The parameters (differentiation,
order, mesh, alpha) are chosen once, on 1 x 1, and passed explicitly to every layout, so all
layouts do the same arithmetic.

Every layout runs as its own job (``mpirun -n R --bind-to none`` with ``OMP_NUM_THREADS=T``,
``OMP_PROC_BIND=false``); a job builds all four solvers, calls each twice to warm up (the pair list of
``skin="auto"`` is built on the second call), then
``--repeat`` times, and reports the median wall time of ``compute()``, its CPU time (all threads
of all ranks, ``time.process_time``: 1 x 1's over a layout's is its per-core efficiency
whatever else runs on the machine, where wall-time speed-ups need idle cores) and the per-phase
times (``pme.timings()``, the slowest rank's, per call). ``--rounds`` rounds run the layouts in
rotating order, so a change of machine load hits every layout alike; the speed-ups are
ratios within a round, and the table gives their median (and range) over the rounds, with the
load average (``os.getloadavg``) before each round. Never more ranks x threads than cores.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

LAYOUTS = [(1, 1), (1, 2), (2, 1)]  # (ranks, threads)
CASES = [("water", 1e-4), ("water", 1e-5), ("nacl", 1e-4), ("nacl", 1e-5)]
PHASES = ["real_space", "ghost_atoms", "migrate", "exclusions", "spread", "ghost", "fft", "solve", "gather", "reduce"]


def _system(name):
    from pmewald import systems

    if name == "nacl":
        return systems.displace(systems.rock_salt(16), 0.1, seed=1)
    return systems.water_box(target_atoms=30000)


def worker(args):
    """One layout: every case, warm-up then --repeat timed calls; JSON on rank 0's stdout."""
    from mpi4py import MPI

    import pmewald

    comm = MPI.COMM_WORLD
    params = json.loads(args.params) if args.params else {}
    out = {"config": {k: v for k, v in pmewald.config().items() if k in ("kokkos_execution_space",
                                                                          "kokkos_threads", "fftw_threads")},
           "cases": {}}
    built = {}
    for name, tol in CASES:
        if name not in built:
            built[name] = _system(name)
        s = built[name]
        n = len(s.charges)
        lo, hi = comm.rank * n // comm.size, (comm.rank + 1) * n // comm.size
        key = f"{name} {tol:g}"
        kw = dict(tolerance=tol, coulomb_constant=332.06371)
        kw.update(params.get(key, {}))
        pme = pmewald.PME(s.box, 10.0, **kw)
        call = (s.positions[lo:hi], s.charges[lo:hi], s.ids[lo:hi], s.exclusions if comm.rank == 0 else None)
        # Two warm-up calls: skin="auto" builds the pair list on the second call, so the
        # timed calls (and the per-phase means) are all steady-state list reuse.
        pme.compute(*call)
        pme.compute(*call)
        pme.reset_timings()
        times, cpu = [], []
        for _ in range(args.repeat):
            comm.Barrier()
            t, c = time.perf_counter(), time.process_time()
            pme.compute(*call)
            times.append(time.perf_counter() - t)
            cpu.append(comm.allreduce(time.process_time() - c))
        tm = pme.timings()
        calls = max(tm.get("calls", 1), 1)
        phases = {k: comm.allreduce(tm.get(k, 0.0), op=MPI.MAX) / calls for k in PHASES}
        p = pme.parameters
        out["cases"][key] = {
            "median_s": float(np.median(times)), "min_s": float(np.min(times)), "phases_s": phases,
            "cpu_s": float(np.median(cpu)),
            "params": {"differentiation": p["differentiation"], "order": int(p["order"]),
                       "mesh": [int(v) for v in p["mesh"]], "alpha": float(p["alpha"])},
        }
    if comm.rank == 0:
        print("HYBRID " + json.dumps(out), flush=True)


def _run(ranks, threads, python, extra, timeout=1200):
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS=str(threads), OMP_PROC_BIND="false", PMEWALD_QUIET_OVERSUBSCRIPTION="0")
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [shutil.which("mpirun") or "mpirun", "-n", str(ranks), "--bind-to", "none", python, __file__, "--worker"]
    r = subprocess.run(cmd + extra, capture_output=True, text=True, timeout=timeout, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{ranks} x {threads} failed:\n{r.stdout}\n{r.stderr}")
    if "pmewald warning" in r.stderr:
        print(r.stderr.strip(), file=sys.stderr)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("HYBRID ")][-1]
    return json.loads(line[len("HYBRID "):])


def _table(rounds, loads):
    lines = []
    names = [f"{n} {t:g}" for n, t in CASES]
    first = rounds[0][(1, 1)]["cases"]
    lines.append("| system | tolerance | params | 1 x 1 (ms) | 1 x 2 (ms) | 2 x 1 (ms) | 1x1 / 1x2 | 1x1 / 2x1 |"
                 " 1x2 / 2x1 | CPU 1x1 / 1x2 | CPU 1x1 / 2x1 |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for key in names:
        p = first[key]["params"]
        ms = {lay: [1e3 * r[lay]["cases"][key]["median_s"] for r in rounds] for lay in LAYOUTS}
        sp12 = [a / b for a, b in zip(ms[(1, 1)], ms[(1, 2)])]
        sp21 = [a / b for a, b in zip(ms[(1, 1)], ms[(2, 1)])]
        rel = [a / b for a, b in zip(ms[(1, 2)], ms[(2, 1)])]
        cpu = {lay: [r[lay]["cases"][key]["cpu_s"] for r in rounds] for lay in LAYOUTS}
        eff12 = [a / b for a, b in zip(cpu[(1, 1)], cpu[(1, 2)])]
        eff21 = [a / b for a, b in zip(cpu[(1, 1)], cpu[(2, 1)])]

        def f(v):
            return f"{np.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if len(v) > 1 else f"{v[0]:.2f}"

        name, tol = key.split()
        lines.append(f"| {name} | {tol} | {p['differentiation']} {p['order']}, {'x'.join(map(str, p['mesh']))}, "
                     f"alpha {p['alpha']:.4f} | {np.median(ms[(1, 1)]):.1f} | {np.median(ms[(1, 2)]):.1f} | "
                     f"{np.median(ms[(2, 1)]):.1f} | {f(sp12)} | {f(sp21)} | {f(rel)} | {f(eff12)} | {f(eff21)} |")
    lines.append("")
    lines.append("Per phase (ms per call, slowest rank; median over rounds), 1 x 1 / 1 x 2 / 2 x 1:")
    lines.append("")
    lines.append("| system | tolerance | " + " | ".join(PHASES) + " |")
    lines.append("|---|---|" + "---|" * len(PHASES))
    for key in names:
        cells = []
        for ph in PHASES:
            v = [np.median([1e3 * r[lay]["cases"][key]["phases_s"][ph] for r in rounds]) for lay in LAYOUTS]
            cells.append(" / ".join(f"{x:.1f}" for x in v))
        name, tol = key.split()
        lines.append(f"| {name} | {tol} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Load average (1 min) before each round: " + ", ".join(f"{x:.1f}" for x in loads))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--params", default="", help=argparse.SUPPRESS)
    ap.add_argument("--repeat", type=int, default=7, help="timed calls per case and job (median)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the three layouts")
    ap.add_argument("--json", default="bench-out/hybrid.json", help="all raw results")
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    import pmewald

    if pmewald.config()["kokkos_execution_space"] == "Serial":
        sys.exit("benchmarks/hybrid.py needs a threaded build: .venv-openmp/bin/python (docs/install.md)")
    py = sys.executable
    # The parameters, chosen once on 1 x 1 (one call, no timing).
    first = _run(1, 1, py, ["--repeat", "1"])
    params = {k: v["params"] for k, v in first["cases"].items()}
    extra = ["--repeat", str(a.repeat), "--params", json.dumps(params)]
    rounds, loads = [], []
    for r in range(a.rounds):
        order = LAYOUTS[r % 3:] + LAYOUTS[:r % 3]
        loads.append(os.getloadavg()[0])
        res = {}
        for lay in order:
            res[lay] = _run(*lay, py, extra)
            print(f"round {r + 1}: {lay[0]} x {lay[1]}: " + ", ".join(
                f"{k} {1e3 * v['median_s']:.1f} ms" for k, v in res[lay]["cases"].items()), flush=True)
        rounds.append(res)
    os.makedirs(os.path.dirname(a.json) or ".", exist_ok=True)
    with open(a.json, "w") as fh:
        json.dump({"loads": loads, "rounds": [{f"{k[0]}x{k[1]}": v for k, v in r.items()} for r in rounds]}, fh,
                  indent=1)
    print()
    print(_table(rounds, loads))


if __name__ == "__main__":
    main()
