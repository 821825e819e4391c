"""Overlap and comm_mode="auto" on real ranks: ``mpirun -n 2 python benchmarks/overlap.py``.

For each system (water boxes of the sizes given), each communication mode and overlap off /
on, one PME object each; their compute calls are interleaved round-robin in one loop (so the
ratios share the machine's state), after warm-up. A call's time is the slowest rank's. The
table gives per mode the median step time without and with overlap, the median of the
round-by-round ratios (with / without), the reciprocal part's communication left exposed
(``comm_wait``, slowest rank, per step) without and with overlap, the time hidden
(``comm_hidden``) and the polling's cost (``overlap_poll_seconds``). Then what
``comm_mode="auto"`` picks (mode and overlap, from its trial of the first calls) against the fastest
variant of the table.

``--poll`` sweeps the progress-call interval instead (rows,microseconds pairs), in the
nonblocking mode: step time and polling cost per setting, against overlap off.

Not a test: numbers depend on the machine and its load (say ``uptime`` next to them).
"""

from __future__ import annotations

import argparse
import json
import statistics

import numpy as np
from mpi4py import MPI

import pmewald
from pmewald import systems
from pmewald.bench.mpi_timing import slowest, timed_compute

MODES = ("pt2pt", "nonblocking", "collective")




def _system(comm, n_mol, seed=1):
    s = systems.water_box(n_mol, seed=seed)
    rank, size = comm.Get_rank(), comm.Get_size()
    # contiguous blocks of molecules: roughly spatial halves, the usual MD split
    mine = np.arange(s.n_atoms)[rank * s.n_atoms // size:(rank + 1) * s.n_atoms // size]
    ex = s.exclusions[np.isin(s.exclusions[:, 0], mine)]
    return s, s.positions[mine], s.charges[mine], s.ids[mine], ex


def _per_step(comm, pme, keys, steps):
    t = pme.timings()
    return {k: slowest(comm, t.get(k, 0.0)) / steps for k in keys}


def _problem(comm, n_mol, args):
    """The system, this rank's atoms, the cutoff and the parameters the automatic choice makes."""
    s, pos, q, ids, ex = _system(comm, n_mol)
    rc = min(args.cutoff, 0.49 * float(np.min(pmewald.reference.cell_heights(s.box))))
    base = pmewald.PME(s.box, rc, tolerance=args.tolerance, comm=comm)
    base.compute(pos, q, ids=ids, exclusions=ex)
    p = base.parameters
    fixed = dict(alpha=p["alpha"], mesh=p["mesh"], order=p["order"], differentiation=p["differentiation"])
    return s, (pos, q, ids, ex), rc, p, fixed


def _interleaved(comm, objs, atoms, args):
    """Warm-up, reset, then `repeats` rounds of one call of each object: times per object."""
    pos, q, ids, ex = atoms
    for o in objs.values():
        for _ in range(args.warmup):
            o.compute(pos, q, ids=ids, exclusions=ex)
        o.reset_timings()
    times = {k: [] for k in objs}
    for _ in range(args.repeats):
        for k, o in objs.items():
            times[k].append(timed_compute(comm, o, pos, q, ids, ex))
    return times


def run_modes(comm, args):
    rows = []
    for n_mol in args.molecules:
        s, atoms, rc, p, fixed = _problem(comm, n_mol, args)
        pos, q, ids, ex = atoms
        objs = {}
        for mode in MODES:
            for ov in (False, True):
                objs[(mode, ov)] = pmewald.PME(s.box, rc, comm=comm, comm_mode=mode, overlap=ov, **fixed)
        auto = pmewald.PME(s.box, rc, comm=comm, comm_mode="auto", **fixed)
        auto.compute(pos, q, ids=ids, exclusions=ex)
        while auto.parameters["comm_mode_used"] is None:  # its trial of the variants, call by call
            auto.compute(pos, q, ids=ids, exclusions=ex)
        times = _interleaved(comm, objs, atoms, args)
        keys = ("comm_wait", "comm_hidden", "overlap_poll_seconds", "real_space", "fft", "ghost")
        for mode in MODES:
            off, on = times[(mode, False)], times[(mode, True)]
            a = _per_step(comm, objs[(mode, False)], keys, args.repeats)
            b = _per_step(comm, objs[(mode, True)], keys, args.repeats)
            rows.append(dict(atoms=s.n_atoms, mesh=list(p["mesh"]), order=p["order"],
                             differentiation=p["differentiation"], mode=mode,
                             plain=statistics.median(off), overlap=statistics.median(on),
                             ratio=statistics.median([y / x for x, y in zip(off, on)]),
                             exposed_plain=a["comm_wait"], exposed_overlap=b["comm_wait"],
                             hidden=b["comm_hidden"], poll=b["overlap_poll_seconds"],
                             real_space=a["real_space"]))
        fastest = min(times, key=lambda k: statistics.median(times[k]))
        rows.append(dict(atoms=s.n_atoms, auto=auto.parameters["comm_mode_used"], auto_overlap=auto.parameters["overlap"],
                         fastest=fastest[0] + ("+overlap" if fastest[1] else ""),
                         auto_seconds=auto.parameters["comm_mode_seconds"],
                         by_variant={m + ("+overlap" if ov else ""): statistics.median(t)
                                     for (m, ov), t in times.items()}))
    return rows


def run_poll(comm, args):
    rows = []
    for n_mol in args.molecules:
        s, atoms, rc, p, fixed = _problem(comm, n_mol, args)
        objs = {"off": pmewald.PME(s.box, rc, comm=comm, comm_mode=args.mode, overlap=False, **fixed)}
        for text in args.poll:
            r, us = text.split(",")
            objs[text] = pmewald.PME(s.box, rc, comm=comm, comm_mode=args.mode, overlap=True,
                                     overlap_poll=(int(r), float(us)), **fixed)
        times = _interleaved(comm, objs, atoms, args)
        for k, o in objs.items():
            t = _per_step(comm, o, ("comm_wait", "comm_hidden", "overlap_poll_seconds", "overlap_polls"),
                          args.repeats)
            rows.append(dict(atoms=s.n_atoms, mesh=list(p["mesh"]), poll=k, step=statistics.median(times[k]),
                             ratio=statistics.median([y / x for x, y in zip(times["off"], times[k])]),
                             exposed=t["comm_wait"], hidden=t["comm_hidden"], poll_seconds=t["overlap_poll_seconds"],
                             polls=t["overlap_polls"]))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--molecules", type=int, nargs="+", default=[1000, 4000])
    ap.add_argument("--tolerance", type=float, default=1e-5)
    ap.add_argument("--cutoff", type=float, default=9.0)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--poll", nargs="*", help="rows,microseconds settings to sweep (nonblocking mode)")
    ap.add_argument("--mode", default="nonblocking", help="mode of the --poll sweep")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    comm = MPI.COMM_WORLD
    rows = run_poll(comm, args) if args.poll else run_modes(comm, args)
    if comm.Get_rank() == 0:
        print(f"# {comm.Get_size()} ranks, repeats {args.repeats}")
        for r in rows:
            if "auto" in r:
                pick = r["auto"] + ("+overlap" if r["auto_overlap"] else "")
                print(f"{r['atoms']:>7} atoms  auto -> {pick}  fastest measured: {r['fastest']}  "
                      f"auto's seconds {r['auto_seconds']}  step by variant {r['by_variant']}")
            elif "mode" in r:
                print(f"{r['atoms']:>7} atoms mesh {r['mesh']} {r['differentiation']} {r['mode']:>11}: "
                      f"plain {1e3 * r['plain']:8.2f} ms  overlap {1e3 * r['overlap']:8.2f} ms  "
                      f"ratio {r['ratio']:.4f}  exposed {1e3 * r['exposed_plain']:.3f} -> "
                      f"{1e3 * r['exposed_overlap']:.3f} ms  hidden {1e3 * r['hidden']:.3f} ms  "
                      f"poll {1e3 * r['poll']:.3f} ms  (pairs {1e3 * r['real_space']:.1f} ms)")
            else:
                print(f"{r['atoms']:>7} atoms mesh {r['mesh']} poll {r['poll']:>10}: step {1e3 * r['step']:8.2f} ms "
                      f"ratio {r['ratio']:.4f}  exposed {1e3 * r['exposed']:.3f} ms  hidden {1e3 * r['hidden']:.3f} ms "
                      f"polls {r['polls']:.0f} ({1e3 * r['poll_seconds']:.3f} ms)")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
