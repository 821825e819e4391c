"""Overlap of the reciprocal part's communication with the pair loop, and comm_mode="auto".

Overlap changes when the pair loop's pieces run, never what they compute: results with and
without it agree to 1e-12 in every mode (the real-space sums bit for bit: the loop runs in the
same fixed blocks either way), with uneven splits and ranks without atoms, and nothing hangs.
"auto" tries the variants on its first calls, every rank keeps the same, and every call's results
are the fixed modes'.
"""
from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import pmewald
from pmewald import systems
from pme_cases import MODES, assert_same, compute_split, half_height_cutoff, split_atoms

PME = pmewald.PME


def _water():
    return systems.water_box(60, seed=5)


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(300)
def test_overlap_same_results(comm):
    size = comm.Get_size()
    s = _water()
    rc = half_height_cutoff(s.box)
    for d, (diff, mesh) in enumerate((("ad", (20, 18, 16)), ("ik", (16, 16, 18)))):
        for m, mode in enumerate(MODES):
            # (the splits' own paths are tests/pme/test_pme.py's; here the migrated and the
            # one-rank-holds-all cases). Every pair of (differentiation, mode, split) values
            # meets in some case, in half the cases of the full product.
            how = ("random", "all_on_0")[(d + m) % 2]
            parts = split_atoms(s.n_atoms, size, how, seed=7)
            plain = PME(s.box, rc, mesh=mesh, order=5, differentiation=diff, comm=comm, comm_mode=mode,
                        overlap=False)
            r0, f0 = compute_split(plain, comm, s, parts)
            # polling after every block (the most progress calls) and with the defaults
            for poll in ((1, 1.0), None):
                over = PME(s.box, rc, mesh=mesh, order=5, differentiation=diff, comm=comm, comm_mode=mode,
                           overlap=True, overlap_poll=poll)
                r1, f1 = compute_split(over, comm, s, parts)
                what = f"{diff} {mode} {how} poll={poll} on {size}"
                assert_same(r0, f0, r1, f1, rtol=1e-12, what=what)
                # the pair loop's sums do not depend on when its pieces ran
                assert r1.terms["real"] == r0.terms["real"], what
                assert r1.terms["exclusion"] == r0.terms["exclusion"], what
                t = over.timings()
                assert over.parameters["overlap"] is True
                assert t["overlap_exchanges"] >= 0 and t["comm_hidden"] >= 0, what
                if size > 1 and len(parts[comm.Get_rank()]) > 0 and poll == (1, 1.0):
                    # exchanges were handed to the overlap, and tests were made while pairs ran
                    assert t["overlap_exchanges"] > 0, what
                assert "comm_hidden" not in plain.timings()


@pytest.mark.mpi(ranks=[2, 3, 4])
@pytest.mark.timeout(120)
def test_overlap_rank_without_atoms_does_not_hang(comm):
    """Two atoms in a large box: most ranks own none (nothing to hide behind) and still take
    part in every exchange; repeated calls stay correct."""
    box = np.diag([18.0, 19.0, 20.0])
    pos = np.array([[1.0, 1.0, 1.0], [4.0, 5.0, 6.0]])
    q = np.array([1.0, -1.0])
    mine = slice(None) if comm.Get_rank() == 0 else slice(0, 0)
    for mode in MODES:
        ref = PME(box, 8.0, mesh=(18, 18, 20), comm=MPI.COMM_SELF, overlap=False)
        r0 = ref.compute(pos, q)
        pme = PME(box, 8.0, mesh=(18, 18, 20), comm=comm, comm_mode=mode, overlap=True)
        for _ in range(2):
            r1 = pme.compute(pos[mine], q[mine])
            assert abs(r1.energy - r0.energy) <= 1e-12 * abs(r0.energy), mode
            if comm.Get_rank() == 0:
                assert np.max(np.abs(r1.forces - r0.forces)) <= 1e-12 * np.max(np.abs(r0.forces)), mode


def _variants(overlap):
    """The candidates "auto" tries for an overlap setting (mode_choice.hpp)."""
    if overlap is not None:
        return [m + ("+overlap" if overlap else "") for m in MODES]
    return ["pt2pt", "nonblocking", "nonblocking+overlap", "collective", "collective+overlap"]


def test_auto_trial_order_and_pick():
    """The trial's calls (mode_choice.hpp) with made-up times: a warm-up in the default variant
    that does not count, each candidate once, then once more in reverse order; a candidate's time
    is its faster call, the fastest candidate wins, a tie goes to the one listed first."""
    from pmewald._core._testing import mode_trial

    cands = _variants(None)
    # times by call: the warm-up fastest of all (ignored); collective+overlap slow once, fast once
    times = [0.1] + [5.0, 4.0, 3.0, 2.0, 9.0] + [1.5, 2.5, 3.5, 4.5, 5.5]
    order, best, seconds = mode_trial(None, times)
    assert order == ["nonblocking+overlap"] + cands + cands[::-1]
    assert best == "collective+overlap"
    assert seconds == {"pt2pt": 5.0, "nonblocking": 4.0, "nonblocking+overlap": 3.0, "collective": 2.0,
                       "collective+overlap": 1.5}
    order, best, seconds = mode_trial(False, [1.0] + [2.0, 2.0, 3.0] + [3.0, 2.0, 2.0])
    assert order == ["nonblocking", "pt2pt", "nonblocking", "collective", "collective", "nonblocking", "pt2pt"]
    assert best == "pt2pt"  # a tie: the first listed
    order, best, _ = mode_trial(True, [1.0] + [3.0, 2.0, 3.0] + [3.0, 2.5, 3.0])
    assert order[0] == "nonblocking+overlap" and set(order[1:]) == {m + "+overlap" for m in MODES}
    assert best == "nonblocking+overlap"
    with pytest.raises(ValueError, match="one time per trial call"):
        mode_trial(None, [1.0] * 3)


@pytest.mark.mpi(ranks=[1, 2, 3, 4])
@pytest.mark.timeout(300)
def test_auto_mode(comm):
    """"auto" tries the variants on its first calls (a warm-up, then each candidate twice), every
    call's results are the fixed mode's, every rank keeps the same winner, and it is kept."""
    size = comm.Get_size()
    s = _water()
    rc = half_height_cutoff(s.box)
    parts = split_atoms(s.n_atoms, size, "blocks", seed=2)
    ref = PME(s.box, rc, mesh=(20, 18, 16), order=5, comm=comm, comm_mode="nonblocking", overlap=False)
    r_ref, f_ref = compute_split(ref, comm, s, parts)
    for overlap in (False, True, None):
        auto = PME(s.box, rc, mesh=(20, 18, 16), order=5, comm=comm, comm_mode="auto", overlap=overlap)
        assert auto.parameters["comm_mode"] == "auto"
        variants = _variants(overlap)
        trial_calls = 1 + 2 * len(variants) if size > 1 else 0
        for call in range(trial_calls + 1):
            r0, f0 = compute_split(auto, comm, s, parts)
            assert_same(r0, f0, r_ref, f_ref, rtol=1e-12, what=f"auto call {call}, overlap={overlap} on {size}")
            first = r0 if call == 0 else first
            p = auto.parameters
            if call + 1 < trial_calls:  # still trying: nothing decided yet
                assert p["comm_mode_used"] is None and p["overlap"] is overlap and p["comm_mode_seconds"] == {}
                assert not any(k.startswith("auto_") for k in auto.timings())
        p = auto.parameters
        chosen = p["comm_mode_used"]
        assert chosen in MODES
        assert comm.allgather((chosen, p["overlap"])) == [(chosen, p["overlap"])] * size
        seconds = p["comm_mode_seconds"]
        t = auto.timings()
        if size > 1:
            assert sorted(seconds) == sorted(variants) and all(v > 0 for v in seconds.values())
            assert comm.allgather(seconds) == [seconds] * size        # the slowest rank's numbers
            winner = chosen + ("+overlap" if p["overlap"] else "")
            assert seconds[winner] == min(seconds.values())
            if overlap is not None:
                assert p["overlap"] == overlap
            for v in variants:
                assert t[f"auto_{v}"] == seconds[v]
        else:  # nothing to try on one rank: the default
            assert seconds == {} and chosen == "nonblocking"
            assert p["overlap"] == (overlap if overlap is not None else True)
        # the chosen variant's results
        fixed = PME(s.box, rc, mesh=(20, 18, 16), order=5, comm=comm, comm_mode=chosen, overlap=p["overlap"])
        r1, f1 = compute_split(fixed, comm, s, parts)
        assert_same(r1, f1, r0, f0, rtol=1e-12, what=f"auto ({chosen}) on {size}")
        assert r1.terms["real"] == first.terms["real"]  # the pair loop's sums: the same bits in any variant
        # kept: neither more computes nor set_box try again
        compute_split(auto, comm, s, parts)
        auto.set_box(s.box * 1.01)
        compute_split(auto, comm, s, parts)
        assert auto.parameters["comm_mode_seconds"] == seconds
        assert (auto.parameters["comm_mode_used"], auto.parameters["overlap"]) == (chosen, p["overlap"])


@pytest.mark.mpi(ranks=[1, 2])
@pytest.mark.timeout(120)
def test_set_comm_mode_switches_the_solver_in_place(comm):
    """The core solver's set_comm_mode (the scale driver's one solver for every variant): the
    same results in every mode and overlap, a trial ended, a mode that differs between ranks
    refused on every rank with the solver still usable."""
    s = _water()
    rc = half_height_cutoff(s.box)
    parts = split_atoms(s.n_atoms, comm.Get_size(), "random", seed=3)
    auto = PME(s.box, rc, mesh=(20, 18, 16), order=5, comm=comm, comm_mode="auto")
    r0, f0 = compute_split(auto, comm, s, parts)
    solver = auto._tuner.state.solver
    for mode in MODES:
        for overlap in (False, True, None):
            solver.set_comm_mode(mode, overlap)
            assert solver.comm_mode == mode and solver.overlap == (overlap if overlap is not None else mode != "pt2pt")
            r1, f1 = compute_split(auto, comm, s, parts)
            assert_same(r1, f1, r0, f0, rtol=1e-12, what=f"{mode} overlap={overlap}")
            assert solver.comm_mode == mode  # no trial left to move it
    assert solver.comm_mode_seconds == {}
    if comm.Get_size() > 1:
        with pytest.raises(ValueError, match="set_comm_mode: the mode or overlap differs between ranks"):
            solver.set_comm_mode(MODES[comm.Get_rank() % 2])
        assert solver.comm_mode == "collective"
        r2, f2 = compute_split(auto, comm, s, parts)
        assert_same(r2, f2, r0, f0, rtol=1e-12, what="after the refused switch")
    with pytest.raises(ValueError):
        solver.set_comm_mode("fastest")


@pytest.mark.mpi(ranks=[2])
@pytest.mark.timeout(200)
def test_auto_measures_again_with_new_plans(comm):
    """Automatic parameters: the solver (its plans) is built at the first compute; "auto"
    tries the variants on its calls, and probes of the tuning use a fixed mode."""
    s = _water()
    pme = PME(s.box, half_height_cutoff(s.box), tolerance=1e-4, comm=comm, comm_mode="auto")
    parts = split_atoms(s.n_atoms, comm.Get_size(), "random")
    res, _ = compute_split(pme, comm, s, parts)
    assert pme.parameters["comm_mode_used"] is None    # its first call: the trial's warm-up
    for _ in range(2 * len(_variants(None))):
        compute_split(pme, comm, s, parts)
    assert pme.parameters["comm_mode_used"] in MODES
    assert sorted(pme.parameters["comm_mode_seconds"]) == sorted(_variants(None))


@pytest.mark.parametrize("kw, words", [
    (dict(overlap="yes"), "overlap must be None, True or False"),
    (dict(overlap=True, overlap_poll=(0, 10.0)), "overlap_poll"),
    (dict(overlap=True, overlap_poll=(10, -1.0)), "overlap_poll"),
    (dict(overlap=True, overlap_poll=5), "overlap_poll"),
    (dict(comm_mode="fastest"), "comm_mode must be one of"),
])
def test_bad_arguments(kw, words):
    with pytest.raises(ValueError, match=words):
        PME(np.eye(3) * 10.0, 4.0, mesh=(10, 10, 10), comm=MPI.COMM_SELF, **kw)
