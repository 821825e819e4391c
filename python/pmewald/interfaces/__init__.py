"""pmewald inside other programs: :mod:`pmewald.interfaces.ase` (an ASE calculator) and
:mod:`pmewald.interfaces.openmm` (an OpenMM System's electrostatics). Each imports its
program only when it is imported itself; ``pmewald.ase`` and ``pmewald.openmm`` are the same
modules under their documented short names.
"""
