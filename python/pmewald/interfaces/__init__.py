"""pmewald inside other programs (docs/engines.md, docs/ase_openmm.md). Each module imports its
program only when it is imported or used itself:

- :mod:`pmewald.interfaces.ase`: an ASE calculator;
- :mod:`pmewald.interfaces.openmm`: an OpenMM System as a pmewald problem, compared with OpenMM's PME;
- :mod:`pmewald.interfaces.openmm_force`: ``PMEForce``, pmewald's electrostatics as a force of an
  OpenMM System, for ``Simulation`` runs on any number of ranks;
- :mod:`pmewald.interfaces.lammps`: ``attach``, pmewald as a LAMMPS run's long-range solver on
  LAMMPS's ranks and atom split;
- :mod:`pmewald.interfaces.autograd`: the energy as a differentiable function of positions,
  charges and cell (first derivatives, per rank), wrapped by :mod:`pmewald.interfaces.jax` and
  :mod:`pmewald.interfaces.torch`;
- ``_pairs``: the plain Coulomb terms of listed pairs (scaled 1-4) that OpenMM and LAMMPS share.

``pmewald.ase``, ``pmewald.openmm`` and ``pmewald.lammps`` are the same modules under short names.
"""
