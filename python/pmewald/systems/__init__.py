"""Deterministic test systems for validating Ewald/PME solvers.

Every generator returns a :class:`System` whose ``box`` rows are the lattice
vectors (the convention of :func:`pmewald.reference.ewald`).  Atom ids are
``0..n-1`` in storage order, so ids double as indices; ``exclusions`` lists
pairs of ids.  Random systems are reproducible from their ``seed``.

Crystals carry ``nearest_neighbor_distance`` (``r0``, the nearest
cation-anion distance) and ``madelung_reference`` (the literature Madelung
constant ``M``), defined by ``E = -M k z^2 N_pairs / r0`` with ``N_pairs`` the
number of cation-anion pairs (half the number of ions) and ``z`` the ionic
charge.

One module per kind, all re-exported here: ``system`` (:class:`System`, :func:`displace`, :func:`replicate`),
``crystals``, ``charges`` (:func:`random_charges`), ``water`` (:func:`water_box`),
``chains`` (:func:`solvated_chains`), ``lammps_data`` (:func:`read_lammps_data`) and
``openmm`` (the water box as an OpenMM ``System``; needs ``openmm``, not imported here).
"""

from __future__ import annotations

from .chains import solvated_chains
from .charges import random_charges
from .crystals import MADELUNG_CONSTANTS, caesium_chloride, rock_salt, triclinic_box, wurtzite, zinc_blende
from .lammps_data import read_lammps_data
from .system import System, displace, replicate
from .water import water_box

__all__ = [
    "System",
    "MADELUNG_CONSTANTS",
    "rock_salt",
    "caesium_chloride",
    "zinc_blende",
    "wurtzite",
    "water_box",
    "random_charges",
    "triclinic_box",
    "displace",
    "replicate",
    "solvated_chains",
    "read_lammps_data",
]
