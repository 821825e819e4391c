"""The real group of a distributed r2c on two ranks: paired z lines against FFTW's r2c (docs/fft.md).

In the PME layout (each rank's brick inside a ghosted storage box, bricks to z-pencils of
the half spectrum, x halved), one run times, interleaved, forward + unnormalised backward
pairs of: the paired transform (the default), FFTW's r2c reading the storage in place
(``pair_real_lines=False``), FFTW's r2c after an x-fastest copy (``contiguous_real_x``), and
on rank 0 alone the one-rank transform (z halved, one 3-D plan) while the other ranks wait.
Medians of ``--rounds`` rounds of 10 pairs, ms per pair (the slowest rank's)::

    mpirun -n 2 .venv/bin/python benchmarks/fft_real_group.py --meshes 64 80 96 100 128
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

import pmewald
from pmewald import _core, geometry


def pairs(comm, mesh, halved, ghost, **options):
    """A callable running 10 forward + backward pairs of one configuration."""
    P, r = comm.Get_size(), comm.Get_rank()
    spec = pmewald.DistributedRealFFT.spectrum_shape_of(mesh, halved)
    brick = geometry.brick_box(P, mesh, r)
    lo, hi = brick
    storage = (tuple(v - ghost for v in lo), tuple(v + 1 for v in hi))
    out_box = geometry.pencil_box(2, P, spec, r)
    f = _core.RealFFT3d(comm, mesh, brick, out_box, "nonblocking", "measure", in_storage=storage,
                        halved_axis=halved, **options)
    a = np.random.default_rng(r).standard_normal(tuple(h - l for l, h in zip(*storage)))
    b = np.empty(tuple(h - l for l, h in zip(*out_box)), complex)
    a2 = np.empty_like(a)

    def run():
        for _ in range(10):
            f.forward(a, b)
            f.backward(b, a2, normalise=False)
    return run, f


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--meshes", type=int, nargs="+", default=[64, 80, 96])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--ghost", type=int, default=4, help="ghost layers below the brick (one above)")
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    for m in a.meshes:
        mesh = (m, m, m)
        runs = {}
        runs["paired"], paired = pairs(comm, mesh, 0, a.ghost)
        runs["fftw r2c in place"], _ = pairs(comm, mesh, 0, a.ghost, pair_real_lines=False)
        runs["x-fastest copy"], _ = pairs(comm, mesh, 0, a.ghost, contiguous_real_x=True)
        one = pairs(MPI.COMM_SELF, mesh, 2, a.ghost)[0] if rank == 0 else None
        times = {k: [] for k in list(runs) + ["one rank"]}
        for _ in range(a.rounds):
            for k, run in runs.items():
                comm.Barrier()
                t0 = time.perf_counter()
                run()
                times[k].append(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX) / 10)
            comm.Barrier()
            if rank == 0:
                t0 = time.perf_counter()
                one()
                times["one rank"].append((time.perf_counter() - t0) / 10)
            comm.Barrier()
        used = comm.allreduce(int(paired.paired_real_lines))
        if rank == 0:
            med = {k: 1e3 * statistics.median(v) for k, v in times.items()}
            print(f"{m}^3, {comm.Get_size()} ranks ({used} pairing), ms per pair: "
                  + ", ".join(f"{k} {v:.2f}" for k, v in med.items())
                  + f"; one rank / paired {med['one rank'] / med['paired']:.2f}", flush=True)


if __name__ == "__main__":
    main()
