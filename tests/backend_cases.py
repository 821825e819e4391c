"""Results that must not depend on the Kokkos build (Serial or OpenMP) or on ranks x threads.

``cases(comm)`` computes a fixed set of results over ``comm``, collected in
global order on every rank: PME energies, forces and virials (water with
exclusions, ik and ad; a triclinic random system; rock salt) in each comm
mode, and the distributed complex and real FFTs of random meshes. Both builds
run the same code on the same inputs, so they may differ only by the order
of floating-point sums (threads, FFTW plans, rank splits).

``python tests/backend_cases.py OUT.npz`` writes them (rank 0) for
``tests/base/test_backends.py``: ``scripts/dev.sh test-openmp`` runs it with the
Serial build on one rank and compares the OpenMP build with it.
"""

from __future__ import annotations

import sys

import numpy as np


def _split(n, comm):
    """An uneven split of 0..n-1 over the ranks (rank r gets a share proportional to r + 1)."""
    size, rank = comm.Get_size(), comm.Get_rank()
    w = np.arange(1, size + 1, dtype=float)
    edges = np.rint(np.concatenate([[0], np.cumsum(w)]) / w.sum() * n).astype(int)
    return np.arange(edges[rank], edges[rank + 1])


def _gathered(comm, idx, rows, n):
    out = np.zeros((n,) + rows.shape[1:], dtype=rows.dtype)
    for i, r in comm.allgather((idx, rows)):
        out[i] = r
    return out


def _pme_cases(comm, out):
    import pmewald
    from pmewald import systems

    water = systems.water_box(target_atoms=1500, seed=3)
    rng = np.random.default_rng(7)
    tri_box = systems.triclinic_box(22.0)
    tri_pos = rng.random((700, 3)) @ tri_box
    tri_q = rng.standard_normal(700)
    tri_q -= tri_q.mean()
    salt = systems.displace(systems.rock_salt((4, 4, 4)), 0.1, seed=2)  # displaced: forces not ~0
    runs = [
        ("water_ik", water.box, water.positions, water.charges, water.exclusions,
         dict(cutoff=9.0, alpha=0.33, mesh=(24, 24, 24), order=5, differentiation="ik")),
        ("water_ad", water.box, water.positions, water.charges, water.exclusions,
         dict(cutoff=9.0, alpha=0.33, mesh=(25, 24, 27), order=6, differentiation="ad")),
        ("triclinic_ad", tri_box, tri_pos, tri_q, None,
         dict(cutoff=7.0, alpha=0.45, mesh=(20, 24, 18), order=4, differentiation="ad")),
        ("salt_ik", salt.box, salt.positions, salt.charges, None,
         dict(cutoff=10.0, alpha=0.3, mesh=(32, 32, 32), order=7, differentiation="ik")),
    ]
    for name, box, pos, q, excl, params in runs:
        n = len(q)
        mine = _split(n, comm)
        for mode in ("pt2pt", "nonblocking", "collective"):
            pme = pmewald.PME(box, comm=comm, comm_mode=mode, **params)
            r = pme.compute(pos[mine], q[mine], ids=mine.astype(np.int64), exclusions=excl)
            key = f"{name}_{mode}"
            out[key + "_energy"] = np.array([r.energy])
            out[key + "_terms"] = np.array([r.terms[k] for k in ("real", "reciprocal", "exclusion")])
            out[key + "_forces"] = _gathered(comm, mine, r.forces, n)
            out[key + "_virial"] = r.virial


def _fft_cases(comm, out):
    from pmewald.fft import DistributedFFT, DistributedRealFFT

    rng = np.random.default_rng(11)
    shape = (18, 20, 15)
    a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    x = rng.standard_normal(shape)
    for mode in ("pt2pt", "collective"):
        fft = DistributedFFT(shape, comm=comm, comm_mode=mode)
        (lo, hi) = fft.inbox
        b = fft.forward(np.ascontiguousarray(a[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]]))
        out[f"fft_{mode}"] = _gathered_box(comm, fft.outbox, b, shape)
        rfft = DistributedRealFFT(shape, comm=comm, comm_mode=mode)
        (lo, hi) = rfft.inbox
        c = rfft.forward(np.ascontiguousarray(x[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]]))
        half = (shape[0] // 2 + 1, shape[1], shape[2])
        out[f"rfft_{mode}"] = _gathered_box(comm, rfft.outbox, c, half)


def _gathered_box(comm, box, part, shape):
    full = np.zeros(shape, dtype=part.dtype)
    for (lo, hi), p in comm.allgather((box, part)):
        full[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]] = p
    return full


def cases(comm):
    """Every case's arrays, by name (the same on every rank)."""
    out = {}
    _pme_cases(comm, out)
    _fft_cases(comm, out)
    return out


def compare(got, ref, tol=1e-12):
    """Names whose arrays differ by more than ``tol`` x the largest reference magnitude, with the ratio."""
    bad = {}
    assert set(got) == set(ref), (sorted(set(got) ^ set(ref)))
    for k in ref:
        scale = max(float(np.max(np.abs(ref[k]))), 1e-300)
        dev = float(np.max(np.abs(np.asarray(got[k]) - ref[k]))) / scale
        if not dev <= tol:
            bad[k] = dev
    return bad


if __name__ == "__main__":
    from mpi4py import MPI

    res = cases(MPI.COMM_WORLD)
    if MPI.COMM_WORLD.Get_rank() == 0:
        np.savez(sys.argv[1], **res)
