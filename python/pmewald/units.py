"""Coulomb constants for the unit systems supported by pmewald.

The electrostatic energy of two point charges ``q1`` and ``q2`` (in units of
the elementary charge, or in Gaussian charge units) a distance ``r`` apart is
``k * q1 * q2 / r`` where ``k`` is the Coulomb constant of the unit system:

=====================  ====================  ===============================
name                   value of ``k``        energy / length units
=====================  ====================  ===============================
``gaussian``           1                     Gaussian (reduced) units
``ev_angstrom``        14.3996454784         eV, Angstrom (ASE convention)
``kj_mol_nm``          138.93545764          kJ/mol, nm (OpenMM, GROMACS)
``kcal_mol_angstrom``  332.0637133           kcal/mol, Angstrom
=====================  ====================  ===============================

The SI-derived values are the CODATA 2018 based constants used by ASE,
OpenMM and LAMMPS-style codes.
"""

GAUSSIAN = 1.0
EV_ANGSTROM = 14.3996454784
KJ_MOL_NM = 138.93545764
KCAL_MOL_ANGSTROM = 332.0637133

#: Coulomb constants by unit-system name.
COULOMB_CONSTANTS = {
    "gaussian": GAUSSIAN,
    "ev_angstrom": EV_ANGSTROM,
    "kj_mol_nm": KJ_MOL_NM,
    "kcal_mol_angstrom": KCAL_MOL_ANGSTROM,
}

__all__ = [
    "GAUSSIAN",
    "EV_ANGSTROM",
    "KJ_MOL_NM",
    "KCAL_MOL_ANGSTROM",
    "COULOMB_CONSTANTS",
]
