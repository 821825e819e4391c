"""cutoff="auto" (pme/cutoff_search.py): the walk over cutoffs with made-up timings (which
candidates it tries, where it stops, the final comparison, failures, bounds), and PME objects that time their own
calls on 1 and 2 ranks: every call's forces within the tolerance of a tight reference whatever
cutoff it ran at, every rank with the same choice, the choice the fastest measured, the lower
bound kept, set_box starting the walk again, bad arguments refused.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import pmewald
from pmewald import systems
from pmewald.pme import cutoff_search as cs
from pmewald.pme.cutoff_search import CutoffSearch


def walk(search, seconds_of, fail=()):
    """Drives the search to its end: each candidate gets its untimed calls, then timed ones at
    seconds_of(cutoff) (the final comparison's calls too); returns the candidates in the order
    the walk measured them."""
    for _ in range(500):
        if search.done:
            return list(search.seconds)
        c = search.current
        if c in fail and search.duel is None:
            search.fail()
            continue
        for _ in range(1 + cs._WARMUP):
            assert search.record(None) is None
        for _ in range(cs._TIMED):
            if search.record(seconds_of(c)) is not None or search.done:
                break
    raise AssertionError("the walk did not end")


def v_shape(best):
    return lambda c: 1.0 + abs(math.log(c / best))


def test_the_walk_goes_down_to_the_fastest_cutoff_and_stops_past_it():
    s = CutoffSearch(4.0, 15.0, 8.0)
    order = walk(s, v_shape(6.0))
    # 8 -> 7.273 -> 6.612 -> 6.011 -> 5.464 (within 12% of 6.011) -> 4.967 (not): ends
    assert order[0] == 8.0 and all(b < a for a, b in zip(order, order[1:]))
    assert s.done and s.current == s.best() == 6.011
    assert s.seconds[order[-1]] > cs.SLOWER * s.seconds[6.011]  # stopped at the first one 12% slower
    assert all(c >= 4.0 for c in s.seconds)
    a, b, ratio = s.duel_result  # the two fastest compared call by call; the faster kept
    assert (a, b) == (6.011, 5.465) and ratio < 1


def test_the_walk_goes_up_when_nothing_below_the_start_is_faster():
    s = CutoffSearch(4.0, 15.0, 8.0)
    order = walk(s, v_shape(11.0))
    # down while within 12% of the best (the start), then up from the start
    up = order.index(8.8)
    assert order[:up] == [8.0, 7.273, 6.612][:up] and up >= 2
    assert all(b > a for a, b in zip(order[up:], order[up + 1:]))
    assert s.done and s.current == s.best()
    assert abs(math.log(s.current / 11.0)) < math.log(cs.STEP)
    assert max(s.seconds) <= 15.0


def test_the_walk_goes_up_one_step_when_the_start_is_near_the_best_below_it():
    # 7.273 is faster than the start, but by less than 12%: one candidate above the start is
    # tried too (and here found fastest, so the walk goes on up); a start beaten by more than
    # 12% is not.
    times = {8.0: 1.0, 7.273: 0.95, 6.612: 1.5, 8.8: 0.8, 9.68: 2.0}
    s = CutoffSearch(4.0, 15.0, 8.0)
    assert walk(s, lambda c: times.get(c, 5.0)) == [8.0, 7.273, 6.612, 8.8, 9.68] and s.current == 8.8
    times = {8.0: 1.0, 7.273: 0.85, 6.612: 1.5}
    s = CutoffSearch(4.0, 15.0, 8.0)
    assert walk(s, lambda c: times.get(c, 5.0)) == [8.0, 7.273, 6.612] and s.current == 7.273


def test_a_candidate_within_twelve_percent_of_the_best_does_not_end_the_walk():
    times = {8.0: 1.0, 7.273: 1.1, 6.612: 0.9, 6.011: 2.0}
    s = CutoffSearch(4.0, 15.0, 8.0)
    order = walk(s, lambda c: times.get(c, 5.0))
    assert order[:4] == [8.0, 7.273, 6.612, 6.011] and s.current == 6.612 and s.done


def test_the_final_comparison_overrules_a_drifted_measurement():
    # In the walk 7.273 measured faster than 8.0 (the machine was quieter then); compared call
    # by call at the end, 8.0 is faster, and is kept.
    s = CutoffSearch(4.0, 15.0, 8.0)
    walk(s, lambda c: ({8.0: 1.0, 7.273: 0.95}.get(c, 3.0) if s.duel is None else {8.0: 1.0, 7.273: 1.2}[c]))
    assert s.best() == 7.273 and s.duel_result == (7.273, 8.0, pytest.approx(1.2)) and s.current == 8.0


def test_the_median_of_the_timed_calls_counts():
    s = CutoffSearch(4.0, 15.0, 8.0)
    for _ in range(1 + cs._WARMUP):
        s.record(None)
    times = [3.0, 1.0, 2.0, 9.0, 0.5, 7.0, 4.0][:cs._TIMED]
    for t in times:
        s.record(t)
    assert s.seconds[8.0] == float(np.median(times))


def test_a_failing_candidate_counts_as_infinitely_slow():
    s = CutoffSearch(4.0, 15.0, 8.0)
    walk(s, v_shape(5.0), fail={6.612})
    assert s.seconds[6.612] == math.inf and s.current == 7.273 and s.done
    assert 6.011 not in s.seconds  # the walk does not go past a failure
    # a failing start: the walk goes up
    s = CutoffSearch(4.0, 15.0, 8.0)
    order = walk(s, v_shape(9.0), fail={8.0})
    assert order[1] == 8.8 and s.current != 8.0 and math.isfinite(s.seconds[s.current])


def test_bounds_are_kept_and_checked():
    s = CutoffSearch(7.5, 8.5, 8.0)
    walk(s, v_shape(1.0))
    assert set(s.seconds) == {8.0} and s.duel_result is None  # 7.273 is below the bound, 8.8 above
    assert CutoffSearch(6.0, 9.0, 3.0).current == 6.0
    assert CutoffSearch(6.0, 9.0, 30.0).current == 9.0
    with pytest.raises(ValueError, match="lower bound"):
        CutoffSearch(10.0, 9.0, 9.5)


def test_the_start_holds_the_neighbours_asked_for():
    rc = cs.neighbour_cutoff(200, 3000, 30000.0)  # 0.1 atoms per cubic length
    assert abs(4.0 / 3.0 * math.pi * rc ** 3 * 0.1 - 200) < 1e-9


# ---------------------------------------------------------------- PME objects

def _forces_error(f, ref):
    return math.sqrt(((f - ref) ** 2).sum() / (ref ** 2).sum())


@pytest.mark.mpi(ranks=(1, 2))
@pytest.mark.timeout(300)
def test_pme_times_its_calls_and_keeps_the_fastest_cutoff(comm):
    s = systems.water_box(target_atoms=600, seed=3)
    rank, size = comm.Get_rank(), comm.Get_size()
    mine = slice(rank * s.n_atoms // size, (rank + 1) * s.n_atoms // size)
    ex = s.exclusions[np.isin(s.exclusions[:, 0], s.ids[mine])]
    args = (s.positions[mine], s.charges[mine], s.ids[mine], ex)
    tol = 1e-4
    ref = pmewald.PME(s.box, 6.0, tolerance=1e-9, comm=comm).compute(*args).forces
    ref_all = np.concatenate(comm.allgather(ref))
    pme = pmewald.PME(s.box, ("auto", 5.0), tolerance=tol, comm=comm)
    p = pme.parameters
    assert p["cutoff"] is None and p["cutoff_request"] == ("auto", 5.0) and p["cutoff_search"] == "not started"
    # The walk's longest: every candidate in [5, half the cell height] (7 here), 7 calls each,
    # the final comparison (6) and the winner's choice: the loop allows for it, whatever the timings.
    cutoffs, chosen = [], {}
    for _ in range(100):
        f = pme.compute(*args).forces
        err = _forces_error(np.concatenate(comm.allgather(f)), ref_all)
        assert err < tol, (pme.parameters["cutoff"], err)  # whichever cutoff the call ran at
        p = pme.parameters
        cutoffs.append(p["cutoff"])
        if p["mesh"] is not None:
            chosen.setdefault(p["cutoff"], (p["alpha"], p["mesh"], p["order"], p["differentiation"]))
        if p["cutoff_search"] == "done":
            break
    p = pme.parameters
    assert p["cutoff_search"] == "done", cutoffs
    seconds = p["cutoff_seconds"]
    assert len(seconds) >= 2 and all(c >= 5.0 for c in seconds)
    a, b, ratio = p["cutoff_duel"]  # the two fastest, compared call by call: the faster is kept
    assert sorted(seconds, key=lambda c: (seconds[c], c))[:2] == [a, b]
    assert p["cutoff"] == (a if ratio <= 1 else b)
    assert all(x == p["cutoff"] for x in comm.allgather(p["cutoff"]))  # every rank alike
    assert all(x == seconds for x in comm.allgather(seconds))
    # The next calls run at the chosen cutoff (its kept solver, or the full choice there when its
    # parameters were a seed), then keep their parameters.
    # Every candidate ran with what a choice at its own cutoff makes: the start's full choice,
    # the others one with the start's order and differentiation, whose mesh is no finer than a
    # PME object of that cutoff, order and differentiation chooses (alpha may differ by the
    # energy check's bound; the start's parameters scaled to the cutoff, the seeds before, were
    # up to 25% finer on 30k water atoms).
    start = cutoffs[0]
    assert len(chosen) == len(seconds)
    for c, (alpha, mesh, order, diff) in chosen.items():
        if c != start:
            assert (order, diff) == chosen[start][2:]
            q = pmewald.PME(s.box, c, tolerance=tol, comm=comm, order=order, differentiation=diff)
            q.compute(*args)
            assert np.prod(mesh) <= 1.05 * np.prod(q.parameters["mesh"]), (c, mesh, q.parameters["mesh"])
    meshes = []
    for _ in range(3):
        f = pme.compute(*args).forces
        assert pme.parameters["cutoff"] == p["cutoff"]
        assert _forces_error(np.concatenate(comm.allgather(f)), ref_all) < tol
        meshes.append(pme.parameters["mesh"])
    assert meshes[1] == meshes[2] and pme.parameters["cutoff_search"] == "done"
    # A box moved far: the walk starts again from the cutoff in use.
    pme.set_box(s.box * 1.1)
    assert pme.parameters["cutoff_search"] == "searching" and pme.parameters["cutoff_seconds"] == {}
    r = pme.compute(*args)
    assert r.estimated_error < tol and pme.parameters["cutoff"] == p["cutoff"]


@pytest.mark.mpi(ranks=(1,))
def test_a_failing_candidate_runs_the_call_again_at_another_cutoff(comm):
    # A molecule whose excluded pair is 8.2 apart: the start (from the density, ~7.8) is
    # shorter, so its first call fails, and the call runs again one step up the walk.
    s = systems.water_box(target_atoms=3000, seed=2)
    pos = s.positions.copy()
    pos[1500] = pos[0] + np.array([8.2, 0.0, 0.0])
    ex = np.array([[s.ids[0], s.ids[1500]]])
    pme = pmewald.PME(s.box, "auto", tolerance=1e-4, comm=comm)
    r = pme.compute(pos, s.charges, s.ids, ex)
    p = pme.parameters
    start = min(p["cutoff_seconds"])
    assert start < 8.2 < p["cutoff"] and math.isinf(p["cutoff_seconds"][start])
    assert np.isfinite(r.forces).all()


@pytest.mark.parametrize("kwargs, match", [
    (dict(cutoff="automatic"), "cutoff must be a length, 'auto' or"),
    (dict(cutoff=("auto",)), "cutoff must be a length, 'auto' or"),
    (dict(cutoff=("auto", -1.0)), "cutoff's lower bound"),
    (dict(cutoff=("auto", 100.0)), "longer than half the smallest cell height"),
    (dict(cutoff="auto", alpha=0.3), "pass neither alpha nor mesh"),
    (dict(cutoff="auto", mesh=(16, 16, 16)), "pass neither alpha nor mesh"),
    (dict(cutoff="auto", real_space=False), "real_space=True"),
])
def test_bad_cutoff_arguments_are_value_errors(kwargs, match):
    s = systems.water_box(target_atoms=300, seed=2)
    with pytest.raises(ValueError, match=match):
        pmewald.PME(s.box, **kwargs)


def test_a_length_reports_no_search():
    s = systems.water_box(target_atoms=300, seed=2)
    p = pmewald.PME(s.box, 5.0).parameters
    assert p["cutoff"] == 5.0 and p["cutoff_request"] == 5.0 and p["cutoff_search"] == "off"
    assert p["cutoff_duel"] is None
    assert p["cutoff_seconds"] == {}
