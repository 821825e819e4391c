"""GROMACS in the peer harness (pmewald.bench.peers.gromacs): the topology's exclusions are
exactly the system's, the units are converted right, and ``gmx mdrun -rerun`` gives
pmewald's forces and energy to PME accuracy on 1 thread and on 2 thread-MPI ranks.

``gmx`` is installed by ``scripts/dev.sh setup`` (Debian's ``gromacs``); these tests skip only
where it is missing.
"""

import numpy as np
import pytest

from pmewald import PME, systems
from pmewald.bench.peers import gromacs as gro

# exclusive (docs/testing.md): runs gmx mdrun on one and two ranks.
pytestmark = pytest.mark.exclusive

gmx_missing = pytest.mark.skipif(gro.gmx_binary() is None,
                                 reason="gmx not found (Debian package gromacs, installed by scripts/dev.sh setup)")
TIGHT = dict(rtol=1e-7, spacing=0.05, order=6)


def _env():
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_"))}


def _rel(a, b):
    return float(np.sqrt(((a - b) ** 2).sum() / (b ** 2).sum()))


def test_molecules_and_topology_exclusions_are_the_systems(tmp_path):
    s = systems.solvated_chains(2, 4, n_water=60, seed=3)
    order, types, counts = gro.molecules(s.n_atoms, s.exclusions, s.charges)
    assert sorted(order.tolist()) == list(range(s.n_atoms))
    assert len(types) == 2                       # one chain type, one water type
    gro.write_topology(tmp_path / "t.top", types, counts)
    got = {tuple(sorted((int(order[i]), int(order[j])))) for i, j in gro.read_topology_exclusions(tmp_path / "t.top")}
    assert got == {tuple(sorted(p)) for p in s.exclusions.tolist()}
    text = (tmp_path / "t.top").read_text()
    assert "  Q  1.0  0.0  A  0.0  0.0" in text  # the only atom type: no Lennard-Jones
    # charges of GROMACS atom k are the system's charges of atom order[k]
    q = np.concatenate([np.tile(types[t][0], c) for t, c in counts])
    assert np.array_equal(q, s.charges[order])
    # no exclusions: one molecule per atom, identical ions share a type
    n = systems.rock_salt((2, 2, 2))
    order, types, counts = gro.molecules(n.n_atoms, n.exclusions, n.charges)
    assert len(types) == 2 and sum(c for _, c in counts) == n.n_atoms and len(counts) == 2


def test_units():
    # a unit-charge pair 1 A = 0.1 nm apart: K / 0.1^2 = 100 K kJ/mol/nm, and 1 e^2/A^2 in k = 1 units
    assert gro.forces_to_harness([[100.0 * gro.K_GROMACS, 0.0, 0.0]])[0, 0] == pytest.approx(1.0, rel=1e-15)
    assert gro.K_GROMACS == pytest.approx(138.93545764, rel=1e-8)


def test_gro_keeps_nine_decimals(tmp_path):
    box = np.diag([31.0, 32.0, 33.0])
    x = np.random.default_rng(1).random((7, 3)) * 31.0
    gro.write_gro(tmp_path / "c.gro", box, [x])
    lines = (tmp_path / "c.gro").read_text().splitlines()
    back = np.array([[float(line[20 + 15 * k:35 + 15 * k]) for k in range(3)] for line in lines[2:9]]) * 10
    assert np.abs(back - x).max() < 1e-8


@gmx_missing
@pytest.mark.timeout(60)
def test_two_ions_force_and_energy_match_pmewald(tmp_path):
    box = np.diag([30.0, 30.0, 30.0])
    pos = np.array([[10.0, 12.0, 14.0], [13.1, 11.0, 16.2]])
    q = np.array([1.0, -1.0])
    s = systems.System(box=box, positions=pos, charges=q, ids=np.arange(2), exclusions=np.zeros((0, 2), np.int64),
                       name="two ions")
    gs = gro.GromacsSystem(s, tmp_path, "ions")
    r = gro.run_gromacs(gs, TIGHT, 9.0, dict(ntmpi=1, ntomp=1), gs.conf, 1, True, _env())
    ref = PME(box, 9.0, tolerance=1e-8, order=8, coulomb_constant=1.0).compute(pos, q)
    assert _rel(r["forces"], ref.forces) < 1e-5
    # kJ/mol = (k = 1, A) energy x K_GROMACS x 10; mixed precision: GROMACS's float reciprocal energy
    # is 1e-5 off (its double build, gmx_d, agrees to 1e-6)
    assert r["energy_kj_mol"] == pytest.approx(ref.energy * gro.K_GROMACS * gro.NM, rel=3e-5)


@gmx_missing
@pytest.mark.timeout(120)
def test_rerun_matches_pmewald_with_exclusions_on_one_and_two_ranks(tmp_path):
    s = systems.solvated_chains(2, 6, n_water=500, seed=5)   # 1,434 atoms, 24.6 A cube
    gs = gro.GromacsSystem(s, tmp_path, "chains")
    ref = PME(s.box, 9.0, tolerance=1e-8, order=8, coulomb_constant=1.0).compute(
        s.positions, s.charges, s.ids, s.exclusions)
    traj = gs.trajectory([s.positions] * 3, "three")
    one = gro.run_gromacs(gs, TIGHT, 9.0, dict(ntmpi=1, ntomp=1), traj, 3, True, _env())
    assert _rel(one["forces"], ref.forces) < 3e-5
    assert one["energy_kj_mol"] == pytest.approx(ref.energy * gro.K_GROMACS * gro.NM, rel=3e-5)
    assert one["frame_s"] > 0 and one["mesh"] and one["alpha_per_A"] > 0 and one["calls"] == 3
    assert one["frame_s"] >= one["force_s"] + one["pme_s"]
    two = gro.run_gromacs(gs, TIGHT, 9.0, dict(ntmpi=2, ntomp=1), traj, 3, True, _env())
    assert _rel(two["forces"], one["forces"]) < 1e-5
    # a missing exclusion would change the forces by far more than that: drop the waters' pairs
    s2 = systems.System(box=s.box, positions=s.positions, charges=s.charges, ids=s.ids,
                        exclusions=s.exclusions[: len(s.exclusions) // 2], name="fewer exclusions")
    bad = PME(s.box, 9.0, tolerance=1e-8, order=8, coulomb_constant=1.0).compute(
        s2.positions, s2.charges, s2.ids, s2.exclusions)
    assert _rel(one["forces"], bad.forces) > 1e-2


@gmx_missing
@pytest.mark.timeout(120)
def test_own_md_loop_keeps_the_list_and_gives_the_rerun_forces(tmp_path):
    """GROMACS's own MD loop (bench peers --mode md): every atom frozen, so step 0's forces are
    the rerun's of the same frame; the pair list is searched every nstlist steps only, and the
    step time leaves out the integrator's rows."""
    s = systems.solvated_chains(2, 6, n_water=500, seed=5)
    gs = gro.GromacsSystem(s, tmp_path, "chains")
    setting = dict(rtol=1e-5, spacing=0.1, order=5)
    md = gro.run_gromacs_md(gs, setting, 9.0, dict(ntmpi=1, ntomp=1), 40, True, _env(), nstlist=10)
    rerun = gro.run_gromacs(gs, setting, 9.0, dict(ntmpi=1, ntomp=1), gs.conf, 1, True, _env())
    # the md run's list has a 0.1 nm buffer beyond the cutoff: the same pairs within it, summed
    # in another order (single precision)
    assert _rel(md["forces"], rerun["forces"]) < 1e-6
    assert md["calls"] == 41 and md["rlist_nm"] == pytest.approx(1.0)
    assert md["cycle_counts"]["Neighbor search"] == 5          # steps 0, 10, ..., 40
    assert rerun["cycle_counts"]["Neighbor search"] == rerun["calls"] == 1
    assert "Update" in md["cycle_rows"]                        # the integrator's row, left out
    assert 0 < md["step_s"] <= md["loop_total_s"] / 41
    assert md["step_s"] >= md["force_s"] + md["pme_s"]
