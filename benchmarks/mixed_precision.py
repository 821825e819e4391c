"""The mixed-precision pair kernel: ``mpirun -n 2 python benchmarks/mixed_precision.py``.

Two parts (docs/realspace.md has the tables):

``--part time``: the pair loop's time, double against mixed, on a water box
(``systems.water_box(target_atoms=--atoms)``, exclusions included, contiguous blocks of
molecules per rank) in an MD-like loop (positions perturbed by a random walk of ``--step``
Angstrom per component and step). For each tolerance the automatic parameters are chosen
once (a double object's first call; or, with ``--alpha-rc``, alpha = that / cutoff and a
mesh of about 1 A, order 6) and four objects are made with them: double and mixed,
each with a fresh search every call (``skin=0``) and with the reused pair list
(``skin="auto"``). Their calls are interleaved step by step, so their ratios share the
machine's state; a call's pair time is the slowest rank's ``timings()["real_space"]`` growth
(the pair loop with its search or list, ghosts' forces included), the first call of each left
out. Per object: median pair seconds per call and the median step-by-step ratio mixed / double.

``--part error``: the float rounding's RMS force error against its model. For water and
random charges (sizes ``--error-atoms``) at each tolerance, the automatic parameters of a
double object and, at the same parameters, ``precision="mixed"``: measured
``sqrt(sum |F_mixed - F_double|^2 / sum |F_double|^2)`` (the float contribution alone),
the model ``estimated_error_float / rms_force`` (``pmewald.pme.tuning._MIXED_C`` u sqrt(2 S / sum F^2)),
their ratio, the energy's relative difference, the total error of both against a double
reference at tolerance ``--reference`` (same cutoff) and ``estimated_error`` of the mixed
result; and what ``precision="auto"`` chose.

Not a test: timings depend on the machine and its load (say ``uptime`` next to them).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics

import numpy as np
from mpi4py import MPI

import pmewald
from pmewald import systems
from pmewald.bench.mpi_timing import slowest


def _split(s, comm):
    rank, size = comm.Get_rank(), comm.Get_size()
    mine = np.arange(s.n_atoms)[rank * s.n_atoms // size:(rank + 1) * s.n_atoms // size]
    ex = s.exclusions[np.isin(s.exclusions[:, 0], s.ids[mine])] if len(s.exclusions) else s.exclusions
    return mine, ex


def _pair_seconds(comm, pme, pos, q, ids, ex):
    before = pme.timings().get("real_space", 0.0)
    pme.compute(pos, q, ids=ids, exclusions=ex)
    return slowest(comm, pme.timings()["real_space"] - before)


def run_time(comm, args):
    s = systems.water_box(target_atoms=args.atoms, seed=1)
    mine, ex = _split(s, comm)
    q, ids = s.charges[mine], s.ids[mine]
    rng = np.random.default_rng(100 + comm.Get_rank())
    rows = []
    for tol in args.tolerance if args.alpha_rc is None else [None]:
        pos = s.positions[mine].copy()
        if tol is None:  # explicit: the pair loop's cost depends on the cutoff, not on alpha or the mesh
            mesh = [int(2 * math.ceil(float(np.linalg.norm(v)) / 2)) for v in s.box]
            p = dict(alpha=args.alpha_rc / args.cutoff, mesh=mesh, order=6, differentiation="ad")
        else:
            base = pmewald.PME(s.box, args.cutoff, tolerance=tol, comm=comm, skin=0, precision="double")
            base.compute(pos, q, ids=ids, exclusions=ex)
            p = base.parameters
        fixed = dict(alpha=p["alpha"], mesh=p["mesh"], order=p["order"], differentiation=p["differentiation"])
        kinds = [(prec, sk) for sk in ("0", "auto") for prec in ("double", "mixed")]
        objs = {k: pmewald.PME(s.box, args.cutoff, comm=comm, precision=k[0],
                               skin=0.0 if k[1] == "0" else "auto", **fixed) for k in kinds}
        for o in objs.values():  # first calls (tuning-free here, but the first list build)
            o.compute(pos, q, ids=ids, exclusions=ex)
        times = {k: [] for k in objs}
        for _ in range(args.steps):
            pos += rng.normal(scale=args.step, size=pos.shape)
            for k, o in objs.items():
                times[k].append(_pair_seconds(comm, o, pos, q, ids, ex))
        for k in kinds:
            ref = times[("double", k[1])]
            rows.append(dict(part="time", atoms=s.n_atoms, ranks=comm.Get_size(), tolerance=tol,
                             alpha=p["alpha"], mesh=list(p["mesh"]), precision=k[0], skin=k[1],
                             pair_ms=1e3 * statistics.median(times[k]),
                             ratio=statistics.median([y / x for x, y in zip(ref, times[k])])))
    return rows


def run_error(comm, args):
    rows = []
    for name in args.systems:
        for n in args.error_atoms:
            if name == "water":
                s = systems.water_box(target_atoms=n, seed=2)
            else:
                s = systems.random_charges(n, systems.water_box(target_atoms=n, seed=2).box, seed=3,
                                           min_distance=1.0)
            cut = min(args.cutoff, 0.45 * float(np.min(np.abs(np.diag(s.box)))))
            mine, ex = _split(s, comm)
            pos, q, ids = s.positions[mine], s.charges[mine], s.ids[mine]
            ref = pmewald.PME(s.box, cut, tolerance=args.reference, comm=comm, skin=0, precision="double")
            f_ref = ref.compute(pos, q, ids=ids, exclusions=ex).forces
            for tol in args.tolerance:
                dbl = pmewald.PME(s.box, cut, tolerance=tol, comm=comm, skin=0, precision="double")
                rd = dbl.compute(pos, q, ids=ids, exclusions=ex)
                p = dbl.parameters
                mix = pmewald.PME(s.box, cut, comm=comm, skin=0, precision="mixed", alpha=p["alpha"],
                                  mesh=p["mesh"], order=p["order"], differentiation=p["differentiation"])
                rm = mix.compute(pos, q, ids=ids, exclusions=ex)
                auto = pmewald.PME(s.box, cut, tolerance=tol, comm=comm, skin=0, precision="auto")
                ra = auto.compute(pos, q, ids=ids, exclusions=ex)

                def rel(a, b):
                    num = comm.allreduce(float(((a - b) ** 2).sum()))
                    return (num / comm.allreduce(float((b ** 2).sum()))) ** 0.5

                measured = rel(rm.forces, rd.forces)
                model = mix.parameters["estimated_error_float"] / rm.rms_force
                rows.append(dict(part="error", system=name, atoms=s.n_atoms, ranks=comm.Get_size(), tolerance=tol,
                                 alpha_rc=p["alpha"] * cut, float_measured=measured, float_model=model,
                                 model_over_measured=model / measured if measured > 0 else float("inf"),
                                 energy_rel=abs(rm.energy - rd.energy) / abs(rd.energy),
                                 total_double=rel(rd.forces, f_ref), total_mixed=rel(rm.forces, f_ref),
                                 estimated_mixed=rm.estimated_error, auto=auto.parameters["precision"],
                                 total_auto=rel(ra.forces, f_ref)))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("time", "error", "both"), default="both")
    ap.add_argument("--atoms", type=int, default=30000)
    ap.add_argument("--error-atoms", type=int, nargs="+", default=[3000])
    ap.add_argument("--systems", nargs="+", default=["water", "random"])
    ap.add_argument("--cutoff", type=float, default=10.0)
    ap.add_argument("--tolerance", type=float, nargs="+", default=[1e-4, 1e-5])
    ap.add_argument("--reference", type=float, default=1e-8)
    ap.add_argument("--alpha-rc", type=float, help="time part: explicit alpha * cutoff (mesh ~1 A, order 6) "
                    "instead of the tolerances' automatic choice")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--step", type=float, default=0.01, help="random-walk step per component (A)")
    ap.add_argument("--json", help="write the rows here (rank 0)")
    args = ap.parse_args(argv)
    comm = MPI.COMM_WORLD
    rows = []
    if args.part in ("error", "both"):
        rows += run_error(comm, args)
    if args.part in ("time", "both"):
        rows += run_time(comm, args)
    if comm.Get_rank() == 0:
        print(f"# pair kernel: {pmewald._core._testing.realspace.pair_kernel_isa()}")
        for r in rows:
            print(json.dumps({k: (float(f"{v:.4g}") if isinstance(v, float) else v) for k, v in r.items()}))
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
