"""The automatic choice of PME's parameters: error estimates, the cost model's choice, the
probe, the force scale and the energy check (docs/accuracy.md).

:class:`Tuner` is the part of :class:`pmewald.PME` that chooses: PME holds one and asks it
for the current solver. It works on two values that it is given, not on PME's attributes:

- the :class:`~pmewald.pme.problem.Problem` (the communicator, the canonical box, cutoff,
  tolerance, Coulomb constant, ``real_space``, a slab's geometry, and how solvers of it are
  made and called), which only PME's constructor and :meth:`PME.set_box` change;
- its :class:`TuningState` (the current solver and parameters, the cost model's answer, the
  estimates and measurements behind them, the charge structure-factor table of the correlated
  error model), which a call may change: PME copies it before a call (:meth:`TuningState.copy`)
  and puts the copy back when the call fails, so a failed call leaves the object as it was.

Every call here is collective where it runs the solver and deterministic across rank counts
(targets rounded by :func:`_for_choice`, force scales to two digits), so every rank makes
the same choice.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from . import energy_check, error_model
from .error_model import for_choice as _for_choice, model_atoms as _model_atoms

# Orders the automatic choice (order=None) considers.
_ORDERS = (4, 8)
# The errors measured at the automatic choice (docs/accuracy.md, "Measured at the choice"): on
# the same sample, the truncation force at the chosen alpha and the mesh force error against
# a finer order-8 mesh whose estimate is at most _MEASURE_REFERENCE of the chosen one; mean
# squares raised by _MEASURE_SIGMAS standard errors (the safe side), the correlation of the
# two errors likewise towards +1. The choice is made again with them when the correlation is
# at least _CROSS_MIN in size or the mesh error differs from the model's by _RECIP_MIN or more.
_MEASURE_REFERENCE = 0.1
_MEASURE_SIGMAS = 2.0
_CROSS_MIN = 0.1
_RECIP_MIN = 0.1
_NO_PLAN = {"cross": 0.0, "recip_factor": 1.0}  # what the choice plans with otherwise
# Nothing is measured when the mesh estimate is below this fraction of the real-space one:
# the cross term is then at most 0.4 |rho| of the real-space error's square.
_MEASURE_SHARE = 0.2
# Cost-model constants for the automatic choice: None uses the calibrated ones built into
# the C++ tuning layer (cpp/tuning/cost_model.cpp, `python -m pmewald.bench cost`); a dict overrides
# entries of tuning.cost_model() (tests use it to make one differentiation cheaper).
_COST = None
# Fraction of the tolerance the automatic mesh aims at (the estimate is good to ~20%).
_MARGIN = 0.8
# Smallest force scale, as a fraction of the typical force k q_rms^2 / d^2: below it the
# relative measure is meaningless (forces that cancel by symmetry, perfect crystals).
_FORCE_FLOOR = 0.01
# The mixed-precision pair kernel (precision="mixed"; docs/realspace.md): the RMS force
# error its float rounding adds is estimated as _MIXED_C * 2^-24 * sqrt(2 S / N), S the sum
# over the evaluated pairs of |f_pair|^2 (each pair's relative error a few float ulps,
# independent between pairs: the errors of atom i's pairs add in quadrature). _MIXED_C is
# measured (benchmarks/mixed_precision.py: estimate / measured 1.1-1.4 on water and random
# charges, tolerances 1e-3 to 1e-6), so the estimate bounds the float part.
_MIXED_C = 2.5
# The same for pair_layout="clusters": its separations are formed in float (the cluster
# centres' difference plus the positions relative to them), so a close pair's relative error
# grows with the clusters' extent over r; measured 3.8-5.8x the atom kernel's on water with
# its intramolecular pairs (tests/realspace/test_cluster_pairs.py, docs/realspace.md).
_MIXED_C_CLUSTERS = 20.0
_FLOAT_ULP = 2.0 ** -24
# precision="auto" keeps mixed when that estimate is at most this fraction of the tolerance.
_MIXED_SHARE = 0.1
# The kernel's range (its float erfc): alpha * cutoff below this.
MIXED_MAX_ALPHA_R = 8.0


# The probe's target (relative to the force scale) is 30 x tolerance, but no finer than this:
# it measures the force scale to the two digits _force_scale keeps, which a 0.3% error
# does not disturb, and at tight tolerances a finer probe only cost more (its choice alone
# took 0.36 s at 1e-5 on 30k water, summing estimates over meshes up to 54x60x90).
_PROBE_TARGET = 3e-3

# FFTW's planner for the solvers the automatic choice makes (probes, candidates, the
# reciprocal-only runs of the energy check and the measured errors): most run once, and a
# measured plan of a new mesh size cost 0.17-0.55 s against a 0.12 s compute on 30,000
# atoms, several times the run it serves; an estimated plan costs ~5 ms. Measured FFTs are
# 1.0-1.6x as fast (50x54x90 to 128^3, `python -m pmewald.bench fft --planner ...`), which
# the kept solver gets from its second call on (Tuner.settle_planner).
_PLAN_WHILE_TUNING = "estimate"

# Error estimates of the charge-sets calls kept per (n_atoms, sum q^2, parameters, table).
_SETS_ESTIMATES = 256


@dataclasses.dataclass
class TuningState:
    """What a compute may change (see the module docstring). The fields are replaced, not
    changed in place, except ``sets_estimates`` (which :meth:`copy` copies) and the core
    solver itself, whose ``set_skin``, ``set_precision`` and ``set_box`` act on the object
    (a copy restores which solver is current, not a precision a failed call set on it).

    ``solver``: the current core solver (None until parameters are chosen); ``params``: its
    alpha, mesh, order and differentiation; ``alpha``, ``order``, ``differentiation``: the
    current parameters (provisional or None before the first call); ``precision``: the pair
    kernel's ("mixed", "double"; None while "auto" has not decided); ``pair_force2``: the mixed
    kernel's sum of |f_pair|^2 at the last call; ``recheck``: tune again on the next call
    (set_box); ``choice``: the cost model's answer for the parameters; ``cache_estimate``:
    (key, estimate, box) of the last estimate; ``sets_estimates``: the charge sets' estimates;
    ``energy_error``, ``mesh_target``: the energy check's; ``measured``: (key, errors) measured at
    the choice; ``plan``: what the choice plans with; ``correlation``, ``correlation_box``: the
    correlated model's table and the box it was made in; ``seed``: what the next call's choice
    takes from another cutoff's (:meth:`Tuner.seed`); ``scale``: the force scale the parameters
    were chosen for."""

    alpha: float
    order: int | None
    differentiation: str | None
    precision: str | None
    solver: object = None
    params: dict | None = None
    pair_force2: float = 0.0
    recheck: bool = False
    choice: dict | None = None
    cache_estimate: tuple | None = None
    sets_estimates: dict = dataclasses.field(default_factory=dict)
    energy_error: float | None = None
    mesh_target: float | None = None
    measured: tuple | None = None
    plan: dict = dataclasses.field(default_factory=lambda: dict(_NO_PLAN))
    correlation: object = None
    correlation_box: np.ndarray | None = None
    seed: dict | None = None
    scale: float | None = None

    def copy(self) -> "TuningState":
        return dataclasses.replace(self, sets_estimates=dict(self.sets_estimates))


class Tuner:
    """The automatic parameter choice of :class:`pmewald.PME` (see the module docstring).

    ``fixed``: the explicit alpha, mesh and order (None where chosen); ``diff_request``:
    "ad", "ik" or "auto"; the initial state holds the provisional alpha (final with
    ``real_space=False``) and, with an explicit mesh, the solver built at once."""

    MARGIN = _MARGIN  # the fraction of the tolerance the choices aim at (energy_check's too)

    def __init__(self, problem, opts):
        self.problem = problem
        self.kept_planner = None  # the planner settle_planner plans the kept solver with (tune sets it)
        self.from_seed = False  # the parameters were chosen from another cutoff's seed (Tuner.seed)
        self.fixed = {"alpha": opts.alpha, "mesh": opts.mesh, "order": opts.order}
        self.diff_request = opts.differentiation
        # The provisional alpha, exp(-alpha^2 rc^2) = tolerance / 4 (the real-space error a
        # fraction of the budget): final with real_space=False (an engine doing its own pairs
        # needs it now), and the probe's alpha otherwise. The rest is chosen on the first
        # compute, when the charges are known; an explicit mesh fixes everything now.
        alpha = opts.alpha if opts.alpha is not None else math.sqrt(math.log(4.0 / opts.tolerance)) / problem.cutoff
        # The pair kernel's precision (None: "auto", decided by the first call's probe,
        # choose_precision).
        precision = None if opts.precision == "auto" else opts.precision
        if opts.precision == "auto" and (opts.mesh is not None or not opts.real_space):
            precision = "double"
        self.state = TuningState(alpha=alpha, order=opts.order,
                                 differentiation=None if opts.differentiation == "auto" else opts.differentiation,
                                 precision=precision)
        if opts.mesh is not None:
            st = self.state
            st.order = opts.order if opts.order is not None else 5
            st.differentiation = st.differentiation or "ad"
            self.build(st.alpha, opts.mesh, st.order, st.differentiation)

    # ------------------------------------------------------------ the current solver

    def build(self, alpha, mesh, order, differentiation):
        """Make the solver of these parameters current (collective; kept when they are the
        current ones, its kernel precision brought up to date)."""
        st = self.state
        mesh = tuple(int(v) for v in mesh)
        new = {"alpha": float(alpha), "mesh": mesh, "order": int(order), "differentiation": differentiation}
        st.alpha, st.order, st.differentiation = new["alpha"], new["order"], differentiation
        if st.solver is not None and new == st.params:
            if st.solver.precision != self.kernel_precision():
                st.solver.set_precision(self.kernel_precision())  # collective, like every build
            layout = self.problem.layout_for(st.solver.precision)
            if st.solver.pair_layout != layout:
                st.solver.set_pair_layout(layout)  # (pair_layout="auto": follows the precision)
            return
        st.solver = self._new_solver(mesh, int(order), float(alpha), differentiation, self.problem.real_space,
                                     skin=self.problem.skin_active)
        st.params = new
        st.cache_estimate = None

    def seed(self, params, precision, scale, pair_force2, mesh_target):
        """cutoff="auto" (cutoff_search.py): the next call chooses alpha and the mesh at this
        problem's cutoff with the order and differentiation of `params` (another cutoff's
        choice) at that choice's force `scale`, mixed-kernel sum `pair_force2` and energy
        check's mesh bound `mesh_target` (None: none), instead of the full choice: no probe,
        and no search over orders and differentiations. Its result is checked as the end of a
        choice is: the estimate within the choice's margin of the tolerance at the force scale
        measured there, then the energy check and the measured errors; if it misses, the full
        choice follows. (Scaling the other cutoff's alpha and mesh, as GROMACS scales its grid,
        gave meshes 10-25% finer than a choice at the cutoff makes, so every candidate but the
        start measured slower than it would run.) No MPI: the next call builds the solver."""
        self.state.precision = precision
        self.state.seed = {"order": params["order"], "differentiation": params["differentiation"],
                           "scale": scale, "pair_force2": pair_force2, "mesh_target": mesh_target}
        self.from_seed = True

    def _new_solver(self, mesh, order, alpha, differentiation, real_space, mode=None, skin=0.0):
        """A solver of the tuning: its FFTs planned by estimate (_PLAN_WHILE_TUNING) where
        parameters are chosen, since most of them live for one run; settle_planner plans
        the one kept with the configured planner at the next call."""
        precision = self.kernel_precision() if real_space else "double"
        planner = _PLAN_WHILE_TUNING if self.fixed["mesh"] is None else None
        return self.problem.new_solver(mesh, order, alpha, differentiation, real_space, precision, mode, skin,
                                       planner=planner)

    def settle_planner(self):
        """Collective where it plans: plan the current solver's FFTs with the planner
        configured when the parameters were chosen (``kept_planner``) if the tuning planned
        them by estimate. Called by every call after the tuning's (no collective of its own
        once settled), so a single call (a single point, a short script) never pays for
        measured plans."""
        solver = self.state.solver
        if solver is not None and self.kept_planner is not None and solver.planner != self.kept_planner:
            solver.set_planner(self.kept_planner)

    def run(self, solver, pos, q, idv, ex, potentials=False, probe_base=None):
        """One checked solver call (Problem.run); the current solver's also records the
        mixed kernel's sum of |f_pair|^2 (its float error estimate; a charge-sets call keeps
        the tuning run's, of the set it tuned on)."""
        raw = self.problem.run(solver, self.state.alpha, pos, q, idv, ex, potentials, probe_base)
        if solver is self.state.solver and "sum_pair_force2" in raw:  # charge sets: the tuned set's stays
            self.state.pair_force2 = float(raw["sum_pair_force2"])
        return raw

    def mode_used(self):
        """The mode the exchanges use: comm_mode, or with "auto" the trial's winner
        (None while the solver's first calls try the modes)."""
        mode, solver = self.problem.comm_mode, self.state.solver
        if mode != "auto":
            return mode
        if solver is None or not solver.comm_mode_seconds and self.problem.comm.Get_size() > 1:
            return None
        return solver.comm_mode

    def overlap_used(self):
        """Whether the exchanges are overlapped (None while "auto" tries the modes)."""
        overlap, mode = self.problem.overlap, self.problem.comm_mode
        if overlap is not None:
            return overlap
        if mode == "auto" and self.mode_used() is None:
            return None
        if self.state.solver is not None:
            return self.state.solver.overlap
        return None if mode == "auto" else mode != "pt2pt"

    def probe_mode(self):
        """The mode of the tuning's probe solvers ("auto" would measure for each)."""
        mode = self.problem.comm_mode
        return self.mode_used() or "nonblocking" if mode == "auto" else mode

    # ------------------------------------------------------------------ the choice

    def _choose(self, target, sum_q2, n_atoms, scan_alpha, differentiation=None, order=None, mesh_target=None):
        """The cheapest (differentiation, order, alpha, mesh) by the cost model whose
        estimated absolute RMS force error meets `target` (tuning.choose_cheapest); alpha
        is scanned when `scan_alpha`, else the current one is kept. `mesh_target` bounds
        the ad reciprocal estimate of the mesh (an energy requirement). Targets go in
        units of the Coulomb constant, rounded, so the choice is the same in any units."""
        from .._core import tuning

        pr, st = self.problem, self.state
        order = order if order is not None else self.fixed["order"]
        r = tuning.choose_cheapest(pr.box, pr.cutoff, _for_choice(target / pr.k), _for_choice(sum_q2),
                                    _model_atoms(n_atoms), differentiation=differentiation or self.diff_request,
                                    coulomb_constant=1.0, alpha=None if scan_alpha else st.alpha, order=order,
                                    orders=_ORDERS, cost=_COST, correlation=st.correlation,
                                    mesh_target=None if mesh_target is None else _for_choice(mesh_target / pr.k),
                                    real_volume=pr.real_volume(), cross=st.plan["cross"],
                                    recip_factor=st.plan["recip_factor"])
        for key in ("est_real", "est_recip", "est_total"):
            r[key] *= pr.k
        return r

    def _use(self, choice):
        self.state.choice = choice
        self.build(choice["alpha"], choice["mesh"], choice["order"], choice["differentiation"])

    def kernel_precision(self):
        """The pair kernel the current solver runs: the decided precision, or (``"auto"``
        before the first call's probe has decided) mixed, whose run gives the sum the
        decision needs."""
        return self.state.precision or "mixed"

    def _target(self, scale, n_atoms):
        """What a choice aims at for the force scale `scale`: _MARGIN x tolerance x scale, less
        (in quadrature) what the mixed kernel's float rounding takes of it."""
        target = _MARGIN * self.problem.tolerance * scale
        return math.sqrt(max(target ** 2 - self._float_error(n_atoms) ** 2, 0.25 * target ** 2))

    def _float_error(self, n_atoms):
        """The absolute RMS force error of the mixed kernel's float rounding at the last
        call (0 with double): _MIXED_C u sqrt(2 S / N) (_MIXED_C_CLUSTERS if that call's pairs
        went by clusters, or before a solver exists if they may: pair_layout "auto")."""
        if self.kernel_precision() != "mixed" or not self.problem.real_space:
            return 0.0
        solver = self.state.solver
        used = solver.pair_layout_used if solver is not None else self.problem.layout_for("mixed")
        c = _MIXED_C_CLUSTERS if used in ("clusters", "auto") else _MIXED_C
        return c * _FLOAT_ULP * math.sqrt(2.0 * max(self.state.pair_force2, 0.0) / n_atoms)

    def _choose_precision(self, scale, n_atoms):
        """precision="auto", on the probe's (mixed) result: mixed when its float error is
        at most _MIXED_SHARE x tolerance x the force scale, else double (rounded to two
        digits like the scale, so every rank count decides alike)."""
        if self.state.precision is not None:
            return
        share = float(f"{self._float_error(n_atoms) / scale:.1e}") if scale > 0 else math.inf
        self.state.precision = "mixed" if share <= _MIXED_SHARE * self.problem.tolerance else "double"

    def estimate(self, sum_q2, n_atoms):
        """(absolute estimate, parts) for the current parameters: real space, mesh and
        (mixed precision) the float rounding of the last call's pairs, in quadrature. The
        first two are cached, since the reciprocal estimate sums over the mesh (~0.1 s at a
        200k-point mesh); _build clears the cache, set_box once the box has moved by more
        than pme._ESTIMATE_BOX_CHANGE since it was made."""
        from .._core import tuning

        p = self.state.params
        key = (n_atoms, sum_q2, p["alpha"], p["mesh"], p["order"], p["differentiation"], id(self.state.correlation))
        if self.state.cache_estimate is None or self.state.cache_estimate[0] != key:
            e = tuning.estimate_errors(self.problem.box, p["alpha"], self.problem.cutoff, p["mesh"], p["order"],
                                        p["differentiation"], sum_q2, _model_atoms(n_atoms),
                                        coulomb_constant=self.problem.k, correlation=self.state.correlation,
                                        real_volume=self.problem.real_volume())
            # With real_space=False the caller's own pair sum (same alpha and cutoff) carries
            # the real-space error, so the estimate and the mesh choice are the same either way.
            self.state.cache_estimate = (key, e, self.problem.box.copy())
        e = dict(self.state.cache_estimate[1], float=self._float_error(n_atoms), cross=0.0, measured=False)
        m = self.state.measured
        if m is not None and m[0] == self._measure_key(sum_q2, n_atoms):
            e.update(m[1], measured=True)  # measured at these parameters and charges (_check_measured)
        both = tuning.combined_error(e["real"], e["recip"], e["cross"])
        return math.sqrt(both ** 2 + e["float"] ** 2), e

    def set_estimate(self, sum_q2, n_atoms):
        """estimate for one charge set's sum of squared charges, cached per set (a charge-sets
        call has many)."""
        st = self.state
        p = st.params
        key = (n_atoms, float(sum_q2), p["alpha"], p["mesh"], p["order"], p["differentiation"], id(st.correlation))
        if key not in st.sets_estimates:
            if len(st.sets_estimates) >= _SETS_ESTIMATES:
                st.sets_estimates.clear()
            st.sets_estimates[key] = self.estimate(float(sum_q2), n_atoms)
        return st.sets_estimates[key]

    def _measure_key(self, sum_q2, n_atoms):
        p = self.state.params
        return (n_atoms, _for_choice(sum_q2), p["alpha"], p["mesh"], p["order"], p["differentiation"])

    def charge_correlation(self, pos, q, idv, sum_q2):
        """The correlated error model's table of these charges (error_model.charge_correlation,
        collective); set_box keeps it while the box stays near this one."""
        corr = error_model.charge_correlation(self.problem, self.state.alpha, pos, q, idv, sum_q2)
        self.state.correlation_box = self.problem.box.copy()
        return corr

    def _measure_errors(self, pos, q, idv, sum_q2, n_atoms):
        """The force errors at the current parameters measured on the tail sample
        (collective): {"real", "recip": absolute RMS, "cross": their correlation}, or None
        when they cannot be measured.

        The real-space error of a sample atom is minus its truncation force (-k q_i E_i, the
        shell's field of tuning.local_tail_fields at the current alpha; Kolafa-Perram's
        estimate of what lies beyond the shell is added in quadrature); its mesh error the
        difference of two reciprocal-only calculations, at the current parameters and on a
        finer order-8 mesh (the first of 1.5, 2, 3 times as fine whose estimate is at most
        _MEASURE_REFERENCE of the current one). The mean squares and the mean product are
        raised by _MEASURE_SIGMAS standard errors (finite-population corrected: none when every
        atom is sampled); the correlation is that product over the two RMS, clipped to
        [-1, 1]; all rounded to three (the correlation two) digits, so no rank count, split
        or unit shows."""
        from mpi4py import MPI

        from .._core import tuning

        p, k, rc = self.state.params, self.problem.k, self.problem.cutoff
        rec = self.estimate(sum_q2, n_atoms)[1]["recip"]
        model = dict(box=self.problem.box, alpha=p["alpha"], cutoff=rc, sum_q2=sum_q2, n_atoms=_model_atoms(n_atoms),
                     coulomb_constant=k, correlation=self.state.correlation, real_volume=self.problem.real_volume())
        fine = None
        for f in (1.5, 2.0, 3.0):
            mesh = tuple(min(4096, tuning.fft_friendly(int(math.ceil(f * x)))) for x in p["mesh"])
            if tuning.estimate_errors(mesh=mesh, order=8, differentiation="ad", **model)["recip"] <= (
                    _MEASURE_REFERENCE * rec):
                fine = mesh
                break
        if fine is None:
            return None
        none = np.zeros((0, 2), dtype=np.int64)
        forces = []
        for mesh, order, diff in ((p["mesh"], p["order"], p["differentiation"]), (fine, 8, "ad")):
            solver = self._new_solver(mesh, order, p["alpha"], diff, False, mode=self.probe_mode())
            forces.append(np.asarray(self.run(solver, pos, q, idv, none)["forces"]))
            del solver
        _, pick, samples, qs = error_model.tail_sample(self.problem.comm, pos, q, idv)
        parts = self.problem.comm.allgather((idv[pick], (forces[0] - forces[1])[pick]))
        order = np.argsort(np.concatenate([x[0] for x in parts]), kind="stable")
        e_k = np.concatenate([x[1] for x in parts]).reshape(-1, 3)[order]
        local = tuning.local_tail_fields(self.problem.box, rc, [p["alpha"]], samples,
                                         np.ascontiguousarray(pos, dtype=float), np.ascontiguousarray(q, dtype=float))
        fields = np.empty_like(local)
        self.problem.comm.Allreduce(local, fields, op=MPI.SUM)
        e_r = -k * qs[:, None] * fields[0]
        m = len(qs)
        if m < 2:
            return None
        fpc = math.sqrt(max(0.0, 1.0 - m / n_atoms)) / math.sqrt(m)

        def upper(x):  # the mean plus _MEASURE_SIGMAS standard errors
            return float(x.mean()) + _MEASURE_SIGMAS * float(x.std(ddof=1)) * fpc

        r2, k2 = (e_r ** 2).sum(axis=1), (e_k ** 2).sum(axis=1)
        norm = math.sqrt(float(r2.mean()) * float(k2.mean()))
        if not norm > 0:
            return None
        sq2 = _for_choice(sum_q2)
        beyond = tuning.real_space_error(p["alpha"], tuning.tail_radius(p["alpha"], rc), sq2, model["n_atoms"],
                                         self.problem.volume_filled(), k)
        rho = min(1.0, max(-1.0, upper((e_r * e_k).sum(axis=1)) / norm))

        def rounded(x):  # three digits in units of the Coulomb constant: the same in any units
            return float(f"{x / k:.3e}") * k

        return {"real": rounded(math.sqrt(upper(r2) + beyond ** 2)), "recip": rounded(math.sqrt(upper(k2))),
                "cross": round(rho, 2)}

    def _typical_force(self, n_atoms, sum_q2):
        """k q_rms^2 / d^2 at the mean spacing d = (V/N)^(1/3) (V: the volume the atoms fill)."""
        vol = self.problem.volume_filled()
        return self.problem.k * (sum_q2 / n_atoms) / (vol / n_atoms) ** (2.0 / 3.0)

    def _force_scale(self, rms, typical):
        """The force scale the relative tolerance refers to, rounded to 2 significant digits
        (in units of the Coulomb constant) so the choice never hinges on the last bits of a
        reduction, whatever the rank count or units."""
        x = max(rms, _FORCE_FLOOR * typical) / self.problem.k
        return float(f"{x:.1e}") * self.problem.k if x > 0 else typical

    def tune(self, pos, q, idv, ex, n_atoms, sum_q2):
        """Choose the parameters on the first call (or after set_box).

        The target is an absolute RMS force error of ``_MARGIN x tolerance x F``, F the
        force scale: first the charge-based typical force, then (real_space=True) the RMS
        force measured by a probe on a coarse mesh, then that of the chosen parameters. They
        are chosen again with the measured scale unless the estimate already lies between a
        quarter of and the full tolerance, so the mesh is neither too coarse nor needlessly
        fine. With real_space=True the energy error is checked (pme/energy_check.py) before
        each choice's full calculation, on reciprocal-only runs, and once more on the result.
        """
        from .. import _core
        from .._mpi.collective import agreed

        self.state.recheck = False
        # The planner the kept solver gets (settle_planner): "measure" unless
        # PMEWALD_FFTW_PLANNER says otherwise, read here where every rank agrees on it.
        self.kept_planner = agreed(self.problem.comm, _core.fftw_planner)
        if self.fixed["mesh"] is not None:
            self.build(self.state.alpha, self.fixed["mesh"], self.state.order, self.state.differentiation)
            return self.run(self.state.solver, pos, q, idv, ex)
        typical = self._typical_force(n_atoms, sum_q2)
        scan = self.problem.real_space and self.fixed["alpha"] is None
        probe = None

        def acceptable(raw):
            scale = self._force_scale(math.sqrt(raw["sum_force2"] / n_atoms), typical)
            est = self.estimate(sum_q2, n_atoms)[0]
            return 0.25 * self.problem.tolerance * scale <= est <= self.problem.tolerance * scale, scale

        seed, self.state.seed = self.state.seed, None
        if seed is not None or self.state.solver is not None:
            if seed is not None:  # cutoff="auto": another cutoff's order, differentiation and scale
                self.state.pair_force2 = seed["pair_force2"]
                self._use(self._choose(self._target(seed["scale"], n_atoms), sum_q2, n_atoms, scan,
                                       differentiation=seed["differentiation"], order=seed["order"],
                                       mesh_target=seed["mesh_target"]))
            # (else after set_box: keep the parameters while they meet the tolerance)
            raw = self.run(self.state.solver, pos, q, idv, ex)
            if not self.problem.real_space:
                return raw
            scale = acceptable(raw)[1]
            if seed is not None:
                # They must meet what a choice aims at, at the scale measured here, and pass
                # the checks that follow a choice (the energy, the measured errors).
                if self.estimate(sum_q2, n_atoms)[0] <= _MARGIN * self.problem.tolerance * scale:
                    self.state.scale = scale
                    raw = energy_check.after_run(self, raw, None, scale, scan, pos, q, idv, n_atoms, sum_q2, ex,
                                                 bound=seed["mesh_target"])
                    return self._check_measured(raw, scale, scan, pos, q, idv, n_atoms, sum_q2, ex)
                self.from_seed = False  # missed: the full choice, from the scale measured here
            elif self.estimate(sum_q2, n_atoms)[0] <= self.problem.tolerance * scale:
                return raw
        else:
            scale = self._force_scale(typical, typical)
            if self.problem.real_space:
                # A cheap probe on a coarse mesh measures the force scale (it only has to be
                # right to the two digits _force_scale keeps): the cheapest parameters at the
                # provisional alpha. Its mesh is usually coarser than the final one, so the
                # energy check can reuse it (and its FFT plans).
                coarse = min(0.3, max(30.0 * self.problem.tolerance, _PROBE_TARGET)) * scale
                self._use(self._choose(coarse, sum_q2, n_atoms, False))
                raw = self.run(self.state.solver, pos, q, idv, ex)
                probe = energy_check.point(self, raw)
                scale = acceptable(raw)[1]
                self._choose_precision(scale, n_atoms)
        checked = probe
        for _ in range(3):
            self._use(self._choose(self._target(scale, n_atoms), sum_q2, n_atoms, scan))
            if probe is not None:  # the energy check first, on reciprocal-only runs
                checked = energy_check.before_run(self, probe, scale, scan, pos, q, idv, n_atoms, sum_q2)
            raw = self.run(self.state.solver, pos, q, idv, ex)
            if not self.problem.real_space:
                return raw  # the total forces are the caller's: keep the charge-based scale
            ok, measured = acceptable(raw)
            if ok or measured == scale:
                break
            scale = measured
        self.state.scale = scale
        raw = energy_check.after_run(self, raw, checked, scale, scan, pos, q, idv, n_atoms, sum_q2, ex,
                                     bound=self.state.mesh_target if probe is not None else None)
        if math.sqrt(raw["sum_force2"] / n_atoms) < _FORCE_FLOOR * typical:
            # Forces that vanish by symmetry (a single charge, a perfect crystal) have force
            # errors that vanish too: measured, they are rounding noise, and a choice planned
            # on them would change from run to run with the last bits of the FFTs. The energy
            # check has chosen; the uncorrelated model stays.
            return raw
        return self._check_measured(raw, scale, scan, pos, q, idv, n_atoms, sum_q2, ex)

    def _check_measured(self, raw, scale, scan, pos, q, idv, n_atoms, sum_q2, ex):
        """Measure the errors at the chosen parameters (correlated model; :meth:`_measure_errors`)
        and report them; when their correlation is at least _CROSS_MIN in size or the mesh
        error differs from the model's by _RECIP_MIN, choose again planning with both (the
        real-space and mesh errors are no longer independent, the mesh estimates scaled by
        the measured ratio), the energy check included, and measure again there. The new
        choice is kept when its measured estimate meets the tolerance (or is below the
        first one's), else the first one."""
        if self.state.correlation is None or not self.problem.real_space:
            return raw
        self.state.measured = None  # a new choice: what was measured before (another box) is the model's here
        model = self.estimate(sum_q2, n_atoms)[1]
        if model["recip"] < _MEASURE_SHARE * model["real"]:
            return raw  # the mesh error is too small a part to matter (<4% of the total's square)
        got = self._measure_errors(pos, q, idv, sum_q2, n_atoms)
        if got is None:
            return raw
        model = model["recip"]
        self.state.measured = (self._measure_key(sum_q2, n_atoms), got)
        factor = float(f"{got['recip'] / model:.2e}") if model > 0 else 1.0
        if abs(got["cross"]) < _CROSS_MIN and abs(factor - 1.0) < _RECIP_MIN:
            return raw
        first = self.state.copy()
        first_est = self.estimate(sum_q2, n_atoms)[0]
        self.state.plan = {"cross": got["cross"], "recip_factor": factor}
        try:
            self._use(self._choose(_MARGIN * self.problem.tolerance * scale, sum_q2, n_atoms, scan,
                                   mesh_target=self.state.mesh_target))
            if self.state.params == first.params:
                self.state = first
                return raw
            again = self.run(self.state.solver, pos, q, idv, ex)
            again = energy_check.after_run(self, again, None, scale, scan, pos, q, idv, n_atoms, sum_q2, ex)
        finally:
            self.state.plan = dict(_NO_PLAN)
        got = self._measure_errors(pos, q, idv, sum_q2, n_atoms)
        if got is not None:
            self.state.measured = (self._measure_key(sum_q2, n_atoms), got)
            est = self.estimate(sum_q2, n_atoms)[0]
            if est <= self.problem.tolerance * scale or est < first_est:
                return again
        self.state = first  # the first choice, with its measured errors
        return raw
