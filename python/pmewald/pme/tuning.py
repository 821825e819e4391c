"""The automatic choice of PME's parameters: error estimates, the cost model's choice, the
probe, the force scale and the energy check (docs/accuracy.md).

:class:`Tuning` is a base class of :class:`pmewald.PME`: its methods are the tuning half of
the solver object, kept here so that ``pme/solver.py`` is the face (construction, compute, set_box,
parameters, timings). The contract between the two:

- it reads what PME's constructor and :meth:`PME.set_box` set: ``_box`` (canonical),
  ``_cutoff``, ``_tolerance``, ``_k`` (the Coulomb constant), ``_real_space``, ``_fixed``
  (the explicit alpha, mesh and order), ``_diff_request``, and the current parameters
  ``_alpha``, ``_order``, ``_differentiation``, ``_params`` and ``_solver``, and
  ``_correlation`` (the charge structure-factor table of the correlated error model, made by
  :meth:`Tuning._charge_correlation` on the first call; None with ``error_model="uncorrelated"``),
  and ``_slab`` (None, or the slab geometry: its atoms fill less than the box, which the
  real-space estimate's density must see);
- it calls PME's set-up: ``_build`` (make the solver of a parameter set current),
  ``_new_solver`` (a solver of other parameters, for the energy check's second mesh) and
  ``_run`` (one checked solver call, collective) and ``_probe_mode`` (the comm mode of
  the energy check's extra solver: a fixed one, so that ``comm_mode="auto"`` does not measure for it);
- it owns ``_choice`` (the cost model's answer for the current parameters),
  ``_cache_estimate``, ``_energy_error`` and ``_recheck`` (set by set_box: tune again on
  the next call), which PME saves and restores with the rest of its tuning state
  (``TUNING_STATE``) when a call fails.

Every call here is collective where it runs the solver and deterministic across rank counts
(targets rounded by :func:`_for_choice`, force scales to two digits), so every rank makes
the same choice.
"""

from __future__ import annotations

import math

import numpy as np

from .._mpi.collective import allsum

# Orders the automatic choice (order=None) considers.
# The tuning state (_tune, _build, _use): saved before a call and restored when the
# call fails, so a failed first call leaves the object as it was.
TUNING_STATE = ("_solver", "_params", "_choice", "_alpha", "_order", "_differentiation", "_recheck",
                "_cache_estimate", "_energy_error", "_correlation", "_precision", "_pair_force2", "_measured",
                "_mesh_target", "_correlation_box")
_ORDERS = (4, 8)
# Largest index half-width of the charge structure-factor table of the correlated error
# model (tuning.local_structure_factors): |x_d| <= 24, a transform of at most 100^3 points.
_CORRELATION_HALF = 24
# The real-space estimate of the correlated model (docs/accuracy.md, "The real-space part"):
# the truncation force sampled on about _TAIL_SAMPLE atoms (at most twice that; all atoms
# of smaller systems), at alpha * cutoff = _TAIL_ALPHA_RC (and the current alpha), relative
# to the Kolafa-Perram estimate (held below 2.5, where the factors measured fall: the
# shell of the smallest alpha is the widest, and costs the most); _TAIL_SIGMAS standard errors of the sample mean are added
# (none when every atom is sampled). The factor is at least 1: the sample raises the
# estimate where the shell adds coherently (a displaced crystal: up to 1.8x) but does not
# lower it where it cancels (water, chains: 0.7-0.9x), because a lower real-space share
# moved the choice onto meshes commensurate with a crystal, on which the mesh estimate is
# up to 1.7x optimistic (docs/accuracy.md: measured above the tolerance on 3^3 rock salt).
_TAIL_SAMPLE = 500
_TAIL_ALPHA_RC = (2.5, 3.0, 3.5, 4.0, 4.5, 5.0)
_TAIL_SIGMAS = 2.0
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
_FLOAT_ULP = 2.0 ** -24
# precision="auto" keeps mixed when that estimate is at most this fraction of the tolerance.
_MIXED_SHARE = 0.1
# The kernel's range (its float erfc): alpha * cutoff below this.
MIXED_MAX_ALPHA_R = 8.0
# Smallest energy scale for the energy check, as a fraction of k sum q^2 / d (systems
# whose energy is a cancellation to ~0).
_ENERGY_FLOOR = 1e-4


class Tuning:
    """The automatic parameter choice of :class:`pmewald.PME` (see the module docstring)."""

    def _choose(self, target, sum_q2, n_atoms, scan_alpha, differentiation=None, order=None, mesh_target=None):
        """The cheapest (differentiation, order, alpha, mesh) by the cost model whose
        estimated absolute RMS force error meets `target` (tuning.choose_cheapest); alpha
        is scanned when `scan_alpha`, else the current one is kept. `mesh_target` bounds
        the ad reciprocal estimate of the mesh (an energy requirement). Targets go in
        units of the Coulomb constant, rounded, so the choice is the same in any units."""
        from .._core import tuning

        order = order if order is not None else self._fixed["order"]
        r = tuning.choose_cheapest(self._box, self._cutoff, _for_choice(target / self._k), _for_choice(sum_q2),
                                    _model_atoms(n_atoms), differentiation=differentiation or self._diff_request,
                                    coulomb_constant=1.0, alpha=None if scan_alpha else self._alpha, order=order,
                                    orders=_ORDERS, cost=_COST, correlation=self._correlation,
                                    mesh_target=None if mesh_target is None else _for_choice(mesh_target / self._k),
                                    real_volume=self._real_volume(), cross=self._plan["cross"],
                                    recip_factor=self._plan["recip_factor"])
        for key in ("est_real", "est_recip", "est_total"):
            r[key] *= self._k
        return r

    def _use(self, choice):
        self._choice = choice
        self._build(choice["alpha"], choice["mesh"], choice["order"], choice["differentiation"])

    def _kernel_precision(self):
        """The pair kernel the current solver runs: the decided precision, or (``"auto"``
        before the first call's probe has decided) mixed, whose run gives the sum the
        decision needs."""
        return self._precision or "mixed"

    def _float_error(self, n_atoms):
        """The absolute RMS force error of the mixed kernel's float rounding at the last
        call (0 with double): _MIXED_C u sqrt(2 S / N)."""
        if self._kernel_precision() != "mixed" or not self._real_space:
            return 0.0
        return _MIXED_C * _FLOAT_ULP * math.sqrt(2.0 * max(self._pair_force2, 0.0) / n_atoms)

    def _choose_precision(self, scale, n_atoms):
        """precision="auto", on the probe's (mixed) result: mixed when its float error is
        at most _MIXED_SHARE x tolerance x the force scale, else double (rounded to two
        digits like the scale, so every rank count decides alike)."""
        if self._precision is not None:
            return
        share = float(f"{self._float_error(n_atoms) / scale:.1e}") if scale > 0 else math.inf
        self._precision = "mixed" if share <= _MIXED_SHARE * self._tolerance else "double"

    def _estimate(self, sum_q2, n_atoms):
        """(absolute estimate, parts) for the current parameters: real space, mesh and
        (mixed precision) the float rounding of the last call's pairs, in quadrature. The
        first two are cached, since the reciprocal estimate sums over the mesh (~0.1 s at a
        200k-point mesh); _build clears the cache, set_box once the box has moved by more
        than pme._ESTIMATE_BOX_CHANGE since it was made."""
        from .._core import tuning

        p = self._params
        key = (n_atoms, sum_q2, p["alpha"], p["mesh"], p["order"], p["differentiation"], id(self._correlation))
        if self._cache_estimate is None or self._cache_estimate[0] != key:
            e = tuning.estimate_errors(self._box, p["alpha"], self._cutoff, p["mesh"], p["order"],
                                        p["differentiation"], sum_q2, _model_atoms(n_atoms),
                                        coulomb_constant=self._k, correlation=self._correlation,
                                        real_volume=self._real_volume())
            # With real_space=False the caller's own pair sum (same alpha and cutoff) carries
            # the real-space error, so the estimate and the mesh choice are the same either way.
            self._cache_estimate = (key, e, self._box.copy())
        e = dict(self._cache_estimate[1], float=self._float_error(n_atoms), cross=0.0, measured=False)
        m = self._measured
        if m is not None and m[0] == self._measure_key(sum_q2, n_atoms):
            e.update(m[1], measured=True)  # measured at these parameters and charges (_check_measured)
        both = tuning.combined_error(e["real"], e["recip"], e["cross"])
        return math.sqrt(both ** 2 + e["float"] ** 2), e

    def _measure_key(self, sum_q2, n_atoms):
        p = self._params
        return (n_atoms, _for_choice(sum_q2), p["alpha"], p["mesh"], p["order"], p["differentiation"])

    def _charge_correlation(self, pos, q, idv, sum_q2):
        """The charges' structure-factor table for the correlated error model, with its
        real-space factors (:meth:`_real_factors`) (collective).

        Every rank transforms its own atoms (tuning.local_structure_factors: a B-spline
        spread onto a periodic grid and one FFT) and the sums are reduced over the ranks,
        so the table does not depend on how the atoms are split; its values are rounded
        to six digits, so neither does the choice made with it."""
        from mpi4py import MPI

        from .._core import tuning

        kmax = 2 * math.pi * _CORRELATION_HALF / float(np.linalg.norm(self._box, axis=1).max())
        half = tuple(int(h) for h in tuning.correlation_half_widths(self._box, kmax, _CORRELATION_HALF))
        local = tuning.local_structure_factors(self._box, pos, q, half)
        total = np.empty_like(local)
        self._comm.Allreduce(local, total, op=MPI.SUM)
        sum_q4 = float(allsum(self._comm, float((q ** 4).sum()))[0])
        corr = tuning.ChargeCorrelation(half, total, _for_choice(sum_q2), _for_choice(sum_q4))
        corr.set_real_factors(*self._real_factors(pos, q, idv, sum_q2))
        self._correlation_box = self._box.copy()  # set_box keeps the table near this box
        return corr

    def _real_factors(self, pos, q, idv, sum_q2):
        """(alpha * cutoff nodes, factors): the sampled real-space truncation error
        (:meth:`_sampled_real_errors`) relative to the Kolafa-Perram estimate, rounded to
        three digits (the reduction's order does not show), at least 1 (collective)."""
        from .._core import tuning

        nodes, sampled, n_atoms = self._sampled_real_errors(pos, q, idv, sum_q2)
        vol = self._real_volume() or abs(np.linalg.det(self._box))
        factors = []
        for x, e in zip(nodes, sampled):
            kp = tuning.real_space_error(x / self._cutoff, self._cutoff, _for_choice(sum_q2), _model_atoms(n_atoms),
                                         vol, 1.0)
            factors.append(max(1.0, float(f"{e / kp:.2e}")) if kp > 0 and e > 0 else 1.0)
        return nodes, factors

    def _sampled_real_errors(self, pos, q, idv, sum_q2):
        """(alpha * cutoff nodes, absolute RMS truncation errors per atom (Coulomb constant
        1), N): the real-space truncation force measured on a sample of the atoms
        (collective).

        The sample is every atom whose id hashes to 0 modulo N // _TAIL_SAMPLE, so it is the
        same on any rank count and split. Its positions and charges are gathered to every
        rank (O(sample)), each rank sums the truncated shell's field of its own atoms at them
        (tuning.local_tail_fields: r_c < r < tuning.tail_radius(alpha)) and the fields are
        summed over the ranks. The sampled mean of q_i^2 |E_i|^2 plus _TAIL_SIGMAS standard
        errors (finite-population corrected: none when all atoms are sampled), plus the
        Kolafa-Perram estimate of what lies beyond the shell, is the squared estimate."""
        from mpi4py import MPI

        from .._core import tuning

        comm, rc = self._comm, self._cutoff
        n_atoms, _, samples, qs = self._tail_sample(pos, q, idv)
        nodes = sorted(set(_TAIL_ALPHA_RC) | {round(float(self._alpha) * rc, 6)})
        if len(qs) == 0 or sum_q2 <= 0:
            return nodes, [0.0] * len(nodes), n_atoms
        alphas = [x / rc for x in nodes]
        local = tuning.local_tail_fields(self._box, rc, alphas, samples, np.ascontiguousarray(pos, dtype=float),
                                         np.ascontiguousarray(q, dtype=float))
        fields = np.empty_like(local)
        comm.Allreduce(local, fields, op=MPI.SUM)
        x = qs[None, :] ** 2 * (fields ** 2).sum(axis=2)  # (alpha, sample)
        m = len(qs)
        mean = x.mean(axis=1)
        spread = x.std(axis=1, ddof=1) if m > 1 else np.zeros_like(mean)
        se = spread / math.sqrt(m) * math.sqrt(max(0.0, 1.0 - m / n_atoms))
        vol = self._real_volume() or abs(np.linalg.det(self._box))
        n_model, sq2 = _model_atoms(n_atoms), _for_choice(sum_q2)
        out = []
        for a, mu, s_e in zip(alphas, mean, se):
            beyond = tuning.real_space_error(a, tuning.tail_radius(a, rc), sq2, n_model, vol, 1.0)
            out.append(math.sqrt(mu + _TAIL_SIGMAS * s_e + beyond ** 2))
        return nodes, out, n_atoms

    def _tail_sample(self, pos, q, idv):
        """(N, local mask, positions, charges) of the sample (collective): the atoms whose id
        hashes to 0 modulo N // _TAIL_SAMPLE, gathered to every rank in the order of their ids,
        so the same on any rank count and split."""
        comm = self._comm
        n_atoms = int(allsum(comm, len(q), np.int64)[0])
        stride = max(1, n_atoms // _TAIL_SAMPLE)
        pick = _sample_hash(idv) % np.uint64(stride) == 0
        parts = comm.allgather((idv[pick], pos[pick], q[pick]))
        order = np.argsort(np.concatenate([p[0] for p in parts]), kind="stable")
        samples = np.ascontiguousarray(np.concatenate([p[1] for p in parts]).reshape(-1, 3)[order])
        return n_atoms, pick, samples, np.concatenate([p[2] for p in parts])[order]

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

        p, k, rc = self._params, self._k, self._cutoff
        rec = self._estimate(sum_q2, n_atoms)[1]["recip"]
        model = dict(box=self._box, alpha=p["alpha"], cutoff=rc, sum_q2=sum_q2, n_atoms=_model_atoms(n_atoms),
                     coulomb_constant=k, correlation=self._correlation, real_volume=self._real_volume())
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
            solver = self._new_solver(mesh, order, p["alpha"], diff, False, mode=self._probe_mode())
            forces.append(np.asarray(self._run(solver, pos, q, idv, none)["forces"]))
            del solver
        _, pick, samples, qs = self._tail_sample(pos, q, idv)
        parts = self._comm.allgather((idv[pick], (forces[0] - forces[1])[pick]))
        order = np.argsort(np.concatenate([x[0] for x in parts]), kind="stable")
        e_k = np.concatenate([x[1] for x in parts]).reshape(-1, 3)[order]
        local = tuning.local_tail_fields(self._box, rc, [p["alpha"]], samples, np.ascontiguousarray(pos, dtype=float),
                                         np.ascontiguousarray(q, dtype=float))
        fields = np.empty_like(local)
        self._comm.Allreduce(local, fields, op=MPI.SUM)
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
                                         self._real_volume() or abs(np.linalg.det(self._box)), k)
        rho = min(1.0, max(-1.0, upper((e_r * e_k).sum(axis=1)) / norm))

        def rounded(x):  # three digits in units of the Coulomb constant: the same in any units
            return float(f"{x / k:.3e}") * k

        return {"real": rounded(math.sqrt(upper(r2) + beyond ** 2)), "recip": rounded(math.sqrt(upper(k2))),
                "cross": round(rho, 2)}

    def _real_volume(self):
        """The volume the atoms fill (the real-space estimate's density): a slab's own
        (``_slab.volume_occupied``, the box without its vacuum gap), else None (the box's)."""
        slab = getattr(self, "_slab", None)
        return None if slab is None else slab.volume_occupied

    def _typical_force(self, n_atoms, sum_q2):
        """k q_rms^2 / d^2 at the mean spacing d = (V/N)^(1/3) (V: the volume the atoms fill)."""
        vol = self._real_volume() or abs(np.linalg.det(self._box))
        return self._k * (sum_q2 / n_atoms) / (vol / n_atoms) ** (2.0 / 3.0)

    def _force_scale(self, rms, typical):
        """The force scale the relative tolerance refers to, rounded to 2 significant digits
        (in units of the Coulomb constant) so the choice never hinges on the last bits of a
        reduction, whatever the rank count or units."""
        x = max(rms, _FORCE_FLOOR * typical) / self._k
        return float(f"{x:.1e}") * self._k if x > 0 else typical

    def _tune(self, pos, q, idv, ex, n_atoms, sum_q2):
        """Choose the parameters on the first call (or after set_box).

        The target is an absolute RMS force error of ``_MARGIN x tolerance x F``, F the
        force scale: first the charge-based typical force, then (real_space=True) the RMS
        force measured by a probe on a coarse mesh, then that of the chosen parameters. They
        are chosen again with the measured scale unless the estimate already lies between a
        quarter of and the full tolerance, so the mesh is neither too coarse nor needlessly
        fine. Finally (real_space=True) the energy error is checked (_check_energy).
        """
        self._recheck = False
        if self._fixed["mesh"] is not None:
            self._build(self._alpha, self._fixed["mesh"], self._order, self._differentiation)
            return self._run(self._solver, pos, q, idv, ex)
        typical = self._typical_force(n_atoms, sum_q2)
        scan = self._real_space and self._fixed["alpha"] is None
        probe = None

        def acceptable(raw):
            scale = self._force_scale(math.sqrt(raw["sum_force2"] / n_atoms), typical)
            est = self._estimate(sum_q2, n_atoms)[0]
            return 0.25 * self._tolerance * scale <= est <= self._tolerance * scale, scale

        if self._solver is not None:  # after set_box: keep the parameters while they meet the tolerance
            raw = self._run(self._solver, pos, q, idv, ex)
            if not self._real_space:
                return raw
            scale = acceptable(raw)[1]
            if self._estimate(sum_q2, n_atoms)[0] <= self._tolerance * scale:
                return raw
        else:
            scale = self._force_scale(typical, typical)
            if self._real_space:
                # A cheap probe on a coarse mesh measures the force scale (it only has to be
                # right to the two digits _force_scale keeps): the cheapest parameters at the
                # provisional alpha. Its mesh is usually coarser than the final one, so the
                # energy check can reuse it (and its FFT plans).
                coarse = min(0.3, 30.0 * self._tolerance) * scale
                self._use(self._choose(coarse, sum_q2, n_atoms, False))
                raw = self._run(self._solver, pos, q, idv, ex)
                probe = self._energy_point(raw)
                scale = acceptable(raw)[1]
                self._choose_precision(scale, n_atoms)
        for _ in range(3):
            # The mesh and real-space estimates share what the float rounding leaves.
            target = _MARGIN * self._tolerance * scale
            target = math.sqrt(max(target ** 2 - self._float_error(n_atoms) ** 2, 0.25 * target ** 2))
            self._use(self._choose(target, sum_q2, n_atoms, scan))
            raw = self._run(self._solver, pos, q, idv, ex)
            if not self._real_space:
                return raw  # the total forces are the caller's: keep the charge-based scale
            ok, measured = acceptable(raw)
            if ok or measured == scale:
                break
            scale = measured
        raw = self._check_energy(raw, probe, scale, scan, pos, q, idv, n_atoms, sum_q2, ex)
        return self._check_measured(raw, scale, scan, pos, q, idv, n_atoms, sum_q2, ex)

    def _check_measured(self, raw, scale, scan, pos, q, idv, n_atoms, sum_q2, ex):
        """Measure the errors at the chosen parameters (correlated model; :meth:`_measure_errors`)
        and report them; when their correlation is at least _CROSS_MIN in size or the mesh
        error differs from the model's by _RECIP_MIN, choose again planning with both (the
        real-space and mesh errors are no longer independent, the mesh estimates scaled by
        the measured ratio), the energy check included, and measure again there. The new
        choice is kept when its measured estimate meets the tolerance (or is below the
        first one's), else the first one."""
        if self._correlation is None or not self._real_space:
            return raw
        self._measured = None  # a new choice: what was measured before (another box) is the model's here
        model = self._estimate(sum_q2, n_atoms)[1]
        if model["recip"] < _MEASURE_SHARE * model["real"]:
            return raw  # the mesh error is too small a part to matter (<4% of the total's square)
        got = self._measure_errors(pos, q, idv, sum_q2, n_atoms)
        if got is None:
            return raw
        model = model["recip"]
        self._measured = (self._measure_key(sum_q2, n_atoms), got)
        factor = float(f"{got['recip'] / model:.2e}") if model > 0 else 1.0
        if abs(got["cross"]) < _CROSS_MIN and abs(factor - 1.0) < _RECIP_MIN:
            return raw
        state = ("_solver", "_params", "_choice", "_alpha", "_order", "_differentiation", "_cache_estimate",
                 "_energy_error", "_mesh_target", "_measured", "_pair_force2")
        first = {name: getattr(self, name) for name in state}
        first_est = self._estimate(sum_q2, n_atoms)[0]
        self._plan = {"cross": got["cross"], "recip_factor": factor}
        try:
            self._use(self._choose(_MARGIN * self._tolerance * scale, sum_q2, n_atoms, scan,
                                   mesh_target=self._mesh_target))
            if self._params == first["_params"]:
                for name, value in first.items():
                    setattr(self, name, value)
                return raw
            again = self._run(self._solver, pos, q, idv, ex)
            again = self._check_energy(again, None, scale, scan, pos, q, idv, n_atoms, sum_q2, ex)
        finally:
            self._plan = dict(_NO_PLAN)
        got = self._measure_errors(pos, q, idv, sum_q2, n_atoms)
        if got is not None:
            self._measured = (self._measure_key(sum_q2, n_atoms), got)
            est = self._estimate(sum_q2, n_atoms)[0]
            if est <= self._tolerance * scale or est < first_est:
                return again
        for name, value in first.items():  # the first choice, with its measured errors
            setattr(self, name, value)
        return raw

    def _energy_point(self, raw):
        """What the energy check needs of a result: its parameters and reciprocal energy."""
        return dict(self._params, reciprocal=float(raw["terms"]["reciprocal"]))

    def _check_energy(self, raw, coarse, scale, scan, pos, q, idv, n_atoms, sum_q2, ex):
        """Refine the parameters when the energy error would exceed 0.3 x tolerance x |E|.

        The energy of another mesh (same alpha and order) differs from this one by about
        the difference of their errors; both errors scale like the reciprocal force-error
        estimates, so this mesh's energy error is about |E_other - E| x est / |est_other -
        est|. The other point is a coarser mesh when one is allowed: the probe when it has
        the same alpha and order, else a reciprocal-only calculation (the energy does not
        depend on the differentiation) on a mesh 0.75x as fine; when the mesh is already
        the coarsest the order allows (a single charge, a tiny cell), a finer one (1.5x).
        The extrapolation is crude (2-3x), hence the allowance of 0.3 x tolerance x |E|,
        |E| at least 1% of k sum q^2 / d (d the mean spacing) for energies that cancel to
        ~0. When it is exceeded, the parameters are chosen again with the mesh itself
        bounded: its ad estimate at most the current one times the missing factor,
        whatever the differentiation (the energy does not depend on it, so ik then needs as
        fine a mesh as ad and usually loses to it). This matters for small systems, whose
        energy error is relatively larger, for systems whose energy is a small difference
        of large terms, and for those whose forces vanish by symmetry (a single charge, a
        perfect crystal), whose force-based choice says nothing about the energy.
        """
        from .._core import tuning

        self._energy_error = None
        self._mesh_target = None
        probe_mesh = coarse["mesh"] if coarse is not None else None
        vol = self._real_volume() or abs(np.linalg.det(self._box))
        floor = _ENERGY_FLOOR * self._k * sum_q2 / (vol / n_atoms) ** (1.0 / 3.0)
        for _ in range(3):
            p = self._params
            rec = self._estimate(sum_q2, n_atoms)[1]["recip"]
            if coarse is None or (coarse["alpha"], coarse["order"]) != (p["alpha"], p["order"]):
                coarse = self._other_energy(pos, q, idv, rec, n_atoms, sum_q2, probe_mesh)
                if coarse is None:
                    break

            def recip_estimate(mesh, diff):
                return tuning.estimate_errors(self._box, p["alpha"], self._cutoff, mesh, p["order"], diff, sum_q2,
                                               _model_atoms(n_atoms), coulomb_constant=self._k,
                                               correlation=self._correlation)["recip"]

            est_c = recip_estimate(coarse["mesh"], p["differentiation"])
            if not max(est_c, rec) > 1.5 * min(est_c, rec):
                break
            d_e = abs(coarse["reciprocal"] - float(raw["terms"]["reciprocal"])) * rec / abs(est_c - rec)
            allowed = 0.3 * self._tolerance * max(abs(raw["energy"]), floor)
            self._energy_error = d_e
            if d_e <= allowed:
                break
            factor = float(f"{allowed / d_e:.1e}")  # two digits: rank-count independent
            est_ad = rec if p["differentiation"] == "ad" else recip_estimate(p["mesh"], "ad")
            coarse = self._energy_point(raw)
            self._mesh_target = est_ad * factor
            self._use(self._choose(_MARGIN * self._tolerance * scale, sum_q2, n_atoms, scan,
                                   mesh_target=self._mesh_target))
            raw = self._run(self._solver, pos, q, idv, ex)
        return raw

    def _other_energy(self, pos, q, idv, rec, n_atoms, sum_q2, probe_mesh=None):
        """The reciprocal energy at the current alpha and order on another mesh (reciprocal
        part only, ad): the probe's mesh when it is coarse enough for the extrapolation (its
        FFT plans exist already), else one about 0.75x (0.6x) as fine, else, when no coarser
        mesh is allowed, one 1.5x (2x) as fine; None when neither exists."""
        from .._core import tuning

        p = self._params
        tries = [] if probe_mesh is None else [tuple(probe_mesh)]
        tries += [tuple(max(p["order"], tuning.fft_friendly(int(math.ceil(f * k)))) for k in p["mesh"])
                  for f in (0.75, 0.6)]
        finer = [tuple(min(4096, tuning.fft_friendly(int(math.ceil(f * k)))) for k in p["mesh"]) for f in (1.5, 2.0)]
        chosen = None
        for mesh in tries + finer:
            coarser = mesh in tries
            if mesh == p["mesh"] or min(mesh) < p["order"]:
                continue
            if coarser and any(a > b for a, b in zip(mesh, p["mesh"])):
                continue
            est = tuning.estimate_errors(self._box, p["alpha"], self._cutoff, mesh, p["order"],
                                          p["differentiation"], sum_q2, _model_atoms(n_atoms),
                                          coulomb_constant=self._k, correlation=self._correlation,
                                        real_volume=self._real_volume())["recip"]
            if (est > 1.5 * rec) if coarser else (rec > 1.5 * est):
                chosen = mesh
                break
        if chosen is None:
            return None
        solver = self._new_solver(chosen, p["order"], p["alpha"], "ad", False, mode=self._probe_mode())
        raw = self._run(solver, pos, q, idv, np.zeros((0, 2), dtype=np.int64))
        return {"alpha": p["alpha"], "order": p["order"], "mesh": chosen,
                "reciprocal": float(raw["terms"]["reciprocal"])}


def _model_atoms(n_atoms):
    """The atom count of the error model: a single charge is modelled as two. The
    estimate of one charge is its self-force error alone (~0 on any mesh), which says
    nothing about its energy error; two carry the aliasing error that both share, with
    the right dependence on the mesh for the energy check."""
    return max(n_atoms, 2)


def _sample_hash(ids):
    """A well-mixed 64-bit hash of the atom ids (splitmix64's finaliser), so that a sample
    picked by hash modulo a stride is spread over the system whatever the ids' pattern."""
    with np.errstate(over="ignore"):
        z = np.asarray(ids, dtype=np.int64).astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _for_choice(x):
    """x to 12 significant digits: sums reduced in a different order on another rank count
    then give the same parameters (the choice never hinges on their last bits)."""
    return float(f"{x:.11e}")
