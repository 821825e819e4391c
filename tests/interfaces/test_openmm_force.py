"""pmewald.interfaces.openmm_force.PMEForce: pmewald's electrostatics inside an OpenMM System,
against OpenMM's own PME (the Reference platform, double precision), in a Simulation, on 1 and 2
ranks (rank 0 runs OpenMM, the others serve)."""

import io

import numpy as np
import pytest

openmm = pytest.importorskip("openmm")

from mpi4py import MPI  # noqa: E402
from openmm import app, unit  # noqa: E402

from pmewald.interfaces.openmm_force import PMEForce  # noqa: E402
from pmewald.systems.openmm import solvated_peptide, water_box_system  # noqa: E402

KJ_NM = unit.kilojoule_per_mole / unit.nanometer


def _reference(system, positions, box=None):
    """Energy (kJ/mol) and forces (kJ/mol/nm) of `system` on OpenMM's Reference platform."""
    ctx = openmm.Context(system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("Reference"))
    if box is not None:
        ctx.setPeriodicBoxVectors(*box)
    ctx.setPositions(positions)
    st = ctx.getState(getEnergy=True, getForces=True)
    return st.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole), st.getForces(asNumpy=True).value_in_unit(KJ_NM)


def _rms(a, b):
    return float(np.sqrt(((a - b) ** 2).sum() / (b ** 2).sum()))


def _pme_parameters(system, positions):
    """(alpha, mesh) OpenMM's Reference PME uses for `system`."""
    ctx = openmm.Context(openmm.XmlSerializer.clone(system), openmm.VerletIntegrator(0.001),
                         openmm.Platform.getPlatformByName("Reference"))
    ctx.setPositions(positions)
    nb = next(f for f in ctx.getSystem().getForces() if isinstance(f, openmm.NonbondedForce))
    alpha, nx, ny, nz = nb.getPMEParametersInContext(ctx)
    return alpha, (nx, ny, nz)


@pytest.fixture(scope="module")
def built_peptide():
    return solvated_peptide(box=2.2, cutoff=0.8)


@pytest.fixture
def peptide(built_peptide):
    """Alanine dipeptide in 2.2 nm of TIP3P (985 atoms, amber14, HBonds): a fresh System each test."""
    topology, system, positions = built_peptide
    return topology, openmm.XmlSerializer.clone(system), positions


@pytest.mark.parametrize("case", ["water-scaled-pairs", "peptide-amber14"])
def test_same_parameters_as_openmm_give_openmm_energy_and_forces(case, peptide):
    """With OpenMM's own alpha, mesh and order 5, the System with PMEForce gives OpenMM's PME
    energy and forces to rounding: LJ, bonded terms and 1-4 LJ kept, the charges moved to pmewald,
    every exception excluded and the scaled 1-4 Coulomb added back (amber14: 1/1.2)."""
    if case == "peptide-amber14":
        _, system, pos = peptide
    else:
        system, pos = water_box_system(64, cutoff=0.6, alpha=3.4, mesh=(20, 20, 20), scaled_pairs=True, bonded=True)
    original = openmm.XmlSerializer.clone(system)
    alpha, mesh = _pme_parameters(system, pos)
    e0, f0 = _reference(original, pos)
    pme = PMEForce(system, alpha=alpha, mesh=mesh, order=5, comm=MPI.COMM_SELF)
    assert len(pme.model.scaled) > 0
    nb = next(f for f in system.getForces() if isinstance(f, openmm.NonbondedForce))
    assert nb.getNonbondedMethod() == openmm.NonbondedForce.CutoffPeriodic
    assert all(nb.getParticleParameters(i)[0].value_in_unit(unit.elementary_charge) == 0.0 for i in range(10))
    e1, f1 = _reference(system, pos)
    assert abs(e1 - e0) <= 1e-9 * abs(e0), (e0, e1)
    assert _rms(f1, f0) <= 1e-9
    assert pme.calls == 1  # energy and forces of one State: one call


def test_forces_agree_with_openmm_within_tolerance(peptide):
    """pmewald at its own automatic parameters (tolerance 1e-4) against OpenMM's PME at
    ewaldErrorTolerance 1e-7: the electrostatic forces' relative RMS error is within the
    tolerance."""
    _, system, pos = peptide
    tight = openmm.XmlSerializer.clone(system)
    next(f for f in tight.getForces() if isinstance(f, openmm.NonbondedForce)).setEwaldErrorTolerance(1e-7)
    lj_only = openmm.XmlSerializer.clone(system)
    from pmewald.interfaces.openmm_force import take_over_electrostatics

    take_over_electrostatics(lj_only)
    _, f_ref = _reference(tight, pos)
    _, f_lj = _reference(lj_only, pos)
    pme = PMEForce(system, tolerance=1e-4, comm=MPI.COMM_SELF)
    _, f = _reference(system, pos)
    error = _rms(f - f_lj, f_ref - f_lj)
    assert error <= 1e-4, error
    assert pme.parameters["differentiation"] == "ad" and pme.parameters["tolerance"] == 1e-4


def _run(system, pos, steps, reporter=None):
    """`steps` of velocity Verlet (0.5 fs) on the Reference platform from `pos` with velocities
    at 300 K (seed 7); the final positions (nm)."""
    sim = app.Simulation(app.Topology(), system, openmm.VerletIntegrator(0.0005 * unit.picoseconds),
                         openmm.Platform.getPlatformByName("Reference"))
    if reporter is not None:
        sim.reporters.append(reporter)
    sim.context.setPositions(pos)
    sim.context.setVelocitiesToTemperature(300 * unit.kelvin, 7)
    sim.step(steps)
    return sim.context.getState(getPositions=True).getPositions(asNumpy=True).value_in_unit(unit.nanometer)


@pytest.mark.mpi(ranks=[1, 2])
@pytest.mark.timeout(120)
def test_simulation_on_ranks_equals_one_rank(comm):
    """A Simulation with a StateDataReporter (flexible water with scaled H-H exceptions): rank 0
    runs OpenMM, the others serve; 20 steps on the communicator's ranks equal 20 steps with a
    one-rank PMEForce to 1e-10 nm, and every call of the driver was served."""
    system, pos = water_box_system(64, cutoff=0.6, bonded=True, scaled_pairs=True)
    system0 = openmm.XmlSerializer.clone(system)
    with PMEForce(system, tolerance=1e-5, comm=comm) as pme:
        if pme.is_driver:
            out = io.StringIO()
            x = _run(system, pos, 20, app.StateDataReporter(out, 10, step=True, potentialEnergy=True))
            assert len(out.getvalue().splitlines()) == 3  # header and steps 10, 20
            served = None
        else:
            served = pme.serve()
            assert pme.errors == []
    assert comm.bcast(pme.calls, root=0) == pme.calls >= 21  # every call of the driver served
    assert served in (None, pme.calls)
    if comm.Get_rank() == 0:
        single = openmm.XmlSerializer.clone(system0)
        with PMEForce(single, tolerance=1e-5, comm=MPI.COMM_SELF) as one:
            y = _run(single, pos, 20)
        assert one.parameters["mesh"] == pme.parameters["mesh"]
        assert np.abs(x - y).max() <= 1e-10
    assert pme.closed


def test_follows_the_barostat():
    """A Monte Carlo barostat every step on a small water box: the box changes, and the
    PMEForce energy in the final box equals OpenMM's PME there (same alpha and mesh)."""
    system, pos = water_box_system(64, cutoff=0.6, alpha=3.4, mesh=(20, 20, 20), bonded=True)
    original = openmm.XmlSerializer.clone(system)
    pme = PMEForce(system, alpha=3.4, mesh=(20, 20, 20), order=5, comm=MPI.COMM_SELF)
    system.addForce(openmm.MonteCarloBarostat(1000 * unit.bar, 300 * unit.kelvin, 1))
    integ = openmm.LangevinMiddleIntegrator(300 * unit.kelvin, 1 / unit.picosecond, 0.0005 * unit.picoseconds)
    ctx = openmm.Context(system, integ, openmm.Platform.getPlatformByName("Reference"))
    ctx.setPositions(pos)
    box0 = ctx.getState().getPeriodicBoxVectors(asNumpy=True).value_in_unit(unit.nanometer)
    integ.step(40)
    st = ctx.getState(getPositions=True, getEnergy=True)
    box = st.getPeriodicBoxVectors(asNumpy=True).value_in_unit(unit.nanometer)
    assert not np.allclose(box, box0)
    x = st.getPositions(asNumpy=True)
    e0, _ = _reference(original, x, box=st.getPeriodicBoxVectors())
    e1 = st.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole)
    assert abs(e1 - e0) <= 1e-9 * abs(e0)
    np.testing.assert_array_equal(pme.parameters["box"], box)


def test_virtual_sites_tip4p():
    """TIP4P-Ew (a massless charged virtual site per water, an uncharged oxygen): the oxygen is
    left out of pmewald's call and OpenMM spreads the site's force onto its atoms; energy and
    forces equal OpenMM's PME."""
    ff = app.ForceField("tip4pew.xml")
    modeller = app.Modeller(app.Topology(), [])
    modeller.addSolvent(ff, model="tip4pew", boxSize=openmm.Vec3(1.6, 1.6, 1.6) * unit.nanometer)
    system = ff.createSystem(modeller.topology, nonbondedMethod=app.PME, nonbondedCutoff=0.7 * unit.nanometer)
    pos = modeller.positions
    alpha, mesh = _pme_parameters(system, pos)
    e0, f0 = _reference(openmm.XmlSerializer.clone(system), pos)
    pme = PMEForce(system, alpha=alpha, mesh=mesh, order=5, comm=MPI.COMM_SELF)
    assert len(pme._charged) == 3 * system.getNumParticles() // 4
    e1, f1 = _reference(system, pos)
    assert abs(e1 - e0) <= 1e-9 * abs(e0)
    assert _rms(f1, f0) <= 1e-9


@pytest.mark.mpi(ranks=[1, 2])
def test_bad_systems_raise_on_every_rank(comm):
    system, _ = water_box_system(64, cutoff=0.4)
    system.getForce(0).setNonbondedMethod(openmm.NonbondedForce.NoCutoff)
    with pytest.raises(ValueError, match="PME or LJPME"):
        PMEForce(system, comm=comm)
    with pytest.raises(ValueError, match="exactly one NonbondedForce"):
        PMEForce(openmm.System(), comm=comm)
    system, _ = water_box_system(64, cutoff=0.4)
    system.getForce(0).addGlobalParameter("lambda", 1.0)
    system.getForce(0).addParticleParameterOffset("lambda", 0, 0.1, 0.0, 0.0)
    with pytest.raises(NotImplementedError, match="offsets"):
        PMEForce(system, comm=comm)
    system, _ = water_box_system(64, cutoff=0.4)
    PMEForce(system, comm=MPI.COMM_SELF)
    with pytest.raises(ValueError, match="already has"):
        PMEForce(system, comm=comm)


@pytest.mark.mpi(ranks=[2])
def test_roles_and_errors_of_a_call(comm):
    """Only rank 0 computes, only the others serve; a bad call (the cutoff no longer fits the
    box) raises on the driver and is kept by the server, which goes on serving."""
    system, pos = water_box_system(64, cutoff=0.6)
    with PMEForce(system, tolerance=1e-4, comm=comm) as pme:
        box = pme.model.box
        if pme.is_driver:
            with pytest.raises(RuntimeError, match="rank 0"):
                pme.serve()
            e, f = pme.compute(pos, box)
            assert f.shape == pos.shape and np.isfinite(e)
            with pytest.raises(ValueError, match="cutoff"):
                pme.compute(pos, box * 0.5)
            e2, _ = pme.compute(pos, box)
            assert e2 == e
        else:
            with pytest.raises(RuntimeError, match="rank 0"):
                pme.compute(pos, box)
            assert pme.serve() == 3
            assert len(pme.errors) == 1 and "cutoff" in str(pme.errors[0])
