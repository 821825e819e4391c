"""Input fuzzer of the public API (issue 11): PME, PME.compute, DistributedFFT and
DistributedRealFFT with random shapes, dtypes, NaN/inf, empty and object arrays, wrong
lengths, negative and huge values, bad parameters, and different inputs on different
ranks. The contract asserted for every example, identically on every rank:

- the call returns a correct result (finite; equal to the reference when the input is
  a re-encoding of a good one: a list, float32, an object array, a strided view), or
- it raises ValueError or TypeError with the same message on every rank;
- never another exception, a crash, a hang (the harness's timeout) or a non-finite
  output; and the object stays correct: a good call right after gives the reference.

Hypothesis runs derandomised (a fixed seed per test, no example database), so CI sees
the same examples every time and every rank draws the same ones; the outcome of each
example is agreed over the ranks before it is judged, so all ranks take the same path.
PMEWALD_FUZZ_EXAMPLES=n runs n examples per test instead of the suite's bounded count,
PMEWALD_FUZZ_SEED=s draws another sequence, PMEWALD_FUZZ_SHRINK=1 shrinks a failure
(docs/reliability.md, "Fuzzing").
"""

from __future__ import annotations

import os

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import pmewald  # noqa: E402

EXAMPLES = int(os.environ.get("PMEWALD_FUZZ_EXAMPLES", "0"))
SEED = int(os.environ.get("PMEWALD_FUZZ_SEED", "0"))
PHASES = [Phase.explicit, Phase.generate] + ([Phase.shrink] if os.environ.get("PMEWALD_FUZZ_SHRINK") else [])


LOG = os.environ.get("PMEWALD_FUZZ_LOG")


def log(comm, *what):
    """With PMEWALD_FUZZ_LOG=file: one line per example (rank 0), to see what was tried."""
    if LOG and comm.Get_rank() == 0:
        with open(LOG, "a") as f:
            f.write(" | ".join(str(w) for w in what) + "\n")


def fuzz_settings(default_examples):
    return settings(max_examples=EXAMPLES or default_examples, derandomize=not SEED, database=None,
                    deadline=None, phases=PHASES, suppress_health_check=list(HealthCheck), print_blob=False)


def seeded(fn):
    return seed(SEED)(fn) if SEED else fn


# --------------------------------------------------------------------------- the contract

def collectively(comm, fn):
    """("ok", value) or (exception type name, None), agreed over the ranks: any other
    exception type, or a different outcome on different ranks, fails on every rank."""
    try:
        value, got = fn(), ("ok", "")
    except (ValueError, TypeError) as e:
        value, got = None, (type(e).__name__, str(e))
    except Exception as e:  # noqa: BLE001 - judged below
        value, got = None, ("unexpected " + type(e).__name__, repr(e))
    everyone = comm.allgather(got)
    assert len(set(everyone)) == 1, f"different outcomes on different ranks: {everyone}"
    assert not everyone[0][0].startswith("unexpected"), f"an exception outside the contract: {everyone[0]}"
    return everyone[0][0], value


def all_ranks(comm, ok, what):
    """A local verdict agreed over the ranks (so every rank fails, or none)."""
    bad = [r for r, v in enumerate(comm.allgather(bool(ok))) if not v]
    assert not bad, f"{what} (on rank(s) {bad})"


# --------------------------------------------------------------------------- the system

BOX = np.diag([8.0, 8.5, 9.0])


def _system():
    """16 atoms at multiples of 0.5 (exact in float32), at least 1 apart, charges
    +-1 and +-0.5; one excluded pair within the cutoff."""
    rng = np.random.default_rng(2024)
    grid = np.stack(np.meshgrid(*(np.arange(0, L, 0.5) for L in np.diag(BOX)), indexing="ij"), -1).reshape(-1, 3)
    picked = []
    for i in rng.permutation(len(grid)):
        if all(np.linalg.norm(grid[i] - grid[j]) >= 1.0 for j in picked):
            picked.append(i)
        if len(picked) == 16:
            break
    pos = grid[picked]
    q = np.array([1.0, -1.0, 0.5, -0.5] * 4)
    d = np.linalg.norm(pos[:, None] - pos[None], axis=-1) + 99 * np.eye(16)
    i, j = np.unravel_index(np.argmin(d), d.shape)
    return pos, q, np.arange(16, dtype=np.int64), np.array([[min(i, j), max(i, j)]], dtype=np.int64)


POS, Q, IDS, EXCL = _system()
CUTOFF = 3.5
FIXED = dict(alpha=1.0, mesh=(16, 16, 18), order=5)


def split(comm, a):
    return a[comm.Get_rank()::comm.Get_size()] if a is not None else None


def reference_result(comm, **kw):
    pme = pmewald.PME(BOX, CUTOFF, comm=comm, **kw)
    return pme, pme.compute(split(comm, POS), split(comm, Q), ids=split(comm, IDS),
                            exclusions=EXCL if comm.Get_rank() == 0 else None)


def same_result(r, want, rtol):
    return (abs(r.energy - want.energy) <= rtol * abs(want.energy)
            and np.allclose(r.forces, want.forces, rtol=0, atol=rtol * np.abs(want.forces).max(initial=1.0))
            and np.allclose(r.virial, want.virial, rtol=0, atol=rtol * np.abs(want.virial).max()))


# --------------------------------------------------------------------------- array variants

def variants(good, kind):
    """(name, value, verdict) for an argument: verdict True = a re-encoding of `good`
    (the result must be the reference), False = invalid (must raise), None = valid
    but different, or either (only the contract applies)."""
    g = np.asarray(good)
    out = [("same", g, True), ("list", g.tolist(), True), ("object", g.astype(object), True),
           ("strided", np.repeat(g, 2, axis=0)[::2], True), ("fortran", np.asfortranarray(g), True),
           ("wrong length", g[:-1], False), ("extra axis", g[..., None], False),
           ("strings", g.astype(str), False), ("complex", g + 1j, False), ("none", None, False),
           ("scalar", 3.0, False), ("empty", g[:0], False), ("ragged", [[1.0, 2.0], [3.0]], False)]
    if kind in ("positions", "charges"):
        out += [("float32", g.astype(np.float32), True), ("nan", _poke(g, np.nan), False),
                ("inf", _poke(g, np.inf), False), ("-inf", _poke(g, -np.inf), False),
                ("bool", g.astype(bool), None), ("negated", -g, None)]
    if kind == "positions":
        out += [("lattice shift", g + BOX[1] - 2 * BOX[0], "approx"), ("far away", g + 1e12, False),
                ("huge", _poke(g, 1e300), False), ("two columns", g[:, :2], False), ("flat", g.ravel(), False),
                ("coincident", _coincide(g), False)]
    if kind == "charges":
        out += [("zero", np.zeros_like(g), "zero"), ("huge", _poke(g, 1e200), False), ("large", g * 1e100, None),
                ("int", g.astype(np.int64), None), ("2-D", g[:, None], False)]
    if kind == "ids":
        out += [("shifted", g + 1000, None), ("int32", g.astype(np.int32), True), ("float", g.astype(float), False),
                ("duplicate", np.where(np.arange(len(g)) == 1, g[0], g) if len(g) > 1 else g, None),
                ("uint64 huge", np.full(len(g), 2**63 + 1, np.uint64), False), ("negative", -g - 1, None)]
    return out


def _poke(g, value):
    a = np.array(g, dtype=float, copy=True)
    if a.size:
        a.flat[min(1, a.size - 1)] = value
    return a


def _coincide(g):
    a = np.array(g, dtype=float, copy=True)
    if len(a) > 1:
        a[1] = a[0]
    return a


# --------------------------------------------------------------------------- PME.compute

def exclusion_variants(good):
    return [("same", good, True), ("list", np.asarray(good).tolist(), True), ("none", None, "no-exclusions"),
            ("self", np.array([[3, 3]]), False), ("unknown id", np.array([[0, 999]]), False),
            ("far pair", np.array([[0, 15]]), None), ("three columns", np.array([[0, 1, 2]]), False),
            ("float", np.asarray(good, dtype=float), False), ("strings", np.asarray(good).astype(str), False),
            ("repeated", np.concatenate([good, good]) if len(good) else good, None)]


def catalogue(arg, good):
    return exclusion_variants(good) if arg == "exclusions" else variants(good, arg)


MUTATIONS = [(arg, name) for arg, g in (("positions", POS), ("charges", Q), ("ids", IDS), ("exclusions", EXCL))
             for name, _, _ in catalogue(arg, g)]


def combine(verdicts):
    """The verdict of several mutations: invalid if any is, a re-encoding if all are."""
    if False in verdicts:
        return False
    if all(v is True for v in verdicts):
        return True
    return verdicts[0] if len(verdicts) == 1 else None


@pytest.mark.mpi(ranks=[1, 2])
@pytest.mark.timeout(150)
def test_fuzz_compute(comm):
    """compute() with one or two arguments fuzzed, on every rank or on one rank only."""
    rank, size = comm.Get_rank(), comm.Get_size()
    fixed, want_fixed = reference_result(comm, **FIXED)
    _, want_auto = reference_result(comm, tolerance=1e-4)
    state = {"auto": pmewald.PME(BOX, CUTOFF, tolerance=1e-4, comm=comm)}  # untuned: its first call is fuzzed

    @fuzz_settings(80)
    @seeded
    @given(mutations=st.lists(st.tuples(st.sampled_from(MUTATIONS), st.sampled_from(["all", "first", "last"])),
                              min_size=1, max_size=2, unique_by=lambda m: m[0][0]),
           auto=st.booleans())
    def run(mutations, auto):
        good = dict(positions=split(comm, POS), charges=split(comm, Q), ids=split(comm, IDS),
                    exclusions=EXCL if rank == 0 else np.zeros((0, 2), np.int64))
        args, verdicts, what = dict(good), [], []
        for (arg, name), where in mutations:
            value, verdict = next((v, d) for n, v, d in catalogue(arg, good[arg] if arg != "exclusions" else EXCL)
                                  if n == name)
            target = {"all": None, "first": 0, "last": size - 1}[where]
            here = target is None or rank == target
            applied = target is None or size == 1
            if arg == "exclusions":
                # the pair lives on one rank: moving it is the same system, repeating it is not
                args["exclusions"] = value if here else np.zeros((0, 2), np.int64)
                if verdict is True and applied and size > 1:
                    verdict = None
            elif here:
                args[arg] = value
            if arg == "ids" and name == "none":   # default ids: fine on every rank, refused on some only
                verdict = None if applied else False
            if verdict in ("no-exclusions", "zero") and not applied:
                verdict = None
            if verdict == "no-exclusions":        # a different, valid system
                verdict = None
            verdicts.append(verdict)
            what.append(f"{arg}={name} on {where}")
        verdict = combine(verdicts)
        what = ", ".join(what)
        if auto and verdict not in (True, False, "zero"):
            auto = False                          # tuning on another system would commit other parameters
        pme, want = (state["auto"], want_auto) if auto else (fixed, want_fixed)
        kind, r = collectively(comm, lambda: pme.compute(args["positions"], args["charges"], ids=args["ids"],
                                                         exclusions=args["exclusions"]))
        log(comm, "compute", what, "auto" if auto else "fixed", verdict, kind)
        if verdict is False:
            assert kind != "ok", f"{what}: accepted"
        elif kind == "ok":
            all_ranks(comm, np.isfinite(r.energy) and np.isfinite(r.forces).all() and np.isfinite(r.virial).all(),
                      f"{what}: non-finite result")
            all_ranks(comm, r.forces.shape == (len(good["charges"]), 3), f"{what}: forces shape")
            if verdict is True:
                all_ranks(comm, same_result(r, want, 1e-10), f"{what}: result differs from the reference")
            elif verdict == "approx":
                all_ranks(comm, same_result(r, want, 1e-8), f"{what}: result differs from the reference")
            elif verdict == "zero":
                all_ranks(comm, r.energy == 0 and not r.forces.any() and not r.virial.any(), f"{what}: not zero")
        elif verdict in (True, "approx", "zero"):
            pytest.fail(f"{what}: a valid input was refused ({kind})")
        # the object stays correct for a good call
        again = pme.compute(good["positions"], good["charges"], ids=good["ids"], exclusions=good["exclusions"])
        all_ranks(comm, same_result(again, want, 1e-10), f"after {what}: the object no longer gives the reference")

    run()


# --------------------------------------------------------------------------- PME()

BAD_BOXES = [np.full((3, 3), np.nan), np.zeros((3, 3)), np.ones((2, 3)), np.diag([8.0, 8.5, 0.0]),
             np.array([[8.0, 0, 0], [16.0, 0, 0], [0, 0, 9.0]]), "box", [8.0, 8.5], np.diag([1e-300] * 3),
             np.diag([np.inf, 8.5, 9.0]), np.diag([2.0, 8.5, 9.0])]
GOOD_BOXES = [BOX, np.diag([-8.0, 8.5, 9.0]), np.diag([8.0, 8.5, 9.0]).tolist(), [8.0, 8.5, 9.0],
              BOX[[1, 0, 2]], BOX * np.array([1, -1, -1])[:, None]]

PARAMETERS = {
    "cutoff": [CUTOFF, 0.0, -1.0, np.nan, np.inf, 5.0, "3.5", None, 1e-300, 3],
    "tolerance": [1e-4, 0.0, 1.0, -1e-5, np.nan, 1e-6, "x", 1e-3, 0.5],
    "alpha": [None, 1.0, 0.0, -1.0, np.inf, 1e-8, 5.0, "a"],
    "mesh": [None, 16, (16, 16, 18), (16, 16), 0, -16, 2048, 10**7, 16.0, 16.5, "16", (16, 16, None), [12, 18, 20]],
    "order": [None, 5, 3, 10, 2, 11, 5.0, 5.5, True, "5"],
    "differentiation": ["auto", "ad", "ik", "fd", None, 3],
    "comm_mode": ["nonblocking", "pt2pt", "collective", "smoke", None],
    "coulomb_constant": [1.0, 332.0637, 0.0, -1.0, np.inf, "k"],
    "real_space": [True, False, np.bool_(True), 1, None, "yes"],
}


@pytest.mark.mpi(ranks=[1, 2])
@pytest.mark.timeout(150)
def test_fuzz_constructor(comm):
    """PME() with fuzzed boxes and parameters, on every rank or one rank only; whatever is
    built must then compute a finite result (or refuse with ValueError)."""
    size = comm.Get_size()

    @fuzz_settings(40)
    @seeded
    @given(box=st.integers(0, 10**6), changes=st.dictionaries(st.sampled_from(sorted(PARAMETERS)),
                                                              st.integers(0, 10**6), max_size=3),
           where=st.sampled_from(["all", "last"]))
    def run(box, changes, where):
        boxes = GOOD_BOXES + BAD_BOXES
        b = boxes[box % len(boxes)]
        kw = dict(tolerance=1e-4)
        for k, i in changes.items():
            kw[k] = PARAMETERS[k][i % len(PARAMETERS[k])]
        mine = (b, kw) if where == "all" or comm.Get_rank() == size - 1 else (BOX, dict(tolerance=1e-4))
        cutoff = mine[1].pop("cutoff", CUTOFF)
        kind, pme = collectively(comm, lambda: pmewald.PME(mine[0], cutoff, comm=comm, **mine[1]))
        log(comm, "PME", repr(b)[:40], kw, where, kind)
        if kind != "ok":
            return
        kind, r = collectively(comm, lambda: pme.compute(split(comm, POS), split(comm, Q)))
        log(comm, "  compute", kind)
        if kind == "ok":
            all_ranks(comm, np.isfinite(r.energy) and np.isfinite(r.forces).all(), f"{b!r} {kw}: non-finite")

    run()


# --------------------------------------------------------------------------- the FFTs

def _fft_box(draw, mesh):
    lo = tuple(draw(st.integers(-1, n)) for n in mesh)
    hi = tuple(draw(st.integers(-1, n + 1)) for n in mesh)
    return (lo, hi)


@st.composite
def fft_case(draw):
    real = draw(st.booleans())
    mesh = tuple(draw(st.integers(1, 9)) for _ in range(3))
    shape = draw(st.sampled_from([mesh, mesh, mesh, mesh[:2], (0,) + mesh[1:], (-2,) + mesh[1:], (2048,) * 3,
                                  (4.0,) + mesh[1:], "mesh", None, (2**40, 1, 1)]))
    kw = {}
    if draw(st.integers(0, 3)) == 0:
        kw["comm_mode"] = draw(st.sampled_from(["pt2pt", "nonblocking", "collective", "bad", 7]))
    if draw(st.integers(0, 4)) == 0:
        kw["planner"] = draw(st.sampled_from(["measure", "exhaustive-ish", None]))
    else:
        kw["planner"] = "estimate"
    box_choice = draw(st.sampled_from(["default", "default", "random", "inverted", "type", "whole-on-last"]))
    if real and draw(st.integers(0, 3)) == 0:
        kw["halved_axis"] = draw(st.sampled_from([0, 1, 2, 3, -1, "x", True]))
    if real and draw(st.integers(0, 4)) == 0:
        kw["storage"] = draw(st.sampled_from(["brick+1", ((0, 0, 0), (1, 1, 1)), "wrong"]))
    array = draw(st.sampled_from(["good", "good", "good", "float32", "float64", "complex64", "strided", "shape+1",
                                  "list", "empty3", "readonly-out", "noncontig-out", "out"]))
    return real, mesh, shape, kw, box_choice, _fft_box(draw, mesh), array, draw(st.sampled_from(["all", "last"]))


def _fft_input(real, mesh, seed_):
    rng = np.random.default_rng(seed_)
    g = rng.normal(size=mesh)
    return g if real else g + 1j * rng.normal(size=mesh)


@pytest.mark.mpi(ranks=[1, 2])
@pytest.mark.timeout(150)
def test_fuzz_fft(comm):
    """DistributedFFT / DistributedRealFFT: fuzzed shapes, modes, planners, boxes, halved
    axes, storage and arrays; a transform that runs must match numpy's FFT of the global
    array, and the object must still transform a good array right after a refusal."""
    rank, size = comm.Get_rank(), comm.Get_size()

    @fuzz_settings(60)
    @seeded
    @given(case=fft_case())
    def run(case):
        real, mesh, shape, kw, box_choice, rbox, array, where = case
        here = where == "all" or rank == size - 1
        cls = pmewald.DistributedRealFFT if real else pmewald.DistributedFFT
        ckw = dict(comm=comm, **kw)
        if "storage" in ckw and ckw["storage"] == "brick+1":
            b = pmewald.geometry.brick_box(size, mesh, rank)
            ckw["storage"] = (tuple(v - 1 for v in b[0]), b[1])
        elif "storage" in ckw and ckw["storage"] == "wrong":
            ckw["storage"] = "wrong"
        if box_choice == "random":
            ckw["inbox"] = rbox
        elif box_choice == "inverted":
            ckw["inbox"] = (rbox[1], rbox[0])
        elif box_choice == "type":
            ckw["inbox"] = ("a", "b")
        elif box_choice == "whole-on-last":   # a valid uneven tiling: everything on the last rank
            full = ((0, 0, 0), mesh)
            ckw["inbox"] = full if rank == size - 1 else ((0, 0, 0), (0, 0, 0))
        if not here:  # one rank only gets the fuzzed arguments; the others the good ones
            ckw = dict(comm=comm, planner="estimate")
            shape_here = mesh
        else:
            shape_here = shape
        kind, fft = collectively(comm, lambda: cls(shape_here, **ckw))
        log(comm, cls.__name__, shape_here, {k: v for k, v in ckw.items() if k != "comm"}, where, kind)
        if kind != "ok":
            return
        g = _fft_input(real, fft.shape, 7)
        inbox = fft.inbox
        storage = fft.storage if real else inbox
        a = np.zeros(fft.inshape, g.dtype)
        inner = tuple(slice(lo - s, hi - s) for lo, hi, s in zip(*inbox, storage[0]))
        a[inner] = g[tuple(slice(lo, hi) for lo, hi in zip(*inbox))]
        out = None
        arr = a
        if here:
            if array == "float32":
                arr = a.astype(np.float32)
            elif array == "float64" and not real:
                arr = a.real.copy()
            elif array == "complex64":
                arr = a.astype(np.complex64)
            elif array == "strided":
                arr = np.repeat(a, 2, axis=0)[::2]
            elif array == "shape+1":
                arr = np.zeros(tuple(n + 1 for n in a.shape), a.dtype)
            elif array == "list":
                arr = a.tolist()
            elif array == "empty3":
                arr = np.zeros((0, 0, 0), a.dtype)
            elif array in ("readonly-out", "noncontig-out", "out"):
                out = np.zeros(fft.outshape, complex)
                if array == "readonly-out":
                    out.flags.writeable = False
                elif array == "noncontig-out":
                    out = np.zeros(tuple(2 * n for n in fft.outshape), complex)[::2, ::2, ::2]
        kind, b = collectively(comm, lambda: fft.forward(arr, out=out))
        log(comm, "  forward", array, where, kind)
        axes = (1, 2, 0) if real and fft.halved_axis == 0 else None
        want = (np.fft.rfftn(g, axes=axes) if real and axes else np.fft.rfftn(g) if real else np.fft.fftn(g))
        if real and fft.halved_axis == 1:
            want = np.fft.rfftn(g, axes=(0, 2, 1))
        ob = fft.outbox
        wpart = want[tuple(slice(lo, hi) for lo, hi in zip(*ob))]
        scale = max(1.0, np.abs(want).max())
        if kind == "ok":
            all_ranks(comm, b.shape == fft.outshape and np.isfinite(b).all(), f"{case}: bad output")
            if array in ("good", "strided", "out") or not here:
                all_ranks(comm, np.allclose(b, wpart, atol=1e-10 * scale), f"{case}: wrong spectrum")
        # still right for a good array
        good = fft.forward(a)
        all_ranks(comm, np.allclose(good, wpart, atol=1e-10 * scale), f"after {case}: wrong spectrum")
        back = fft.backward(good)
        all_ranks(comm, np.allclose(back[inner], a[inner], atol=1e-10 * max(1.0, np.abs(g).max())),
                  f"after {case}: backward does not invert")

    run()
