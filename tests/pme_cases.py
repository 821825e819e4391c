"""What the PME solver tests share (tests/pme/test_pme.py, tests/tuning/test_automatic_choice.py):
the test systems with their direct-Ewald references (cached), the accuracy criteria of
issue 4 and cost-model overrides that make one differentiation cheaper.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from pmewald import reference, systems

STRONG = "strong"


def rel_rms(f, fref):
    """Relative RMS force error sqrt(sum |F - F_ref|^2 / sum |F_ref|^2) (issue 4's measure)."""
    f = np.asarray(f, dtype=float)
    fref = np.asarray(fref, dtype=float)
    return math.sqrt(float(np.sum((f - fref) ** 2)) / float(np.sum(fref ** 2)))


@functools.lru_cache(maxsize=None)
def _reference_cached(key):
    s = _SYSTEMS[key]()
    return s, reference.ewald(s.box, s.positions, s.charges, exclusions=s.exclusions)


def _random_exclusions(s, m, seed, within=None):
    """m distinct random pairs of ids, each pair once, drawn from the pairs closer than
    `within` (default 0.9 x the tests' cutoff: excluded pairs must lie within the cutoff)."""
    within = 0.9 * half_height_cutoff(s.box) if within is None else within
    i, j = np.triu_indices(s.n_atoms, 1)
    d = reference.minimum_image(s.box, s.positions[i] - s.positions[j])
    near = np.nonzero(np.einsum("ij,ij->i", d, d) < within ** 2)[0]
    assert len(near) >= m
    pick = np.random.default_rng(seed).choice(near, m, replace=False)
    return np.stack([i[pick], j[pick]], axis=1).astype(np.int64)


def _with_exclusions(s, m, seed):
    s.exclusions = _random_exclusions(s, m, seed)
    return s


_SYSTEMS = {
    "ortho-neutral": lambda: systems.random_charges(150, [10.0, 11.0, 12.0], neutral=True, seed=11),
    "ortho-charged": lambda: systems.random_charges(120, [10.0, 11.0, 12.0], neutral=False, seed=12),
    "triclinic-neutral": lambda: systems.random_charges(
        150, systems.triclinic_box(12.0, STRONG), neutral=True, seed=13),
    "triclinic-charged": lambda: systems.random_charges(
        120, systems.triclinic_box(12.0, STRONG), neutral=False, seed=14),
    "water40": lambda: systems.water_box(40, seed=5),
    "water100": lambda: systems.water_box(100, seed=3),
    "triclinic-charged-excl": lambda: _with_exclusions(systems.random_charges(
        90, systems.triclinic_box(9.0, STRONG), neutral=False, seed=31), 25, seed=32),
}


@functools.lru_cache(maxsize=None)
def kernel_threads():
    """Threads per rank of the Kokkos build under test (1 for the Serial build)."""
    import pmewald

    return int(pmewald.show_config()["kokkos_threads"])


def assert_same_per_atom(a, b):
    """Per-atom arrays (forces, potentials) of two calls that must agree: bitwise on one
    thread; with more, to rounding (1e-14 of the largest), because each thread sums its
    pieces of the pair loop into its own copy of the per-atom arrays and which thread
    takes which piece changes from call to call (dynamic schedule), so the copies' sums
    differ in the last bits (seen: 5e-17, relative 4e-14, on 1 rank x 2 threads)."""
    a, b = np.asarray(a), np.asarray(b)
    if kernel_threads() == 1:
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-13 * max(np.abs(b).max(), 1e-300))


def half_height_cutoff(box, fraction=0.45):
    return fraction * float(np.min(reference.cell_heights(box)))


def _check_accuracy(s, ref, pme, res, forces, tol, label):
    """Return a list of failure strings (empty when all criteria hold)."""
    bad = []
    err = rel_rms(forces, ref.forces)
    est = float(res.estimated_error)
    if not err <= tol:
        bad.append(f"{label}: measured force error {err:.3e} > tolerance {tol:g}")
    if not (err / 3.0 <= est <= 3.0 * err):
        bad.append(f"{label}: estimate {est:.3e} not within 3x of measured {err:.3e}")
    de = abs(res.energy - ref.energy)
    if not de <= tol * abs(ref.energy):
        bad.append(f"{label}: energy error {de:.3e} > tol*|E| = {tol * abs(ref.energy):.3e}")
    wscale = max(abs(ref.energy), float(np.max(np.abs(ref.virial))))
    dw = float(np.max(np.abs(np.asarray(res.virial) - ref.virial)))
    if not dw <= 10.0 * tol * wscale:
        bad.append(f"{label}: virial error {dw:.3e} > 10 tol scale {10 * tol * wscale:.3e}")
    return bad


# Cost models (entries of tuning.cost_model()) under which one differentiation is always
# the cheaper: ik costing what ad does per transform and point but needing fewer
# transforms, and the reverse.
IK_CHEAP = {"transforms_ad": 2, "transforms_ik": 1, "mesh_ik": 0.0, "atom_ik": 0.0, "point_ik": 0.0}
AD_CHEAP = {"transforms_ad": 1, "transforms_ik": 8, "mesh_ad": 0.0, "atom_ad": 0.0, "point_ad": 0.0}


# The PME tests' helpers for distributed calls (tests/pme/test_pme.py, tests/comm/test_overlap.py).

MODES = ("pt2pt", "nonblocking", "collective")


def energy_scale(res):
    """Size of the energy for 'relative' comparisons: |E| or its largest term.

    Energies that are small differences of large terms (a water box) cannot be
    reproduced to a fixed fraction of the difference; the largest term sets the
    rounding scale.
    """
    return max(abs(res.energy), max(abs(float(v)) for v in res.terms.values()))


def split_atoms(n, size, how, seed=0):
    """Index arrays, one per rank, saying which atoms (and in which order) each rank passes."""
    idx = np.arange(n)
    if how == "all_on_0":
        return [idx] + [idx[:0]] * (size - 1)
    if how == "round_robin":
        return [idx[r::size] for r in range(size)]
    if how == "blocks":          # contiguous, deliberately uneven
        cuts = np.sort(np.random.default_rng(seed).choice(np.arange(1, n), size - 1, replace=False))
        return np.split(idx, cuts)
    if how == "odd_ranks_only":  # ranks 0, 2, ... hold nothing (on 1 rank: everything)
        owners = [r for r in range(size) if r % 2 == 1] or [0]
        parts = [idx[:0]] * size
        for k, r in enumerate(owners):
            parts[r] = idx[k::len(owners)]
        return parts
    if how == "random":          # random owner, random order within each rank
        rng = np.random.default_rng(seed)
        owner = rng.integers(0, size, n)
        perm = rng.permutation(n)
        return [perm[owner[perm] == r] for r in range(size)]
    raise ValueError(how)


def split_exclusions(ex, size, how):
    if how == "rank0":
        return [ex] + [ex[:0]] * (size - 1)
    if how == "last":
        return [ex[:0]] * (size - 1) + [ex]
    if how == "spread":          # each pair once, on some rank; one direction flipped
        ex = ex.copy()
        ex[::2] = ex[::2, ::-1]
        return [ex[r::size] for r in range(size)]
    raise ValueError(how)


def compute_split(pme, comm, s, parts, *, ex_how="spread", use_ids=True, positions=None):
    """Compute with atoms distributed by ``parts``; return (result, global forces)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    pos = s.positions if positions is None else positions
    mine = parts[rank]
    ex = split_exclusions(s.exclusions, size, ex_how)[rank] if s.exclusions.shape[0] else None
    res = pme.compute(pos[mine], s.charges[mine], ids=s.ids[mine] if use_ids else None,
                      exclusions=ex)
    assert res.forces.shape == (mine.size, 3)
    assert res.forces.dtype == np.float64
    forces = np.full((s.n_atoms, 3), np.nan)
    for idx, f in zip(comm.allgather(mine), comm.allgather(np.asarray(res.forces))):
        forces[idx] = f
    assert not np.any(np.isnan(forces))
    # energy and virial are global: the same on every rank
    energies = comm.allgather(res.energy)
    assert all(e == energies[0] for e in energies), energies
    virials = comm.allgather(np.asarray(res.virial))
    assert all(np.array_equal(v, virials[0]) for v in virials)
    return res, forces


def gather_rows(comm, mine, values, n):
    """The rows every rank holds for its atoms ``mine`` (indices), in global order (collective)."""
    out = np.full((n,) + np.shape(values)[1:], np.nan)
    for idx, v in zip(comm.allgather(mine), comm.allgather(np.asarray(values))):
        out[idx] = v
    assert not np.isnan(out).any()
    return out


def assert_same(r1, f1, r2, f2, rtol=1e-12, what=""):
    """Energy, forces, virial agree to ``rtol`` of their size."""
    de = abs(r1.energy - r2.energy)
    assert de <= rtol * energy_scale(r1), f"{what}: energy {r1.energy!r} vs {r2.energy!r}"
    df = float(np.max(np.abs(f1 - f2)))
    assert df <= rtol * float(np.max(np.abs(f1))), f"{what}: forces differ by {df:.3e}"
    dw = float(np.max(np.abs(np.asarray(r1.virial) - np.asarray(r2.virial))))
    assert dw <= rtol * float(np.max(np.abs(r1.virial))), f"{what}: virial differs by {dw:.3e}"
