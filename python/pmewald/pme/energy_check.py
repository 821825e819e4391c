"""The energy check of the automatic choice (docs/accuracy.md, "What is chosen", step 3).

The force-based choice says nothing about the energy, whose error is relatively larger for
small systems, for energies that are small differences of large terms and for forces that
vanish by symmetry. The check extrapolates the energy error from the reciprocal energies of
two meshes at the same alpha and order and, when it exceeds 0.3 x tolerance x |E|, has the
:class:`~pmewald.pme.tuning.Tuner` choose again with the mesh bounded. Functions of the tuner
(its state, problem, solvers and choices), collective where they run solvers:

- :func:`before_run`: on reciprocal-only runs of the parameters just chosen, before their full
  calculation (a refined mesh costs a reciprocal-only run);
- :func:`after_run`: on a full result (a refined mesh is run in full);
- :func:`point`: what the check needs of a result.
"""

from __future__ import annotations

import math

import numpy as np

from .._core import tuning as core_tuning
from .error_model import model_atoms as _model_atoms

# Smallest energy scale for the energy check, as a fraction of k sum q^2 / d (systems
# whose energy is a cancellation to ~0).
ENERGY_FLOOR = 1e-4


def point(tuner, raw):
    """What the energy check needs of a result: its parameters, reciprocal energy and
    energy."""
    return dict(tuner.state.params, reciprocal=float(raw["terms"]["reciprocal"]), energy=float(raw["energy"]))


def after_run(tuner, raw, coarse, scale, scan, pos, q, idv, n_atoms, sum_q2, ex, bound=None):
    """The energy check of a full result (see _rounds): a refined mesh is run in full.
    `bound`: the mesh bound the parameters were chosen under (before_run's), kept unless
    the check refines them."""
    return _rounds(tuner, raw, coarse, scale, scan, pos, q, idv, n_atoms, sum_q2,
                   lambda: tuner.run(tuner.state.solver, pos, q, idv, ex), bound)[0]


def before_run(tuner, probe, scale, scan, pos, q, idv, n_atoms, sum_q2):
    """The energy check of the parameters just chosen, before their full calculation: the
    same rounds as :func:`after_run`, on reciprocal-only calculations of the current and
    every refined mesh, with the probe's energy as |E| (the allowance's scale, good to the
    probe's accuracy). A refinement then costs a reciprocal-only run instead of a full
    calculation of parameters that are rejected (real space is most of a full one).
    Returns the energy point that the current parameters were checked against (same alpha
    and order, another mesh), for :func:`after_run` to check the full result without
    another run; None when the check found no other mesh."""

    def reciprocal_run():
        reciprocal = _reciprocal_energy(tuner, tuner.state.params["mesh"], pos, q, idv)
        return {"terms": {"reciprocal": reciprocal}, "energy": probe["energy"]}

    return _rounds(tuner, reciprocal_run(), probe, scale, scan, pos, q, idv, n_atoms, sum_q2, reciprocal_run)[1]


def _rounds(tuner, raw, coarse, scale, scan, pos, q, idv, n_atoms, sum_q2, run, bound=None):
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

    Returns (the result at the parameters kept, the other energy point of the last check).
    """
    tuner.state.energy_error = None
    tuner.state.mesh_target = bound  # the choice's own (a later choice, _check_measured's, keeps it)
    probe_mesh = coarse["mesh"] if coarse is not None else None
    vol = tuner.problem.volume_filled()
    floor = ENERGY_FLOOR * tuner.problem.k * sum_q2 / (vol / n_atoms) ** (1.0 / 3.0)
    for _ in range(3):
        p = tuner.state.params
        rec = tuner.estimate(sum_q2, n_atoms)[1]["recip"]
        if coarse is None or (coarse["alpha"], coarse["order"]) != (p["alpha"], p["order"]):
            coarse = _other_energy(tuner, pos, q, idv, rec, n_atoms, sum_q2, probe_mesh)
            if coarse is None:
                break

        def recip_estimate(mesh, diff):
            return core_tuning.estimate_errors(tuner.problem.box, p["alpha"], tuner.problem.cutoff, mesh,
                                               p["order"], diff, sum_q2, _model_atoms(n_atoms),
                                               coulomb_constant=tuner.problem.k,
                                               correlation=tuner.state.correlation)["recip"]

        est_c = recip_estimate(coarse["mesh"], p["differentiation"])
        if not max(est_c, rec) > 1.5 * min(est_c, rec):
            break
        d_e = abs(coarse["reciprocal"] - float(raw["terms"]["reciprocal"])) * rec / abs(est_c - rec)
        allowed = 0.3 * tuner.problem.tolerance * max(abs(raw["energy"]), floor)
        tuner.state.energy_error = d_e
        if d_e <= allowed:
            break
        factor = float(f"{allowed / d_e:.1e}")  # two digits: rank-count independent
        est_ad = rec if p["differentiation"] == "ad" else recip_estimate(p["mesh"], "ad")
        coarse = point(tuner, raw)
        tuner.state.mesh_target = est_ad * factor
        tuner._use(tuner._choose(tuner.MARGIN * tuner.problem.tolerance * scale, sum_q2, n_atoms, scan,
                                 mesh_target=tuner.state.mesh_target))
        raw = run()
    return raw, coarse


def _other_energy(tuner, pos, q, idv, rec, n_atoms, sum_q2, probe_mesh=None):
    """The reciprocal energy at the current alpha and order on another mesh (reciprocal
    part only, ad): the probe's mesh when it is coarse enough for the extrapolation (its
    FFT plans exist already), else one about 0.75x (0.6x) as fine, else, when no coarser
    mesh is allowed, one 1.5x (2x) as fine; None when neither exists."""
    p = tuner.state.params
    tries = [] if probe_mesh is None else [tuple(probe_mesh)]
    tries += [tuple(max(p["order"], core_tuning.fft_friendly(int(math.ceil(f * k)))) for k in p["mesh"])
              for f in (0.75, 0.6)]
    finer = [tuple(min(4096, core_tuning.fft_friendly(int(math.ceil(f * k)))) for k in p["mesh"])
             for f in (1.5, 2.0)]
    chosen = None
    for mesh in tries + finer:
        coarser = mesh in tries
        if mesh == p["mesh"] or min(mesh) < p["order"]:
            continue
        if coarser and any(a > b for a, b in zip(mesh, p["mesh"])):
            continue
        est = core_tuning.estimate_errors(tuner.problem.box, p["alpha"], tuner.problem.cutoff, mesh, p["order"],
                                          p["differentiation"], sum_q2, _model_atoms(n_atoms),
                                          coulomb_constant=tuner.problem.k, correlation=tuner.state.correlation,
                                          real_volume=tuner.problem.real_volume())["recip"]
        if (est > 1.5 * rec) if coarser else (rec > 1.5 * est):
            chosen = mesh
            break
    if chosen is None:
        return None
    return {"alpha": p["alpha"], "order": p["order"], "mesh": chosen,
            "reciprocal": _reciprocal_energy(tuner, chosen, pos, q, idv)}


def _reciprocal_energy(tuner, mesh, pos, q, idv):
    """The reciprocal energy on `mesh` at the current alpha and order (a reciprocal-only
    solver, ad: the energy does not depend on the differentiation; collective)."""
    p = tuner.state.params
    solver = tuner._new_solver(mesh, p["order"], p["alpha"], "ad", False, mode=tuner.probe_mode())
    raw = tuner.run(solver, pos, q, idv, np.zeros((0, 2), dtype=np.int64))
    return float(raw["terms"]["reciprocal"])
