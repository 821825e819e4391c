"""What a PME object computes and how its core solvers are made and called.

:class:`Problem` holds what does not change from call to call: the object's own
communicator, the canonical box (changed only by :meth:`PME.set_box`), the cutoff,
tolerance, Coulomb constant, ``real_space``, a slab's geometry, the communication mode,
overlap and polling, and the pair list's skin given to new solvers. It makes core solvers
(after the agreed size check) and calls them, refusing a non-finite result with its
reason. The :class:`~pmewald.pme.tuning.Tuner` and :class:`pmewald.PME` share it; neither
reaches into the other's attributes.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from . import potentials as _potentials
from .. import _core
from .._checks.limits import check_fits, node_ranks, solver_footprint
from .._checks.validate import canonical_box, coincident_pair
from .._mpi.collective import agreed


class Problem:
    """The fixed part of a PME object (see the module docstring). ``box`` is the canonical
    form of the box the solver runs on (a slab's: extended by its gap); ``slab`` None or the
    slab geometry (pme/slab.py); ``skin`` the pair list's skin at this cutoff (``skin_auto``:
    ``"auto"``'s fraction of it), ``skin_active`` the skin new solvers get (0 until
    ``skin="auto"`` switches the list on after the first call)."""

    def __init__(self, comm, opts):
        self.comm = comm
        self.node_ranks = node_ranks(comm)
        self.box = canonical_box(opts.box)
        self.cutoff, self.tolerance, self.k = opts.cutoff, opts.tolerance, opts.coulomb_constant
        self.real_space = opts.real_space
        self.comm_mode, self.overlap, self.poll = opts.comm_mode, opts.overlap, opts.poll
        self.slab = opts.slab
        self.skin, self.skin_auto = opts.skin, opts.skin_auto
        self.skin_active = 0.0 if opts.skin_auto else opts.skin
        self.ghost_exchange = opts.ghost_exchange
        self.pair_layout = opts.pair_layout
        self.balance = (opts.balance, opts.balance_by, opts.balance_threshold)

    def with_cutoff(self, cutoff):
        """The same problem at another cutoff (cutoff="auto", pme/cutoff_search.py): the box and
        slab as they are now; a skin "auto" is its fraction of the new cutoff, and its pair list
        starts again from the first call."""
        other = copy.copy(self)
        other.cutoff = float(cutoff)
        if self.skin_auto:
            other.skin = self.skin * other.cutoff / self.cutoff
            other.skin_active = 0.0
        return other

    def real_volume(self):
        """The volume the atoms fill (the real-space estimate's density): a slab's own
        (``slab.volume_occupied``, the box without its vacuum gap), else None (the box's)."""
        return None if self.slab is None else self.slab.volume_occupied

    def volume_filled(self):
        """real_volume(), or the box's volume."""
        return self.real_volume() or abs(float(np.linalg.det(self.box)))

    def layout_for(self, precision):
        """The pair list's layout for a kernel `precision`: pair_layout, or with "auto" atoms
        in double (clusters in double measured 2x slower) and in mixed precision "auto", the
        solver's trial of both on its first list calls (docs/realspace.md, "Cluster pairs":
        clusters are faster on water, atoms on the LAMMPS peptide)."""
        if self.pair_layout != "auto":
            return self.pair_layout
        return "auto" if precision == "mixed" else "atoms"

    def new_solver(self, mesh, order, alpha, differentiation, real_space, precision, mode=None, skin=0.0,
                   planner=None):
        """Collective: a C++ solver, after the agreed per-rank size check (_checks.limits: the
        32-bit element limit and the memory available to each rank). The core agrees on
        its own errors, out of memory in its buffers and grids included. `mode`: the
        communication mode (default: comm_mode); `skin`: its pair list's (0, a fresh
        search every call, for the tuning's one-off solvers); `planner`: FFTW's planner
        (default: the configured one, ``_core.fftw_planner()``)."""
        comm = self.comm

        def fits():
            elements, nbytes = solver_footprint(mesh, comm.Get_size(), comm.Get_rank(), order, differentiation)
            check_fits(f"mesh {tuple(mesh)}", elements, nbytes, comm.Get_size(), self.node_ranks)

        agreed(comm, fits)
        return _core.PMESolver(comm, self.box, mesh, order, alpha, self.cutoff, differentiation,
                               mode or self.comm_mode, self.k, real_space, self.overlap, *self.poll, skin,
                               precision if real_space else "double", self.ghost_exchange, *self.balance,
                               planner=planner, pair_layout=self.layout_for(precision if real_space else "double"))

    def run(self, solver, alpha, pos, q, idv, ex, potentials=False, probe_base=None):
        """solver.compute (q of shape (n,)) or solver.compute_sets (q of shape (n, m)),
        refusing a non-finite result (identical on every rank: the energies and the force
        and virial sums are reduced) with the reason. `alpha`: the solver's (the message's
        tolerance for coincident atoms); `probe_base`: the first probe's id
        (probes are atoms of zero charge from there on), for the message."""
        sets = q.ndim == 2
        raw = (solver.compute_sets if sets else solver.compute)(pos, q, idv, ex, potentials)
        # NaN and inf survive the sums (inf - inf is NaN): three checks.
        energy = np.asarray(raw["energy"])
        if not (np.isfinite(energy).all() and np.isfinite(raw["sum_force2"]).all()
                and np.isfinite(raw["virial"]).all()):
            bad = energy[~np.isfinite(energy)]
            self.refuse_non_finite(float(bad.flat[0]) if bad.size else math.nan, alpha, pos, idv, ex, probe_base)
        return raw

    def refuse_non_finite(self, energy, alpha, pos, idv, ex, probe_base=None):
        """Collective, on the failure path only: find why the result is not finite (two
        atoms at the same position that are not an excluded pair: their erfc pair term is
        infinite) from every rank's atoms, and raise it on every rank."""
        parts = self.comm.allgather((idv, pos, ex))
        ids = np.concatenate([p[0] for p in parts])
        where = np.concatenate([p[1] for p in parts])
        pairs = np.concatenate([p[2] for p in parts])
        hit = coincident_pair(self.box, where, ids, pairs, 1e-8 / alpha)  # the kernel's: 1e-10 / alpha
        if hit is not None:
            a, b, x = hit
            if probe_base is not None and b >= probe_base:
                raise ValueError(f"{_potentials.describe_atom(b, probe_base)} is at the same position as "
                                 f"{_potentials.describe_atom(a, probe_base)} ({x[0]:.6g}, {x[1]:.6g}, {x[2]:.6g}) "
                                 "(up to a lattice vector): the potential there is infinite. Move the probe")
            raise ValueError(f"atoms with ids {a} and {b} are at the same position ({x[0]:.6g}, {x[1]:.6g}, "
                             f"{x[2]:.6g}) (up to a lattice vector) and are not an excluded pair: their Coulomb "
                             "energy is infinite. Exclude the pair (a virtual site or Drude particle on its "
                             "atom) or move one of them")
        raise ValueError(f"the result is not finite (energy {energy}): positions or charges too large for "
                         "double precision?")
