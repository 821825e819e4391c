"""ASE calculator for pmewald: periodic electrostatics in eV and Angstrom.

Usage::

    from ase.build import bulk
    from pmewald.interfaces.ase import PMECalculator

    atoms = bulk("NaCl", "rocksalt", a=5.64, cubic=True).repeat(3)
    atoms.set_initial_charges([+1 if s == "Na" else -1 for s in atoms.get_chemical_symbols()])
    atoms.calc = PMECalculator(cutoff=8.0, tolerance=1e-5)
    atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress()

Units: energies in eV, forces in eV/Angstrom, stress in eV/Angstrom^3 (ASE's units);
charges in elementary charges; the Coulomb constant is
:data:`pmewald.units.EV_ANGSTROM`.

Stress: ASE's Voigt 6-vector ``(xx, yy, zz, yz, xz, xy)`` of
``sigma = (1/V) dE/d(eps) = -W / V`` with ``W`` pmewald's virial (``W = -dE/d(eps)``
for the homogeneous strain of positions and cell, see ``docs/theory.md``).

MPI: ASE's convention is that every rank holds the whole :class:`ase.Atoms`. The
calculator gives rank ``r`` of ``P`` the contiguous share of atoms
``[r*n//P, (r+1)*n//P)``, computes, and all-gathers the forces, so every rank
gets the full, identical results. Every rank must call the calculator
(it is collective), as ASE's parallel scripts do.

Per-atom results (computed only when asked for, ``potentials=True`` of
:meth:`pmewald.PME.compute`): ``atoms.get_potential_energies()`` (eV, ``q_i phi_i / 2``,
summing to the energy), ``atoms.get_charges()`` (the charges used, e), and
``calc.get_electrostatic_potentials(atoms)`` (``phi_i = dE/dq_i`` in eV/e, i.e. volts;
every term: real, reciprocal, self, background). They cost one more gather from the mesh
and a potential pass in the pair loop (docs/potentials.md).

The :class:`pmewald.PME` solver is kept between calls. A new cell is passed to
:meth:`pmewald.PME.set_box` (NPT-style; with an automatic mesh the mesh is
re-chosen only if the tolerance is no longer met); the solver is rebuilt only
when the number of atoms or the options change. A cell in which the cutoff no
longer fits (more than half the smallest cell height) raises ``ValueError``.
"""

from __future__ import annotations

import numpy as np
from ase.calculators.calculator import Calculator, PropertyNotImplementedError, all_changes

from .. import units
from ..pme import PME

__all__ = ["PMECalculator", "BornMayer", "voigt_stress"]


def voigt_stress(virial, volume):
    """ASE's stress Voigt 6-vector (xx, yy, zz, yz, xz, xy) = -W/V from a virial W."""
    s = -0.5 * (np.asarray(virial, dtype=float) + np.asarray(virial, dtype=float).T) / volume
    return np.array([s[0, 0], s[1, 1], s[2, 2], s[1, 2], s[0, 2], s[0, 1]])


class PMECalculator(Calculator):
    """Smooth particle-mesh Ewald electrostatics as an ASE calculator.

    Parameters
    ----------
    cutoff : float, "auto" or ("auto", lower bound)
        Real-space cutoff in Angstrom (at most half the smallest cell height); ``"auto"``
        has it chosen by timing the first calls (:class:`pmewald.PME`), worth it over a
        geometry optimisation or MD run of some hundred steps.
    tolerance : float
        Target relative RMS force error (see :class:`pmewald.PME`).
    comm : mpi4py communicator, optional
        Defaults to ``MPI.COMM_WORLD``. Every rank of it must hold the same Atoms.
    comm_mode : str
        ``"pt2pt"``, ``"nonblocking"`` or ``"collective"``.
    charges : array (n,), optional
        Charges in e. Default: ``atoms.get_initial_charges()``.
    **pme_options
        Passed on to :class:`pmewald.PME`: ``alpha`` (1/Angstrom), ``mesh``,
        ``order``, ``differentiation`` (default ``"auto"``: the cheaper of ``"ad"`` and
        ``"ik"``; pass ``"ad"`` for forces that are the exact gradient of the energy, e.g.
        long NVE runs). ``coulomb_constant`` may be given to use other units (default
        eV*Angstrom).

    Results: ``energy`` and ``free_energy`` (eV, equal), ``forces`` (eV/Angstrom),
    ``stress`` (eV/Angstrom^3, Voigt order).

    Per-atom results, computed only when asked for: ``energies`` (eV), ``charges`` (e)
    and ``electrostatic_potentials`` (eV/e), the last through the method
    ``get_electrostatic_potentials``.
    """

    implemented_properties = ["energy", "free_energy", "forces", "stress", "energies", "charges",
                              "electrostatic_potentials"]
    _PER_ATOM = ("energies", "charges", "electrostatic_potentials")
    discard_results_on_any_change = True

    def __init__(self, cutoff, tolerance=1e-5, comm=None, comm_mode="nonblocking", charges=None,
                 label=None, **pme_options):
        Calculator.__init__(self, label=label)
        # "auto" and ("auto", lo) go to PME as given (it checks them); a length as a float.
        cutoff = tuple(cutoff) if isinstance(cutoff, (tuple, list)) else (
            cutoff if isinstance(cutoff, str) else float(cutoff))
        self.parameters.update(cutoff=cutoff, tolerance=float(tolerance), comm_mode=comm_mode,
                               **pme_options)
        self.comm = comm
        self._charges = None if charges is None else np.array(charges, dtype=float).reshape(-1)
        self.pme = None
        self._pme_key = None
        self._pme_cell = None
        self.builds = 0  # how many times a PME solver was constructed (for tests/diagnostics)

    # ASE's Calculator.set() returns the changed parameters and resets results;
    # the solver is rebuilt lazily when the options differ from the ones it was built with.
    def set(self, **kwargs):
        if "charges" in kwargs:
            q = kwargs.pop("charges")
            self._charges = None if q is None else np.array(q, dtype=float).reshape(-1)
            self.reset()
        return Calculator.set(self, **kwargs)

    def _comm(self):
        if self.comm is None:
            from mpi4py import MPI

            self.comm = MPI.COMM_WORLD
        return self.comm

    def _options(self):
        opts = dict(self.parameters)
        cutoff = opts.pop("cutoff")
        opts.setdefault("coulomb_constant", units.EV_ANGSTROM)
        return cutoff, opts

    def _solver(self, cell, n):
        cutoff, opts = self._options()
        key = (n, repr(sorted((k, np.asarray(v).tolist() if isinstance(v, (list, tuple, np.ndarray)) else v)
                              for k, v in opts.items())), cutoff)
        if self.pme is None or key != self._pme_key:
            self.pme = PME(cell, cutoff, comm=self._comm(), **opts)
            self._pme_key, self._pme_cell = key, cell.copy()
            self.builds += 1
        elif not np.array_equal(cell, self._pme_cell):
            self.pme.set_box(cell)  # ValueError (on every rank) if the cutoff no longer fits
            self._pme_cell = cell.copy()
        return self.pme

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        Calculator.calculate(self, atoms, properties, system_changes)
        atoms = self.atoms
        for p in properties:
            if p not in self.implemented_properties:
                raise PropertyNotImplementedError(p)
        if not all(atoms.pbc):
            raise ValueError(f"PMECalculator needs a cell periodic in all three directions, got pbc={atoms.pbc}")
        n = len(atoms)
        q = self._charges if self._charges is not None else atoms.get_initial_charges()
        q = np.asarray(q, dtype=float)
        if q.shape != (n,):
            raise ValueError(f"{n} atoms but {q.shape[0] if q.ndim == 1 else q.shape} charges")
        cell = np.array(atoms.cell.array, dtype=float)
        pme = self._solver(cell, n)

        comm = self._comm()
        rank, size = comm.Get_rank(), comm.Get_size()
        lo, hi = rank * n // size, (rank + 1) * n // size
        pos = atoms.get_positions()
        per_atom = any(p in self._PER_ATOM for p in properties)
        res = pme.compute(pos[lo:hi], q[lo:hi], ids=np.arange(lo, hi, dtype=np.int64), potentials=per_atom)

        from mpi4py import MPI

        def gather(local, width):
            out = np.empty((n, width), dtype=np.float64)
            counts = [((r + 1) * n // size - r * n // size) * width for r in range(size)]
            displs = [r * n // size * width for r in range(size)]
            comm.Allgatherv(np.ascontiguousarray(local, dtype=np.float64).reshape(-1, width),
                            [out, counts, displs, MPI.DOUBLE])
            return out

        volume = abs(np.linalg.det(cell))
        self.results = {
            "energy": res.energy,
            "free_energy": res.energy,
            "forces": gather(res.forces, 3),
            "stress": voigt_stress(res.virial, volume),
        }
        if per_atom:
            both = gather(np.column_stack((res.energies, res.potentials)), 2)
            self.results.update(energies=both[:, 0], electrostatic_potentials=both[:, 1], charges=q.copy())
        self.pme_result = res

    def get_electrostatic_potentials(self, atoms=None):
        """Per-atom electrostatic potential ``phi_i = dE/dq_i`` (eV/e, i.e. V), every term
        included (the potential of all other charges and their images, the self term and
        the neutralising background's). Collective under MPI like every other property."""
        return self.get_property("electrostatic_potentials", atoms)


class BornMayer(Calculator):
    """Short-range Born-Mayer repulsion ``u(r) = A exp(-r/rho)`` between every pair of atoms,
    shifted so that energy and force vanish at ``cutoff`` (energy conserving), for combining
    with :class:`PMECalculator` through ``ase.calculators.mixing.SumCalculator``.

    ``u_s(r) = A [exp(-r/rho) - exp(-rc/rho) + (r - rc)/rho * exp(-rc/rho)]`` for r < rc.

    ``A`` (eV) may be a scalar or a function ``A(Z_i, Z_j)`` of the atomic numbers; ``rho``
    and ``cutoff`` in Angstrom. Serial (every rank computes the whole, cheap sum).
    With ``A = M k rho exp(r0/rho) / (6 r0^2)`` (M the Madelung constant) a rock-salt
    crystal of unit charges with only nearest-neighbour repulsion is in equilibrium
    at the nearest-neighbour distance ``r0``.
    """

    implemented_properties = ["energy", "free_energy", "forces", "stress"]

    def __init__(self, A, rho, cutoff, **kwargs):
        Calculator.__init__(self, **kwargs)
        self.A, self.rho, self.cutoff = A, float(rho), float(cutoff)

    @staticmethod
    def rock_salt_prefactor(r0, rho, madelung=1.7475645946331821906, coulomb_constant=units.EV_ANGSTROM):
        """``A`` putting a unit-charge rock-salt crystal (nearest-neighbour repulsion only) in equilibrium at r0."""
        return madelung * coulomb_constant * rho * np.exp(r0 / rho) / (6.0 * r0 * r0)

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        from ase.neighborlist import neighbor_list

        Calculator.calculate(self, atoms, properties, system_changes)
        atoms = self.atoms
        i, j, d, D = neighbor_list("ijdD", atoms, self.cutoff)
        z = atoms.numbers
        A = self.A(z[i], z[j]) if callable(self.A) else self.A
        rho, rc = self.rho, self.cutoff
        ec = np.exp(-rc / rho)
        e = np.exp(-d / rho)
        u = A * (e - ec + (d - rc) / rho * ec)
        du = A * (-e + ec) / rho                     # du/dr
        fpair = (-du / d)[:, None] * D               # force on j from i (D = r_j - r_i)
        forces = np.zeros((len(atoms), 3))
        np.add.at(forces, j, fpair)                  # each pair appears twice (i,j) and (j,i)
        np.add.at(forces, i, -fpair)
        forces *= 0.5
        # stress = (1/V) dE/deps = (1/V) sum_pairs du/dr * D D^T / r  (each pair counted twice here)
        sigma = 0.5 * np.einsum("p,pa,pb->ab", du / d, D, D) / atoms.get_volume()
        self.results = {"energy": 0.5 * float(u.sum()), "free_energy": 0.5 * float(u.sum()), "forces": forces,
                        "stress": np.array([sigma[0, 0], sigma[1, 1], sigma[2, 2], sigma[1, 2], sigma[0, 2],
                                            sigma[0, 1]])}
