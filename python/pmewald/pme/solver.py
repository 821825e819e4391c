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

This is the documented face of the solver: the docstrings of PME and compute are the API
reference (docs/api.md renders them), with the constructor's and compute's checks. PME is
composed of parts: its Problem (problem.py: what the solvers are made for, and how), its Tuner
(tuning.py: the automatic choice and the one TuningState a call may change), with
``cutoff="auto"`` its CutoffTuning (cutoff_search.py: the walk over cutoffs, each with its own
Problem and Tuner), and the per-call helpers of charge_sets.py, potentials.py and slab.py; the
work is in the C++ core.
"""

from __future__ import annotations

import math

import numpy as np

from . import charge_sets as _charge_sets, potentials as _potentials
from .._checks.validate import canonical_box, check_atoms, checked_box
from .._mpi.collective import agree, agreed, check_comm, duplicate, exscan_sum, require_mpi, same_everywhere
from .._mpi.threads import Busy, Rules
from .options import Options
from .problem import Problem
from .result import TERMS, PMEResult, estimate_report, zero_result
from .cutoff_search import CutoffTuning
from .tuning import Tuner


class PME:
    """Smooth particle-mesh Ewald electrostatics over MPI.

    Parameters
    ----------
    box : array (3, 3) or (3,)
        Rows are the lattice vectors (any triclinic cell); 3 numbers mean an
        orthorhombic box.
    cutoff : float, "auto" or ("auto", lower bound)
        Real-space cutoff; at most half the smallest cell height. ``"auto"`` chooses it by
        timing the calls (GROMACS's ``-tunepme``): candidates ``x 1.1^k`` from the cutoff
        holding ~200 atoms (its automatic choice scaled to each, checked like a choice: every
        call meets ``tolerance``), walked down then up until one is 12% slower than the best;
        the two fastest then alternate call by call and the faster is kept. Seven calls per
        candidate, the first two dearer (checks, plans): for loops of some hundred calls, not
        single points. ``("auto", lo)`` stays at or above ``lo``. Not with ``alpha``, ``mesh``
        or ``real_space=False``. ``parameters``: ``cutoff`` (None before the first call),
        ``cutoff_seconds``, ``cutoff_search``, ``cutoff_duel``. docs/accuracy.md, "The cutoff
        by timing".
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
        How the FFT remaps and ghost-layer exchanges communicate. ``"auto"`` tries them on
        the first calls (after a warm-up, each mode, with and without ``overlap`` where it is
        None, runs one call, twice: 11 calls) and keeps the fastest (the slowest rank's time
        decides); the results are the same in every mode. ``parameters["comm_mode_used"]``
        (None while it tries) and ``["comm_mode_seconds"]`` show the outcome; a new mesh tries
        again. docs/overlap.md.
    overlap : bool or None
        Hide the reciprocal part's communication behind the real-space pair loop: the
        exchanges are started and the pairs run in pieces while they are in flight, with
        progress calls in between (``timings()["comm_hidden"]``, ``["comm_wait"]``). The
        results are the same either way. ``None`` (default): with ``"nonblocking"`` and
        ``"collective"``, not with ``"pt2pt"`` (its blocking sends leave nothing to hide), and
        with ``"auto"`` as its trial finds fastest. ``parameters["overlap"]`` says what is used.
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
    ghost_exchange : "auto", "direct" or "staged"
        How the real-space ghost atoms travel between ranks. ``"direct"``: each image straight
        to every domain within the cutoff (one message per such domain: 26 and more on a 3-D
        grid); ``"staged"``: axis by axis through the two neighbours, forwarding what came
        (LAMMPS's and GROMACS's scheme: 2 messages per axis and pulse, more pulses when the
        cutoff spans several domains). The same ghosts either way, so the same results to
        rounding. ``"auto"`` (default): staged where the direct exchange would send more than
        twice as many messages (from 32 ranks on a 3-D grid; direct on 1-16 ranks, where it
        is one round of a few messages), decided by the geometry alone;
        ``parameters["ghost_exchange_used"]`` says which. docs/scaling.md.
    balance : "off", "once" or "dynamic"
        Real-space load balancing. ``"off"`` (default): the real-space domains are the mesh's
        bricks. Otherwise the real-space part runs on domains of its own whose cut planes
        (per axis, shared by the ranks along it) move so that every rank has the same pair
        work, while the mesh keeps its bricks: ``"once"`` places the cuts at the first call
        (equal atom counts), corrects them once by the work measured there, and keeps them;
        ``"dynamic"`` also moves them (half way, as GROMACS) after any call whose imbalance
        exceeds ``balance_threshold``. The cost: the atoms' migration to the balanced owners
        and the forces' return (one more neighbour exchange each way per call). Calls with
        ``potentials`` and charge sets run the pairs on the bricks. ``timings()`` reports the
        imbalance (``real_space_imbalance``: slowest / mean pair-loop seconds) whatever the
        mode. docs/scaling.md, "Load balancing".
    balance_by : "pairs" or "time"
        The work balanced: the candidate pairs each rank's pair loop tests (default;
        deterministic) or its measured seconds (includes whatever else slows a rank).
    balance_threshold : float
        ``"dynamic"``: re-balance when slowest / mean work exceeds this (default 1.05).
    pair_layout : "auto", "atoms" or "clusters"
        How the reused pair list (``skin`` > 0) evaluates its pairs: ``"atoms"``, each atom's
        partners gathered into the pair kernel, or ``"clusters"``, the same pairs as 4 x 4
        blocks of spatial clusters with masks (GROMACS's nbnxm layout). The same results to
        rounding. ``"auto"`` (default): in double atoms (clusters 1.6-1.8x slower); with the
        mixed kernel both, timed on the list's first four calls, the faster kept (clusters
        won on an AVX2 core, atoms with AVX-512); docs/realspace.md, "Cluster pairs".
        ``parameters["pair_layout_used"]``: the last call's; ``["pair_layout_trial"]``.

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

    Systems whose forces vanish by symmetry (a single charge, a perfect crystal) have no force
    scale to be relative to: their energy error is checked too (within ``0.3 x tolerance x
    |E|``, against a second mesh) and the mesh refined until it is met. A box with negative
    edges or a left-handed basis (``np.diag([-L, L, L])``) is the same lattice as its
    right-handed form and is computed as that (``parameters["box"]`` is the box as given).

    Every bad argument raises ``ValueError`` on every rank (``TypeError`` for a
    non-communicator, raised on the rank that passed it), and the object stays as it was;
    a mesh whose share on a rank exceeds 2^31 - 1 elements or that rank's memory is
    refused before anything is allocated. One call at a time per object: another thread
    calling a busy object gets ``RuntimeError``. See docs/reliability.md.
    """

    def __init__(self, box, cutoff, *, tolerance=1e-5, alpha=None, mesh=None, order=None,
                 differentiation="auto", comm=None, comm_mode="nonblocking", coulomb_constant=1.0,
                 real_space=True, error_model="correlated", overlap=None, overlap_poll=None, skin="auto",
                 slab=False, slab_gap="auto", precision="double", ghost_exchange="auto", balance="off",
                 balance_by="pairs", balance_threshold=1.05, pair_layout="auto"):
        require_mpi()
        user_comm = check_comm(comm)  # TypeError for a non-communicator (the one local check)

        def check():
            return Options.parse(box, cutoff, tolerance, alpha, mesh, order, differentiation, comm_mode,
                                 coulomb_constant, real_space, error_model, overlap, overlap_poll, skin, slab,
                                 slab_gap, precision, ghost_exchange, balance, balance_by, balance_threshold,
                                 pair_layout)

        with Rules():
            opts = agreed(user_comm, check)
            # Every later collective of this object runs on its own communicator.
            self._comm = duplicate(user_comm, self)
            same_everywhere(self._comm, opts.agreement_key(),
                            "PME parameters differ between ranks: every rank must pass the same box, cutoff, "
                            "tolerance, alpha, mesh, order, differentiation, comm_mode, coulomb_constant, "
                            "real_space, error_model, overlap, overlap_poll, skin, slab, slab_gap, precision, "
                            "ghost_exchange, balance and pair_layout")
            self._busy = Busy("PME")
            self._opts = opts
            # The box as given (reported by parameters); the solver gets its canonical form.
            self._user_box = opts.slab.box if opts.slab is not None else opts.box
            self._problem = Problem(self._comm, opts)
            self._slab_gap_error = None  # a slab gap's absolute RMS force error (_slab_estimate)
            self._last_estimate = estimate_report()  # parameters' estimate keys, None until a call
            self._tuner = Tuner(self._problem, opts)  # with an explicit mesh: builds the solver now
            # cutoff="auto": the walk over cutoffs by timing (pme/cutoff_search.py), started by the first call
            self._cutoffs = CutoffTuning(self._comm, opts, lambda problem: Tuner(problem, opts)) if (
                opts.cutoff_auto) else None

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
        model's. ``fft_planner`` is the FFTW planner of the solver's plans: the automatic
        choice plans by ``"estimate"``, and the solver it keeps is planned with the configured
        one (``"measure"`` unless ``PMEWALD_FFTW_PLANNER`` says otherwise) from the next call
        on (docs/reliability.md).
        """
        st, pr, o, tuner = self._tuner.state, self._problem, self._opts, self._tuner
        solver = st.solver
        p = {"alpha": st.alpha, "mesh": st.params["mesh"] if st.params else None, "order": st.order,
             "differentiation": st.differentiation or "auto",
             "modelled_cost": st.choice["cost"] if st.choice else None}
        searching = self._cutoffs is not None
        p.update(cutoff=None if searching and self._cutoffs.search is None else pr.cutoff,
                 cutoff_request=o.cutoff_request(),
                 **(self._cutoffs.report() if searching else {"cutoff_seconds": {}, "cutoff_search": "off",
                                                              "cutoff_duel": None}))
        p.update(tolerance=pr.tolerance,
                 comm_mode=pr.comm_mode, comm_mode_used=tuner.mode_used(),
                 comm_mode_seconds=dict(solver.comm_mode_seconds) if solver is not None else {},
                 overlap=tuner.overlap_used(), overlap_poll=pr.poll,
                 coulomb_constant=pr.k, real_space=pr.real_space,
                 error_model=o.error_model, box=self._user_box.copy(), skin=pr.skin,
                 precision=st.precision, precision_request=o.precision,
                 skin_used=solver.skin if solver is not None else None,
                 fft_planner=solver.planner if solver is not None else None,
                 slab=pr.slab is not None, slab_gap=pr.slab.gap if pr.slab is not None else None,
                 ghost_exchange=o.ghost_exchange,
                 ghost_exchange_used=solver.ghost_exchange if solver is not None else None,
                 balance=o.balance, balance_by=o.balance_by, balance_threshold=o.balance_threshold,
                 pair_layout=o.pair_layout, pair_layout_used=solver.pair_layout_used if solver is not None else None,
                 pair_layout_trial=solver.pair_layout_trial if solver is not None else None)
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
            pr = self._problem
            sl = pr.slab
            if sl is None:
                b = agreed(self._comm, lambda: checked_box(box, pr.cutoff, "the new"))
            else:  # the same gap on the new slab box
                sl = agreed(self._comm, lambda: pr.slab.rebuilt(box, pr.cutoff, pr.tolerance))
                b = sl.extended
            same_everywhere(self._comm, b.tobytes(), "set_box: the box differs between ranks")
            c = canonical_box(b)
            st = self._tuner.state
            if st.solver is not None:
                st.solver.set_box(c)
            self._user_box, pr.box = (b if sl is None else sl.box), c
            pr.slab = sl
            self._slab_gap_error = None  # measured again on the next call (_slab_estimate)
            if st.cache_estimate is not None and not _near(c, st.cache_estimate[2], _ESTIMATE_BOX_CHANGE):
                st.cache_estimate = None
                st.sets_estimates = {}
            if not _near(c, st.correlation_box, _TABLE_BOX_CHANGE):
                # The table is indexed by the reciprocal lattice, so it holds for a box scaled
                # with its atoms (NPT); after a larger change it and the measured errors are
                # made again on the next call (rebuilding them every NPT step cost 6x a compute).
                st.correlation, st.measured = None, None
            st.recheck = self._tuner.fixed["mesh"] is None
            if self._cutoffs is not None:
                self._cutoffs.box_changed(pr)  # a box moved far: the cutoff is timed again

    # ----------------------------------------------------------------- compute

    def compute(self, positions, charges, ids=None, exclusions=None, *, potentials=False, probes=None,
                estimate=True) -> PMEResult:
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
        estimate : bool
            False skips the error estimate of this result (``estimated_error`` and
            ``estimated_error_absolute`` are NaN, in ``parameters`` too until a call with
            it): it is evaluated again whenever the sum of squared charges changes (about 10 ms
            at 200 atoms, 80 ms at 3,000), which a caller changing charges at every call (a fit,
            the autograd interfaces) need not pay. Local: no rank waits for another's estimate.
            The first call's automatic choice estimates regardless.

        Bad input on any rank raises ``ValueError`` (``TypeError`` for a wrong kind of
        object, ``MemoryError`` when a conversion runs out of memory) on every rank, with
        the same message; the object is unchanged and the next call is as if the failed
        one had not been made. When every charge is zero the result is exactly zero
        (energy, forces, virial) and nothing is tuned or computed.
        """
        require_mpi()
        with self._busy:
            return self._compute(positions, charges, ids, exclusions, potentials, probes, estimate=bool(estimate))

    def _potentials_of(self, positions, charges, ids, exclusions):
        """Collective: the potentials of compute(..., potentials=True) without the error
        estimate (the matrix-vector products of pmewald.qeq)."""
        require_mpi()
        with self._busy:
            return self._compute(positions, charges, ids, exclusions, True, None, estimate=False).potentials

    def _compute(self, positions, charges, ids, exclusions, potentials=False, probes=None, estimate=True,
                 _retry=False):
        """The one call path of one charge set (charges (n,)) and of m sets (charges (n, m)):
        local checks agreed in the allreduce that sums what the call needs, the ids, the
        tuning on the (lead) set, the solver call and the result; what a failed call changed
        of the tuning state is put back."""
        comm, pr = self._comm, self._problem
        error, local = None, (0.0,) * 8
        try:
            sets = _charge_sets.is_sets(charges)  # charges (n, m): m charge sets
            pos, q, idv, ex = (_charge_sets.check_atoms if sets else check_atoms)(positions, charges, ids,
                                                                                  exclusions, pr.box)
            n_sets = q.shape[1] if sets else 0
            if sets and pr.slab is not None:
                raise ValueError("charge sets (charges of shape (n, m)) are not supported with slab=True: pass "
                                 "one set per call")
            want, pts = _potentials.check_request(potentials, probes, pr.box)
            if pr.slab is not None:
                pr.slab.check_positions(pos)
                pr.slab.check_positions(pts, "probes")
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
        want, sets = n_want > 0 or n_probes > 0, m_sum > 0
        if sets:
            sum_q, sum_q2 = _charge_sets.sums(comm, q)
            tuned, tuned_q2, _ = _charge_sets.lead(q, sum_q2)
        else:
            tuned, tuned_q2 = q, sum_q2
        if tuned_q2 == 0.0:  # every charge zero: nothing to tune or compute
            res, self._last_estimate = (_charge_sets.zero_result(len(q), n_atoms, q.shape[1], want, len(pts)) if sets
                                        else zero_result(len(q), n_atoms, want, len(pts), self._problem.slab is not None))
            return res
        cutoffs = self._cutoffs
        if cutoffs is not None:
            if cutoffs.search is None:  # the first call: the walk's start, from the atom density
                self._problem, self._tuner = cutoffs.first_call(self._problem, n_atoms)
            cutoffs.begin(self._tuner)
        pr, tuner = self._problem, self._tuner
        saved = tuner.state.copy()
        try:
            st = tuner.state
            if self._opts.error_model == "correlated" and st.correlation is None:
                st.correlation = tuner.charge_correlation(pos, tuned, idv, tuned_q2)
            probe_base = None
            run = (pos, q, idv)
            if n_probes > 0:  # probes: atoms of zero charge (the tuning sees the atoms only)
                pids, probe_base = _potentials.probe_ids(comm, idv, len(pts), int(n_probes))
                run = _potentials.append(pos, q, idv, pts, pids)
            raw = None
            tuning = st.solver is None or st.recheck
            if tuning:
                raw = tuner.tune(pos, tuned, idv, ex, n_atoms, tuned_q2)
            else:
                tuner.settle_planner()  # the kept solver's measured FFT plans, from the second call on
            if raw is None or want or sets:  # the tuning's last run is this call's unless more was asked
                raw = tuner.run(tuner.state.solver, *run, ex, potentials=want, probe_base=probe_base)
            if pr.skin_auto and pr.skin_active == 0.0:
                tuner.state.solver.set_skin(pr.skin)  # collective: every rank got here
                pr.skin_active = pr.skin
            if sets:
                res, self._last_estimate = _charge_sets.result(tuner, raw, q, n_atoms, sum_q, sum_q2, estimate,
                                                               want, len(pts))
            else:
                res = self._result(raw, n_atoms, sum_q, sum_q2, estimate)
                if want:
                    for name, value in _potentials.split(raw, q, len(q), len(pts)).items():
                        setattr(res, name, value)
                    res.forces = res.forces[:len(q)]
                if pr.slab is not None:
                    res = pr.slab.correct(comm, res, pos, q, pr.k, pts)
                    self._slab_estimate(res, pos, q, estimate)
        except BaseException as e:
            tuner.state = saved  # nothing of a failed call is kept
            if isinstance(e, ValueError) and cutoffs is not None and cutoffs.fresh() and not _retry:
                # cutoff="auto": a candidate's first call failed (an excluded pair beyond a short
                # cutoff, a mesh too large): it counts as too slow, and the call runs again at the
                # cutoff the walk goes on with (once: a second failure is the caller's).
                self._problem, self._tuner = cutoffs.failed(pr, tuner)
                return self._compute(positions, charges, ids, exclusions, potentials, probes, estimate, True)
            raise
        if cutoffs is not None:  # collective while the walk runs: every rank got here
            self._problem, self._tuner = cutoffs.after_call(pr, tuner, not (tuning or want or sets))
        return res

    def _slab_estimate(self, res, pos, q, estimate):
        """Collective: a slab's estimate, relative to the corrected forces, with the gap's error
        in quadrature: measured on this call's atoms (Slab.gap_force_error) at the first call
        for this box and gap, kept until set_box."""
        pr = self._problem
        if estimate:
            if self._slab_gap_error is None:
                self._slab_gap_error = pr.slab.gap_force_error(self._comm, pos, q, pr.k)
            gap = self._slab_gap_error
            res.estimated_error_absolute = math.hypot(res.estimated_error_absolute, gap)
            res.estimated_error = res.estimated_error_absolute / res.rms_force if res.rms_force > 0 else math.inf
            self._last_estimate["estimated_error_absolute"] = res.estimated_error_absolute
            self._last_estimate["estimated_error_slab_gap"] = gap / res.rms_force if res.rms_force > 0 else math.inf
        self._last_estimate["estimated_error"] = res.estimated_error

    def _result(self, raw, n_atoms, sum_q, sum_q2, estimate=True) -> PMEResult:
        # estimate=False (pmewald.qeq's products): no error estimate (NaN), whose error model
        # is evaluated again for every new sum of squared charges (80 ms at 3k atoms).
        est_abs, parts = self._tuner.estimate(sum_q2, n_atoms) if estimate else (
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
        (completed while work ran). With ``comm_mode="auto"``, once its trial is done:
        ``auto_<variant>`` per candidate (``auto_pt2pt``, ``auto_nonblocking+overlap``, ...:
        the seconds of its faster call, the slowest rank's). With a pair list (``skin``):
        ``pair_list_builds`` (the searches so far), ``pair_list_build`` (seconds building it:
        its migration, ghosts and search), ``pair_list_refresh`` (checking the displacements
        and sending them along the frozen plans) and ``pair_list_evaluate`` (the stored pairs
        at the new positions), all inside ``real_space``.

        The real-space load (every mode of ``balance``, over the calls since the last reset):
        ``real_space_pairs_imbalance`` (slowest / mean candidate pairs the pair loops tested;
        deterministic) and ``real_space_imbalance`` (the same for the pair loop's seconds;
        with ``overlap`` those seconds include the waits the loop hides, so the pairs are the
        better measure there), ``real_space_pairs_imbalance_last`` and
        ``real_space_imbalance_last`` (the last call's), this rank's ``real_space_candidates``
        and ``real_space_pair_loop`` (seconds), and ``balance_rebalances`` (cut moves)."""
        solver = self._tuner.state.solver
        return dict(solver.timings()) if solver is not None else {}

    def reset_timings(self):
        solver = self._tuner.state.solver
        if solver is not None:
            solver.reset_timings()

    @property
    def brick(self):
        """This rank's brick of the mesh, ((lo), (hi))."""
        solver = self._tuner.state.solver
        return solver.brick if solver is not None else None


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
