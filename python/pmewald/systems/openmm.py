"""An OpenMM ``System`` of the water box (:func:`pmewald.systems.water_box`), for comparisons and MD
with OpenMM (examples/openmm_*.py, tests/interfaces/test_openmm.py). Needs ``openmm``."""

from __future__ import annotations

import math
import random

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


# Ideal peptide geometry (Angstrom, degrees) for the heavy atoms of ACE-(ALA)n-NME, built by
# placing each atom from three earlier ones (bond, angle, dihedral); hydrogens come from
# openmm.app.Modeller.addHydrogens.
_BOND = {"N-CA": 1.458, "CA-C": 1.525, "C-N": 1.329, "C-O": 1.231, "CA-CB": 1.530, "CH3-C": 1.520,
         "N-CH3": 1.458}
_ANGLE = {"N-CA-C": 111.2, "CA-C-N": 116.2, "C-N-CA": 121.7, "CA-C-O": 120.8, "N-CA-CB": 110.5}


def _place(a, b, c, bond, angle, dihedral):
    """The point d with |cd| = bond, angle bcd and dihedral abcd (degrees)."""
    import numpy as np

    ang, dih = math.radians(angle), math.radians(dihedral)
    bc = (c - b) / np.linalg.norm(c - b)
    n = np.cross(b - a, bc)
    n /= np.linalg.norm(n)
    m = np.cross(n, bc)
    d2 = np.array([-bond * math.cos(ang), bond * math.sin(ang) * math.cos(dih), bond * math.sin(ang) * math.sin(dih)])
    return c + d2[0] * bc + d2[1] * m + d2[2] * n


def _peptide_heavy_atoms(n_residues, phi=-120.0, psi=130.0):
    """[(residue name, atom name, element, position in Angstrom)] of ACE-(ALA)n-NME, extended."""
    import numpy as np

    atoms = [("ACE", "CH3", "C", np.array([0.0, 0.0, 0.0])), ("ACE", "C", "C", np.array([1.52, 0.0, 0.0]))]
    prev_ca, prev_c = atoms[0][3], atoms[1][3]
    anchor = np.array([0.0, 1.0, 0.0])  # fixes the chain's plane
    n = _place(anchor, prev_ca, prev_c, _BOND["C-N"], _ANGLE["CA-C-N"], 180.0)
    atoms.append(("ACE", "O", "O", _place(n, prev_ca, prev_c, _BOND["C-O"], _ANGLE["CA-C-O"], 180.0)))
    prev_n = anchor
    for _ in range(n_residues):
        ca = _place(prev_ca, prev_c, n, _BOND["N-CA"], _ANGLE["C-N-CA"], 180.0)
        c = _place(prev_c, n, ca, _BOND["CA-C"], _ANGLE["N-CA-C"], phi)
        cb = _place(c, n, ca, _BOND["CA-CB"], _ANGLE["N-CA-CB"], -122.5)
        n_next = _place(n, ca, c, _BOND["C-N"], _ANGLE["CA-C-N"], psi)
        o = _place(n_next, ca, c, _BOND["C-O"], _ANGLE["CA-C-O"], 180.0)
        atoms += [("ALA", "N", "N", n), ("ALA", "CA", "C", ca), ("ALA", "CB", "C", cb), ("ALA", "C", "C", c),
                  ("ALA", "O", "O", o)]
        prev_n, prev_ca, prev_c, n = n, ca, c, n_next
    ch3 = _place(prev_ca, prev_c, n, _BOND["N-CH3"], _ANGLE["C-N-CA"], 180.0)
    atoms += [("NME", "N", "N", n), ("NME", "C", "C", ch3)]
    del prev_n
    return atoms


def solvated_peptide(n_residues=1, box=3.0, forcefield=("amber14-all.xml", "amber14/tip3p.xml"),
                     cutoff=0.9, ewald_error_tolerance=5e-4, constraints="HBonds", minimize=True):
    """A capped alanine peptide ACE-(ALA)n-NME in TIP3P water, built with OpenMM's own tools:
    ideal extended heavy-atom geometry, ``Modeller.addHydrogens`` and ``addSolvent`` (a cubic
    box of edge ``box`` nm), the ``forcefield`` files (default amber14 + TIP3P), PME with
    ``cutoff`` (nm) and ``ewald_error_tolerance``, ``constraints`` (an ``openmm.app`` name,
    rigid water) and, with ``minimize``, a local energy minimisation (100 iterations, with
    reaction-field electrostatics on one CPU thread: the same result every time), so that MD
    can start from it. Deterministic: the same positions on every call and every rank.

    Returns ``(topology, system, positions)``: positions an (n, 3) array in nm. One residue
    (alanine dipeptide) in a 3 nm box: 2,656 atoms.
    """
    import numpy as np
    import openmm
    from openmm import app, unit

    top = app.Topology()
    chain = top.addChain()
    pos, residue, last = [], None, None
    for res_name, name, element, xyz in _peptide_heavy_atoms(int(n_residues)):
        if residue is None or res_name != last or name == "N" and res_name == "ALA":
            residue, last = top.addResidue(res_name, chain), res_name
        top.addAtom(name, app.Element.getBySymbol(element), residue)
        pos.append(xyz / 10.0)
    for res in top.residues():  # bonds within each residue, then the peptide bond to the next
        a = {x.name: x for x in res.atoms()}
        for x, y in (("CH3", "C"), ("C", "O"), ("N", "CA"), ("CA", "CB"), ("CA", "C"), ("N", "C")):
            if x in a and y in a and not (res.name == "ALA" and (x, y) == ("N", "C")):
                top.addBond(a[x], a[y])
    residues = list(top.residues())
    for r0, r1 in zip(residues[:-1], residues[1:]):
        top.addBond(next(x for x in r0.atoms() if x.name == "C"), next(x for x in r1.atoms() if x.name == "N"))
    ff = app.ForceField(*forcefield)
    modeller = app.Modeller(top, np.array(pos) * unit.nanometer)
    # Modeller places hydrogens at random (Python's random) and then minimises them: both seeded
    # and on the Reference platform, the caller's random state restored, so every build is the same.
    state = random.getstate()
    try:
        random.seed(2029)
        modeller.addHydrogens(ff, platform=openmm.Platform.getPlatformByName("Reference"))
    finally:
        random.setstate(state)
    modeller.addSolvent(ff, model="tip3p", boxSize=openmm.Vec3(box, box, box) * unit.nanometer)
    system = ff.createSystem(modeller.topology, nonbondedMethod=app.PME, nonbondedCutoff=cutoff * unit.nanometer,
                             constraints=getattr(app, constraints) if constraints else None, rigidWater=True,
                             ewaldErrorTolerance=ewald_error_tolerance)
    positions = np.array(modeller.positions.value_in_unit(unit.nanometer))
    if minimize:
        # Relaxed with reaction-field electrostatics (no mesh), which is all a starting structure
        # needs, on one CPU thread: fast and the same every time (PME on the CPU platform is not).
        relax = openmm.XmlSerializer.clone(system)
        for f in relax.getForces():
            if isinstance(f, openmm.NonbondedForce):
                f.setNonbondedMethod(openmm.NonbondedForce.CutoffPeriodic)
        ctx = openmm.Context(relax, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("CPU"),
                             {"Threads": "1"})
        ctx.setPositions(positions)
        openmm.LocalEnergyMinimizer.minimize(ctx, 10.0, 100)
        positions = ctx.getState(getPositions=True).getPositions(asNumpy=True).value_in_unit(unit.nanometer)
        del ctx
    return modeller.topology, system, np.asarray(positions)
