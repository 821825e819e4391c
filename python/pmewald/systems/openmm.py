"""An OpenMM ``System`` of the water box (:func:`pmewald.systems.water_box`), for comparisons and MD
with OpenMM (examples/openmm_*.py, tests/interfaces/test_openmm.py). Needs ``openmm``."""

from __future__ import annotations

import math

from . import water_box


def water_box_system(n_molecules=64, cutoff=0.6, alpha=None, mesh=None, ewald_error_tolerance=5e-4, seed=0,
                     bonded=False, scaled_pairs=False):
    """An OpenMM System for :func:`pmewald.systems.water_box` (converted to nm) and its positions.

    NonbondedForce with PME (charges from the water box; LJ on oxygen, SPC/E-like sigma
    0.3166 nm, epsilon 0.650 kJ/mol), exceptions with chargeProd 0 for the three
    intramolecular pairs. ``bonded=True`` adds harmonic O-H bonds and H-O-H angles
    (flexible water for MD). ``scaled_pairs=True`` gives the H-H exception a non-zero
    chargeProd (half of q_H^2) to exercise the scaled-exception path.
    Returns ``(system, positions_nm)``.
    """
    import openmm


    wb = water_box(n_molecules, seed=seed)
    box = wb.box / 10.0
    pos = wb.positions / 10.0
    system = openmm.System()
    system.setDefaultPeriodicBoxVectors(*[openmm.Vec3(*row) for row in box])
    nb = openmm.NonbondedForce()
    nb.setNonbondedMethod(openmm.NonbondedForce.PME)
    nb.setCutoffDistance(cutoff)
    nb.setUseDispersionCorrection(False)
    nb.setEwaldErrorTolerance(ewald_error_tolerance)
    if alpha is not None:
        nb.setPMEParameters(alpha, *mesh)
    for k, q in enumerate(wb.charges):
        oxygen = k % 3 == 0
        system.addParticle(15.999 if oxygen else 1.008)
        nb.addParticle(float(q), 0.3166 if oxygen else 0.1, 0.650 if oxygen else 0.0)
    for i, j in wb.exclusions:
        qq = 0.0
        if scaled_pairs and i % 3 and j % 3:
            qq = 0.5 * wb.charges[i] * wb.charges[j]
        nb.addException(int(i), int(j), qq, 0.1, 0.0)
    system.addForce(nb)
    if bonded:
        bonds, angles = openmm.HarmonicBondForce(), openmm.HarmonicAngleForce()
        for m in range(0, len(wb.charges), 3):
            bonds.addBond(m, m + 1, 0.1, 345000.0)
            bonds.addBond(m, m + 2, 0.1, 345000.0)
            angles.addAngle(m + 1, m, m + 2, math.radians(109.47), 383.0)
        system.addForce(bonds)
        system.addForce(angles)
    return system, pos
