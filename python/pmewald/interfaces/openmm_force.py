"""pmewald's PME electrostatics as a force of an OpenMM ``System``, for the ordinary
``Simulation``, integrators, barostats and reporters.

Usage (one process)::

    from openmm import app, unit
    from pmewald.interfaces.openmm_force import PMEForce

    system = forcefield.createSystem(topology, nonbondedMethod=app.PME,
                                     nonbondedCutoff=1.0 * unit.nanometer, constraints=app.HBonds)
    pme = PMEForce(system, tolerance=1e-4)          # takes over the NonbondedForce's electrostatics
    simulation = app.Simulation(topology, system, integrator)
    simulation.context.setPositions(positions)
    simulation.step(1000)

Under MPI, rank 0 runs OpenMM and the other ranks serve pmewald's share of the work::

    with PMEForce(system, tolerance=1e-4, comm=MPI.COMM_WORLD) as pme:   # collective
        if pme.is_driver:                       # rank 0 of comm
            simulation = app.Simulation(topology, system, integrator)
            ...
        else:
            pme.serve()                         # returns when rank 0 leaves the block

What the force takes over (docs/engines.md has the whole contract):

- The System's single ``NonbondedForce`` (``PME`` or ``LJPME``) keeps its Lennard-Jones (the
  same cutoff, switching function and dispersion correction) and loses its electrostatics:
  every particle charge and every exception ``chargeProd`` is set to zero, and ``PME``
  becomes ``CutoffPeriodic`` (same LJ, no mesh work for charges that are all zero; ``LJPME``
  stays, its dispersion mesh is LJ).
- pmewald computes the Ewald sum of the original charges with **every** exception as an
  exclusion (OpenMM removes every exception pair from its Ewald sum), and adds back each
  exception's own Coulomb term ``k chargeProd / r`` (scaled 1-4 pairs), with the distance the
  minimum image (OpenMM may hand a PythonForce wrapped positions).
- Atoms of zero charge are left out of pmewald's call (TIP4P oxygens, say); virtual sites are
  ordinary charged particles here, and OpenMM spreads their forces onto their parents.
- The box is read from every State: a barostat's new box goes to :meth:`pmewald.PME.set_box`.

Units are OpenMM's (nm, kJ/mol, e; the Coulomb constant :data:`pmewald.units.KJ_MOL_NM`).
``NonbondedForce`` parameter offsets and other forces' charges (a ``CustomNonbondedForce``)
are not taken over; offsets raise ``NotImplementedError``. A ``PMEForce`` holds an MPI
communicator and a solver, so a System that carries it cannot be serialized by
``XmlSerializer`` (the ``PythonForce``'s function does not pickle).

The force is an ``openmm.PythonForce``: OpenMM hands its State to :meth:`PMEForce.compute` each
step. Measured at 29k atoms (docs/engines.md) that costs 1-2% of the step beyond pmewald's own
computation, so there is no C++ route (a ``CustomCPPForceImpl``) to save it.
"""

from __future__ import annotations

import atexit
import time

import numpy as np
from mpi4py import MPI

from .. import units
from .._mpi.collective import agree, check_comm, duplicate
from ..pme import PME
from ._pairs import CoulombPairs

__all__ = ["PMEForce", "ElectrostaticsModel", "take_over_electrostatics"]

_STOP, _COMPUTE = 0.0, 1.0


class ElectrostaticsModel:
    """What :func:`take_over_electrostatics` read from the NonbondedForce: ``charges`` (n,),
    ``exclusions`` (m, 2: every exception pair), ``scaled`` (:class:`CoulombPairs`: the
    exceptions with a non-zero ``chargeProd``), ``cutoff`` (nm), ``ewald_error_tolerance``
    and ``box`` (the System's default box, rows in nm)."""

    def __init__(self, charges, exclusions, scaled_pairs, scaled_products, cutoff, ewald_error_tolerance, box):
        self.charges = np.asarray(charges, dtype=np.float64)
        self.exclusions = np.asarray(exclusions, dtype=np.int64).reshape(-1, 2)
        self.scaled = CoulombPairs(scaled_pairs, scaled_products, units.KJ_MOL_NM)
        self.cutoff = float(cutoff)
        self.ewald_error_tolerance = float(ewald_error_tolerance)
        self.box = np.asarray(box, dtype=np.float64).reshape(3, 3)

    @property
    def n_particles(self):
        return len(self.charges)


def _the_nonbonded_force(system):
    import openmm

    if any(f.__class__.__name__ == "PythonForce" and f.getName() == PMEForce.NAME for f in system.getForces()):
        raise ValueError("this System already has a pmewald PMEForce")
    found = [f for f in system.getForces() if isinstance(f, openmm.NonbondedForce)]
    if len(found) != 1:
        raise ValueError(f"the System must have exactly one NonbondedForce, it has {len(found)}")
    nb = found[0]
    if nb.getNonbondedMethod() not in (openmm.NonbondedForce.PME, openmm.NonbondedForce.LJPME):
        raise ValueError("the NonbondedForce must use PME or LJPME (periodic electrostatics), not method "
                         f"{nb.getNonbondedMethod()}")
    if nb.getNumParticleParameterOffsets() or nb.getNumExceptionParameterOffsets():
        raise NotImplementedError("NonbondedForce parameter offsets (global-parameter dependent charges) are not "
                                  "supported by PMEForce")
    return nb


def take_over_electrostatics(system) -> ElectrostaticsModel:
    """Read the NonbondedForce's electrostatics and remove them from it (charges and exception
    charge products zero; ``PME`` becomes ``CutoffPeriodic``, LJ unchanged). Returns the
    :class:`ElectrostaticsModel` pmewald computes instead. ValueError for a System without
    exactly one periodic (PME, LJPME) NonbondedForce."""
    import openmm
    from openmm import unit

    nb = _the_nonbonded_force(system)

    def plain(x, u):
        return x.value_in_unit(u) if unit.is_quantity(x) else float(x)

    e = unit.elementary_charge
    n = nb.getNumParticles()
    if n != system.getNumParticles():
        raise ValueError(f"the NonbondedForce has {n} particles, the System {system.getNumParticles()}")
    charges = np.empty(n)
    for i in range(n):
        q, sig, eps = nb.getParticleParameters(i)
        charges[i] = plain(q, e)
        nb.setParticleParameters(i, 0.0, sig, eps)
    exclusions, scaled, products = [], [], []
    for k in range(nb.getNumExceptions()):
        i, j, qq, sig, eps = nb.getExceptionParameters(k)
        qq = plain(qq, e * e)
        exclusions.append((i, j))
        if qq != 0.0:
            scaled.append((i, j))
            products.append(qq)
        nb.setExceptionParameters(k, i, j, 0.0, sig, eps)
    if nb.getNonbondedMethod() == openmm.NonbondedForce.PME:
        nb.setNonbondedMethod(openmm.NonbondedForce.CutoffPeriodic)
    box = [[plain(c, unit.nanometer) for c in v] for v in system.getDefaultPeriodicBoxVectors()]
    return ElectrostaticsModel(charges, exclusions, scaled, products, plain(nb.getCutoffDistance(), unit.nanometer),
                               nb.getEwaldErrorTolerance(), box)


def openmm_python_force(function, system, name, force_group=0):
    """An ``openmm.PythonForce`` of ``function(state)``, periodic, named, in ``force_group``,
    added to ``system``."""
    import openmm

    force = openmm.PythonForce(function)
    force.setUsesPeriodicBoundaryConditions(True)
    force.setName(name)
    force.setForceGroup(int(force_group))
    system.addForce(force)
    return force


class PMEForce:
    """pmewald's electrostatics for an OpenMM System (see the module docstring).

    Parameters
    ----------
    system : openmm.System
        Modified in place: its NonbondedForce loses its electrostatics and the force is added
        (on every rank; only rank 0 of ``comm`` may run a Context with it).
    tolerance : float, optional
        pmewald's relative RMS force error target (default: the NonbondedForce's
        ``ewaldErrorTolerance``; OpenMM's own PME errs 1.3-1.5x that on water, docs/engines.md).
    cutoff : float, optional
        pmewald's real-space cutoff in nm (default: the NonbondedForce's cutoff).
    comm : mpi4py intracommunicator, optional
        Default ``MPI.COMM_WORLD``. Rank 0 runs OpenMM; the others call :meth:`serve`.
    force_group : int
        The OpenMM force group of the added force (default 0).
    server_poll : float
        Seconds a serving rank sleeps between checks for the driver's next call (default
        2e-4): a waiting server leaves its core to OpenMM's threads instead of spinning in MPI.
        0 spins (the lowest latency, for ranks with cores of their own).
    **pme_options
        Passed to :class:`pmewald.PME`: ``differentiation`` (default ``"ad"``: forces that are
        the exact gradient of the energy, as OpenMM's), ``comm_mode`` (default
        ``"nonblocking"``), ``alpha``, ``mesh``, ``order``, ``skin``, ``precision``...

    Notes
    -----
    The object keeps ``force`` (the OpenMM Force added), ``model`` (:class:`ElectrostaticsModel`),
    ``pme`` (the :class:`pmewald.PME`), ``is_driver`` (rank 0), ``calls``, ``seconds`` (time
    inside :meth:`compute`) and ``pme_seconds`` (inside ``PME.compute``) on every rank.
    """

    NAME = "pmewald PMEForce"

    def __init__(self, system, tolerance=None, cutoff=None, comm=None, force_group=0, server_poll=2e-4,
                 **pme_options):
        user_comm = check_comm(comm)
        self.model = None
        error = None
        try:
            self.model = take_over_electrostatics(system)
        except Exception as e:  # noqa: BLE001 - agreed below: every rank raises it
            error = e
        agree(user_comm, error)
        self._comm = duplicate(user_comm, self)
        self.rank, self.size = self._comm.Get_rank(), self._comm.Get_size()
        self.is_driver = self.rank == 0
        m = self.model
        opts = dict(differentiation="ad", comm_mode="nonblocking")
        opts.update(pme_options)
        opts.setdefault("coulomb_constant", units.KJ_MOL_NM)
        self.tolerance = m.ewald_error_tolerance if tolerance is None else float(tolerance)
        self.cutoff = m.cutoff if cutoff is None else float(cutoff)
        self.pme = PME(m.box, self.cutoff, tolerance=self.tolerance, comm=self._comm, **opts)
        self._box = m.box.copy()
        self._charged = np.flatnonzero(m.charges != 0.0)  # only these go to pmewald
        keep = np.zeros(m.n_particles, dtype=bool)
        keep[self._charged] = True
        ex = m.exclusions
        self._exclusions = ex[keep[ex[:, 0]] & keep[ex[:, 1]]] if len(ex) else ex
        nc = len(self._charged)
        self._lo, self._hi = self.rank * nc // self.size, (self.rank + 1) * nc // self.size
        counts = np.array([(r + 1) * nc // self.size - r * nc // self.size for r in range(self.size)])
        self._counts3, self._displs3 = counts * 3, np.concatenate([[0], np.cumsum(counts)[:-1]]) * 3
        self._header = np.zeros(10)  # the command, then the box's 9 numbers
        self._mine = np.empty((self._hi - self._lo, 3))
        self._gathered = np.empty((nc, 3)) if self.is_driver else None
        self.closed = False
        self.calls, self.seconds, self.pme_seconds = 0, 0.0, 0.0
        self.server_poll = float(server_poll)
        self.force = openmm_python_force(self._callback, system, self.NAME, force_group)
        if self.is_driver and self.size > 1:
            atexit.register(self.close)  # servers must not wait for a driver that has ended

    # ----------------------------------------------------------------- the OpenMM side

    def _callback(self, state):
        if not self.is_driver:
            raise RuntimeError("PMEForce: only rank 0 of its communicator may run OpenMM; the other ranks call "
                               "serve()")
        pos = state.getPositions(asNumpy=True)._value
        box = state.getPeriodicBoxVectors(asNumpy=True)._value
        return self.compute(pos, box)

    # ----------------------------------------------------------------- the collective work

    def compute(self, positions, box):
        """Energy (kJ/mol) and forces (kJ/mol/nm, (n, 3)) of all particles at ``positions``
        (nm) in ``box`` (rows, nm): the PME sum and the scaled exceptions. Called by the driver
        (rank 0) while the other ranks :meth:`serve`; on one rank simply a function."""
        if not self.is_driver:
            raise RuntimeError("PMEForce.compute runs on rank 0; the other ranks call serve()")
        if self.closed:
            raise RuntimeError("this PMEForce was closed (its servers have returned)")
        t0 = time.perf_counter()
        pos = np.ascontiguousarray(positions, dtype=np.float64).reshape(-1, 3)
        if len(pos) != self.model.n_particles:
            raise ValueError(f"{len(pos)} positions for {self.model.n_particles} particles")
        self._header[0] = _COMPUTE
        self._header[1:] = np.asarray(box, dtype=np.float64).reshape(9)
        charged = pos[self._charged]
        if self.size > 1:
            self._comm.Ibcast(self._header, root=0).Wait()
            self._comm.Scatterv([charged, self._counts3, self._displs3, MPI.DOUBLE], self._mine, root=0)
            mine = self._mine
        else:
            mine = charged
        energy, f = self._evaluate(mine)
        forces = np.zeros((self.model.n_particles, 3))
        forces[self._charged] = f
        e_pairs, f_pairs, _ = self.model.scaled.evaluate(pos, self._box)
        self.seconds += time.perf_counter() - t0
        return energy + e_pairs, forces + f_pairs

    def serve(self):
        """On every rank but the driver: take part in each of the driver's :meth:`compute`
        calls until the driver closes the force (:meth:`close`, the end of a ``with`` block or
        the driver's exit). An error of a call (agreed: the driver raises it too) is kept in
        ``self.errors`` and serving goes on. Returns the number of calls served."""
        if self.is_driver:
            raise RuntimeError("serve() runs on the ranks other than 0; rank 0 runs OpenMM")
        self.errors = []
        served = 0
        while True:
            request = self._comm.Ibcast(self._header, root=0)
            while self.server_poll > 0 and not request.Test():
                time.sleep(self.server_poll)
            request.Wait()
            if self._header[0] == _STOP:
                self.closed = True
                return served
            self._comm.Scatterv([None, self._counts3, self._displs3, MPI.DOUBLE], self._mine, root=0)
            t0 = time.perf_counter()
            try:
                self._evaluate(self._mine)
            except Exception as e:  # noqa: BLE001 - agreed inside PME: rank 0 has raised it to OpenMM
                self.errors.append(e)
            self.seconds += time.perf_counter() - t0
            served += 1

    def _evaluate(self, mine):
        """Collective: this rank's share of the charged atoms; the forces of all of them on the
        driver (None elsewhere) and the energy."""
        box = self._header[1:].reshape(3, 3)
        if not np.array_equal(box, self._box):
            self.pme.set_box(box)
            self._box = box.copy()
        lo, hi = self._lo, self._hi
        t0 = time.perf_counter()
        res = self.pme.compute(mine, self.model.charges[self._charged[lo:hi]], ids=self._charged[lo:hi],
                               exclusions=self._exclusions if self.is_driver else None)
        self.pme_seconds += time.perf_counter() - t0
        self.calls += 1
        if self.size == 1:
            return res.energy, res.forces
        self._comm.Gatherv(np.ascontiguousarray(res.forces), [self._gathered, self._counts3, self._displs3,
                                                             MPI.DOUBLE], root=0)
        return res.energy, self._gathered

    def close(self):
        """On the driver: release the servers (their :meth:`serve` returns); idempotent. Other
        ranks: nothing."""
        if self.closed:
            return
        self.closed = True
        if self.is_driver and self.size > 1 and MPI.Is_initialized() and not MPI.Is_finalized():
            self._header[0] = _STOP
            self._comm.Ibcast(self._header, root=0).Wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def parameters(self):
        """The solver's parameters (:attr:`pmewald.PME.parameters`) and this force's cutoff."""
        return self.pme.parameters
