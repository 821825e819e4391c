"""Calibration of the reciprocal-space cost model: ``python -m pmewald.bench cost``.

The automatic parameter choice (:class:`pmewald.PME` with ``differentiation="auto"`` and
``order=None``) picks the cheapest (differentiation, order, alpha, mesh) by a cost model
whose constants live in one place, ``default_cost_model()`` in ``cpp/tuning/cost_model.cpp``
(documented in ``cpp/tuning/cost_model.hpp``). For a mesh of N points, order p and n atoms, one
reciprocal step on one rank costs

    t = fft * transforms(diff) * N log2 N                  (ad: 2 transforms, ik: 4)
      + mesh(diff) * N                                      (solve, copies, zeroing, halo)
      + (atom(diff) + point(diff) p^3) * n                  (spread and gather)

This script times the reciprocal part alone (``real_space=False``, one rank) for every
combination of differentiation, order and mesh it is given, fits each constant to the
phase it describes (``pme.timings()``: ``fft``, ``solve``, ``spread``, ``gather``,
``ghost``), and prints

* the fitted constants, and the C++ body of ``default_cost_model()`` to paste;
* measured against modelled time for every configuration, with both the fitted and the
  built-in constants (``_core.tuning.cost_model()``), so a stale model shows up.

Only ratios of the constants matter to the choice. Run it on a quiet machine, without
``mpirun``, after any change to the FFT, solve, spread or gather kernels.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

PHASES = ("spread", "ghost", "fft", "solve", "gather")
KEYS = ("fft", "mesh_ad", "mesh_ik", "atom_ad", "atom_ik", "point_ad", "point_ik", "transforms_ad",
        "transforms_ik")


def _time_config(pos, q, box, diff, order, mesh, alpha):
    """Per-call seconds of each reciprocal phase, one call after a warm-up call
    (real_space=False, one rank)."""
    from mpi4py import MPI

    from .pme import PME

    pme = PME(box, 0.45 * float(np.min(np.diag(box))), alpha=alpha, mesh=mesh, order=order,
              differentiation=diff, comm=MPI.COMM_SELF, real_space=False)
    pme.compute(pos, q)  # warm-up (plans, buffers)
    pme.reset_timings()
    pme.compute(pos, q)
    t = pme.timings()
    return {k: float(t.get(k, 0.0)) for k in PHASES}


def _fit(columns, y):
    """Least squares of the RELATIVE residuals, y ~ columns @ c, with c >= 0 (a negative
    term is dropped and the rest refitted)."""
    A = np.column_stack(columns) / y[:, None]
    b = np.ones_like(y)
    keep = list(range(A.shape[1]))
    while True:
        c, *_ = np.linalg.lstsq(A[:, keep], b, rcond=None)
        if (c >= 0).all() or len(keep) == 1:
            out = np.zeros(A.shape[1])
            out[keep] = np.maximum(c, 0.0)
            return out
        keep.pop(int(np.argmin(c)))


def calibrate(rows, transforms=(2, 4)):
    """Fit the CostModel constants to measured rows (dicts: diff, order, mesh, n, phases),
    each phase to the terms that describe it."""
    T = {"ad": transforms[0], "ik": transforms[1]}
    N = np.array([float(np.prod(r["mesh"])) for r in rows])
    NlogN = N * np.log2(N)
    n = np.array([float(r["n"]) for r in rows])
    np3 = n * np.array([r["order"] ** 3 for r in rows], dtype=float)
    tr = np.array([T[r["diff"]] for r in rows], dtype=float)
    ph = {k: np.array([r["phases"][k] for r in rows]) for k in PHASES}
    is_ik = np.array([r["diff"] == "ik" for r in rows])
    # fft phase: the transforms plus per-point work per transform (copies, if any)
    fft, copy = _fit([tr * NlogN, tr * N], ph["fft"])
    # spread phase: per atom, per stencil point, and the grid zeroing per mesh point
    s_atom, s_point, zero = _fit([n, np3, N], ph["spread"])
    out = {"fft": fft, "transforms_ad": T["ad"], "transforms_ik": T["ik"]}
    for diff, sel in (("ad", ~is_ik), ("ik", is_ik)):
        if not sel.any():
            out[f"mesh_{diff}"] = out[f"atom_{diff}"] = out[f"point_{diff}"] = 0.0
            continue
        g_atom, g_point = _fit([n[sel], np3[sel]], ph["gather"][sel])
        (solve,) = _fit([N[sel]], ph["solve"][sel])
        (ghost,) = _fit([N[sel]], ph["ghost"][sel])
        out[f"mesh_{diff}"] = solve + ghost + zero + copy * T[diff]
        out[f"atom_{diff}"] = s_atom + g_atom
        out[f"point_{diff}"] = s_point + g_point
    return {k: out[k] for k in KEYS}


def modelled(cost, diff, order, mesh, n):
    from ._core import tuning

    return tuning.reciprocal_cost(tuple(mesh), order, diff, n, cost=cost)


def cpp_snippet(c):
    lines = ["CostModel default_cost_model() {", "  CostModel c;"]
    for k in KEYS:
        v = c[k]
        lines.append(f"  c.{k} = {int(v)};" if k.startswith("transforms") else f"  c.{k} = {v:.3g};")
    lines += ["  return c;", "}"]
    return "\n".join(lines)


def bench_cost(args) -> int:
    from . import _core, systems

    rng = np.random.default_rng(args.seed)
    L = args.box
    box = np.diag([L, L, L])
    n = args.atoms
    s = systems.random_charges(n, box, neutral=True, seed=args.seed)
    # in cell order (4 A cells, x slowest), as MD engines and the benchmark systems hand
    # atoms over: spreading and gathering then reuse the cache, which random order does not
    cell = np.floor(s.positions / 4.0).astype(np.int64)
    order_ = np.lexsort((cell[:, 2], cell[:, 1], cell[:, 0]))
    pos, q = np.ascontiguousarray(s.positions[order_]), np.ascontiguousarray(s.charges[order_])
    alpha = 3.2 / (0.45 * L)
    configs = [(d, p, m) for d in args.diffs for p in args.orders for m in args.meshes if m >= p]
    rng.shuffle(configs)  # spread slow drifts of the machine over all settings
    print(f"[bench cost] {n} random charges, box {L} A, {len(configs)} configurations x {args.repeats} "
          f"rounds (reciprocal part only, 1 rank)", flush=True)
    # Rounds over all configurations, each timed once per round; per phase the fastest
    # round counts. On a shared machine a busy stretch then spoils single rounds of many
    # configurations rather than all rounds of a few.
    per = {c: [] for c in configs}
    t0 = time.time()
    for rnd in range(args.repeats):
        for i, c in enumerate(configs):
            d, p, m = c
            per[c].append(_time_config(pos, q, box, d, p, (m, m, m), alpha))
            sys.stderr.write(f"\r  round {rnd + 1}/{args.repeats}, {i + 1}/{len(configs)} ({time.time() - t0:.0f} s)")
            sys.stderr.flush()
    sys.stderr.write("\n")
    rows = []
    for (d, p, m), ts in per.items():
        ph = {k: min(t[k] for t in ts) for k in PHASES}
        rows.append(dict(diff=d, order=p, mesh=[m, m, m], n=n, phases=ph, total=sum(ph.values())))
    fitted = calibrate(rows)
    builtin = _core.tuning.cost_model()
    rows.sort(key=lambda r: (r["diff"], r["order"], r["mesh"][0]))
    print("\n| diff | order | mesh | measured ms | fitted model ms | built-in model ms |")
    print("|---|---|---|---|---|---|")
    dev_fit, dev_old = [], []
    for r in rows:
        mf = modelled(fitted, r["diff"], r["order"], r["mesh"], n)
        mb = modelled(builtin, r["diff"], r["order"], r["mesh"], n)
        dev_fit.append(mf / r["total"])
        dev_old.append(mb / r["total"])
        print(f"| {r['diff']} | {r['order']} | {r['mesh'][0]}^3 | {r['total'] * 1e3:.2f} | {mf * 1e3:.2f} | "
              f"{mb * 1e3:.2f} |")
    print(f"\nmodel / measured: fitted {min(dev_fit):.2f} .. {max(dev_fit):.2f}; "
          f"built-in {min(dev_old):.2f} .. {max(dev_old):.2f}")
    print("\nfitted constants (seconds):", {k: (float(f"{v:.3g}") if isinstance(v, float) else v)
                                           for k, v in fitted.items()})
    print("built-in constants:        ", builtin)
    print("\nTo adopt the fit, replace default_cost_model() in cpp/tuning/cost_model.cpp with:\n")
    print(cpp_snippet(fitted))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(rows=rows, fitted=fitted, builtin=builtin, atoms=n, box=L), f, indent=1)
    return 0


def add_parser(sub):
    p = sub.add_parser("cost", help="calibrate the reciprocal cost model of the automatic parameter choice",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--atoms", type=int, default=20000,
                   help="random charges, handed over in cell order (the meshes then span about 10 to "
                        "200 points per atom, the range of the benchmark systems)")
    p.add_argument("--box", type=float, default=60.0, help="cubic box edge (Angstrom-like units)")
    p.add_argument("--diffs", nargs="+", default=["ad", "ik"], choices=["ad", "ik"])
    p.add_argument("--orders", type=int, nargs="+", default=[4, 5, 6, 7, 8])
    p.add_argument("--meshes", type=int, nargs="+", default=[64, 100, 128, 160],
                   help="cubic meshes (points per axis)")
    p.add_argument("--repeats", type=int, default=5,
                   help="rounds over all configurations (per phase the fastest round counts)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write every measurement and both constant sets to this file")
    return p


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="python -m pmewald.bench_cost")
    sp = ap.add_subparsers(dest="what", required=True)
    add_parser(sp)
    sys.exit(bench_cost(ap.parse_args(sys.argv[1:])))
