"""pmewald as the long-range solver of a LAMMPS run, on LAMMPS's own ranks and atom split.

Usage, from LAMMPS's Python module (every rank of the run executes the same script)::

    from lammps import lammps
    from pmewald.interfaces.lammps import attach

    lmp = lammps()
    lmp.file("in.setup")                    # units, atoms, force field; no `run` yet
    fix = attach(lmp, mode="kspace", cutoff=10.0, tolerance=1e-5)   # collective
    fix.run(1000)                           # lmp.command("run 1000"), raising pmewald's errors

``attach`` adds ``fix <fix_id> all external pf/callback 1 1``: at every force evaluation each
LAMMPS rank's callback gets its own local atoms (ids = LAMMPS tags, positions) and adds pmewald's
forces to them; the energy and the virial go to LAMMPS's thermo output (``pe``, ``press``) through
the fix. pmewald takes any split of the atoms, so it runs on LAMMPS's domain decomposition as it
is: no gathering, no second decomposition for the caller to keep.

Two modes, by what the pair style computes (pmewald computes the rest):

``mode="kspace"`` (pmewald in place of ``pppm``)
    The pair style keeps the real-space Ewald part: a ``*/coul/long`` style (``coul/long``,
    ``lj/cut/coul/long``, ``lj/charmm/coul/long``, ``lj/charmmfsw/coul/long``,
    ``buck/coul/long``, ``born/coul/long``, ``lj/class2/coul/long``...), with its own handling
    of special pairs. Such a style needs a kspace style for its ``g_ewald``: ``attach`` sets
    ``kspace_style ewald`` with its computation off (``kspace_modify compute no``) and its
    ``gewald`` pmewald's alpha, replacing the input's ``pppm`` (which must not have run yet,
    see FFTW below), so that the pair style's erfc and pmewald's mesh split the same Ewald sum.
    pmewald computes the reciprocal, self and background terms (``real_space=False``).
    ``cutoff`` is the pair style's Coulomb cutoff (alpha is chosen from it and the tolerance,
    or pass ``alpha``).
``mode="full"``
    pmewald computes all of the electrostatics (its own real-space sum with ``cutoff``):
    the pair style must compute no Coulomb (``lj/cut``, ``lj/smooth/linear``, ``buck``,
    ``morse``, ``table``...; for CHARMM's switched LJ, ``lj/charmm/coul/charmm 8 10 0.05
    0.1`` with a Coulomb cutoff below any atom distance), and no ``kspace_style`` may be
    active. LAMMPS's special neighbours (1-2, 1-3, 1-4 through the bond graph, as LAMMPS's
    ``special_bonds`` finds them without its ``angle``/``dihedral`` options) with Coulomb
    factor 0 become pmewald exclusions; with a factor ``0 < f < 1`` the pair is excluded and
    ``f k q_i q_j / r`` added back (pairs across ranks included); factor 1 pairs are ordinary.
    The factors are read from LAMMPS (``special_coul``) where its library exposes them (LAMMPS
    2023 and later); older versions (Debian 12's 2022 package) need ``special_coul=(f12, f13,
    f14)``, as in the input's ``special_bonds`` command (LAMMPS's default is ``(0, 0, 0)``).

Define ``fix shake`` and ``fix rattle`` after ``attach``: LAMMPS applies post-force fixes in the
order they are defined, and a constraint fix must see every force (pmewald's fix after SHAKE lets
the constraints drift: the peptide's energy drifted 10x faster); ``attach`` warns when fixes are
already defined.

``attach`` runs ``run 0 post no`` once: the first call tunes pmewald's parameters, and the thermo
checks that no kspace style computes (``elong`` zero). Nothing can check, from LAMMPS's library
interface, that a full-mode pair style computes no Coulomb (its ``ecoul`` holds a CHARMM
dihedral's 1-4 Coulomb too): that is the input's responsibility. Units: LAMMPS's, with the Coulomb constant its
``qqrd2e`` (``qqr2e`` over the ``dielectric``). Charges are read at every call (a ``fix qeq``
may change them); the box too (``fix npt``, ``fix deform``: :meth:`pmewald.PME.set_box`).
Orthogonal and triclinic boxes, periodic in x, y and z.

FFTW: a LAMMPS built with threaded FFTW (Debian's) calls ``fftw_cleanup_threads()`` whenever
it destroys one of its FFT plans (a ``pppm`` re-initialised by a ``run``, replaced, or closed with
its instance), and that invalidates every FFTW plan of the process, pmewald's included (FFTW's
rule: no plan survives a cleanup). So no ``pppm`` may run in a process while pmewald objects
live; ``kspace_style ewald`` uses no FFTW, which is why kspace mode takes it. Compare with
LAMMPS's ``pppm`` in another process (as ``tests/interfaces/test_lammps.py`` does).

Not supported: ``kspace_modify slab``, TIP4P styles (``lj/cut/tip4p/long``: their M site is not
an atom), point dipoles, ``run_style respa`` with the fix at an inner level.

An error inside a step (pmewald's, raised on every rank alike) cannot propagate through LAMMPS's
C callback: the fix stores it, zeroes its forces, prints it and stops the run at the end of that
step (``timer timeout``), every later step stops at once until :meth:`PMEFix.clear`, and
:meth:`PMEFix.run` or :meth:`PMEFix.check` raises it.
"""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np
from mpi4py import MPI

from .._mpi.collective import agree, check_comm, duplicate
from ..pme import PME
from ._pairs import CoulombPairs

__all__ = ["attach", "PMEFix", "special_neighbors", "open_lammps", "lammps_communicator", "lammps_box"]

_MODES = ("kspace", "full")


def open_lammps(cmdargs=None, comm=None):
    """A ``lammps.lammps`` instance on the mpi4py communicator ``comm`` (default
    ``MPI.COMM_WORLD``). LAMMPS's Python module of 2021-2022 (Debian 12's) accepts a
    communicator only from mpi4py 2 or 3, by its version string; the calls it then makes
    (``MPI._sizeof``, ``MPI._addressof``) are in mpi4py 4 as well, so the version check is
    passed for the construction only."""
    import mpi4py
    from lammps import lammps

    comm = check_comm(comm)
    version = mpi4py.__version__
    if version.split(".")[0] not in ("2", "3"):
        mpi4py.__version__ = "3.1.0"
    try:
        return lammps(cmdargs=list(cmdargs or []), comm=comm)
    finally:
        mpi4py.__version__ = version


def lammps_communicator(lmp):
    """The mpi4py communicator a LAMMPS instance runs on (also with LAMMPS Python modules that
    predate mpi4py 4, whose ``get_mpi_comm`` refuses it)."""
    handle = lmp.lib.lammps_get_mpi_comm(lmp.lmp)
    if handle < 0:
        raise RuntimeError("this LAMMPS library was built without MPI: pmewald needs LAMMPS on MPI")
    return MPI.Comm.f2py(handle)


def lammps_box(lmp):
    """The simulation box as pmewald rows (a, b, c), from ``extract_box``; ValueError unless it
    is periodic in x, y and z."""
    lo, hi, xy, yz, xz, periodicity, _ = lmp.extract_box()
    if list(periodicity) != [1, 1, 1]:
        raise ValueError(f"pmewald needs a box periodic in x, y and z; LAMMPS's periodicity is {list(periodicity)}")
    lx, ly, lz = (hi[k] - lo[k] for k in range(3))
    return np.array([[lx, 0.0, 0.0], [xy, ly, 0.0], [xz, yz, lz]])


def special_neighbors(bonds):
    """LAMMPS's special neighbours of a bond graph: ``{1: (m1, 2), 2: (m2, 2), 3: (m3, 2)}``,
    the 1-2, 1-3 and 1-4 pairs of atom tags (each pair once, smaller tag first; a pair is at
    the lowest level it reaches, as in LAMMPS's ``special_bonds`` without ``angle``/``dihedral``
    options). ``bonds``: (n, 2) tags."""
    partners = {}
    for a, b in np.asarray(bonds, dtype=np.int64).reshape(-1, 2).tolist():
        if a == b:
            continue
        partners.setdefault(a, set()).add(b)
        partners.setdefault(b, set()).add(a)
    levels = {1: set(), 2: set(), 3: set()}
    for i, first in partners.items():
        seen, shell = {i} | first, first
        levels[1].update((i, j) for j in first if i < j)
        for level in (2, 3):
            shell = {k for j in shell for k in partners[j]} - seen
            seen |= shell
            levels[level].update((i, j) for j in shell if i < j)
    return {lv: np.array(sorted(p), dtype=np.int64).reshape(-1, 2) for lv, p in levels.items()}


class _ScaledSpecial:
    """The special pairs with a Coulomb factor ``0 < f < 1``: ``f k q_i q_j / r`` on every rank
    from the positions and charges of the atoms they involve, all-gathered each call (a special
    pair may span two ranks). Energy and virial are the totals; forces those of this rank's atoms."""

    def __init__(self, comm, pairs, factors, k):
        self.comm = comm
        self.pairs, self.factors = pairs, np.asarray(factors, dtype=np.float64)
        self.tags = np.unique(pairs)
        self.slot = np.full(int(self.tags.max()) + 1 if len(self.tags) else 1, -1, dtype=np.int64)
        self.slot[self.tags] = np.arange(len(self.tags))
        self.coulomb = CoulombPairs(self.slot[pairs], np.zeros(len(pairs)), k)

    def evaluate(self, tags, x, q, box):
        """(energy, forces of this rank's atoms (nlocal, 3), virial)."""
        inside = tags < len(self.slot)
        mine = np.flatnonzero(inside)[self.slot[tags[inside]] >= 0]
        rows = np.empty((len(mine), 5))
        rows[:, 0], rows[:, 1:4], rows[:, 4] = tags[mine], x[mine], q[mine]
        counts = np.array(self.comm.allgather(rows.size))
        table = np.empty((counts.sum() // 5, 5))
        self.comm.Allgatherv(rows, [table, counts, np.concatenate([[0], np.cumsum(counts)[:-1]]), MPI.DOUBLE])
        n = len(self.tags)
        pos, charge = np.zeros((n, 3)), np.zeros(n)
        s = self.slot[table[:, 0].astype(np.int64)]
        pos[s], charge[s] = table[:, 1:4], table[:, 4]
        i, j = self.coulomb.pairs[:, 0], self.coulomb.pairs[:, 1]
        self.coulomb.products = self.factors * charge[i] * charge[j]
        energy, forces, virial = self.coulomb.evaluate(pos, box, n)
        out = np.zeros((len(tags), 3))
        out[mine] = forces[self.slot[tags[mine]]]
        return energy, out, virial


class PMEFix:
    """pmewald attached to a LAMMPS instance (made by :func:`attach`; see the module docstring).

    It keeps ``pme`` (the :class:`pmewald.PME`), ``mode``, ``fix_id``, ``exclusions``
    (full mode: the excluded tag pairs), ``calls``, ``seconds`` (inside the callback, this
    rank), ``error`` (a stored error of a step, or None)."""

    def __init__(self, lmp, comm, mode, pme, fix_id, exclusions, scaled):
        self.lmp, self.mode, self.pme, self.fix_id = lmp, mode, pme, fix_id
        self.comm = duplicate(comm, self)  # this object's collectives, apart from LAMMPS's
        self.exclusions = exclusions
        self._scaled = scaled
        self._box = lammps_box(lmp)
        self.calls, self.seconds, self.error = 0, 0.0, None
        self._virial = [0.0] * 6

    # ------------------------------------------------------------------ per step

    def _callback(self, caller, ntimestep, nlocal, tag, x, fext):
        if self.error is not None:  # a failed step: no more steps until detached
            fext[:] = 0.0
            self.lmp.force_timeout()
            return
        t0 = time.perf_counter()
        try:
            self._step(nlocal, tag, x, fext)
        except BaseException as e:  # noqa: BLE001 - the C callback cannot raise: stored, the run stopped
            self.error = e
            fext[:] = 0.0
            self.lmp.force_timeout()
            if self.comm.Get_rank() == 0:
                sys.stderr.write(f"pmewald: step {ntimestep} failed, the run stops: {type(e).__name__}: {e}\n")
        self.calls += 1
        self.seconds += time.perf_counter() - t0

    def _step(self, nlocal, tag, x, fext):
        error = None
        try:
            box = lammps_box(self.lmp)
            q = self.lmp.numpy.extract_atom("q")
            if q is None:
                raise ValueError("the atom style has no charges (atom_style charge or full)")
            q = np.asarray(q[:nlocal], dtype=np.float64)
            ids = np.asarray(tag, dtype=np.int64)
        except Exception as e:  # noqa: BLE001 - agreed: every rank raises it
            error = e
        agree(self.comm, error)
        if not np.array_equal(box, self._box):
            self.pme.set_box(box)
            self._box = box
        first = self.comm.Get_rank() == 0
        res = self.pme.compute(x, q, ids=ids, exclusions=self.exclusions if first else None)
        energy, virial = res.energy, np.asarray(res.virial)
        fext[:] = res.forces
        if self._scaled is not None:
            e2, f2, w2 = self._scaled.evaluate(ids, np.asarray(x), q, box)
            energy, virial = energy + e2, virial + w2
            fext += f2
        w = 0.5 * (virial + virial.T)
        self._virial[:] = [w[0, 0], w[1, 1], w[2, 2], w[0, 1], w[0, 2], w[1, 2]]
        # Both are totals, the same on every rank (LAMMPS adds the energy once and divides the
        # virial by the rank count before summing the ranks' contributions).
        self.lmp.fix_external_set_energy_global(self.fix_id, float(energy))
        self.lmp.fix_external_set_virial_global(self.fix_id, self._virial)

    # ------------------------------------------------------------------ the caller's side

    def check(self):
        """Raise the error a step stored (every rank has the same one), if any."""
        if self.error is not None:
            raise self.error

    def clear(self):
        """Forget a stored error, so that steps compute again (after its cause was removed).
        Collective: it also ends the forced timeout (``timer timeout off``)."""
        self.error = None
        self.lmp.command("timer timeout off")

    def run(self, steps, *args):
        """``lmp.command("run steps ...")``, then :meth:`check`."""
        self.lmp.command(" ".join(["run", str(int(steps))] + [str(a) for a in args]))
        self.check()

    def detach(self):
        """Remove the fix (collective); in kspace mode LAMMPS's ``kspace_style ewald`` computes
        again (with its own g_ewald): the input's ``pppm`` is not restored."""
        self.lmp.command(f"unfix {self.fix_id}")
        if self.mode == "kspace":
            self.lmp.command("kspace_modify compute yes gewald 0.0")
        self.error = None

    @property
    def parameters(self):
        """:attr:`pmewald.PME.parameters` of the solver."""
        return self.pme.parameters


def _special(lmp, comm, k, special_coul):
    """(exclusions, _ScaledSpecial or None) of full mode from the bond graph and the factors."""
    from_lammps = lmp.extract_global("special_coul")
    factors = special_coul if special_coul is not None else (None if from_lammps is None else from_lammps[1:4])
    nbonds, flat = lmp.gather_bonds() if lmp.extract_global("nbonds") else (0, [])
    bonds = np.array(flat, dtype=np.int64).reshape(-1, 3)[:, 1:]
    if len(bonds) == 0:
        return np.zeros((0, 2), dtype=np.int64), None
    if factors is None:
        raise ValueError("this LAMMPS library does not expose its special_bonds factors: pass special_coul=(f12, f13, "
                         "f14) as in the input's special_bonds command (LAMMPS's default: (0, 0, 0))")
    factors = [float(f) for f in factors]
    if len(factors) != 3 or not all(0.0 <= f <= 1.0 for f in factors):
        raise ValueError(f"special_coul must be three factors in [0, 1], got {special_coul}")
    levels = special_neighbors(bonds)
    ex = [levels[lv] for lv in (1, 2, 3) if factors[lv - 1] < 1.0]
    exclusions = np.concatenate(ex) if ex else np.zeros((0, 2), dtype=np.int64)
    scaled = [(levels[lv], factors[lv - 1]) for lv in (1, 2, 3) if 0.0 < factors[lv - 1] < 1.0 and len(levels[lv])]
    if not scaled:
        return exclusions, None
    pairs = np.concatenate([p for p, _ in scaled])
    f = np.concatenate([np.full(len(p), v) for p, v in scaled])
    return exclusions, _ScaledSpecial(comm, pairs, f, k)


def attach(lmp, *, mode="kspace", cutoff=None, tolerance=1e-5, special_coul=None, fix_id="pmewald", comm=None,
           **pme_options) -> PMEFix:
    """Attach pmewald to a LAMMPS instance (collective over its ranks; see the module docstring).

    Parameters
    ----------
    lmp : lammps.lammps
        Set up (box, atoms with charges, force field) and not running.
    mode : "kspace" or "full"
        What pmewald computes: the long-range part in place of LAMMPS's kspace style, or all the
        electrostatics (the pair style without Coulomb).
    cutoff : float
        kspace: the pair style's Coulomb cutoff (for alpha; not needed with ``alpha=``). full:
        pmewald's real-space cutoff.
    tolerance : float
        pmewald's relative RMS force error target (:class:`pmewald.PME`).
    special_coul : (f12, f13, f14), optional
        full mode: LAMMPS's ``special_bonds`` Coulomb factors, where LAMMPS does not expose them.
    fix_id : str
        The fix's id.
    comm : mpi4py communicator, optional
        Default: LAMMPS's own. It must be the communicator LAMMPS runs on.
    **pme_options
        Passed to :class:`pmewald.PME` (``alpha``, ``mesh``, ``order``, ``differentiation``,
        ``comm_mode``, ``skin``, ``precision``...).
    """
    comm = lammps_communicator(lmp) if comm is None else check_comm(comm)
    error, k = None, None
    try:
        if mode not in _MODES:
            raise ValueError(f"mode must be 'kspace' or 'full', not {mode!r}")
        if not lmp.extract_setting("q_flag") == 1:
            raise ValueError("the LAMMPS atom style has no charges (atom_style charge or full)")
        if cutoff is None and not (mode == "kspace" and pme_options.get("alpha") is not None):
            raise ValueError("cutoff is needed: the pair style's Coulomb cutoff (kspace mode; or pass alpha) or "
                             "pmewald's real-space cutoff (full mode)")
        if "coulomb_constant" in pme_options or "real_space" in pme_options:
            raise ValueError("coulomb_constant and real_space follow from LAMMPS's units and the mode")
        # LAMMPS sets qqrd2e only when a run initialises; qqr2e / dielectric is what it will be.
        k = float(lmp.extract_global("qqr2e")) / float(lmp.extract_global("dielectric"))
        box = lammps_box(lmp)
    except Exception as e:  # noqa: BLE001 - agreed: every rank raises it
        error = e
    agree(comm, error)
    kspace = mode == "kspace"
    pme = PME(box, cutoff if cutoff is not None else 0.4 * float(np.linalg.norm(box, axis=1).min()),
              tolerance=tolerance, comm=comm, coulomb_constant=k, real_space=not kspace, **pme_options)
    earlier = [f for f in lmp.available_ids("fix") if f != fix_id]
    if earlier and comm.Get_rank() == 0:
        warnings.warn(f"pmewald's fix comes after the fixes {earlier}: LAMMPS applies forces of post-force fixes in "
                      "the order they are defined, so a fix shake or rattle among them does not see pmewald's forces "
                      "(its constraints drift); define those after attach()", stacklevel=2)
    fix = PMEFix(lmp, comm, mode, pme, fix_id, np.zeros((0, 2), dtype=np.int64), None)
    if not kspace:
        fix.exclusions, fix._scaled = _agreed_special(lmp, fix.comm, k, special_coul)
    if kspace:  # ewald: no FFTW plans (see the module docstring), and no work with compute no
        lmp.command(f"kspace_style ewald {tolerance!r}")
        lmp.command(f"kspace_modify compute no gewald {pme.parameters['alpha']!r}")
    lmp.command(f"fix {fix_id} all external pf/callback 1 1")
    lmp.set_fix_external_callback(fix_id, fix._callback, None)
    lmp.command("run 0 post no")
    fix.check()
    _check_mode(lmp, comm, mode)
    return fix


def _agreed_special(lmp, comm, k, special_coul):
    error, out = None, (np.zeros((0, 2), dtype=np.int64), None)
    try:
        out = _special(lmp, comm, k, special_coul)
    except Exception as e:  # noqa: BLE001 - agreed: every rank raises it
        error = e
    agree(comm, error)
    return out


def _check_mode(lmp, comm, mode):
    """After ``run 0`` (collective, as thermo keywords are): no kspace style may compute
    (``elong`` zero); in full mode the pair style must not need one (where LAMMPS names it)."""
    elong = lmp.get_thermo("elong")
    pair = lmp.extract_global("pair_style") if mode == "full" else None
    error = None
    if elong != 0.0:
        error = ValueError(f"a kspace style computes (elong = {elong}): pmewald computes the long range; with "
                           "mode='full' remove the kspace_style")
    elif isinstance(pair, str) and any(s in pair for s in ("coul/long", "coul/msm", "tip4p/long")):
        error = ValueError(f"pair style {pair} computes the real-space Ewald part: use mode='kspace' with it, or a "
                           "pair style without Coulomb for mode='full'")
    agree(comm, error)
