"""Bridge to OpenMM: build a pmewald problem from an OpenMM ``System`` and compare with OpenMM's PME.

Units are OpenMM's: nm, kJ/mol, elementary charges; the Coulomb constant is
:data:`pmewald.units.KJ_MOL_NM` (138.93545764, OpenMM's ONE_4PI_EPS0).

What is taken from the ``NonbondedForce`` (there must be exactly one, with
``PME`` or ``LJPME``; only its electrostatics are used):

- particle charges;
- the cutoff, and OpenMM's PME parameters (alpha, mesh) as OpenMM actually uses them:
  ``getPMEParametersInContext`` of a Reference-platform context when a context is
  given or the force leaves them automatic (alpha = 0), else ``getPMEParameters``;
  order 5 (OpenMM's fixed PME order);
- exceptions. OpenMM removes every exception pair from the Ewald sum (the reciprocal
  part is subtracted as ``-k q_i q_j erf(alpha r)/r``) and then adds the exception's own
  interaction, plain Coulomb ``k chargeProd / r`` (no cutoff, no erfc). pmewald does the
  same: **every** exception becomes a pmewald exclusion (so ``k q_i q_j / r`` of the pair is
  removed from the Ewald total), and exceptions with non-zero ``chargeProd`` (e.g. scaled
  1-4 pairs) are listed in ``scaled_pairs`` and their ``k chargeProd / r`` is added back
  explicitly, with forces, by :meth:`OpenMMProblem.compute`. Their distance ``r`` is the
  minimum image when the force's ``getExceptionsUsePeriodicBoundaryConditions()`` is true,
  else the plain difference of the given positions (OpenMM's rule); pmewald's exclusion
  always uses the minimum image, so keep molecules whole (unwrapped) as OpenMM does.

Not supported (``NotImplementedError``): virtual sites, particle/exception parameter
offsets (OpenMM 7.3+ global-parameter offsets).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import units
from ..pme import PME

__all__ = ["OpenMMProblem", "from_openmm", "compare_with_openmm", "ComparisonResult"]


def _nm(x, shape=None):
    """Plain float array in nm from an OpenMM Quantity, a list of (Quantity) Vec3 or numbers."""
    from openmm import unit

    def strip(v):
        return v.value_in_unit(unit.nanometer) if unit.is_quantity(v) else v

    x = strip(x)
    if not isinstance(x, np.ndarray):
        x = [[float(c) for c in strip(v)] for v in x]
    a = np.array(x, dtype=np.float64)
    if shape is not None:
        a = a.reshape(shape)
    return a


def _nonbonded(system):
    import openmm

    found = [f for f in system.getForces() if isinstance(f, openmm.NonbondedForce)]
    if len(found) != 1:
        raise ValueError(f"the System must have exactly one NonbondedForce, it has {len(found)}")
    nb = found[0]
    if nb.getNonbondedMethod() not in (openmm.NonbondedForce.PME, openmm.NonbondedForce.LJPME):
        raise ValueError("the NonbondedForce must use PME (or LJPME)")
    if nb.getNumParticleParameterOffsets() or nb.getNumExceptionParameterOffsets():
        raise NotImplementedError("NonbondedForce parameter offsets are not supported")
    if any(system.isVirtualSite(i) for i in range(system.getNumParticles())):
        raise NotImplementedError("systems with virtual sites are not supported")
    return nb


@dataclass
class OpenMMProblem:
    """A pmewald electrostatics problem in OpenMM units (nm, kJ/mol, e).

    Attributes
    ----------
    box : ndarray (3, 3)
        Lattice vectors as rows, nm.
    positions : ndarray (n, 3)
        nm.
    charges : ndarray (n,)
        e.
    ids : ndarray (n,) of int64
        Particle indices.
    exclusions : ndarray (m, 2) of int64
        Every exception pair of the NonbondedForce.
    scaled_pairs : ndarray (s, 2) int64 and scaled_charge_products : ndarray (s,)
        The exceptions with non-zero ``chargeProd`` (added back as ``k chargeProd / r``).
    cutoff : float
        nm.
    alpha : float
        1/nm.
    mesh : tuple of 3 ints
    order : int
        5 (OpenMM's).
    exceptions_periodic : bool
        Whether exception distances use the minimum image (OpenMM's
        ``getExceptionsUsePeriodicBoundaryConditions``).
    """

    box: np.ndarray
    positions: np.ndarray
    charges: np.ndarray
    ids: np.ndarray
    exclusions: np.ndarray
    scaled_pairs: np.ndarray
    scaled_charge_products: np.ndarray
    cutoff: float
    alpha: float
    mesh: tuple
    order: int = 5
    exceptions_periodic: bool = False
    coulomb_constant: float = units.KJ_MOL_NM
    extra: dict = field(default_factory=dict)

    def pme(self, comm=None, **options) -> PME:
        """A :class:`pmewald.PME` with this problem's box, cutoff, alpha, mesh, order and units."""
        opts = dict(alpha=self.alpha, mesh=self.mesh, order=self.order, coulomb_constant=self.coulomb_constant)
        opts.update(options)
        return PME(self.box, self.cutoff, comm=comm, **opts)

    def compute(self, pme=None, comm=None, positions=None, box=None):
        """Electrostatic energy (kJ/mol) and forces (kJ/mol/nm, all atoms, on every rank).

        Collective: every rank holds the whole problem; rank r computes the contiguous
        share ``[r*n//P, (r+1)*n//P)`` and the forces are all-gathered. Returns
        ``(energy, forces)`` including the explicit scaled-exception Coulomb term.
        """
        from mpi4py import MPI

        pme, comm, pos, n, res = self._share(pme, comm, positions, box)
        size = comm.Get_size()
        forces = np.empty((n, 3))
        counts = [((r + 1) * n // size - r * n // size) * 3 for r in range(size)]
        displs = [r * n // size * 3 for r in range(size)]
        comm.Allgatherv(np.ascontiguousarray(res.forces), [forces, counts, displs, MPI.DOUBLE])
        e_pairs, f_pairs = self.scaled_pair_coulomb(pos, pme.parameters["box"])
        return res.energy + e_pairs, forces + f_pairs

    def potentials(self, pme=None, comm=None, positions=None, box=None):
        """Per-atom electrostatic potentials ``phi_i = dE/dq_i`` (kJ/mol/e) and energies
        ``q_i phi_i / 2`` (kJ/mol, summing to :meth:`compute`'s energy), all atoms, on every
        rank (collective, split as :meth:`compute`).

        The exceptions' own term ``k chargeProd / r`` is differentiated as the scaled charge
        product it is in force fields (``chargeProd = s q_i q_j``, a 1-4 scaling), so it adds
        ``k chargeProd / (q_i r)`` to ``phi_i``; an exception with non-zero ``chargeProd``
        on an atom of zero charge has no such derivative and raises ``ValueError``.
        Returns ``(potentials, energies)``.
        """
        from mpi4py import MPI

        if len(self.scaled_pairs):
            qi, qj = self.charges[self.scaled_pairs[:, 0]], self.charges[self.scaled_pairs[:, 1]]
            bad = np.flatnonzero((qi == 0) | (qj == 0))
            if len(bad):
                i, j = self.scaled_pairs[bad[0]]
                raise ValueError(f"exception ({i}, {j}) has chargeProd {self.scaled_charge_products[bad[0]]} "
                                 "but an atom of zero charge: its potential term is undefined")
        pme, comm, pos, n, res = self._share(pme, comm, positions, box, potentials=True)
        size = comm.Get_size()
        phi = np.empty(n)
        counts = [(r + 1) * n // size - r * n // size for r in range(size)]
        displs = [r * n // size for r in range(size)]
        comm.Allgatherv(np.ascontiguousarray(res.potentials), [phi, counts, displs, MPI.DOUBLE])
        if len(self.scaled_pairs):
            i, j = self.scaled_pairs[:, 0], self.scaled_pairs[:, 1]
            r = np.linalg.norm(self._pair_vectors(pos, pme.parameters["box"]), axis=1)
            e = self.coulomb_constant * self.scaled_charge_products / r
            np.add.at(phi, i, e / self.charges[i])
            np.add.at(phi, j, e / self.charges[j])
        return phi, 0.5 * self.charges * phi

    def _share(self, pme, comm, positions, box, potentials=False):
        """The collective call of compute and potentials: rank r of P computes the atoms
        ``[r*n//P, (r+1)*n//P)``. Returns (pme, its communicator, positions, n, result)."""
        if pme is None:
            pme = self.pme(comm=comm)
        comm = pme._comm
        pos = self.positions if positions is None else np.asarray(positions, dtype=np.float64)
        if box is not None:
            pme.set_box(box)
        n = len(self.charges)
        rank, size = comm.Get_rank(), comm.Get_size()
        lo, hi = rank * n // size, (rank + 1) * n // size
        res = pme.compute(pos[lo:hi], self.charges[lo:hi], ids=self.ids[lo:hi],
                          exclusions=self.exclusions if rank == 0 else None, potentials=potentials)
        return pme, comm, pos, n, res

    def _pair_vectors(self, pos, box=None):
        """r_i - r_j of the scaled pairs (the minimum image where OpenMM uses it)."""
        d = pos[self.scaled_pairs[:, 0]] - pos[self.scaled_pairs[:, 1]]
        if self.exceptions_periodic:
            from ..geometry.cell import minimum_image

            d = minimum_image(self.box if box is None else box, d)
        return d

    def scaled_pair_coulomb(self, positions=None, box=None):
        """Energy and forces of the exceptions' own Coulomb term ``k chargeProd / r``."""
        pos = self.positions if positions is None else positions
        forces = np.zeros_like(pos)
        if len(self.scaled_pairs) == 0:
            return 0.0, forces
        i, j = self.scaled_pairs[:, 0], self.scaled_pairs[:, 1]
        d = self._pair_vectors(pos, box)
        r = np.linalg.norm(d, axis=1)
        e = self.coulomb_constant * self.scaled_charge_products / r
        f = (e / (r * r))[:, None] * d  # force on i
        np.add.at(forces, i, f)
        np.add.at(forces, j, -f)
        return float(e.sum()), forces


def _reference_pme_parameters(system, box):
    """(alpha, mesh) OpenMM's Reference platform uses for this System."""
    import openmm

    ctx = openmm.Context(openmm.XmlSerializer.clone(system), openmm.VerletIntegrator(0.001),
                         openmm.Platform.getPlatformByName("Reference"))
    try:
        nb = _nonbonded(ctx.getSystem())
        alpha, nx, ny, nz = nb.getPMEParametersInContext(ctx)
    finally:
        del ctx
    return float(alpha), (int(nx), int(ny), int(nz))


def from_openmm(system, positions, box=None, context=None) -> OpenMMProblem:
    """Build an :class:`OpenMMProblem` from an OpenMM ``System`` (see the module docstring).

    Parameters
    ----------
    system : openmm.System
    positions : (n, 3) array in nm, or an OpenMM Quantity / list of Vec3
    box : (3, 3) rows in nm, optional
        Default: the System's default periodic box vectors.
    context : openmm.Context, optional
        Read alpha and mesh with ``getPMEParametersInContext(context)``.
    """
    nb = _nonbonded(system)
    n = system.getNumParticles()
    pos = _nm(positions, (-1, 3))
    if pos.shape != (n, 3):
        raise ValueError(f"the System has {n} particles but positions has shape {pos.shape}")
    b = _nm(system.getDefaultPeriodicBoxVectors() if box is None else box, (3, 3))
    try:
        from openmm import unit

        def val(x, u):
            return x.value_in_unit(u) if unit.is_quantity(x) else float(x)

        e_unit, nm = unit.elementary_charge, unit.nanometer
        inv_nm = nm ** -1
    except ImportError:  # pragma: no cover
        raise
    q = np.array([val(nb.getParticleParameters(i)[0], e_unit) for i in range(n)])
    ex, sp, sq = [], [], []
    for k in range(nb.getNumExceptions()):
        i, j, qq, _, _ = nb.getExceptionParameters(k)
        qq = val(qq, e_unit ** 2)
        ex.append((i, j))
        if qq != 0.0:
            sp.append((i, j))
            sq.append(qq)
    cutoff = val(nb.getCutoffDistance(), nm)
    if context is not None:
        alpha, nx, ny, nz = nb.getPMEParametersInContext(context)
        alpha, mesh = val(alpha, inv_nm), (int(nx), int(ny), int(nz))
    else:
        alpha, nx, ny, nz = nb.getPMEParameters()
        alpha, mesh = val(alpha, inv_nm), (int(nx), int(ny), int(nz))
        if alpha == 0.0 or min(mesh) == 0:
            alpha, mesh = _reference_pme_parameters(system, b)
    return OpenMMProblem(box=b, positions=pos, charges=q, ids=np.arange(n, dtype=np.int64),
                         exclusions=np.array(ex, dtype=np.int64).reshape(-1, 2),
                         scaled_pairs=np.array(sp, dtype=np.int64).reshape(-1, 2),
                         scaled_charge_products=np.array(sq, dtype=np.float64),
                         cutoff=cutoff, alpha=alpha, mesh=mesh, order=5,
                         exceptions_periodic=bool(nb.getExceptionsUsePeriodicBoundaryConditions()))


def electrostatics_only(system):
    """A copy of ``system`` with only its NonbondedForce (force group 0), Lennard-Jones off
    (epsilon 0 for particles and exceptions, no dispersion correction, LJPME -> PME)."""
    import openmm

    sys2 = openmm.XmlSerializer.clone(system)
    for k in reversed(range(sys2.getNumForces())):
        if not isinstance(sys2.getForce(k), openmm.NonbondedForce):
            sys2.removeForce(k)
    nb = _nonbonded(sys2)
    nb.setForceGroup(0)
    if nb.getNonbondedMethod() == openmm.NonbondedForce.LJPME:
        nb.setNonbondedMethod(openmm.NonbondedForce.PME)
    nb.setUseDispersionCorrection(False)
    for i in range(nb.getNumParticles()):
        qi, sig, _ = nb.getParticleParameters(i)
        nb.setParticleParameters(i, qi, sig, 0.0)
    for k in range(nb.getNumExceptions()):
        i, j, qq, sig, _ = nb.getExceptionParameters(k)
        nb.setExceptionParameters(k, i, j, qq, sig, 0.0)
    return sys2


@dataclass
class ComparisonResult:
    """pmewald vs OpenMM Reference PME (kJ/mol, nm)."""

    energy_openmm: float
    energy_pmewald: float
    forces_openmm: np.ndarray
    forces_pmewald: np.ndarray
    relative_energy_difference: float
    relative_rms_force_difference: float
    alpha: float
    mesh: tuple
    order: int
    cutoff: float


def openmm_reference_electrostatics(problem: OpenMMProblem, system):
    """Energy (kJ/mol) and forces (kJ/mol/nm) of OpenMM's Reference-platform PME for the
    NonbondedForce alone, LJ off, with the problem's alpha and mesh."""
    import openmm

    sys2 = electrostatics_only(system)
    nb = _nonbonded(sys2)
    nb.setPMEParameters(problem.alpha, *problem.mesh)
    sys2.setDefaultPeriodicBoxVectors(*[openmm.Vec3(*row) for row in problem.box])
    ctx = openmm.Context(sys2, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("Reference"))
    ctx.setPeriodicBoxVectors(*[openmm.Vec3(*row) for row in problem.box])
    ctx.setPositions([openmm.Vec3(*p) for p in problem.positions])
    alpha, nx, ny, nz = nb.getPMEParametersInContext(ctx)
    if (nx, ny, nz) != tuple(problem.mesh) or not math.isclose(alpha, problem.alpha, rel_tol=1e-15):
        raise RuntimeError(f"OpenMM uses alpha {alpha}, mesh {(nx, ny, nz)} instead of {problem.alpha}, "
                           f"{problem.mesh}")
    st = ctx.getState(getEnergy=True, getForces=True)
    from openmm import unit

    e = st.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole)
    f = np.array(st.getForces(asNumpy=True).value_in_unit(unit.kilojoule_per_mole / unit.nanometer))
    del ctx
    return float(e), f


def compare_with_openmm(system, positions, box=None, comm=None, context=None) -> ComparisonResult:
    """Compare pmewald's electrostatic energy and forces with OpenMM's Reference-platform PME.

    Both use the same alpha, mesh and order 5 (OpenMM's, see :func:`from_openmm`).
    OpenMM runs on a copy of the system holding only the NonbondedForce, with
    Lennard-Jones switched off. Collective over ``comm`` (OpenMM runs on rank 0 and its
    results are broadcast). Returns a :class:`ComparisonResult` with
    ``relative_energy_difference = |E_p - E_o| / |E_o|`` and
    ``relative_rms_force_difference = sqrt(sum |F_p - F_o|^2 / sum |F_o|^2)``.
    """
    from mpi4py import MPI

    comm = MPI.COMM_WORLD if comm is None else comm
    problem = from_openmm(system, positions, box=box, context=context)
    ref = openmm_reference_electrostatics(problem, system) if comm.Get_rank() == 0 else None
    e_o, f_o = comm.bcast(ref, root=0)
    e_p, f_p = problem.compute(comm=comm)
    return ComparisonResult(
        energy_openmm=e_o, energy_pmewald=e_p, forces_openmm=f_o, forces_pmewald=f_p,
        relative_energy_difference=abs(e_p - e_o) / abs(e_o),
        relative_rms_force_difference=float(np.sqrt(((f_p - f_o) ** 2).sum() / (f_o ** 2).sum())),
        alpha=problem.alpha, mesh=problem.mesh, order=problem.order, cutoff=problem.cutoff)


def __getattr__(name):
    # A forward of a name that moved (not a dependency of the interface): water_box_system is a
    # test system, now pmewald.systems.openmm.water_box_system.
    if name == "water_box_system":
        import warnings

        from ..systems.openmm import water_box_system
        warnings.warn("pmewald.interfaces.openmm.water_box_system moved to pmewald.systems.openmm",
                      DeprecationWarning, stacklevel=2)
        return water_box_system
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
