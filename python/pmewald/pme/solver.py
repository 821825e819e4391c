"""The PME solver: total electrostatic energy, forces and virial of a periodic system.

Typical use, on any number of MPI ranks::

    from mpi4py import MPI
    import pmewald

    pme = pmewald.PME(box, cutoff=9.0, tolerance=1e-5)      # collective
    res = pme.compute(positions, charges)                    # collective
    res.energy, res.forces, res.virial, res.terms

Each rank passes the atoms it has (any split: all on one rank, none on some,
or spatially owned); it gets back the forces of exactly those atoms, in the
order it passed them. Energy and virial are global and identical on every rank.

Longer than 600 lines because it is the documented face of the solver: the docstrings of PME,
PMEResult and compute are the API reference (docs/api.md renders them), with the constructor's
and compute's checks; the work is in _tuning, _potentials, _charge_sets, _slab and the C++ core.
"""

from __future__ import annotations

import math

import numpy as np

from . import charge_sets as _charge_sets, potentials as _potentials
from .. import _core
from .._mpi.collective import agree, agreed, check_comm, duplicate, exscan_sum, require_mpi, same_everywhere
from .._checks.limits import check_fits, node_ranks, solver_footprint
from .._mpi.threads import Busy, Rules
from .result import ZERO_PARTS, TERMS, PMEResult, estimate_report
from .tuning import _NO_PLAN, TUNING_STATE, Tuning
from .options import Options
from .._checks.validate import canonical_box, check_atoms, checked_box, coincident_pair



class PME(Tuning, _charge_sets.ChargeSets):
    """Smooth particle-mesh Ewald electrostatics over MPI.

    Parameters
    ----------
    box : array (3, 3) or (3,)
        Rows are the lattice vectors (any triclinic cell); 3 numbers mean an
        orthorhombic box.
    cutoff : float
        Real-space cutoff; at most half the smallest cell height.
    tolerance : float
        Target relative RMS force error ``sqrt(sum |F - F_exact|^2 / sum |F_exact|^2)``.
        Used to choose whichever of ``alpha``, ``mesh`` and ``order`` are not given.
    alpha, mesh, order : optional
        Ewald splitting parameter (1/length), mesh points per axis (3 ints), and
        B-spline order (3..10). Explicit values override the automatic choice.
        ``order=None`` (default) chooses it, with the mesh, from 4 to 8.
    differentiation : "auto", "ad" or "ik"
        Analytical differentiation (one backward FFT; the forces are the exact gradient of
        the energy) or ik (three backward FFTs; more accurate forces for a given mesh).
        ``"auto"`` (default) takes whichever the cost model finds cheaper for the tolerance.
    comm : mpi4py intracommunicator, optional
        Defaults to ``MPI.COMM_WORLD``.
    comm_mode : "pt2pt", "nonblocking", "collective" or "auto"
        How the FFT remaps and ghost-layer exchanges communicate. ``"auto"`` times the
        three on this problem's own exchanges at the first :meth:`compute` (the slowest
        rank's time decides, so every rank picks the same) and keeps the fastest;
        ``parameters["comm_mode_used"]`` and ``parameters["comm_mode_seconds"]`` show the
        outcome. It measures again only when the mesh (the plans) changes.
    overlap : bool or None
        Hide the reciprocal part's communication behind the real-space pair loop: the
        exchanges are started and the pairs run in pieces while they are in flight, with
        progress calls in between (``timings()["comm_hidden"]``, ``["comm_wait"]``). The
        results are the same either way. ``None`` (default): where it was measured not
        slower, i.e. with ``"nonblocking"`` and ``"collective"`` (with ``"auto"``: if the
        winner is one of them), not with ``"pt2pt"``, whose blocking sends leave nothing to
        hide; ``parameters["overlap"]`` says what is used. docs/overlap.md has the
        measurements.
    overlap_poll : (int, float), optional
        With ``overlap``: test the exchange in flight every this many pair rows or this
        many microseconds, whichever comes first (default ``(256, 100.0)``).
    coulomb_constant : float
        1.0 (Gaussian units) by default; see :mod:`pmewald.units`.
    real_space : bool
        False gives the reciprocal part, self and background terms and the
        exclusion corrections only, for an engine that computes its own pairs.
    slab : bool
        2-D periodic slab (periodic in x and y, open in z): the box's first two rows lie in
        the xy plane and the third is ``(0, 0, Lz)``; atoms must lie in ``0 <= z < Lz``
        (not wrapped in z). The solver runs on the box extended by a vacuum gap in z and
        adds the Yeh-Berkowitz dipole correction (with the terms of a net charge) to the
        energy (``terms["slab"]``), forces, potentials, fields and virial; the virial's
        ``zz`` is that of scaling the atoms' z. docs/slab.md.
    slab_gap : float or "auto"
        The vacuum gap added in z (a length). ``"auto"`` (default): from the tolerance, the
        gap whose force error is half of it (``parameters["slab_gap"]``), chosen again by
        :meth:`set_box` when the new cell needs a longer one. The estimated error includes
        the gap's own error, measured on the charges (``parameters["estimated_error_slab_gap"]``;
        docs/slab.md, "The estimate"), so an explicit gap that is too short shows.
    skin : float or "auto"
        The real-space pair list is reused across :meth:`compute` calls: pairs are searched
        within ``cutoff + skin`` and the stored pairs re-evaluated at the new positions (only
        those closer than the cutoff count) until some atom has moved more than ``skin / 2``
        since the search, the atoms a rank passes (their count or ids), the exclusions or the
        box change; the atoms' owners and ghosts stay as at the search in between (LAMMPS's
        scheme). The results are those of a fresh search to rounding. ``0`` searches on every
        call; ``"auto"`` (default) is ``0.1 x cutoff`` from the second call on (the first
        searches afresh, so a single call costs what it does without a list); the skin is
        limited to half the smallest cell height minus the cutoff (``parameters["skin_used"]``). ``timings()`` has the
        rebuilds (``pair_list_builds``) and the seconds building, refreshing and evaluating
        the list. Used with ``real_space=True`` only; a call with ``potentials=True`` (or
        probes) searches afresh and leaves the list as it was. docs/realspace.md.
    precision : "double", "mixed" or "auto"
        The real-space pair kernel's arithmetic. ``"double"`` (default): double precision
        throughout, results identical to rounding (1e-12) on any rank count and split.
        ``"mixed"``: distances' square roots, erfc and exp in single precision on twice the
        SIMD lanes, differences, charges and every sum (energy, virial, forces) in double;
        each pair's force is then good to a few float ulps, and ``estimated_error``
        includes the resulting RMS force error, ``c u sqrt(2 sum_pairs |f_pair|^2 / N)``
        (u = 2^-24, c measured; ``estimated_error_float`` in :attr:`parameters`).
        ``"auto"``: the first call's probe runs mixed and measures that
        estimate; mixed is kept when it is at most a tenth of ``tolerance`` (typically
        tolerances of 1e-4 and looser; never 1e-6 and tighter), else double. With an
        explicit ``mesh`` (nothing tuned) or ``real_space=False``, ``"auto"`` is double.
        Potentials and fields are computed in double either way. ``parameters["precision"]``
        says what is used (``None`` while ``"auto"`` has not decided). docs/realspace.md.
    error_model : "correlated" or "uncorrelated"
        How the reciprocal-space error is estimated (for the automatic choice and
        ``estimated_error``): ``"correlated"`` (default) weighs the error functional by
        the structure factor of the charges of the first call, so neutral molecules and
        ion pairs, whose mesh errors largely cancel, are estimated as accurately as random
        charges; ``"uncorrelated"`` is the textbook functional that assumes uncorrelated
        charges (pessimistic for molecular systems). See docs/accuracy.md.

    Notes
    -----
    Automatic parameters (docs/accuracy.md has the details). Whatever is not given is
    chosen on the first :meth:`compute`, when the charges are known, as the cheapest
    combination of differentiation (``"auto"``), order (``None``: 4 to 8), alpha and mesh
    (smallest FFT-friendly mesh, factors 2, 3, 5, by cell heights) whose estimated RMS
    force error is within ``0.8 x tolerance x F``, by a model of the reciprocal-space cost
    (FFTs, solve, spreading and gathering; constants calibrated by
    ``python -m pmewald.bench cost``). F is the RMS force measured by a cheap probe on a
    coarse mesh (rounded to two digits, so the choice does not depend on the rank count);
    with ``real_space=False``, the charge-based force ``k q_rms^2 / d^2`` (d the mean atom
    spacing). For systems whose forces nearly cancel (perfect crystals) F is at least 1% of
    that typical force, and a single charge is modelled as two in the estimates.

    alpha: with ``real_space=True`` the real-space cost does not depend on alpha at a fixed
    cutoff, so alpha is chosen on the first call too, as small as the accuracy allows: the
    real-space (Kolafa-Perram) estimate takes whichever share of the error budget makes the
    mesh cheapest. Before that call ``parameters["alpha"]`` shows a provisional value,
    ``exp(-alpha^2 rc^2) = tolerance / 4``. With ``real_space=False`` that value is final
    from construction (an engine doing its own pairs needs alpha before the first call),
    and only the mesh, order and differentiation are chosen at the first call.

    The mesh is chosen again (at most three times) if the estimate then lies outside
    ``[0.25, 1] x tolerance x`` the RMS force just measured, and refined when an
    extrapolation of the energy from a coarser mesh says the energy error would exceed
    ``0.3 x tolerance x |E|``. After :meth:`set_box` the parameters are re-chosen only if
    the tolerance is no longer met. With an explicit ``mesh`` nothing is tuned: alpha is
    the construction value, order 5 and ``"ad"`` unless given.

    Systems whose forces vanish by symmetry (a single charge, a perfect crystal) have no
    force scale to be relative to: their energy error is checked too (within ``0.3 x
    tolerance x |E|``, against a second mesh) and the mesh refined until it is met.

    A box with negative edges or a left-handed basis (``np.diag([-L, L, L])``) is the same
    lattice as its right-handed form and is computed as that (``parameters["box"]`` is
    the box as given).

    Every bad argument raises ``ValueError`` on every rank (``TypeError`` for a
    non-communicator, raised on the rank that passed it), and the object stays as it was;
    a mesh whose share on a rank exceeds 2^31 - 1 elements or that rank's memory is
    refused before anything is allocated. One call at a time per object: another thread
    calling a busy object gets ``RuntimeError``. See docs/reliability.md.
    """

    def __init__(self, box, cutoff, *, tolerance=1e-5, alpha=None, mesh=None, order=None,
                 differentiation="auto", comm=None, comm_mode="nonblocking", coulomb_constant=1.0,
                 real_space=True, error_model="correlated", overlap=None, overlap_poll=None, skin="auto",
                 slab=False, slab_gap="auto", precision="double"):
        require_mpi()
        user_comm = check_comm(comm)  # TypeError for a non-communicator (the one local check)

        def check():
            return Options.parse(box, cutoff, tolerance, alpha, mesh, order, differentiation, comm_mode,
                                 coulomb_constant, real_space, error_model, overlap, overlap_poll, skin, slab,
                                 slab_gap, precision)

        with Rules():
            opts = agreed(user_comm, check)
            # Every later collective of this object runs on its own communicator.
            self._comm = duplicate(user_comm, self)
            same_everywhere(self._comm, opts.agreement_key(),
                            "PME parameters differ between ranks: every rank must pass the same box, cutoff, "
                            "tolerance, alpha, mesh, order, differentiation, comm_mode, coulomb_constant, "
                            "real_space, error_model, overlap, overlap_poll, skin, slab, slab_gap and precision")
            self._node_ranks = node_ranks(self._comm)
            # skin="auto": a fresh search on the first call (a single call costs what it did
            # without a list), the list from the second on (_compute).
            self._skin, self._skin_auto = opts.skin, opts.skin_auto
            self._skin_active = 0.0 if self._skin_auto else opts.skin
            self._slab = opts.slab  # None, or the slab geometry and dipole correction (pme/slab.py)
            self._slab_gap_error = None  # its gap's absolute RMS force error (_slab_estimate)
            self._last_estimate = estimate_report()  # parameters' estimate keys, None until a call
            self._precision_request = opts.precision
            self._init_state(opts)
            if opts.slab is not None:
                self._user_box = opts.slab.box

    def _init_state(self, opts: Options):
        self._busy = Busy("PME")
        b, rc, a, m, p = opts.box, opts.cutoff, opts.alpha, opts.mesh, opts.order
        self._user_box = b  # as given (reported by parameters); the solver gets its canonical form
        self._box, self._cutoff, self._tolerance = canonical_box(b), rc, opts.tolerance
        self._fixed = {"alpha": a, "mesh": m, "order": p}
        self._diff_request, self._comm_mode = opts.differentiation, opts.comm_mode
        self._k, self._real_space = opts.coulomb_constant, opts.real_space
        self._error_model = opts.error_model
        self._correlation = None  # tuning.ChargeCorrelation of the first call's charges (correlated model)
        self._correlation_box = None  # the (canonical) box it was made in
        self._overlap, self._poll = opts.overlap, opts.poll
        self._solver = None
        self._params = None
        self._recheck = False
        self._cache_estimate = None
        self._measured = None  # (parameters and charges, errors measured there): _tuning._check_measured
        self._plan = dict(_NO_PLAN)  # what the choice plans with (_tuning._check_measured)
        self._mesh_target = None  # the energy check's bound on the mesh (_tuning._check_energy)
        self._choice = None
        self._energy_error = None
        # The provisional alpha, exp(-alpha^2 rc^2) = tolerance / 4 (the real-space error a
        # fraction of the budget): final with real_space=False (an engine doing its own pairs
        # needs it now), and the probe's alpha otherwise. The rest is chosen on the first
        # compute, when the charges are known; an explicit mesh fixes everything now.
        self._alpha = a if a is not None else math.sqrt(math.log(4.0 / opts.tolerance)) / rc
        self._order = p
        self._differentiation = None if opts.differentiation == "auto" else opts.differentiation
        # The pair kernel's precision (None: "auto", decided by the first call's probe,
        # _tuning.Tuning._choose_precision); its input, the mixed kernel's sum over the
        # pairs of |f_pair|^2 at the last call (0 with double).
        req = self._precision_request
        self._precision = None if req == "auto" else req
        if req == "auto" and (m is not None or not opts.real_space):
            self._precision = "double"
        self._pair_force2 = 0.0
        if m is not None:
            self._order = p if p is not None else 5
            self._differentiation = self._differentiation or "ad"
            self._build(self._alpha, m, self._order, self._differentiation)

    # ------------------------------------------------------------------ set-up

    def _build(self, alpha, mesh, order, differentiation):
        mesh = tuple(int(v) for v in mesh)
        new = {"alpha": float(alpha), "mesh": mesh, "order": int(order), "differentiation": differentiation}
        self._alpha, self._order, self._differentiation = new["alpha"], new["order"], differentiation
        if self._solver is not None and new == self._params:
            if self._solver.precision != self._kernel_precision():
                self._solver.set_precision(self._kernel_precision())  # collective, like every _build
            return
        self._solver = self._new_solver(mesh, int(order), float(alpha), differentiation, self._real_space,
                                        skin=self._skin_active)
        self._params = new
        self._cache_estimate = None

    def _new_solver(self, mesh, order, alpha, differentiation, real_space, mode=None, skin=0.0):
        """Collective: a C++ solver, after the agreed per-rank size check (_limits: the
        32-bit element limit and the memory available to each rank). The core agrees on
        its own errors, out of memory in its buffers and grids included. `mode`: the
        communication mode (default: comm_mode); `skin`: its pair list's (0, a fresh
        search every call, for the tuning's one-off solvers)."""
        comm = self._comm

        def fits():
            elements, nbytes = solver_footprint(mesh, comm.Get_size(), comm.Get_rank(), order, differentiation)
            check_fits(f"mesh {tuple(mesh)}", elements, nbytes, comm.Get_size(), self._node_ranks)

        agreed(comm, fits)
        precision = self._kernel_precision() if real_space else "double"
        return _core.PMESolver(comm, self._box, mesh, order, alpha, self._cutoff, differentiation,
                               mode or self._comm_mode, self._k, real_space, self._overlap, *self._poll, skin,
                               precision)

    def _mode_used(self):
        """The mode the exchanges use: comm_mode, or with "auto" the measured winner
        (None before the first compute has measured)."""
        if self._comm_mode != "auto":
            return self._comm_mode
        if self._solver is None or not self._solver.comm_mode_seconds and self._comm.Get_size() > 1:
            return None
        return self._solver.comm_mode

    def _overlap_used(self):
        """Whether the exchanges are overlapped (None while "auto" has not measured)."""
        if self._overlap is not None:
            return self._overlap
        if self._comm_mode == "auto" and self._mode_used() is None:
            return None
        if self._solver is not None:
            return self._solver.overlap
        return None if self._comm_mode == "auto" else self._comm_mode != "pt2pt"

    def _probe_mode(self):
        """The mode of the tuning's probe solvers ("auto" would measure for each)."""
        return self._mode_used() or "nonblocking" if self._comm_mode == "auto" else self._comm_mode

    @property
    def parameters(self) -> dict:
        """Parameters and error estimates.

        Automatic choices are made on the first :meth:`compute`; before it ``mesh`` and an
        automatic ``order`` are ``None``, ``differentiation`` is ``"auto"`` unless given,
        and ``alpha`` is provisional with ``real_space=True`` (final with
        ``real_space=False``). ``modelled_cost`` is the cost model's seconds per
        reciprocal step on one rank for the choice (``None`` when nothing was chosen), and
        the error estimates refer to the last computed result: ``estimated_error`` (relative
        to the RMS force) and ``estimated_error_absolute``, combined from
        ``estimated_error_real``, ``estimated_error_reciprocal`` and ``estimated_error_float``;
        ``estimated_error_correlation`` is the correlation of the real-space and mesh errors
        the combination uses (0: independent, in quadrature). ``estimated_error_measured`` is
        True when the real-space and mesh parts and that correlation were measured on a
        sample of the atoms at these parameters (the automatic choice does so where the mesh
        part matters, docs/accuracy.md "Measured at the choice"), False when they are the
        model's.
        """
        p = {"alpha": self._alpha, "mesh": self._params["mesh"] if self._params else None, "order": self._order,
             "differentiation": self._differentiation or "auto",
             "modelled_cost": self._choice["cost"] if self._choice else None}
        p.update(cutoff=self._cutoff, tolerance=self._tolerance,
                 comm_mode=self._comm_mode, comm_mode_used=self._mode_used(),
                 comm_mode_seconds=dict(self._solver.comm_mode_seconds) if self._solver is not None else {},
                 overlap=self._overlap_used(), overlap_poll=self._poll,
                 coulomb_constant=self._k, real_space=self._real_space,
                 error_model=self._error_model, box=self._user_box.copy(), skin=self._skin,
                 precision=self._precision, precision_request=self._precision_request,
                 skin_used=self._solver.skin if self._solver is not None else None,
                 slab=self._slab is not None, slab_gap=self._slab.gap if self._slab is not None else None)
        p.update(self._last_estimate)
        return p

    def set_box(self, box):
        """Change the box (NPT). Plans and buffers are reused (same mesh, alpha, order).

        With automatic parameters, the next compute checks the error estimate for the
        new box and chooses them again only if the tolerance is no longer met. A bad or
        differing box raises ``ValueError`` on every rank and leaves the old box.
        """
        require_mpi()
        with self._busy:
            sl = self._slab
            if sl is None:
                b = agreed(self._comm, lambda: checked_box(box, self._cutoff, "the new"))
            else:  # the same gap on the new slab box
                sl = agreed(self._comm, lambda: self._slab.rebuilt(box, self._cutoff, self._tolerance))
                b = sl.extended
            same_everywhere(self._comm, b.tobytes(), "set_box: the box differs between ranks")
            c = canonical_box(b)
            if self._solver is not None:
                self._solver.set_box(c)
            self._user_box, self._box = (b, c) if sl is None else (sl.box, c)
            self._slab = sl
            self._slab_gap_error = None  # measured again on the next call (_slab_estimate)
            if self._cache_estimate is not None and not _near(c, self._cache_estimate[2], _ESTIMATE_BOX_CHANGE):
                self._cache_estimate = None
                self.__dict__.pop("_sets_estimates", None)  # the charge sets' (_charge_sets)
            if not _near(c, self._correlation_box, _TABLE_BOX_CHANGE):
                # The table is indexed by the reciprocal lattice, so it holds for a box scaled
                # with its atoms (NPT); after a larger change it and the measured errors are
                # made again on the next call (rebuilding them every NPT step cost 6x a compute).
                self._correlation, self._measured = None, None
            self._recheck = self._fixed["mesh"] is None

    # ----------------------------------------------------------------- compute

    def compute(self, positions, charges, ids=None, exclusions=None, *, potentials=False, probes=None) -> PMEResult:
        """Energy, forces and virial of the atoms passed by all ranks together (collective).

        Parameters
        ----------
        positions : array (n_local, 3)
            Cartesian positions, anywhere in space (wrapped into the box).
        charges : array (n_local,) or (n_local, m)
            One charge per atom, or m charge sets on the same atoms (column c: set c).
            With (n_local, m) the call computes every set at once, sharing the atoms'
            migration, the pair search and each pair's erfc/exp, the B-spline stencils and
            the FFT plans (each set has its own spread, FFTs, solve and gather); the result
            has the set as its leading axis (:class:`PMEResult`; ``res.charge_set(c)`` equals
            ``compute(positions, charges[:, c], ...)`` to rounding, 1e-12 relative), also
            for m = 1. Every rank passes the same m (shape (0, m) where a rank has no
            atoms); a NaN in any set is refused. A first call tunes the parameters on the
            set with the largest sum of squared charges, each set's ``estimated_error`` is
            its own (``parameters`` shows that of the tuned set). A sets call searches
            the pairs afresh and leaves the pair list (``skin``) as it was, like a call with
            potentials. docs/potentials.md has how and at what cost.
            Global atom identities (used by ``exclusions``). Default: the global
            index in rank order (rank 0's atoms first).
        exclusions : int array (m, 2), optional
            Pairs of ids whose interaction is excluded; each pair once, on any rank,
            each closer than the cutoff. Two atoms at the same position must be an
            excluded pair (a virtual site, a Drude particle on its core).
        potentials : bool
            Also the per-atom potentials ``phi_i = dE/dq_i``, energies ``q_i phi_i / 2`` and
            fields (``PMEResult.potentials``, ``energies``, ``fields``). Must be the same on
            every rank. Costs a second interpolation from the mesh (ik: also one more
            backward FFT) and a potential pass in the pair loop, only when asked
            (docs/potentials.md has the measurements); forces, energy and virial are the same.
        probes : array (p, 3), optional
            Points without charge at which to compute the potential and field as well
            (``PMEResult.probe_potentials``, ``probe_fields``); implies ``potentials``. Any
            rank may pass any number of probes (or None); each gets its own back in its
            order. They do not change the energy, forces or virial. A probe must not lie on
            an atom or another probe (the potential there is infinite: ``ValueError``).

        Bad input on any rank raises ``ValueError`` (``TypeError`` for a wrong kind of
        object, ``MemoryError`` when a conversion runs out of memory) on every rank, with
        the same message; the object is unchanged and the next call is as if the failed
        one had not been made. When every charge is zero the result is exactly zero
        (energy, forces, virial) and nothing is tuned or computed.
        """
        require_mpi()
        with self._busy:
            return self._compute(positions, charges, ids, exclusions, potentials, probes)

    def _potentials_of(self, positions, charges, ids, exclusions):
        """Collective: the potentials of compute(..., potentials=True) without the error
        estimate (the matrix-vector products of pmewald.qeq)."""
        require_mpi()
        with self._busy:
            return self._compute(positions, charges, ids, exclusions, True, None, estimate=False).potentials

    def _compute(self, positions, charges, ids, exclusions, potentials=False, probes=None, estimate=True):
        comm = self._comm
        # Local checks, agreed in the same allreduce that sums what the call needs.
        error, local = None, (0.0,) * 8
        try:
            sets = _charge_sets.is_sets(charges)  # charges (n, m): m charge sets
            pos, q, idv, ex = (_charge_sets.check_atoms if sets else check_atoms)(positions, charges, ids,
                                                                                  exclusions, self._box)
            n_sets = q.shape[1] if sets else 0
            if sets and self._slab is not None:
                raise ValueError("charge sets (charges of shape (n, m)) are not supported with slab=True: pass "
                                 "one set per call")
            want, pts = _potentials.check_request(potentials, probes, self._box)
            if self._slab is not None:
                self._slab.check_positions(pos)
                self._slab.check_positions(pts, "probes")
            # (q * q).sum(), not q @ q: a BLAS dot may wake a thread pool (measured 12 ms
            # per call at 30k atoms). Overflowing squares are refused below.
            with np.errstate(over="ignore"):
                local = (len(q), float(q.sum()), float((q * q).sum()), 1.0 if idv is None else 0.0,
                         1.0 if want else 0.0, len(pts), n_sets, n_sets * n_sets)
        except Exception as e:  # noqa: BLE001 - agreed: every rank raises it
            error = e
        n, sum_q, sum_q2, n_without_ids, n_want, n_probes, m_sum, m2_sum = agree(comm, error, local)
        n_atoms, size = int(n), comm.Get_size()
        if 0 < n_without_ids < size:
            raise ValueError(f"ids were passed on {size - int(n_without_ids)} of {size} ranks: pass ids on every "
                             "rank (an empty array where a rank has no atoms) or on none")
        if 0 < n_want < size:
            raise ValueError(f"potentials=True was passed on {int(n_want)} of {size} ranks: pass the same on "
                             "every rank")
        _charge_sets.check_agreed(m_sum, m2_sum, size)
        if n_atoms == 0:
            raise ValueError("no atoms were passed on any rank (positions are empty)")
        if not math.isfinite(sum_q2):
            raise ValueError("charges are too large: the sum of their squares overflows")
        if idv is None:
            offset = exscan_sum(comm, len(q))
            idv = np.arange(offset, offset + len(q), dtype=np.int64)
        want = n_want > 0 or n_probes > 0
        if m_sum > 0:
            return self._compute_sets(pos, q, idv, ex, n_atoms, want, pts, int(n_probes), estimate)
        if sum_q2 == 0.0:
            return self._zero_result(len(q), n_atoms, want, len(pts))
        saved = {name: getattr(self, name) for name in TUNING_STATE}
        try:
            if self._error_model == "correlated" and self._correlation is None:
                self._correlation = self._charge_correlation(pos, q, idv, sum_q2)
            self._probe_base = None
            if n_probes > 0:  # probes: atoms of zero charge (the tuning sees the atoms only)
                pids, self._probe_base = _potentials.probe_ids(comm, idv, len(pts), int(n_probes))
                run = _potentials.append(pos, q, idv, pts, pids)
            else:
                run = (pos, q, idv)
            if self._solver is None or self._recheck:
                raw = self._tune(pos, q, idv, ex, n_atoms, sum_q2)
                if want:
                    raw = self._run(self._solver, *run, ex, potentials=True)
            else:
                raw = self._run(self._solver, *run, ex, potentials=want)
            if self._skin_auto and self._skin_active == 0.0:
                self._solver.set_skin(self._skin)  # collective: every rank got here
                self._skin_active = self._skin
            res = self._result(raw, n_atoms, sum_q, sum_q2, estimate)
            if want:
                for name, value in _potentials.split(raw, q, len(q), len(pts)).items():
                    setattr(res, name, value)
                res.forces = res.forces[:len(q)]
            if self._slab is not None:
                res = self._slab.correct(comm, res, pos, q, self._k, pts)
                self._slab_estimate(res, pos, q, estimate)
            return res
        except BaseException:
            for name, value in saved.items():  # nothing of a failed call is kept
                setattr(self, name, value)
            raise

    def _slab_estimate(self, res, pos, q, estimate):
        """Collective: a slab's estimate, relative to the corrected forces, with the gap's error
        in quadrature: measured on this call's atoms (Slab.gap_force_error) at the first call
        for this box and gap, kept until set_box."""
        if estimate:
            if self._slab_gap_error is None:
                self._slab_gap_error = self._slab.gap_force_error(self._comm, pos, q, self._k)
            gap = self._slab_gap_error
            res.estimated_error_absolute = math.hypot(res.estimated_error_absolute, gap)
            res.estimated_error = res.estimated_error_absolute / res.rms_force if res.rms_force > 0 else math.inf
            self._last_estimate["estimated_error_absolute"] = res.estimated_error_absolute
            self._last_estimate["estimated_error_slab_gap"] = gap / res.rms_force if res.rms_force > 0 else math.inf
        self._last_estimate["estimated_error"] = res.estimated_error

    def _run(self, solver, pos, q, idv, ex, potentials=False):
        """solver.compute, refusing a non-finite result (identical on every rank: the
        energy and the force and virial sums are reduced) with the reason."""
        raw = solver.compute(pos, q, idv, ex, potentials)
        if solver is self._solver:
            self._pair_force2 = float(raw["sum_pair_force2"])
        # NaN and inf survive the sums (inf - inf is NaN): three scalar checks.
        if not (math.isfinite(raw["energy"]) and math.isfinite(raw["sum_force2"])
                and math.isfinite(raw["virial"].sum())):
            self._refuse_non_finite(raw, pos, idv, ex)
        return raw

    def _refuse_non_finite(self, raw, pos, idv, ex):
        """Collective, on the failure path only: find why the result is not finite (two
        atoms at the same position that are not an excluded pair: their erfc pair term is
        infinite) from every rank's atoms, and raise it on every rank."""
        parts = self._comm.allgather((idv, pos, ex))
        ids = np.concatenate([p[0] for p in parts])
        where = np.concatenate([p[1] for p in parts])
        pairs = np.concatenate([p[2] for p in parts])
        hit = coincident_pair(self._box, where, ids, pairs, 1e-8 / self._alpha)  # the kernel's: 1e-10 / alpha
        if hit is not None:
            a, b, x = hit
            base = getattr(self, "_probe_base", None)
            if base is not None and b >= base:
                raise ValueError(f"{_potentials.describe_atom(b, base)} is at the same position as "
                                 f"{_potentials.describe_atom(a, base)} ({x[0]:.6g}, {x[1]:.6g}, {x[2]:.6g}) (up to "
                                 "a lattice vector): the potential there is infinite. Move the probe")
            raise ValueError(f"atoms with ids {a} and {b} are at the same position ({x[0]:.6g}, {x[1]:.6g}, "
                             f"{x[2]:.6g}) (up to a lattice vector) and are not an excluded pair: their Coulomb "
                             "energy is infinite. Exclude the pair (a virtual site or Drude particle on its "
                             "atom) or move one of them")
        raise ValueError(f"the result is not finite (energy {raw['energy']}): positions or charges too large for "
                         "double precision?")

    def _zero_result(self, n_local, n_atoms, potentials=False, n_probes=0) -> PMEResult:
        """All charges zero: exactly zero energy, forces, virial (and potentials and fields,
        which are linear in the charges); nothing tuned."""
        self._last_estimate = estimate_report(0.0, 0.0, ZERO_PARTS)
        res = PMEResult(energy=0.0, forces=np.zeros((n_local, 3)), virial=np.zeros((3, 3)),
                        terms={t: 0.0 for t in TERMS}, estimated_error=0.0, estimated_error_absolute=0.0,
                        rms_force=0.0, n_atoms=n_atoms, total_charge=0.0)
        if potentials:
            for name, value in _potentials.split({}, np.zeros(n_local), n_local, n_probes).items():
                setattr(res, name, value)
        if self._slab is not None:
            res.terms["slab"] = 0.0
        return res

    def _result(self, raw, n_atoms, sum_q, sum_q2, estimate=True) -> PMEResult:
        # estimate=False (pmewald.qeq's products): no error estimate (NaN), whose error model
        # is evaluated again for every new sum of squared charges (80 ms at 3k atoms).
        est_abs, parts = self._estimate(sum_q2, n_atoms) if estimate else (
            math.nan, {"real": math.nan, "recip": math.nan, "float": math.nan})
        rms = math.sqrt(raw["sum_force2"] / n_atoms)
        est_rel = est_abs / rms if rms > 0 else math.inf
        self._last_estimate = estimate_report(est_rel, est_abs, parts)
        terms = {t: float(raw["terms"].get(t, 0.0)) for t in TERMS}
        return PMEResult(energy=float(raw["energy"]), forces=raw["forces"], virial=np.asarray(raw["virial"]),
                         terms=terms, estimated_error=est_rel, estimated_error_absolute=est_abs, rms_force=rms,
                         n_atoms=n_atoms, total_charge=sum_q)

    def timings(self) -> dict:
        """Cumulative seconds per phase on this rank (spread, ghost, fft, solve, gather,
        real_space, ghost_atoms, exclusions, migrate, reduce) plus FFT/halo communication
        detail (``fft_comm_wait``, ``fft_messages``, ``fft_bytes``, ``ghost_*``), the messages and
        bytes this rank sent for the atoms (``migrate_messages``, ``migrate_bytes``: to their owners
        and results back; ``ghost_atoms_messages``, ``ghost_atoms_bytes``: ghost atoms and the forces
        on them) and ``calls``.

        ``comm_wait``: seconds inside the reciprocal part's exchanges not hidden (blocked
        in MPI); with ``overlap``, ``comm_hidden`` (pair work run while an exchange was
        in flight), ``overlap_polls``, ``overlap_poll_seconds`` (inside the progress calls'
        ``MPI_Test*``: the polling's cost), ``overlap_progress_seconds`` (the progress calls
        with the unpacks they did), ``overlap_exchanges`` and ``overlap_hidden_exchanges``
        (completed while work ran). With ``comm_mode="auto"``: ``auto_pt2pt``,
        ``auto_nonblocking``, ``auto_collective`` (the measured seconds per mode) and
        ``auto_measure`` (the measurement's cost). With a pair list (``skin``):
        ``pair_list_builds`` (the searches so far), ``pair_list_build`` (seconds building it:
        its migration, ghosts and search), ``pair_list_refresh`` (checking the displacements
        and sending them along the frozen plans) and ``pair_list_evaluate`` (the stored pairs
        at the new positions), all inside ``real_space``."""
        return dict(self._solver.timings()) if self._solver is not None else {}

    def reset_timings(self):
        if self._solver is not None:
            self._solver.reset_timings()

    @property
    def brick(self):
        """This rank's brick of the mesh, ((lo), (hi))."""
        return self._solver.brick if self._solver is not None else None


# set_box keeps the correlated error model's table while no component of the box has moved
# by more than this fraction of the longest edge since the table was made, and the error
# estimate (a sum over the mesh, ~0.1 s at 200k points) while none has moved by more than
# _ESTIMATE_BOX_CHANGE (the mesh spacing by at most 0.5%: the estimate, ~h^p, by at most
# 4% at order 8; an NPT run recomputes it once its box has drifted that far).
_TABLE_BOX_CHANGE = 0.05
_ESTIMATE_BOX_CHANGE = 0.005


def _near(box, reference, fraction):
    """Whether no component of `box` differs from `reference` by more than `fraction` of
    its longest edge (None: never)."""
    if reference is None:
        return False
    scale = float(np.linalg.norm(reference, axis=1).max())
    return float(np.abs(np.asarray(box) - reference).max()) <= fraction * scale
