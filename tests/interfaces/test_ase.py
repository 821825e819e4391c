"""pmewald.interfaces.ase.PMECalculator: agreement with pmewald.PME, stress sign, MPI convention, NVE MD."""

import numpy as np
import pytest

ase = pytest.importorskip("ase")

from ase import Atoms, units as ase_units  # noqa: E402
from ase.calculators.mixing import SumCalculator  # noqa: E402

import pmewald  # noqa: E402
from pmewald import systems, units  # noqa: E402
from pmewald.interfaces.ase import BornMayer, PMECalculator  # noqa: E402

FIXED = dict(alpha=0.55, mesh=(24, 24, 24), order=5)


def _triclinic_atoms(n=48, seed=3):
    s = systems.random_charges(n, systems.triclinic_box(12.0, "restricted"), seed=seed)
    return Atoms(f"X{n}", positions=s.positions, cell=s.box, pbc=True, charges=s.charges), s


def _rock_salt(n_cells=2, temperature_K=None, seed=0):
    from ase.build import bulk

    atoms = bulk("NaCl", "rocksalt", a=5.64, cubic=True).repeat(n_cells)
    atoms.set_initial_charges([1.0 if s == "Na" else -1.0 for s in atoms.get_chemical_symbols()])
    if temperature_K:
        m = atoms.get_masses()[:, None]
        p = np.sqrt(m * ase_units.kB * temperature_K) * np.random.default_rng(seed).normal(size=(len(atoms), 3))
        atoms.set_momenta(p - m * p.sum(axis=0) / m.sum())  # Maxwell-Boltzmann, no net momentum
    return atoms


def test_energy_forces_equal_pme_in_ev():
    atoms, s = _triclinic_atoms()
    atoms.calc = PMECalculator(cutoff=5.0, tolerance=1e-6)
    ref = pmewald.PME(s.box, 5.0, tolerance=1e-6, coulomb_constant=units.EV_ANGSTROM).compute(s.positions, s.charges)
    assert atoms.get_potential_energy() == pytest.approx(ref.energy, rel=1e-12, abs=1e-12)
    assert atoms.get_potential_energy(force_consistent=True) == atoms.get_potential_energy()
    np.testing.assert_allclose(atoms.get_forces(), ref.forces, rtol=0, atol=1e-12 * np.abs(ref.forces).max())
    vol = abs(np.linalg.det(s.box))
    W = ref.virial
    np.testing.assert_allclose(atoms.get_stress(voigt=False), -0.5 * (W + W.T) / vol, atol=1e-14)


def test_cutoff_auto_passes_through_and_stays_within_tolerance():
    atoms = _rock_salt(n_cells=3, temperature_K=300)
    atoms.positions += np.random.default_rng(1).normal(scale=0.05, size=atoms.positions.shape)
    atoms.calc = PMECalculator(cutoff=("auto", 4.0), tolerance=1e-4)
    ref = PMECalculator(cutoff=8.0, tolerance=1e-9)
    f_ref = ref.get_forces(atoms)
    for _ in range(4):
        f = atoms.calc.get_forces(atoms)
        assert np.sqrt(((f - f_ref) ** 2).sum() / (f_ref ** 2).sum()) < 1e-4
        atoms.calc.reset()  # same positions, computed again (the walk counts calls)
    p = atoms.calc.pme.parameters
    assert p["cutoff_request"] == ("auto", 4.0) and p["cutoff"] >= 4.0 and p["cutoff_search"] == "searching"
    with pytest.raises(ValueError, match="cutoff must be a length, 'auto' or"):
        PMECalculator(cutoff="automatic").get_forces(atoms)


def test_charges_argument_and_validation():
    atoms, s = _triclinic_atoms(n=20)
    atoms.set_initial_charges(np.zeros(len(atoms)))
    atoms.calc = PMECalculator(cutoff=5.0, charges=s.charges, **FIXED)
    e = atoms.get_potential_energy()
    ref = pmewald.PME(s.box, 5.0, coulomb_constant=units.EV_ANGSTROM, **FIXED).compute(s.positions, s.charges)
    assert e == pytest.approx(ref.energy, rel=1e-12)
    slab = atoms.copy()
    slab.pbc = (True, True, False)
    slab.calc = PMECalculator(cutoff=5.0, charges=s.charges, **FIXED)
    with pytest.raises(ValueError, match="periodic"):
        slab.get_potential_energy()
    bad = atoms.copy()
    bad.calc = PMECalculator(cutoff=5.0, charges=s.charges[:-1], **FIXED)
    with pytest.raises(ValueError, match="charges"):
        bad.get_potential_energy()


def test_stress_matches_strain_finite_differences_triclinic():
    atoms, _ = _triclinic_atoms()
    calc = PMECalculator(cutoff=5.0, **FIXED)
    atoms.calc = calc
    stress = atoms.get_stress(voigt=False)
    vol = atoms.get_volume()
    h = 1e-5
    num = np.zeros((3, 3))
    for a in range(3):
        for b in range(3):
            e = []
            for sign in (1, -1):
                F = np.eye(3)
                F[a, b] += sign * h
                strained = atoms.copy()
                strained.set_cell(atoms.cell.array @ F.T, scale_atoms=False)
                strained.positions = atoms.positions @ F.T
                strained.calc = calc
                e.append(strained.get_potential_energy())
            num[a, b] = (e[0] - e[1]) / (2 * h) / vol  # stress = (1/V) dE/d(eps)
    # the energy is rotation invariant, so dE/d(eps) is symmetric: compare with the symmetric stress
    np.testing.assert_allclose(stress, num, rtol=0, atol=1e-6 * np.abs(num).max())
    assert np.abs(stress).max() > 1e-4
    assert calc.builds == 1  # every strained cell went through set_box


def test_solver_reused_and_rebuilt_when_needed():
    atoms, s = _triclinic_atoms(n=30)
    calc = PMECalculator(cutoff=5.0, **FIXED)
    atoms.calc = calc
    atoms.get_forces()
    pme = calc.pme
    atoms.positions += 0.1
    atoms.get_forces()
    atoms.set_cell(atoms.cell.array * 1.02, scale_atoms=True)
    e_scaled = atoms.get_potential_energy()
    assert calc.pme is pme and calc.builds == 1
    fresh = atoms.copy()
    fresh.calc = PMECalculator(cutoff=5.0, **FIXED)
    assert e_scaled == pytest.approx(fresh.get_potential_energy(), rel=1e-12)
    calc.set(tolerance=1e-4, alpha=0.5)  # options changed: rebuilt
    atoms.get_potential_energy()
    assert calc.builds == 2
    del atoms[-1]                        # atom count changed: rebuilt
    atoms.get_potential_energy()
    assert calc.builds == 3
    small = atoms.copy()                 # the cutoff no longer fits the cell
    small.set_cell(atoms.cell.array * 0.7, scale_atoms=True)
    small.calc = calc
    with pytest.raises(ValueError, match="cutoff"):
        small.get_potential_energy()


@pytest.mark.mpi(ranks=[1, 2])
def test_identical_on_1_and_2_ranks(comm):
    """Every rank holds the whole Atoms and gets the full results; they equal a 1-rank run."""
    from mpi4py import MPI

    atoms, s = _triclinic_atoms(n=51)
    atoms.calc = PMECalculator(cutoff=5.0, tolerance=1e-5, comm=comm)
    e, f, st = atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress()
    serial = atoms.copy()
    serial.calc = PMECalculator(cutoff=5.0, tolerance=1e-5, comm=MPI.COMM_SELF)
    assert serial.calc.parameters["tolerance"] == 1e-5
    assert e == pytest.approx(serial.get_potential_energy(), rel=1e-12)
    np.testing.assert_allclose(f, serial.get_forces(), rtol=0, atol=1e-11 * np.abs(f).max())
    np.testing.assert_allclose(st, serial.get_stress(), rtol=0, atol=1e-11 * np.abs(st).max())
    # every rank holds the same full results
    for x in (np.array([e]), f, st):
        root = comm.bcast(x, root=0)
        assert np.array_equal(root, x)


@pytest.mark.mpi(ranks=[1, 2])
@pytest.mark.timeout(120)
def test_nve_rock_salt_conserves_energy(comm):
    """200 steps of hot rock salt, pmewald + Born-Mayer repulsion through SumCalculator."""
    from ase.md.verlet import VelocityVerlet

    atoms = _rock_salt(2, temperature_K=1500)
    atoms.rattle(0.1, seed=2)
    rho, rc = 0.317, 5.5
    atoms.calc = SumCalculator([PMECalculator(cutoff=rc, tolerance=1e-4, comm=comm),
                                BornMayer(BornMayer.rock_salt_prefactor(2.82, rho), rho, rc)])
    dyn = VelocityVerlet(atoms, timestep=1.0 * ase_units.fs)
    energies = []
    dyn.attach(lambda: energies.append(atoms.get_total_energy()), interval=10)
    dyn.run(200)
    energies = np.array(energies)
    drift = np.abs(energies - energies[0]).max() / len(atoms)
    assert drift < 1e-4, drift
    assert atoms.get_temperature() > 300  # still hot: the run did move
    all_e = comm.allgather(energies[-1])
    assert all(x == all_e[0] for x in all_e)


@pytest.mark.mpi(ranks=[1, 2])
def test_per_atom_energies_charges_and_potentials(comm):
    """atoms.get_potential_energies() sums to the energy and equals q_i phi_i / 2; charges
    are the ones used; the potentials are dE/dq_i (central differences of the calculator's
    energy in one charge) and pmewald's own in eV/e; the same on every rank and on 1 rank;
    asking for forces first and the per-atom results after gives the same forces."""
    from mpi4py import MPI

    atoms, s = _triclinic_atoms(n=31)
    calc = PMECalculator(cutoff=5.0, comm=comm, **FIXED)
    atoms.calc = calc
    f = atoms.get_forces()
    energies, phi = atoms.get_potential_energies(), calc.get_electrostatic_potentials(atoms)
    np.testing.assert_array_equal(atoms.get_charges(), s.charges)
    np.testing.assert_array_equal(atoms.get_forces(), f)
    e = atoms.get_potential_energy()
    assert abs(energies.sum() - e) <= 1e-11 * np.abs(energies).sum()
    np.testing.assert_allclose(energies, 0.5 * s.charges * phi, rtol=1e-13, atol=0)
    ref = pmewald.PME(s.box, 5.0, coulomb_constant=units.EV_ANGSTROM, comm=MPI.COMM_SELF, **FIXED)
    np.testing.assert_allclose(phi, ref.compute(s.positions, s.charges, potentials=True).potentials,
                               rtol=1e-11, atol=1e-12)
    h = 1e-4
    for i in (0, 17):
        e2 = []
        for sign in (1, -1):
            q = s.charges.copy()
            q[i] += sign * h
            calc.set(charges=q)
            e2.append(atoms.get_potential_energy())
        assert abs((e2[0] - e2[1]) / (2 * h) - phi[i]) <= 1e-7 * abs(phi[i])
    assert np.array_equal(comm.bcast(phi, root=0), phi)
