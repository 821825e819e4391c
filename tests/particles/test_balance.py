"""Real-space load balancing (cpp/particles/balance, pmewald.PME's balance): balanced
domains give the results of the bricks to 1e-12 relative (once, dynamic; direct and staged
ghosts; with and without the pair list; calls with potentials between) on 1-4 ranks, and on
a water slab with 40% vacuum the pair work's slowest / mean falls from 1.6-1.9 to at most
1.05; a balanced system (below the threshold) stays on the bricks, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

import pmewald
from pmewald import systems


def _slab(target_atoms=1200, vacuum=0.4, seed=3):
    """A water box whose cell is stretched along z so that `vacuum` of it is empty."""
    w = systems.water_box(target_atoms=target_atoms, seed=seed)
    box = np.array(w.box, dtype=float)
    box[2, 2] /= 1.0 - vacuum
    return w, box


def _gathered(comm, idx, values, n):
    out = np.zeros((n,) + np.shape(values)[1:])
    out[idx] = values
    return comm.allreduce(out)


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(120)
def test_balanced_domains_give_the_bricks_results(comm):
    rank, size = comm.Get_rank(), comm.Get_size()
    w, box = _slab()
    idx = np.arange(rank, w.n_atoms, size)
    ex = w.exclusions[rank::size]
    kw = dict(cutoff=5.5, alpha=0.5, mesh=(16, 16, 28), order=5, comm=comm)

    def run(**opts):
        pme = pmewald.PME(box, **kw, **opts)
        out = []
        for k in range(3):
            pos = w.positions + 0.02 * k  # moving atoms: the list refreshes, the cuts move
            out.append(pme.compute(pos[idx], w.charges[idx], ids=w.ids[idx], exclusions=ex))
        out.append(pme.compute(w.positions[idx], w.charges[idx], ids=w.ids[idx], exclusions=ex, potentials=True))
        return pme, out

    for skin in (0.0, 0.6):
        _, ref = run(skin=skin)
        for balance, ge in (("once", "direct"), ("dynamic", "staged")):
            pme, got = run(skin=skin, balance=balance, ghost_exchange=ge, balance_threshold=1.0)
            if size > 1:
                assert pme.timings()["balance_rebalances"] >= 1
            for a, b in zip(got, ref):
                what = (skin, balance, ge)
                assert abs(a.energy - b.energy) <= 1e-12 * abs(b.energy), what
                assert np.allclose(a.virial, b.virial, rtol=0, atol=1e-12 * np.abs(b.virial).max()), what
                fa, fb = (_gathered(comm, idx, r.forces, w.n_atoms) for r in (a, b))
                assert np.abs(fa - fb).max() <= 1e-12 * np.abs(fb).max(), what
            pa, pb = (_gathered(comm, idx, r.potentials, w.n_atoms) for r in (got[-1], ref[-1]))
            assert np.abs(pa - pb).max() <= 1e-12 * np.abs(pb).max()


@pytest.mark.mpi(ranks=[2, 4])
@pytest.mark.timeout(120)
def test_a_slab_with_vacuum_is_balanced(comm):
    """The bricks split the cell along z, so the ranks over the vacuum have little pair work
    (slowest / mean candidate pairs 1.6-1.9). The first call measures that on the bricks;
    balancing by the pairs then brings it to at most 1.05 (once: in two moves; dynamic: all
    the way, then half way each call, by the fourth; on 4 ranks every domain is thinner than
    the cutoff, so most of the work is the ghosts' and moves with the cuts) and keeps it."""
    rank, size = comm.Get_rank(), comm.Get_size()
    w, box = _slab(target_atoms=1800)
    idx = np.arange(rank, w.n_atoms, size)
    kw = dict(cutoff=6.0, alpha=0.45, mesh=(16, 16, 32), order=5, skin=0.0, comm=comm)
    imb = {}
    for balance in ("off", "once", "dynamic"):
        pme = pmewald.PME(box, balance=balance, **kw)
        seen = []
        for _ in range(6):
            pme.compute(w.positions[idx], w.charges[idx], ids=w.ids[idx], exclusions=w.exclusions[rank::size])
            seen.append(pme.timings()["real_space_pairs_imbalance_last"])
        imb[balance] = seen
    assert min(imb["off"]) > 1.3, imb
    for balance in ("once", "dynamic"):
        assert imb[balance][0] == imb["off"][0], imb  # the first call on the bricks
        assert max(imb[balance][4:]) <= 1.05, imb


@pytest.mark.mpi(ranks=[2])
@pytest.mark.timeout(60)
def test_balanced_work_stays_on_the_bricks(comm):
    """Random charges filling the cell: the pairs are even (below the threshold), the cuts
    never move, and the results are those of balance='off' to the bit."""
    rank, size = comm.Get_rank(), comm.Get_size()
    s = systems.random_charges(600, 18.0, seed=6, min_distance=0.9)
    idx = np.arange(rank, s.n_atoms, size)
    kw = dict(cutoff=6.0, alpha=0.5, mesh=(16, 16, 16), order=5, skin=0.0, comm=comm)
    out = {}
    for balance in ("off", "dynamic"):
        pme = pmewald.PME(s.box, balance=balance, balance_threshold=1.2, **kw)
        out[balance] = [pme.compute(s.positions[idx], s.charges[idx], ids=s.ids[idx]) for _ in range(3)]
        if balance == "dynamic":
            assert pme.timings()["balance_rebalances"] == 0
            assert pme.timings()["real_space_pairs_imbalance"] < 1.2
    for a, b in zip(out["dynamic"], out["off"]):
        assert a.energy == b.energy and np.array_equal(a.forces, b.forces)


@pytest.mark.mpi(ranks=[1, 2])
@pytest.mark.timeout(60)
def test_bad_balance_options(comm):
    s = systems.random_charges(40, 10.0, seed=2)
    for kw, name in ((dict(balance="always"), "balance"), (dict(balance_by="atoms"), "balance_by"),
                     (dict(balance_threshold=0.9), "balance_threshold"),
                     (dict(balance_threshold=float("nan")), "balance_threshold")):
        with pytest.raises(ValueError, match=name):
            pmewald.PME(s.box, cutoff=3.0, comm=comm, **kw)
