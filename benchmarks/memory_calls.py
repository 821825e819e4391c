"""Memory over many calls: the resident set size of every rank over 10,000 calls.

Each call is one of (the schedule is fixed, the same on every rank):

- ``compute`` of a small water box (300 atoms, ids and exclusions, split over the ranks)
  with automatic parameters, most calls;
- every 100th call (offset 7): ``compute`` with bad input that must raise ``ValueError``
  on every rank, in turn: a NaN position, a self-exclusion and an exclusion naming an
  unknown id (both found in C++ on every rank), and charges of the wrong length;
- every 250th (offset 11): ``set_box`` to a box 0.5% larger or back, then ``compute``;
- every 50th (offset 23): a ``DistributedFFT`` forward and backward transform (24^3 mesh,
  the mode of the call's turn) and a ``DistributedRealFFT`` pair;
- every 1000th (offset 500): a fresh ``PME`` object (tuned again) replaces the old one and
  fresh FFT objects replace theirs, so plans and solvers are built and destroyed too.

After every call each rank reads its resident set size (RSS) from ``/proc/self/statm``
and the bytes malloc has handed out (glibc's ``mallinfo2``). The run passes (exit code 0)
when, on every rank, RSS stays within 1 MiB of its value at the end of the warm-up (the
first 1,000 calls) for all later calls, and the malloc'd bytes within 256 KiB; it also
prints the slope of a straight-line fit of both, so that a slow growth shows even inside
the limits. The old objects are dropped before the fresh ones are built: building them
while the old ones are still alive fragments glibc's heap, which adds about 1.5 MiB of
RSS over the first few replacements (with the malloc'd bytes flat; docs/testing.md). ::

    .venv/bin/python benchmarks/memory_calls.py --json out/mem1.json
    mpirun -n 2 .venv/bin/python benchmarks/memory_calls.py --json out/mem2.json
    .venv/bin/python benchmarks/memory_calls.py --plot out/mem1.json out/mem2.json \
        --png docs/benchmarks/memory_calls.png

Results: docs/testing.md, "Memory over many calls".
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import sys
import time

import numpy as np

LIMIT = 1 << 20  # bytes: RSS must stay within 1 MiB of its value after the warm-up
HEAP_LIMIT = 256 << 10  # bytes: and malloc's bytes in use within 256 KiB
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    """Resident set size of this process (second field of /proc/self/statm, in pages)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]


def heap_reader():
    """A function giving the bytes malloc has handed out and not had back (glibc's
    mallinfo2: arena chunks in use plus mmapped chunks), or None without mallinfo2.
    RSS also counts freed memory that malloc keeps, so the two together tell a leak
    (both grow) from a heap that settles (RSS steps once, this stays flat)."""
    try:
        f = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return None
    f.restype = _Mallinfo2

    def in_use():
        m = f()
        return m.uordblks + m.hblkhd

    return in_use


def run(calls: int, warmup: int, json_path: str | None) -> int:
    from mpi4py import MPI

    import pmewald
    from pmewald import systems, units

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    water = systems.water_box(target_atoms=300, seed=3)
    mine = np.arange(rank, water.n_atoms, size)
    pos, q, ids = water.positions[mine], water.charges[mine], water.ids[mine]
    excl = water.exclusions[rank::size]
    box0, box1 = water.box, water.box * 1.005
    cutoff = 0.45 * float(np.diag(water.box).min())
    modes = ("pt2pt", "nonblocking", "collective")
    mesh = (24, 24, 24)

    def new_pme():
        return pmewald.PME(box0, cutoff, tolerance=1e-4, coulomb_constant=units.KCAL_MOL_ANGSTROM)

    def new_ffts():
        return ([pmewald.DistributedFFT(mesh, comm_mode=m) for m in modes],
                [pmewald.DistributedRealFFT(mesh, comm_mode=m) for m in modes])

    rng = np.random.default_rng(rank)

    def fft_pair(ffts, rffts, turn):
        c, r = ffts[turn % 3], rffts[turn % 3]
        a = rng.standard_normal(c.inshape) + 1j * rng.standard_normal(c.inshape)
        back = c.backward(c.forward(a))
        x = rng.standard_normal(r.inshape)
        xr = r.backward(r.forward(x))
        assert np.allclose(back, a) and np.allclose(xr, x)

    bad_pos = pos.copy()
    if len(bad_pos):
        bad_pos[0, 0] = np.nan
    self_excl = np.array([[water.ids[0], water.ids[0]]], dtype=np.int64)
    unknown_excl = np.array([[water.ids[0], 10 * water.n_atoms]], dtype=np.int64)
    bad_inputs = [
        lambda p: p.compute(bad_pos, q, ids=ids, exclusions=excl),
        lambda p: p.compute(pos, q, ids=ids, exclusions=self_excl if rank == 0 else excl),
        lambda p: p.compute(pos, q, ids=ids, exclusions=unknown_excl if rank == 0 else excl),
        lambda p: p.compute(pos, np.append(q, 0.0), ids=ids, exclusions=excl),
    ]

    pme = new_pme()
    ffts, rffts = new_ffts()
    e_ref = pme.compute(pos, q, ids=ids, exclusions=excl).energy
    rss = np.empty(calls, dtype=np.int64)
    heap = np.zeros(calls, dtype=np.int64)
    in_use = heap_reader() or (lambda: 0)
    counts = {"compute": 0, "bad input": 0, "set_box": 0, "fft pairs": 0, "new objects": 0}
    big = False
    t0 = time.perf_counter()
    for i in range(calls):
        if i % 100 == 7:
            try:
                bad_inputs[(i // 100) % len(bad_inputs)](pme)
            except ValueError:
                counts["bad input"] += 1
            else:
                raise AssertionError(f"call {i}: bad input did not raise ValueError")
        elif i % 250 == 11:
            big = not big
            pme.set_box(box1 if big else box0)
            pme.compute(pos, q, ids=ids, exclusions=excl)
            counts["set_box"] += 1
        elif i % 50 == 23:
            fft_pair(ffts, rffts, i // 50)
            counts["fft pairs"] += 1
        elif i % 1000 == 500:
            del pme, ffts, rffts
            pme = new_pme()
            if big:
                pme.set_box(box1)
            ffts, rffts = new_ffts()
            pme.compute(pos, q, ids=ids, exclusions=excl)
            counts["new objects"] += 1
        else:
            res = pme.compute(pos, q, ids=ids, exclusions=excl)
            if not big and abs(res.energy - e_ref) > 1e-4 * abs(e_ref):
                raise AssertionError(f"call {i}: energy {res.energy} differs from the first call's {e_ref}")
            counts["compute"] += 1
        rss[i] = rss_bytes()
        heap[i] = in_use()
    seconds = time.perf_counter() - t0

    x = np.arange(warmup, calls)
    after, heap_after = rss[warmup:], heap[warmup:]
    drift = int(np.abs(after - rss[warmup]).max())
    heap_drift = int(np.abs(heap_after - heap[warmup]).max())
    mine_stats = {"rank": rank, "rss_start": int(rss[0]), "rss_warm": int(rss[warmup]), "rss_end": int(rss[-1]),
                  "rss_min_after_warmup": int(after.min()), "rss_max_after_warmup": int(after.max()),
                  "rss_drift": drift, "rss_slope_bytes_per_call": float(np.polyfit(x, after, 1)[0]),
                  "heap_warm": int(heap[warmup]), "heap_end": int(heap[-1]), "heap_drift": heap_drift,
                  "heap_slope_bytes_per_call": float(np.polyfit(x, heap_after, 1)[0])}
    every = comm.gather(mine_stats, root=0)
    samples = comm.gather(rss.tolist(), root=0)
    heap_samples = comm.gather(heap.tolist(), root=0)
    worst = comm.allreduce(drift, op=MPI.MAX)
    worst_heap = comm.allreduce(heap_drift, op=MPI.MAX)
    ok = worst <= LIMIT and worst_heap <= HEAP_LIMIT
    if rank == 0:
        print(f"pmewald {pmewald.__version__}, {size} rank(s), {calls} calls ({counts}), {seconds:.1f} s; "
              f"warm-up {warmup} calls")
        print(f"{'':4} {'RSS (MiB)':^42} | {'malloc in use (MiB)':^33}")
        print(f"{'rank':>4} {'start':>7} {'warm-up':>8} {'min':>7} {'max':>7} {'end':>7} {'slope':>7} | "
              f"{'warm-up':>8} {'end':>8} {'drift':>7} {'slope':>7}")
        for s in every:
            print(f"{s['rank']:>4} {s['rss_start'] / 2**20:>7.2f} {s['rss_warm'] / 2**20:>8.2f} "
                  f"{s['rss_min_after_warmup'] / 2**20:>7.2f} {s['rss_max_after_warmup'] / 2**20:>7.2f} "
                  f"{s['rss_end'] / 2**20:>7.2f} {s['rss_slope_bytes_per_call']:>5.1f} B | "
                  f"{s['heap_warm'] / 2**20:>8.3f} {s['heap_end'] / 2**20:>8.3f} {s['heap_drift'] / 1024:>5.1f} K "
                  f"{s['heap_slope_bytes_per_call']:>5.2f} B")
        print("(min, max, drift and slope over the calls after the warm-up; slopes per call)")
        print(("PASS" if ok else "FAIL") + f": RSS within {worst / 1024:.0f} KiB of its value after the warm-up "
              f"(limit {LIMIT >> 10} KiB), malloc'd bytes within {worst_heap / 1024:.1f} KiB "
              f"(limit {HEAP_LIMIT >> 10} KiB)")
        if json_path:
            os.makedirs(os.path.dirname(os.path.abspath(json_path)), exist_ok=True)
            with open(json_path, "w") as f:
                json.dump({"ranks": size, "calls": calls, "warmup": warmup, "limit": LIMIT, "heap_limit": HEAP_LIMIT,
                           "counts": counts,
                           "seconds": seconds, "machine": platform.node(), "stats": every, "rss": samples, "heap": heap_samples}, f)
    return 0 if ok else 1


def plot(paths: list[str], png: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    warm = None
    for path in paths:
        with open(path) as f:
            d = json.load(f)
        warm = d["warmup"]
        for r, (series, heap) in enumerate(zip(d["rss"], d["heap"])):
            y, h = np.asarray(series) / 2**20, np.asarray(heap) / 2**10
            calls = np.arange(1, len(y) + 1)
            label = f"{d['ranks']} rank(s), rank {r}"
            ax.plot(calls, y - y[warm], lw=0.8, label=f"{label} ({y[warm]:.1f} MiB at call {warm})")
            bx.plot(calls, h - h[warm], lw=0.8, label=f"{label} ({h[warm] / 1024:.1f} MiB at call {warm})")
    for a in (ax, bx):
        a.axvline(warm, color="grey", ls=":", lw=0.8)
        a.legend(fontsize=7, loc="lower right")
    ax.axhspan(-1, 1, color="green", alpha=0.08)
    ax.set_ylim(-2.5, 1.5)
    ax.set_ylabel("RSS - RSS at warm-up (MiB)")
    ax.set_title("pmewald: memory over 10,000 calls (benchmarks/memory_calls.py); band: limit")
    bx.axhspan(-256, 256, color="green", alpha=0.08)
    bx.set_ylim(-400, 300)
    bx.set_ylabel("malloc'd bytes - at warm-up (KiB)")
    bx.set_xlabel("call")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"wrote {png}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--warmup", type=int, default=1_000)
    ap.add_argument("--json", help="write the samples and statistics here (rank 0)")
    ap.add_argument("--plot", nargs="+", metavar="JSON", help="plot these results instead of running")
    ap.add_argument("--png", default="memory_calls.png", help="figure file for --plot")
    a = ap.parse_args(argv)
    if a.plot:
        plot(a.plot, a.png)
        return 0
    if not 0 < a.warmup < a.calls:
        ap.error("--warmup must be between 0 and --calls")
    return run(a.calls, a.warmup, a.json)


if __name__ == "__main__":
    sys.exit(main())
