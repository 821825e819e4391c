"""The first call with automatic parameters, in computes (issue 30, item 3).

For each system and tolerance, in one process on the ranks it runs on:

- ``first``: the first ``compute`` of ``pmewald.PME(box, cutoff, tolerance=tol)`` (the tuning
  and its result), with the time the tuning's parts took (choices, solver constructions,
  solver runs; from wrappers around ``Problem.new_solver``, ``Problem.run`` and
  ``tuning.choose_cheapest``);
- ``second``: the next call at the same positions (the pair list's build and, since the
  tuning plans by estimate, the measured FFT plans of the solver kept);
- ``compute``: the median of the calls after those (what an MD loop pays per call);
- ``explicit``: the first call of a new object given the chosen alpha, mesh, order and
  differentiation (a fresh search and the measured plans: the floor of a first call).

``first / compute`` is the first call in computes. Every rank prints nothing; rank 0 prints
a table and ``--json`` writes the rows::

    .venv/bin/python benchmarks/first_call.py --systems water3k water30k --tolerances 1e-4 1e-5
    mpirun -n 2 .venv/bin/python benchmarks/first_call.py --systems water30k

Systems: ``waterN`` = ``systems.water_box(target_atoms=N)`` (``k`` for thousands) with its
exclusions, cutoff 10 A (9 A below 10k atoms); ``nacl`` = 8x8x8 rock salt displaced by
0.1 A, cutoff 10 A. One charge unit, Coulomb constant 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
from mpi4py import MPI

import pmewald
from pmewald import systems
from pmewald._core import tuning as core_tuning
from pmewald.bench.mpi_timing import timed_compute
from pmewald.pme import problem as problem_module
from pmewald.pme import tuning as tuning_module


def make_system(name):
    if name == "nacl":
        return systems.displace(systems.rock_salt((8, 8, 8)), 0.1, seed=1), 10.0
    if name.startswith("water"):
        n = name[len("water"):]
        atoms = int(float(n[:-1]) * 1000) if n.endswith("k") else int(n)
        return systems.water_box(target_atoms=atoms, seed=1), 10.0 if atoms >= 10000 else 9.0
    raise SystemExit(f"unknown system {name!r}")


class Ledger:
    """Seconds spent in the tuning's parts (wrapped for the duration of one call)."""

    def __init__(self):
        self.parts = {"choose": 0.0, "new_solver": 0.0, "runs": 0.0}
        self.counts = {"choose": 0, "new_solver": 0, "runs": 0}

    def wrap(self):
        ledger = self
        originals = (problem_module.Problem.new_solver, problem_module.Problem.run, core_tuning.choose_cheapest)

        def timed(part, fn):
            def inner(*a, **k):
                t = time.perf_counter()
                try:
                    return fn(*a, **k)
                finally:
                    ledger.parts[part] += time.perf_counter() - t
                    ledger.counts[part] += 1
            return inner

        problem_module.Problem.new_solver = timed("new_solver", originals[0])
        problem_module.Problem.run = timed("runs", originals[1])
        core_tuning.choose_cheapest = timed("choose", originals[2])
        return originals

    @staticmethod
    def unwrap(originals):
        problem_module.Problem.new_solver, problem_module.Problem.run, core_tuning.choose_cheapest = originals


def one(comm, name, tol, calls):
    s, cutoff = make_system(name)
    n, r, p = len(s.charges), comm.Get_rank(), comm.Get_size()
    mine = slice(r * n // p, (r + 1) * n // p)
    args = (s.positions[mine], s.charges[mine], s.ids[mine], s.exclusions)

    def timed_call(pme):
        return timed_compute(comm, pme, *args)

    pme = pmewald.PME(s.box, cutoff, tolerance=tol, comm=comm)
    ledger = Ledger()
    originals = ledger.wrap()
    try:
        first = timed_call(pme)
    finally:
        Ledger.unwrap(originals)
    second = timed_call(pme)
    steady = [timed_call(pme) for _ in range(calls)]
    prm = pme.parameters
    explicit_pme = pmewald.PME(s.box, cutoff, alpha=prm["alpha"], mesh=prm["mesh"], order=prm["order"],
                               differentiation=prm["differentiation"], comm=comm)
    explicit = timed_call(explicit_pme)
    compute = statistics.median(steady)
    return {"system": name, "atoms": n, "ranks": p, "tolerance": tol, "alpha": prm["alpha"],
            "mesh": list(prm["mesh"]), "order": prm["order"], "differentiation": prm["differentiation"],
            "estimated_error": prm["estimated_error"], "first_s": first, "second_s": second, "compute_s": compute,
            "explicit_first_s": explicit, "first_computes": first / compute,
            "explicit_computes": explicit / compute, "parts_s": dict(ledger.parts), "counts": dict(ledger.counts)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--systems", nargs="+", default=["water3k", "water30k"])
    ap.add_argument("--tolerances", nargs="+", type=float, default=[1e-4, 1e-5])
    ap.add_argument("--calls", type=int, default=5, help="steady calls timed after the second")
    ap.add_argument("--json", help="write the rows here (rank 0)")
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    rows = []
    for name in a.systems:
        for tol in a.tolerances:
            row = one(comm, name, tol, a.calls)
            rows.append(row)
            if comm.Get_rank() == 0:
                parts = ", ".join(f"{k} {v:.2f} s ({row['counts'][k]})" for k, v in row["parts_s"].items())
                print(f"{name:9s} {row['ranks']} rk tol {tol:g}: first {row['first_s']:.2f} s = "
                      f"{row['first_computes']:.1f} computes (explicit parameters: {row['explicit_computes']:.1f}); "
                      f"compute {1e3 * row['compute_s']:.0f} ms, second {row['second_s']:.2f} s; "
                      f"{row['order']} {tuple(row['mesh'])} alpha {row['alpha']}; tuning: {parts}", flush=True)
    if comm.Get_rank() == 0 and a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
