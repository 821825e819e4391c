"""The ghost atoms' two ways through PME (cpp/particles/staged_ghosts, pmewald.PME's
ghost_exchange): the staged exchange gives the direct one's energies, forces and virial to
1e-12 relative on 1-4 ranks, in every comm mode, orthorhombic and triclinic, with the cutoff
longer than a domain (several pulses), ranks without atoms, exclusions, the reused pair list
and potentials; it sends 2 messages per axis and pulse; "auto" chooses by the geometry.
"""

from __future__ import annotations

import numpy as np
import pytest

import pmewald
from pmewald import systems

MODES = ("pt2pt", "nonblocking", "collective")


def _gathered(comm, idx, values, n):
    out = np.zeros((n,) + np.shape(values)[1:])
    out[idx] = values
    return comm.allreduce(out)


def _compare(a, b, what):
    assert abs(a.energy - b.energy) <= 1e-12 * abs(b.energy), (what, a.energy, b.energy)
    assert np.allclose(a.virial, b.virial, rtol=0, atol=1e-12 * np.abs(b.virial).max()), what


def _run(comm, s, idx, ex, ge, mode, calls, **kw):
    pme = pmewald.PME(s.box, ghost_exchange=ge, comm_mode=mode, comm=comm, **kw)
    out = [pme.compute(s.positions[idx] + 0.03 * k, s.charges[idx], ids=s.ids[idx], exclusions=ex)
           for k in range(calls)]
    return pme, out


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(120)
def test_staged_gives_the_direct_results(comm):
    """Water (exclusions, the pair list over moving atoms: builds and refreshes along the
    staged plan) in an orthorhombic box, random charges in a triclinic one in each mode (the
    ghosts travel the same way in every mode; the modes' exchanges run beside them); atoms
    split round-robin and, on the triclinic case, all on the last rank (the others pass none)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    water = systems.water_box(target_atoms=600, seed=2)
    tric = systems.random_charges(300, systems.triclinic_box(16.0, "strong"), seed=4, min_distance=1.2)
    cases = (("water", water, dict(cutoff=5.5, alpha=0.5, mesh=(16, 16, 16), order=5, skin=0.8),
              np.arange(rank, water.n_atoms, size), water.exclusions[rank::size], ("nonblocking",), 3),
             ("tric", tric, dict(cutoff=4.8, alpha=0.55, mesh=(16, 18, 20), order=6, skin=0.0),
              np.arange(tric.n_atoms) if rank == size - 1 else np.arange(0), None, MODES, 1))
    for name, s, kw, idx, ex, modes, calls in cases:
        for mode in modes:
            pme_d, direct = _run(comm, s, idx, ex, "direct", mode, calls, **kw)
            pme_s, staged = _run(comm, s, idx, ex, "staged", mode, calls, **kw)
            assert pme_s.parameters["ghost_exchange_used"] == "staged"
            # potentials: a fresh search on the bricks' migration, each way
            direct.append(pme_d.compute(s.positions[idx], s.charges[idx], ids=s.ids[idx], exclusions=ex,
                                        potentials=True))
            staged.append(pme_s.compute(s.positions[idx], s.charges[idx], ids=s.ids[idx], exclusions=ex,
                                        potentials=True))
            for a, b in zip(staged, direct):
                _compare(a, b, (name, mode))
                fa, fb = (_gathered(comm, idx, r.forces, s.n_atoms) for r in (a, b))
                assert np.abs(fa - fb).max() <= 1e-12 * np.abs(fb).max(), (name, mode)
            pa, pb = (_gathered(comm, idx, r.potentials, s.n_atoms) for r in (staged[-1], direct[-1]))
            assert np.abs(pa - pb).max() <= 1e-12 * np.abs(pb).max(), (name, mode)


@pytest.mark.mpi(ranks=[4])
@pytest.mark.timeout(60)
def test_cutoff_longer_than_a_domain_takes_several_pulses(comm):
    """4 ranks along z (mesh 8 x 8 x 40) and a cutoff of 0.45 of the box height: the ghosts
    come from two domains away (2 pulses), staged and direct agree, and the staged exchange
    sends 2 messages per pulse each way (after the first call's message counts settle)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    s = systems.random_charges(400, np.diag([14.0, 14.0, 20.0]), seed=9, min_distance=1.0)
    idx = np.arange(rank, s.n_atoms, size)
    kw = dict(cutoff=6.9, alpha=0.45, mesh=(8, 8, 40), order=5, skin=0.0, comm=comm)
    res = {}
    for ge in ("direct", "staged"):
        pme = pmewald.PME(s.box, ghost_exchange=ge, **kw)
        pme.compute(s.positions[idx], s.charges[idx], ids=s.ids[idx])
        pme.reset_timings()
        r = pme.compute(s.positions[idx], s.charges[idx], ids=s.ids[idx])
        res[ge] = (r, _gathered(comm, idx, r.forces, s.n_atoms), pme.timings()["ghost_atoms_messages"])
    _compare(res["staged"][0], res["direct"][0], "pulses")
    assert np.abs(res["staged"][1] - res["direct"][1]).max() <= 1e-12 * np.abs(res["direct"][1]).max()
    # z: 2 pulses x 2 directions, forward and the forces back: 8 messages; direct: every
    # other rank (3), sizes and data, and the forces back.
    assert res["staged"][2] == 8, res["staged"][2]
    assert res["direct"][2] == 3 * 2 + 3, res["direct"][2]


@pytest.mark.mpi(ranks=[1, 2])
@pytest.mark.timeout(60)
def test_auto_and_bad_values(comm):
    """'auto' is direct on few ranks (the geometry's rule); a bad value is a ValueError on
    every rank naming the option."""
    s = systems.random_charges(50, 12.0, seed=1)
    pme = pmewald.PME(s.box, cutoff=4.0, alpha=0.6, mesh=(12, 12, 12), comm=comm)
    assert pme.parameters["ghost_exchange"] == "auto"
    pme.compute(s.positions, s.charges) if comm.Get_rank() == 0 else pme.compute(np.zeros((0, 3)), np.zeros(0))
    assert pme.parameters["ghost_exchange_used"] == "direct"
    for bad in ("sideways", 3, None):
        with pytest.raises(ValueError, match="ghost_exchange"):
            pmewald.PME(s.box, cutoff=4.0, ghost_exchange=bad, comm=comm)
