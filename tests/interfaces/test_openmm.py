"""pmewald.interfaces.openmm: problem built from an OpenMM System, agreement with OpenMM's Reference PME."""

import numpy as np
import pytest

openmm = pytest.importorskip("openmm")

from pmewald import units  # noqa: E402
from pmewald.interfaces.openmm import compare_with_openmm, from_openmm  # noqa: E402
from pmewald.systems.openmm import water_box_system  # noqa: E402
from pmewald.systems import water_box  # noqa: E402


def test_from_openmm_reads_charges_exceptions_and_pme_parameters():
    system, pos = water_box_system(64, cutoff=0.6, alpha=3.1, mesh=(18, 20, 24), scaled_pairs=True)
    p = from_openmm(system, pos)
    wb = water_box(64)
    np.testing.assert_allclose(p.charges, wb.charges)
    np.testing.assert_allclose(p.positions, wb.positions / 10)
    np.testing.assert_allclose(p.box, wb.box / 10)
    assert sorted(map(tuple, p.exclusions.tolist())) == sorted(map(tuple, wb.exclusions.tolist()))
    assert len(p.scaled_pairs) == 64  # the H-H pair of each molecule
    np.testing.assert_allclose(p.scaled_charge_products, 0.5 * 0.4238 ** 2)
    assert (p.alpha, p.mesh, p.order, p.cutoff) == (3.1, (18, 20, 24), 5, 0.6)
    assert p.coulomb_constant == units.KJ_MOL_NM
    # automatic parameters: what OpenMM's Reference platform uses
    auto_sys, _ = water_box_system(64, cutoff=0.6)
    auto = from_openmm(auto_sys, pos)
    ctx = openmm.Context(auto_sys, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("Reference"))
    alpha, nx, ny, nz = auto_sys.getForce(0).getPMEParametersInContext(ctx)
    assert (auto.alpha, auto.mesh) == (alpha, (nx, ny, nz))


@pytest.mark.parametrize("kw", [dict(), dict(alpha=3.4, mesh=(20, 20, 20)), dict(scaled_pairs=True)],
                         ids=["auto", "explicit", "scaled-exceptions"])
def test_agrees_with_openmm_reference_pme(kw):
    system, pos = water_box_system(64, cutoff=0.6, **kw)
    r = compare_with_openmm(system, pos)
    assert r.order == 5
    assert r.relative_energy_difference < 1e-6, r
    assert r.relative_rms_force_difference < 1e-5, r


def test_rejects_non_pme_systems():
    system, pos = water_box_system(8, cutoff=0.4)
    system.getForce(0).setNonbondedMethod(openmm.NonbondedForce.CutoffPeriodic)
    with pytest.raises(ValueError, match="PME"):
        from_openmm(system, pos)
    system.addForce(openmm.NonbondedForce())
    with pytest.raises(ValueError, match="exactly one"):
        from_openmm(system, pos)


@pytest.mark.mpi(ranks=[1, 2])
def test_agrees_with_openmm_on_ranks(comm):
    system, pos = water_box_system(64, cutoff=0.6, scaled_pairs=True)
    r = compare_with_openmm(system, pos, comm=comm)
    assert r.relative_energy_difference < 1e-6
    assert r.relative_rms_force_difference < 1e-5
    root = comm.bcast(r.forces_pmewald, root=0)
    assert np.array_equal(root, r.forces_pmewald)


@pytest.mark.mpi(ranks=[1, 2])
def test_potentials_are_charge_derivatives_of_openmm_energy(comm):
    """OpenMMProblem.potentials: phi_i equals the central difference of OpenMM's own
    Reference-platform energy in q_i (updateParametersInContext; what OpenMM cannot give
    directly), energies sum to compute()'s energy; with scaled 1-4-type exceptions phi_i
    is dE/dq_i with chargeProd scaling with the charges; the same on every rank."""
    import dataclasses

    from openmm import unit

    system, pos = water_box_system(64, cutoff=0.6, alpha=3.4, mesh=(20, 20, 20))
    p = from_openmm(system, pos)
    phi, energies = p.potentials(comm=comm)
    e, _ = p.compute(comm=comm)
    assert abs(energies.sum() - e) <= 1e-10 * np.abs(energies).sum()
    nb = system.getForce(0)
    ctx = openmm.Context(system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("Reference"))
    ctx.setPositions(pos)
    h = 1e-3
    for i in (0, 1, 100):
        q0, sig, eps = nb.getParticleParameters(i)
        e2 = []
        for sign in (1, -1):
            nb.setParticleParameters(i, q0 + sign * h * unit.elementary_charge, sig, eps)
            nb.updateParametersInContext(ctx)
            e2.append(ctx.getState(getEnergy=True).getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole))
        nb.setParticleParameters(i, q0, sig, eps)
        assert abs((e2[0] - e2[1]) / (2 * h) - phi[i]) <= 2e-5 * abs(phi[i]), (i, phi[i])
    # scaled exceptions: chargeProd = s q_i q_j moves with q_i
    system, pos = water_box_system(64, cutoff=0.6, alpha=3.4, mesh=(20, 20, 20), scaled_pairs=True)
    p = from_openmm(system, pos)
    phi, _ = p.potentials(comm=comm)
    i = int(p.scaled_pairs[0, 0])
    e2 = []
    for sign in (1, -1):
        q = p.charges.copy()
        q[i] += sign * h
        scale = np.where((p.scaled_pairs == i).any(axis=1), q[i] / p.charges[i], 1.0)
        e2.append(dataclasses.replace(p, charges=q, scaled_charge_products=p.scaled_charge_products * scale)
                  .compute(comm=comm)[0])
    assert abs((e2[0] - e2[1]) / (2 * h) - phi[i]) <= 1e-7 * abs(phi[i])
    assert np.array_equal(comm.bcast(phi, root=0), phi)
