"""The error model's side of the charges: what the correlated error model measures on them
(the structure-factor table and the sampled real-space factors, docs/accuracy.md), the tail
sample that the measurements at the choice share, and the conventions every estimate keeps
(the model's atom count, the rounding that makes the choice independent of the rank count).

Functions of the :class:`~pmewald.pme.problem.Problem` (its communicator, box, cutoff and the
volume the atoms fill) and the current alpha; collective where they say so.
"""

from __future__ import annotations

import math

import numpy as np

from .._mpi.collective import allsum

# Largest index half-width of the charge structure-factor table of the correlated error
# model (tuning.local_structure_factors): |x_d| <= 24, a transform of at most 100^3 points.
_CORRELATION_HALF = 24
# The real-space estimate of the correlated model (docs/accuracy.md, "The real-space part"):
# the truncation force sampled on about _TAIL_SAMPLE atoms (at most twice that; all atoms
# of smaller systems), at alpha * cutoff = _TAIL_ALPHA_RC (and the current alpha), relative
# to the Kolafa-Perram estimate (held below 2.5, where the factors measured fall: the
# shell of the smallest alpha is the widest, and costs the most); _TAIL_SIGMAS standard errors
# of the sample mean are added
# (none when every atom is sampled). The factor is at least 1: the sample raises the
# estimate where the shell adds coherently (a displaced crystal: up to 1.8x) but does not
# lower it where it cancels (water, chains: 0.7-0.9x), because a lower real-space share
# moved the choice onto meshes commensurate with a crystal, on which the mesh estimate is
# up to 1.7x optimistic (docs/accuracy.md: measured above the tolerance on 3^3 rock salt).
_TAIL_SAMPLE = 500
_TAIL_ALPHA_RC = (2.5, 3.0, 3.5, 4.0, 4.5, 5.0)
_TAIL_SIGMAS = 2.0


def charge_correlation(problem, alpha, pos, q, idv, sum_q2):
    """The charges' structure-factor table for the correlated error model, with its
    real-space factors (:func:`real_factors`) (collective).

    Every rank transforms its own atoms (tuning.local_structure_factors: a B-spline
    spread onto a periodic grid and one FFT) and the sums are reduced over the ranks,
    so the table does not depend on how the atoms are split; its values are rounded
    to six digits, so neither does the choice made with it."""
    from mpi4py import MPI

    from .._core import tuning

    kmax = 2 * math.pi * _CORRELATION_HALF / float(np.linalg.norm(problem.box, axis=1).max())
    half = tuple(int(h) for h in tuning.correlation_half_widths(problem.box, kmax, _CORRELATION_HALF))
    local = tuning.local_structure_factors(problem.box, pos, q, half)
    total = np.empty_like(local)
    problem.comm.Allreduce(local, total, op=MPI.SUM)
    sum_q4 = float(allsum(problem.comm, float((q ** 4).sum()))[0])
    corr = tuning.ChargeCorrelation(half, total, for_choice(sum_q2), for_choice(sum_q4))
    corr.set_real_factors(*real_factors(problem, alpha, pos, q, idv, sum_q2))
    return corr


def real_factors(problem, alpha, pos, q, idv, sum_q2):
    """(alpha * cutoff nodes, factors): the sampled real-space truncation error
    (:func:`sampled_real_errors`) relative to the Kolafa-Perram estimate, rounded to
    three digits (the reduction's order does not show), at least 1 (collective)."""
    from .._core import tuning

    nodes, sampled, n_atoms = sampled_real_errors(problem, alpha, pos, q, idv, sum_q2)
    vol = problem.volume_filled()
    factors = []
    for x, e in zip(nodes, sampled):
        kp = tuning.real_space_error(x / problem.cutoff, problem.cutoff, for_choice(sum_q2), model_atoms(n_atoms),
                                     vol, 1.0)
        factors.append(max(1.0, float(f"{e / kp:.2e}")) if kp > 0 and e > 0 else 1.0)
    return nodes, factors


def sampled_real_errors(problem, alpha, pos, q, idv, sum_q2):
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

    comm, rc = problem.comm, problem.cutoff
    n_atoms, _, samples, qs = tail_sample(comm, pos, q, idv)
    nodes = sorted(set(_TAIL_ALPHA_RC) | {round(float(alpha) * rc, 6)})
    if len(qs) == 0 or sum_q2 <= 0:
        return nodes, [0.0] * len(nodes), n_atoms
    alphas = [x / rc for x in nodes]
    local = tuning.local_tail_fields(problem.box, rc, alphas, samples, np.ascontiguousarray(pos, dtype=float),
                                     np.ascontiguousarray(q, dtype=float))
    fields = np.empty_like(local)
    comm.Allreduce(local, fields, op=MPI.SUM)
    x = qs[None, :] ** 2 * (fields ** 2).sum(axis=2)  # (alpha, sample)
    m = len(qs)
    mean = x.mean(axis=1)
    spread = x.std(axis=1, ddof=1) if m > 1 else np.zeros_like(mean)
    se = spread / math.sqrt(m) * math.sqrt(max(0.0, 1.0 - m / n_atoms))
    vol = problem.volume_filled()
    n_model, sq2 = model_atoms(n_atoms), for_choice(sum_q2)
    out = []
    for a, mu, s_e in zip(alphas, mean, se):
        beyond = tuning.real_space_error(a, tuning.tail_radius(a, rc), sq2, n_model, vol, 1.0)
        out.append(math.sqrt(mu + _TAIL_SIGMAS * s_e + beyond ** 2))
    return nodes, out, n_atoms


def tail_sample(comm, pos, q, idv):
    """(N, local mask, positions, charges) of the sample (collective): the atoms whose id
    hashes to 0 modulo N // _TAIL_SAMPLE, gathered to every rank in the order of their ids,
    so the same on any rank count and split."""
    n_atoms = int(allsum(comm, len(q), np.int64)[0])
    stride = max(1, n_atoms // _TAIL_SAMPLE)
    pick = sample_hash(idv) % np.uint64(stride) == 0
    parts = comm.allgather((idv[pick], pos[pick], q[pick]))
    order = np.argsort(np.concatenate([p[0] for p in parts]), kind="stable")
    samples = np.ascontiguousarray(np.concatenate([p[1] for p in parts]).reshape(-1, 3)[order])
    return n_atoms, pick, samples, np.concatenate([p[2] for p in parts])[order]


def model_atoms(n_atoms):
    """The atom count of the error model: a single charge is modelled as two. The
    estimate of one charge is its self-force error alone (~0 on any mesh), which says
    nothing about its energy error; two carry the aliasing error that both share, with
    the right dependence on the mesh for the energy check."""
    return max(n_atoms, 2)


def sample_hash(ids):
    """A well-mixed 64-bit hash of the atom ids (splitmix64's finaliser), so that a sample
    picked by hash modulo a stride is spread over the system whatever the ids' pattern."""
    with np.errstate(over="ignore"):
        z = np.asarray(ids, dtype=np.int64).astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def for_choice(x):
    """x to 12 significant digits: sums reduced in a different order on another rank count
    then give the same parameters (the choice never hinges on their last bits)."""
    return float(f"{x:.11e}")
