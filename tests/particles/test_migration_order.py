"""The order of the migration's lists (cpp/particles/migration.cpp), which the threaded build
must keep: its wrap / owner pass, the owned rows, the ghost images and their rows are
Kokkos loops (count, prefix sum, write at each atom's offset), and the forces' sums follow
these orders. On one rank the order is fully defined and computed here independently:
owned atoms by id, each with its excluded partners; then every owned atom's periodic
images within the margin, image shifts z, y, x ascending, the identity left out.
``scripts/dev.sh test-openmp`` runs this file on 1 rank x 2 threads as well."""

import numpy as np
import pytest

from pmewald import _core
from realspace_cases import TRICLINIC, heights, random_system

rs = _core._testing.realspace


def _expected_images(s, margin):
    """(owned index, shift) of every image on one rank, in the migration's order."""
    out = []
    for i, si in enumerate(s):
        axes = [[n for n in range(-1, 3) if si[d] + n + margin[d] >= 0 and si[d] + n - margin[d] < 1]
                for d in range(3)]
        for nz in axes[2]:
            for ny in axes[1]:
                for nx in axes[0]:
                    if (nx, ny, nz) != (0, 0, 0):
                        out.append((i, (nx, ny, nz)))
    return out


@pytest.mark.mpi(ranks=[1])
@pytest.mark.parametrize("mesh", [(10, 12, 9), (5, 4, 36)])
def test_mpi_owned_and_ghost_order_on_one_rank(comm, mesh):
    # 1501 atoms (an odd count: the threads' shares differ), most outside the box
    # (wrapped across the periodic boundaries), ids shuffled (the sort runs), and
    # exclusions, so every atom carries a payload of partner ids.
    box = TRICLINIC
    n = 1501
    pos, q, ids = random_system(box, n, seed=5, spread=2.5)
    rng = np.random.default_rng(9)
    pairs = np.unique(np.sort(rng.choice(ids, size=(600, 2)), axis=1), axis=0)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    cutoff = 0.45 * heights(box).min()
    d = rs.migrate(comm, box, mesh, pos, q, ids, cutoff, pairs)
    assert d["forward_path"] == "none"
    order = np.argsort(ids, kind="stable")
    assert np.array_equal(d["owned_ids"], ids[order])
    assert np.array_equal(d["origin_index"], order) and np.all(d["origin_rank"] == 0)
    assert np.array_equal(d["owned_charges"], q[order])
    s = pos[order] @ np.linalg.inv(box)
    s -= np.floor(s)
    assert np.allclose(d["owned_fractional"], s, rtol=0, atol=1e-13)
    partners = {int(i): [] for i in ids}
    for a, b in pairs:
        partners[int(a)].append(int(b))
        partners[int(b)].append(int(a))
    assert [sorted(p) for p in d["owned_payload"]] == [sorted(partners[int(i)]) for i in ids[order]]
    # the owners' rows come back in the caller's order
    assert np.array_equal(d["returned"][:, 0].astype(np.int64), ids)
    # ghosts: the exact sequence
    want = _expected_images(d["owned_fractional"], np.array(d["margin"]))
    assert len(want) > n  # most atoms have images: the image loop is not a corner case here
    assert len(d["ghost_ids"]) == len(want)
    idx = np.array([i for i, _ in want])
    shift = np.array([sh for _, sh in want], dtype=float)
    assert np.array_equal(d["ghost_ids"], d["owned_ids"][idx])
    assert np.array_equal(d["ghost_charges"], d["owned_charges"][idx])
    assert np.array_equal(d["ghost_fractional"], d["owned_fractional"][idx] + shift)
    assert np.allclose(d["ghost_positions"], d["owned_positions"][idx] + shift @ box, rtol=0, atol=1e-11)
