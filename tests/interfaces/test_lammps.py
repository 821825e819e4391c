"""pmewald.interfaces.lammps: pmewald as LAMMPS's long-range solver on LAMMPS's own ranks and atom
split (fix external pf/callback), on the peptide example of Debian's lammps-examples, against
LAMMPS's own Ewald sum (kspace_style ewald 1e-7: no FFTW, so it can share the process with
pmewald; docs/engines.md has the comparison with pppm, in separate processes)."""

import os
import warnings

import numpy as np
import pytest

pytest.importorskip("lammps")

from mpi4py import MPI  # noqa: E402

from pmewald.interfaces.lammps import attach, lammps_box, open_lammps, special_neighbors  # noqa: E402

DATA = "/usr/share/lammps/examples/peptide/data.peptide"
pytestmark = pytest.mark.skipif(not os.path.exists(DATA), reason="Debian's lammps-examples is not installed")

# in.peptide's force field (CHARMM; special_bonds 0 0 0 by default, the dihedrals' own 1-4)
PEPTIDE = """
units real
atom_style full
pair_style {pair}
bond_style harmonic
angle_style charmm
dihedral_style charmm
improper_style harmonic
{kspace}
read_data {data}
{special}
neighbor 2.0 bin
neigh_modify delay 0 every 1 check yes
"""
COUL_LONG = "lj/charmm/coul/long 8.0 10.0 10.0"
LJ_ONLY = "lj/charmm/coul/charmm 8.0 10.0 0.05 0.1"  # CHARMM's LJ; Coulomb cut below any distance
ARGS = ["-log", "none", "-screen", os.environ.get("PMEWALD_LAMMPS_SCREEN", "none"), "-nocite"]


def _peptide(pair=COUL_LONG, kspace="", special="", comm=None, commands=()):
    lmp = open_lammps(ARGS, comm=comm)
    lmp.commands_string(PEPTIDE.format(pair=pair, kspace=kspace, data=DATA, special=special))
    for c in commands:
        lmp.command(c)
    return lmp


def _gathered(lmp):
    """Forces of all atoms by tag, energy, pressure (collective)."""
    f = np.array(lmp.gather_atoms("f", 1, 3)).reshape(-1, 3)
    return f, lmp.get_thermo("pe"), lmp.get_thermo("press")


def _ewald(special="", comm=None, charges=True):
    """LAMMPS's own answer: coul/long pairs and kspace_style ewald 1e-7 (without charges: the
    force field's other forces)."""
    commands = [] if charges else ["set group all charge 0.0", "kspace_modify gewald 0.3"]
    lmp = _peptide(kspace="kspace_style ewald 1e-7", special=special, comm=comm, commands=commands)
    lmp.command("run 0 post no")
    out = _gathered(lmp)
    lmp.close()
    return out


def _relative(f, f_ref, f_other):
    """Relative RMS error of the electrostatic forces (the others subtracted)."""
    return float(np.sqrt(((f - f_ref) ** 2).sum() / ((f_ref - f_other) ** 2).sum()))


@pytest.mark.mpi(ranks=[1, 2])
def test_kspace_mode_is_lammps_ewald_within_the_tolerance(comm):
    """pmewald in place of the kspace style (the pair style's coul/long keeps the real-space part
    and the special pairs): forces within the tolerance of LAMMPS's Ewald sum, energy and
    pressure close; the kspace style's computation is off."""
    f_ref, e_ref, p_ref = _ewald()
    f_other, _, _ = _ewald(charges=False)
    lmp = _peptide(kspace="kspace_style pppm 1e-4")  # replaced by attach before it ever runs
    fix = attach(lmp, mode="kspace", cutoff=10.0, tolerance=1e-5)
    f, e, p = _gathered(lmp)
    assert lmp.get_thermo("elong") == 0.0 and fix.calls == 1
    assert _relative(f, f_ref, f_other) <= 1e-5
    assert abs(e - e_ref) <= 1e-5 * abs(e_ref) and abs(p - p_ref) <= 0.5
    assert fix.parameters["real_space"] is False
    lmp.close()


@pytest.mark.mpi(ranks=[1, 2])
def test_full_mode_with_scaled_special_pairs(comm):
    """pmewald computes all the electrostatics (the pair style only CHARMM's LJ): the special
    neighbours from the bond graph, 1-2 and 1-4 excluded, 1-3 scaled by 0.5 (pairs across ranks
    too; CHARMM's weighted dihedrals, which add their own 1-4 terms, insist on 1-4 factors of
    0), against LAMMPS's Ewald sum with special_bonds coul 0 0.5 0."""
    special = "special_bonds lj 0.0 0.0 0.0 coul 0.0 0.5 0.0"
    f_ref, e_ref, p_ref = _ewald(special)
    f_other, _, _ = _ewald(special, charges=False)
    lmp = _peptide(pair=LJ_ONLY, special=special)
    fix = attach(lmp, mode="full", cutoff=9.0, tolerance=1e-5, special_coul=(0.0, 0.5, 0.0))
    f, e, p = _gathered(lmp)
    assert len(fix._scaled.pairs) > 0 and len(fix.exclusions) > len(fix._scaled.pairs)
    assert _relative(f, f_ref, f_other) <= 1e-5
    assert abs(e - e_ref) <= 1e-5 * abs(e_ref) and abs(p - p_ref) <= 0.5
    lmp.close()


@pytest.mark.mpi(ranks=[2])
@pytest.mark.timeout(120)
def test_dynamics_on_two_ranks_follow_one_rank(comm):
    """30 NVE steps (1 fs, reneighbouring every step) with pmewald in full mode on LAMMPS's two
    ranks and, on rank 0, on a LAMMPS of its own: the same trajectory (LAMMPS's sums follow its
    decomposition, so not bitwise) and total energy."""
    runs = {}
    for name, c in (("two", comm), ("one", MPI.COMM_SELF)):
        if c == MPI.COMM_SELF and comm.Get_rank() != 0:
            continue
        lmp = _peptide(pair=LJ_ONLY, comm=c, commands=["velocity all create 300.0 4928 mom yes rot yes"])
        fix = attach(lmp, mode="full", cutoff=9.0, tolerance=1e-5, special_coul=(0, 0, 0))
        lmp.commands_string("fix nve all nve\ntimestep 1.0")
        fix.run(30)
        assert fix.calls == 32  # attach's run 0, this run's set-up and its 30 steps
        runs[name] = (np.array(lmp.gather_atoms("x", 1, 3)).reshape(-1, 3), lmp.get_thermo("etotal"))
        lmp.close()
    if comm.Get_rank() == 0:
        assert np.abs(runs["two"][0] - runs["one"][0]).max() <= 1e-8
        assert abs(runs["two"][1] - runs["one"][1]) <= 1e-8 * abs(runs["one"][1])


@pytest.mark.mpi(ranks=[1, 2])
def test_follows_box_changes(comm):
    """A remapping change_box (triclinic: a tilt too) after attach: the next evaluation uses the
    new box (PME.set_box), and energy and forces agree with LAMMPS's Ewald sum there."""
    change = ["change_box all triclinic", "change_box all x scale 1.02 y scale 0.99 xy final 0.5 remap"]
    ref = _peptide(kspace="kspace_style ewald 1e-7", commands=change)
    ref.command("run 0 post no")
    f_ref, e_ref, _ = _gathered(ref)
    ref.close()
    lmp = _peptide()
    fix = attach(lmp, mode="kspace", cutoff=10.0, tolerance=1e-5)
    for c in change:
        lmp.command(c)
    fix.run(0)
    f, e, _ = _gathered(lmp)
    np.testing.assert_array_equal(fix.parameters["box"], lammps_box(lmp))
    assert lammps_box(lmp)[1, 0] == 0.5
    assert abs(e - e_ref) <= 1e-5 * abs(e_ref)
    assert np.sqrt(((f - f_ref) ** 2).mean()) <= 1e-3 * np.sqrt((f_ref ** 2).mean())
    lmp.close()


@pytest.mark.mpi(ranks=[1, 2])
def test_bad_input_raises_on_every_rank(comm):
    lmp = _peptide(pair=LJ_ONLY)
    with pytest.raises(ValueError, match="mode must be"):
        attach(lmp, mode="pppm", cutoff=9.0)
    with pytest.raises(ValueError, match="cutoff is needed"):
        attach(lmp, mode="full")
    with pytest.raises(ValueError, match="special_coul"):
        attach(lmp, mode="full", cutoff=9.0)
    with pytest.raises(ValueError, match="coulomb_constant"):
        attach(lmp, mode="full", cutoff=9.0, coulomb_constant=1.0, special_coul=(0, 0, 0))
    lmp.close()
    lmp = open_lammps(ARGS)
    lmp.commands_string("units lj\natom_style atomic\nregion b block 0 5 0 5 0 5\ncreate_box 1 b\n")
    with pytest.raises(ValueError, match="no charges"):
        attach(lmp, mode="full", cutoff=2.0)
    lmp.close()


@pytest.mark.mpi(ranks=[1, 2])
def test_an_error_in_a_step_stops_the_run_and_is_raised(comm):
    """A box in which the cutoff no longer fits: the callback cannot raise through LAMMPS, so
    the run stops at that step, run() raises the error on every rank, and every later run
    stops at once until the error is cleared."""
    lmp = _peptide(commands=["fix nve all nve"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fix = attach(lmp, mode="kspace", cutoff=10.0, tolerance=1e-4)
    # a fix defined before pmewald's: the warning about fix shake (rank 0)
    assert [str(w.message)[:35] for w in caught] == (["pmewald's fix comes after the fixes"]
                                                     if comm.Get_rank() == 0 else [])
    fix.run(2)
    lmp.command("change_box all x scale 0.7 y scale 0.7 z scale 0.7 remap")
    with pytest.raises(ValueError, match="cutoff 10.0 is longer than half"):
        fix.run(10)
    assert lmp.extract_global("ntimestep") == 2
    with pytest.raises(ValueError, match="cutoff"):
        fix.run(10)
    assert lmp.extract_global("ntimestep") == 2
    lmp.command("change_box all x scale 1.4285714285714286 y scale 1.4285714285714286 z scale 1.4285714285714286 "
                "remap")
    fix.clear()
    fix.run(1)
    assert lmp.extract_global("ntimestep") == 3
    lmp.close()


def test_special_neighbors_of_a_bond_graph():
    """1-2, 1-3 and 1-4 neighbours as LAMMPS finds them: a pair at its lowest level only (a
    ring of 5 makes every pair 1-2 or 1-3), no self pairs."""
    chain = special_neighbors([[1, 2], [2, 3], [3, 4], [4, 5]])
    assert chain[1].tolist() == [[1, 2], [2, 3], [3, 4], [4, 5]]
    assert chain[2].tolist() == [[1, 3], [2, 4], [3, 5]]
    assert chain[3].tolist() == [[1, 4], [2, 5]]
    ring = special_neighbors([[1, 2], [2, 3], [3, 4], [4, 5], [5, 1]])
    assert len(ring[1]) == 5 and len(ring[2]) == 5 and len(ring[3]) == 0
    water = special_neighbors([[7, 8], [7, 9]])
    assert water[1].tolist() == [[7, 8], [7, 9]] and water[2].tolist() == [[8, 9]] and len(water[3]) == 0
