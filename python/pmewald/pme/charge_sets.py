"""Charge sets: ``PME.compute(positions, charges)`` with ``charges`` of shape (n, m).

m charge vectors on the same atoms in one call. The C++ solver (PMESolver::compute_sets)
migrates the atoms once, searches the pairs and evaluates their erfc/exp once for all sets,
computes the B-spline stencils once and runs each set's spread, FFTs, solve and gather on the
shared plans. The result holds every per-set quantity with the set as its leading axis:
``energy`` (m,), ``forces`` (m, n, 3), ``virial`` (m, 3, 3), each ``terms`` entry (m,),
``potentials`` (m, n) and so on; ``PMEResult.charge_set(s)`` is set s as the result of a
call with ``charges[:, s]`` alone.

A sets call takes the same path through :meth:`PME.compute` as a call with one set (checks,
agreement, tuning, probes, the pair list's skin, the rollback of a failed call); what
differs is here: the local checks (agreed in pme/solver.py), the per-set sums, which set the
tuning sees, and the shape of the result.
"""

from __future__ import annotations

import math

import numpy as np
from mpi4py import MPI

from .._checks.validate import check_atoms as _check_atoms_1d
from .._checks.validate import float_array
from .result import ZERO_PARTS, TERMS, PMEResult, estimate_report, set_potentials


def is_sets(charges) -> bool:
    """Whether ``charges`` has more than one axis (charge sets; more than two is refused in
    check_atoms): decided locally, agreed in pme/solver.py. Something numpy cannot shape (ragged
    lists) is not sets: the 1-D check refuses it, naming the charges."""
    try:
        return np.ndim(charges) >= 2
    except (TypeError, ValueError):
        return False


def check_atoms(positions, charges, ids, exclusions, box):
    """check_atoms for charges of shape (n, m): (pos, q (n, m) C-contiguous float64, ids, ex)."""
    q = float_array(charges, "charges", "(n, m)")
    if q.ndim != 2:
        raise ValueError(f"charges must have shape (n,) or (n, m), got {q.shape}")
    if q.shape[1] < 1:
        raise ValueError(f"charges of shape (n, m) need at least one charge set (m >= 1), got {q.shape}")
    pos, _, idv, ex = _check_atoms_1d(positions, np.zeros(len(q)), ids, exclusions, box)
    if q.size and not (math.isfinite(q.min()) and math.isfinite(q.max())):
        bad = np.flatnonzero(~np.isfinite(q).all(axis=0))
        raise ValueError(f"charges contain NaN or inf (charge set {int(bad[0])})")
    return pos, np.ascontiguousarray(q), idv, ex


def check_agreed(m_sum, m2_sum, size):
    """Every rank passed 1-D charges (m = 0) or the same number of sets: the sums of m and
    m^2 over the ranks satisfy size * sum(m^2) == sum(m)^2 exactly then (and only then)."""
    if size * m2_sum != m_sum * m_sum:
        raise ValueError("charges must be 1-D on every rank or have the same number of columns (charge sets) on "
                         "every rank (shape (0, m) where a rank has no atoms)")


def sums(comm, q):
    """Collective: every set's total charge and sum of squared charges, (m,) each."""
    m = q.shape[1]
    with np.errstate(over="ignore"):
        local = np.concatenate((q.sum(axis=0), (q * q).sum(axis=0)))
    total = np.empty_like(local)
    comm.Allreduce(local, total, op=MPI.SUM)
    return total[:m], total[m:]


def lead(q, sum_q2):
    """The set the tuning (first call, set_box) and the correlated error model see: the one
    with the largest sum of squared charges (the first of equal ones), as (charges, sum)."""
    c = int(np.argmax(sum_q2))
    return np.ascontiguousarray(q[:, c]), float(sum_q2[c]), c


def result(tuner, raw, q, n_atoms, sum_q, sum_q2, estimate, want, n_probes):
    """(PMEResult with the set axis, parameters' estimate report: the tuned set's)."""
    m, n = q.shape[1], len(q)
    rms = np.sqrt(raw["sum_force2"] / n_atoms)
    est_abs, est_rel = np.zeros(m), np.zeros(m)
    parts = [{"real": 0.0, "recip": 0.0}] * m
    for c in range(m):
        if sum_q2[c] == 0.0:
            continue  # a set without charge: exactly zero, no error
        if estimate:
            est_abs[c], parts[c] = tuner.set_estimate(sum_q2[c], n_atoms)
        else:
            est_abs[c], parts[c] = math.nan, {"real": math.nan, "recip": math.nan}
        est_rel[c] = est_abs[c] / rms[c] if rms[c] > 0 else math.inf
    c = lead(q, sum_q2)[2]
    report = estimate_report(float(est_rel[c]), float(est_abs[c]), parts[c])
    forces = raw["forces"]  # (n + probes, m, 3)
    res = PMEResult(energy=np.asarray(raw["energy"]), forces=np.ascontiguousarray(forces[:n].transpose(1, 0, 2)),
                    virial=np.asarray(raw["virial"]),
                    terms={t: np.asarray(raw["terms"].get(t, np.zeros(m))) for t in TERMS},
                    estimated_error=est_rel, estimated_error_absolute=est_abs, rms_force=rms, n_atoms=n_atoms,
                    total_charge=np.asarray(sum_q, dtype=float))
    if want:
        phi = np.ascontiguousarray(raw["potentials"].T)  # (m, n + probes)
        field = np.ascontiguousarray(raw["fields"].transpose(1, 0, 2))
        set_potentials(res, q, phi, field, n)
    return res, report


def zero_result(n_local, n_atoms, m, want, n_probes):
    """Every set's charges zero: exactly zero everything; nothing tuned."""
    res = PMEResult(energy=np.zeros(m), forces=np.zeros((m, n_local, 3)), virial=np.zeros((m, 3, 3)),
                    terms={t: np.zeros(m) for t in TERMS}, estimated_error=np.zeros(m),
                    estimated_error_absolute=np.zeros(m), rms_force=np.zeros(m), n_atoms=n_atoms,
                    total_charge=np.zeros(m))
    if want:
        set_potentials(res, np.zeros((n_local, m)), np.zeros((m, n_local + n_probes)),
                       np.zeros((m, n_local + n_probes, 3)), n_local)
    return res, estimate_report(0.0, 0.0, ZERO_PARTS)
