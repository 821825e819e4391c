"""Real-space load balancing on real ranks: slowest / mean pair work and the step, balance off
against on (docs/scaling.md, "Load balancing").

    mpirun -n 2 .venv/bin/python benchmarks/balance.py [--calls 12] [--json out.json]

Two inhomogeneous systems: a water slab (a water box whose cell is stretched along z so that
40% of it is vacuum) and solvated peptide-like chains (pmewald.systems.solvated_chains). For
each, balance "off", "once" and "dynamic" (by the candidate pairs), with a fresh pair search
every call (skin 0: the real-space part is what is balanced) and with the reused pair list
(skin "auto"). Reports per setting the last call's slowest / mean candidate pairs, the
slowest / mean pair-loop seconds over the timed calls (timings()["real_space_imbalance"]), and
the mean step (the slowest rank's, after the warm-up calls that place the cuts). Each rank
passes the atoms of its mesh brick (as an MD code on the bricks would). Fixed
parameters (alpha, mesh, order from tolerance 1e-4 on the first setting), so every setting
does the same work. On more ranks than cores the seconds are not the ranks' own (the pairs are).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from mpi4py import MPI

import pmewald
from pmewald import systems


def water_slab(atoms=12000, vacuum=0.4, seed=3):
    w = systems.water_box(target_atoms=atoms, seed=seed)
    box = np.array(w.box, dtype=float)
    box[2, 2] /= 1.0 - vacuum
    return w, box


def chains(seed=5):
    s = systems.solvated_chains(20, 10, n_water=4000, seed=seed)  # the peer benchmark's proportions
    return s, np.array(s.box, dtype=float)


def brick_owners(box, mesh, positions, size):
    """The rank whose mesh brick holds each atom (an MD code whose domains are the bricks
    passes its atoms so: the mesh part migrates none, the balanced real space its neighbours')."""
    from pmewald import _core
    K = np.array(mesh)
    f = positions @ np.linalg.inv(box)
    m = np.minimum(np.floor((f - np.floor(f)) * K).astype(int), K - 1)
    owner = np.zeros(len(positions), dtype=int)
    for r, (lo, hi) in enumerate(_core.geometry.brick_boxes(size, tuple(int(k) for k in mesh))):
        owner[np.all((m >= np.array(lo)) & (m < np.array(hi)), axis=1)] = r
    return owner


def run(comm, s, box, params, balance, skin, calls, warmup):
    rank, size = comm.Get_rank(), comm.Get_size()
    idx = np.nonzero(brick_owners(box, params["mesh"], s.positions, size) == rank)[0]
    ex = s.exclusions[rank::size]  # (any rank may pass any excluded pair)
    pme = pmewald.PME(box, cutoff=10.0, comm=comm, balance=balance, skin=skin, **params)
    steps = []
    for k in range(calls):
        if k == warmup:
            pme.reset_timings()
        comm.Barrier()
        t0 = time.perf_counter()
        pme.compute(s.positions[idx], s.charges[idx], ids=s.ids[idx], exclusions=ex)
        steps.append(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))
    t = pme.timings()
    return {"pairs_imbalance": t["real_space_pairs_imbalance_last"], "time_imbalance": t["real_space_imbalance"],
            "step_s": float(np.mean(steps[warmup:])), "rebalances": t["balance_rebalances"],
            "ghost_exchange": pme.parameters["ghost_exchange_used"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--json")
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    out = {"ranks": comm.Get_size(), "rows": []}
    for name, (s, box) in (("water slab 40% vacuum", water_slab()), ("solvated chains", chains())):
        probe = pmewald.PME(box, cutoff=10.0, tolerance=1e-4, comm=comm)
        idx = np.arange(comm.Get_rank(), s.n_atoms, comm.Get_size())
        probe.compute(s.positions[idx], s.charges[idx], ids=s.ids[idx], exclusions=s.exclusions[comm.Get_rank()::comm.Get_size()])
        p = probe.parameters
        params = {"alpha": p["alpha"], "mesh": p["mesh"], "order": p["order"], "differentiation": p["differentiation"]}
        for skin in (0.0, "auto"):
            for balance in ("off", "once", "dynamic"):
                r = run(comm, s, box, params, balance, skin, args.calls, args.warmup)
                r.update(system=name, atoms=int(s.n_atoms), skin=skin, balance=balance)
                out["rows"].append(r)
                if comm.Get_rank() == 0:
                    print(f"{name:24s} skin {str(skin):5s} {balance:8s} pairs {r['pairs_imbalance']:.3f} "
                          f"time {r['time_imbalance']:.3f} step {1e3 * r['step_s']:8.2f} ms "
                          f"rebalances {r['rebalances']:.0f}", flush=True)
    if comm.Get_rank() == 0 and args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
