"""The distributed FFT benchmark: ``python -m pmewald.bench fft [options]`` (run it under mpirun).

For each mesh it measures, in one run so the ratios share the machine's state:

* ``fftw``: FFTW's own serial 3-D transform of the whole mesh on rank 0, out of
  place, same planner flags: the reference limit. With ``--transform real`` (the
  default; what the PME solver runs) pmewald's :class:`~pmewald.fft.DistributedRealFFT`
  against FFTW's r2c + c2r pair (``fftw_plan_dft_r2c_3d`` / ``c2r_3d``), halving
  z on one rank and x across ranks as the solver does; with
  ``--transform complex`` :class:`~pmewald.fft.DistributedFFT` against
  ``fftw_plan_dft_3d``;
* ``1 rank``: pmewald's forward+backward pair on rank 0 alone (``COMM_SELF``);
* each communication mode on all ranks of ``COMM_WORLD``,

all interleaved round-robin in one loop. Times are medians over ``--repeats``
pairs (after warm-up); a distributed pair's time is the slowest rank's. The
ratios (``/FFTW``, ``speedup`` over pmewald on one rank) are medians of the
round-by-round ratios, which a shared, noisy machine disturbs least. Message counts and bytes per remap are summed over
ranks for one forward transform. ``--json PATH`` also writes every number.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from .._mpi import COMM_MODES
from .mpi_timing import slowest, total

DEFAULT_MESHES = ["32x32x32", "64x64x64", "96x96x96", "128x128x128", "60x54x45"]
REMAPS_FWD = ["in->x", "x->y", "y->z", "z->out"]


def _mesh(text):
    parts = [int(v) for v in text.lower().split("x")]
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"mesh must look like 64x64x64, not {text!r}")
    return tuple(parts)


class _Pair:
    """One forward+backward pair of a DistributedFFT (or DistributedRealFFT) on preallocated arrays."""

    def __init__(self, fft, comm, real=False):
        self.fft, self.comm = fft, comm
        rng = np.random.default_rng(comm.Get_rank())
        if real:
            self.a = rng.standard_normal(fft.inshape)
        else:
            self.a = rng.standard_normal(fft.inshape) + 1j * rng.standard_normal(fft.inshape)
        self.b = np.empty(fft.outshape, complex)
        self.a2 = np.empty(fft.inshape, self.a.dtype)

    def __call__(self):
        from mpi4py import MPI

        self.comm.Barrier()
        t0 = time.perf_counter()
        self.fft.forward(self.a, out=self.b)
        self.fft.backward(self.b, out=self.a2)
        t = time.perf_counter() - t0
        return slowest(self.comm, t)


def _interleaved(timers, repeats, warmup=2):
    """Round-robin over `timers` (name -> callable returning seconds): medians are
    then taken over the same stretch of machine time for every entry."""
    for _ in range(warmup):
        for f in timers.values():
            f()
    times = {k: [] for k in timers}
    for _ in range(repeats):
        for k, f in timers.items():
            times[k].append(f())
    return times


def _remap_summary(fft, comm, repeats):
    s = fft.stats()
    out = {}
    for name in REMAPS_FWD:
        r = s[name]
        execs = max(r["executions"], 1)
        out[name] = {
            "messages": total(comm, r["messages_sent"]) // execs if r["executions"] else 0,
            "bytes": total(comm, r["bytes_sent"]) // execs if r["executions"] else 0,
            "active_ranks": total(comm, int(r["active"])),
            "pack_s": total(comm, r["pack_seconds"]) / repeats,
            "wait_s": total(comm, r["wait_seconds"]) / repeats,
            "unpack_s": total(comm, r["unpack_seconds"]) / repeats,
            "self_s": total(comm, r["self_seconds"]) / repeats,
        }
    out["fft_s"] = total(comm, s["fft"]["forward_seconds"] + s["fft"]["backward_seconds"]) / repeats
    return out


def bench_fft(args) -> int:
    from mpi4py import MPI

    from .. import _core, geometry
    from ..fft import DistributedFFT, DistributedRealFFT

    comm = MPI.COMM_WORLD
    rank, P = comm.Get_rank(), comm.Get_size()
    modes = list(args.modes)
    real = args.transform == "real"

    def Transform(mesh, comm, **kw):
        if not real:
            return DistributedFFT(mesh, comm=comm, **kw)
        # as the PME solver: z halved on one rank (one 3-D plan), x across ranks
        return DistributedRealFFT(mesh, comm=comm, halved_axis=2 if comm.Get_size() == 1 else 0, **kw)

    Serial = _core.FFTWSerialReal3d if real else _core.FFTWSerial3d
    results = []
    if rank == 0:
        name = "DistributedRealFFT" if real else "DistributedFFT"
        print(f"pmewald FFT benchmark ({args.transform}: {name} vs FFTW's serial "
              f"{'r2c+c2r' if real else 'complex'} pair): {P} rank(s), planner={args.planner}, "
              f"outbox={args.outbox}, {args.repeats} interleaved repeats, median [min] per forward+backward pair",
              flush=True)
    for mesh in args.meshes:
        row = {"mesh": list(mesh), "ranks": P, "label": args.label, "planner": args.planner,
               "outbox": args.outbox, "transform": args.transform}
        # Everything interleaved round-robin in one loop, so every ratio compares
        # pairs timed in the same stretch of machine time: FFTW's serial 3-D pair
        # and pmewald alone (COMM_SELF) on rank 0 while the others wait, then each
        # mode on all ranks.
        if rank == 0:
            ref = Serial(mesh, args.planner)
            one = _Pair(Transform(mesh, comm=MPI.COMM_SELF, comm_mode="nonblocking", planner=args.planner),
                        MPI.COMM_SELF, real)
        else:
            ref = one = None

        def on_root(f):
            def timed():
                t = f() if rank == 0 else None
                return comm.bcast(t, root=0)
            return timed

        if real:
            # the output lives on the half spectrum: its z-pencils, or its bricks
            half = 2 if P == 1 else 0
            spec = DistributedRealFFT.spectrum_shape_of(mesh, half)
            outbox = (DistributedRealFFT.z_pencil_box(mesh, comm, half) if args.outbox == "zpencil"
                      else geometry.brick_box(P, spec, rank))
        else:
            outbox = DistributedFFT.z_pencil_box(mesh, comm) if args.outbox == "zpencil" else None
        ffts = {}
        for mode in modes:
            name, kw = mode, {}
            if mode == "collective+self":
                name, kw = "collective", {"_collective_self_via_mpi": True}
            ffts[mode] = Transform(mesh, comm=comm, comm_mode=name, outbox=outbox, planner=args.planner, **kw)
        timers = {"fftw": on_root(lambda: ref.pair_seconds()), "one": on_root(lambda: one())}
        timers.update({m: _Pair(f, comm, real) for m, f in ffts.items()})
        for f in ffts.values():
            f.reset_stats()
        t = _interleaved(timers, args.repeats)
        row["fftw_serial"] = statistics.median(t["fftw"])
        row["fftw_serial_min"] = min(t["fftw"])
        row["pmewald_1rank"] = statistics.median(t["one"])
        row["pmewald_1rank_min"] = min(t["one"])
        row["ratio_1rank_vs_fftw"] = statistics.median(a / b for a, b in zip(t["one"], t["fftw"]))
        row["modes"] = {}
        for mode in modes:
            ts = t[mode]
            row["modes"][mode] = {
                "median": statistics.median(ts), "min": min(ts),
                "vs_fftw": statistics.median(a / b for a, b in zip(ts, t["fftw"])),
                "speedup": statistics.median(b / a for a, b in zip(ts, t["one"])),
                "remaps": _remap_summary(ffts[mode], comm, args.repeats + 2)}
        del ref, one, timers
        del ffts
        results.append(row)
        if rank == 0:
            _print_row(row, modes, P)
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


def _print_row(row, modes, P):
    mesh = "x".join(str(n) for n in row["mesh"])
    fftw, one = row["fftw_serial"], row["pmewald_1rank"]
    best = min(modes, key=lambda m: row["modes"][m]["median"])
    kind = "r2c+c2r pair" if row.get("transform") == "real" else "pair"
    print(f"\nmesh {mesh}: FFTW serial {kind} {fftw * 1e3:.2f} [{row['fftw_serial_min'] * 1e3:.2f}] ms; "
          f"pmewald 1 rank {one * 1e3:.2f} [{row['pmewald_1rank_min'] * 1e3:.2f}] ms; "
          f"1 rank / FFTW = {row['ratio_1rank_vs_fftw']:.2f} (median of paired ratios)", flush=True)
    print(f"  {'mode':<16}{'ranks':>6}{'pair ms':>10}{'[min]':>9}{'/FFTW':>7}{'speedup':>9}   "
          f"remaps (fwd, all ranks: msgs/bytes)")
    for m in modes:
        r = row["modes"][m]
        t = r["median"]
        rem = "  ".join(f"{k}:{v['messages']}/{v['bytes'] / 1e6:.2f}MB" for k, v in r["remaps"].items()
                        if k != "fft_s" and v["active_ranks"])
        mark = " *" if m == best else ""
        print(f"  {m:<16}{P:>6}{t * 1e3:>10.2f}{r['min'] * 1e3:>9.2f}{r['vs_fftw']:>7.2f}{r['speedup']:>9.2f}   "
              f"{rem or '(none)'}{mark}",
              flush=True)


def add_parser(sub):
    f = sub.add_parser("fft", help="distributed FFT vs FFTW's serial 3-D transform")
    f.add_argument("--meshes", type=_mesh, nargs="+", default=[_mesh(m) for m in DEFAULT_MESHES])
    f.add_argument("--modes", nargs="+", default=list(COMM_MODES),
                   choices=[*COMM_MODES, "collective+self"])
    f.add_argument("--repeats", type=int, default=15)
    f.add_argument("--planner", default="measure", choices=["estimate", "measure", "patient"])
    f.add_argument("--transform", default="real", choices=["real", "complex"],
                   help="real: DistributedRealFFT (r2c, what the PME solver runs) vs FFTW's serial r2c+c2r "
                        "pair (default); complex: DistributedFFT vs FFTW's serial complex pair")
    f.add_argument("--outbox", default="inbox", choices=["inbox", "zpencil"],
                   help="outbox of the distributed runs: the inbox (real: the brick of the half spectrum; "
                        "default) or z-pencils")
    f.add_argument("--label", default="", help="free text stored with the results (e.g. the machine)")
    f.add_argument("--json", help="write all results to this file (rank 0)")
    return f
