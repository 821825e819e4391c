"""The real-space test cases shared by tests/realspace/test_realspace.py and
tests/base/test_simd.py (which runs every SIMD version of the pair kernel on them): the
boxes, random systems with many atoms outside the cell, the cell heights.
"""

import numpy as np

L = 10.0
ORTHO = np.diag([L, 1.1 * L, 0.9 * L])
TRICLINIC = np.array([[L, 0, 0], [0.5 * L, 0.85 * L, 0], [0.3 * L, -0.25 * L, 0.8 * L]])


def heights(box):
    box = np.asarray(box, float)
    vol = abs(np.linalg.det(box))
    return np.array([vol / np.linalg.norm(np.cross(box[(d + 1) % 3], box[(d + 2) % 3])) for d in range(3)])


def random_system(box, n, seed, neutral=True, spread=1.5):
    rng = np.random.default_rng(seed)
    s = rng.uniform(-spread + 1, spread, size=(n, 3))  # many atoms outside the box
    pos = s @ box
    q = rng.uniform(-1, 1, size=n)
    if neutral:
        q -= q.mean()
    ids = rng.permutation(n).astype(np.int64) * 7 + 3  # arbitrary unique ids
    return pos, q, ids


CASES = {
    # name: (box, mesh, n, neutral)
    "ortho-neutral": (ORTHO, (12, 12, 12), 150, True),
    "ortho-charged": (ORTHO, (6, 6, 40), 150, False),  # thin bricks: ghosts go past neighbours
    "tric-neutral": (TRICLINIC, (10, 12, 9), 150, True),
    "tric-charged": (TRICLINIC, (5, 4, 36), 150, False),
}


def split(n, comm, how):
    """Indices this rank passes, for several ways of splitting n atoms."""
    rank, size = comm.Get_rank(), comm.Get_size()
    idx = np.arange(n)
    if how == "rank0":
        return idx if rank == 0 else idx[:0]
    if how == "last":
        return idx if rank == size - 1 else idx[:0]
    if how == "roundrobin":
        return idx[rank::size]
    if how == "reversed":
        return idx[::-1][rank::size]
    if how == "blocks":
        return np.array_split(idx, size)[rank]
    raise ValueError(how)
