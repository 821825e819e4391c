"""Mesh cases, arrays and tilings shared by tests/fft/test_fft.py and test_real_fft.py."""

import numpy as np

MESHES = [(1, 1, 1), (2, 3, 5), (7, 11, 13), (16, 16, 16), (30, 27, 32)]


def global_array(mesh, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(mesh) + 1j * rng.standard_normal(mesh)


def part(g, box):
    (lo, hi) = box
    return np.ascontiguousarray(g[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]])


def slabs(mesh, axis, P, rank, skip=()):
    """Uneven slabs along `axis` over the ranks not in `skip` (which get empty boxes)."""
    owners = [r for r in range(P) if r not in skip] or list(range(P))
    if rank not in owners:
        return ((0, 0, 0), (0, 0, 0))
    k, n = owners.index(rank), len(owners)
    # uneven: part k gets weight k+1
    w = np.cumsum([0] + [j + 1 for j in range(n)])
    lo_a = int(mesh[axis] * w[k] // w[-1])
    hi_a = int(mesh[axis] * w[k + 1] // w[-1])
    lo, hi = [0, 0, 0], list(mesh)
    lo[axis], hi[axis] = lo_a, hi_a
    return (tuple(lo), tuple(hi))
