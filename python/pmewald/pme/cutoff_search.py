"""``cutoff="auto"``: the real-space cutoff chosen by timing the calls, like GROMACS's ``-tunepme``.

A pure-electrostatics user has no Lennard-Jones cutoff to keep, and the best split between the
real-space pairs and the mesh depends on the machine, the rank count and the system: a shorter
cutoff means fewer pairs and a finer mesh (alpha grows with it at the same accuracy). The
automatic choice of alpha, order and mesh (tuning.py) works at a given cutoff; this module walks
the cutoff itself, by measurement, over the first calls of a PME object:

- The candidates are ``start x STEP^k`` between a lower bound (the user's, else the cutoff
  holding ``_MIN_NEIGHBOURS`` atoms at the system's mean density) and half the smallest cell
  height. ``start`` holds ``_START_NEIGHBOURS`` (at least the lower bound). The start gets the
  full automatic choice; every other candidate is seeded by the nearest one chosen afresh (the
  start, or one whose seed missed): its first call chooses alpha and the mesh at its own cutoff
  with that one's order, differentiation and force scale, without the probe (Tuner.seed), and
  checks the result against the tolerance with the choice's margin (the full choice runs if it
  misses): every call's result meets the tolerance, whichever cutoff it ran at. (Seeds used to
  be the start's alpha and mesh scaled to the cutoff, as GROMACS scales its grid; rounded up to
  FFT sizes and keeping the start's split of the error, their meshes were 10-25% finer than a
  choice there, and every candidate but the start measured slower than it would run.)
- At a candidate, its first call chooses the parameters and the next (``_WARMUP``) plans the
  kept FFTs and builds the pair list; they are not timed, nor are the calls of the solver's
  trial of its pair-list layouts (pair_layout="auto" with the mixed kernel). The ``_TIMED``
  calls after them are, as the slowest rank's wall seconds (every rank decides alike), and
  their median counts.
- The walk goes down from ``start`` while a candidate is not more than ``SLOWER`` (12%, as
  GROMACS) slower than the best so far, then up from ``start`` the same way unless the start
  itself was more than ``SLOWER`` slower than the best below it (candidates a step apart differ
  by about as much as single measurements drift: where the start is near the best, going up is
  worth one candidate); it ends at the bounds. The two fastest then run alternately, ``_DUEL``
  calls each, and the one the median of the call-by-call ratios says is faster is kept, with
  the parameters it was measured with.
- A candidate whose call fails (an excluded pair beyond a short cutoff, a mesh too large for
  memory) counts as infinitely slow: the call is run again (once) at the cutoff the walk goes
  on with.
- After :meth:`PME.set_box` has moved the box by more than ``_RETUNE_BOX_CHANGE`` of its
  longest edge since the choice, the walk starts again from the cutoff in use.

Only calls of one charge set without potentials are timed (the others run at the current
cutoff). :class:`CutoffSearch` is the walk alone, without MPI or a solver (tests drive it with
made-up timings); :class:`CutoffTuning` is what :class:`pmewald.PME` holds.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..geometry.cell import half_height

# Candidate cutoffs are start x STEP^k (the pair count changes by 1.33x per step).
STEP = 1.1
# A direction of the walk ends at a candidate this much slower than the best (GROMACS's 12%).
SLOWER = 1.12
# Calls at a candidate after its first (the parameter choice) that are not timed: the kept
# solver's measured FFT plans and the pair list's build happen there.
_WARMUP = 1
# Calls timed per candidate; their median counts (single calls on a shared machine vary by
# tens of percent both ways: the fastest of three picked a cutoff 9% slower in a longer run).
_TIMED = 5
# The walk's end: the two fastest candidates compared call by call, alternately, over this many
# pairs of calls, the median of the ratios deciding (measurements taken one after another drift
# by as much as flat candidates differ: 2 ranks, 1e-5, 63.5 ms in the walk, 79.3 ms after it).
# Three pairs were too few on 2 ranks: at 1e-4 on 30k water they overruled a 9% difference of
# the walk and kept a cutoff 7% slower.
_DUEL = 5
# The cutoff of start and of the default lower bound: the sphere holding this many atoms at the
# system's mean density (water: ~7.8 and ~4.6 Angstrom).
_START_NEIGHBOURS = 200
_MIN_NEIGHBOURS = 50
# set_box: the walk starts again once the box has moved by more than this fraction of its
# longest edge since the choice.
_RETUNE_BOX_CHANGE = 0.05


def neighbour_cutoff(n_neighbours, n_atoms, volume):
    """The radius of the sphere holding `n_neighbours` atoms at the mean density."""
    return (3.0 * n_neighbours * volume / (4.0 * math.pi * n_atoms)) ** (1.0 / 3.0)


def _rounded(x):
    return float(f"{x:.4g}")


def _rounded_down(x):
    """x to 4 significant digits, not above x (a candidate at the box's limit stays within it)."""
    unit = 10.0 ** (math.floor(math.log10(x)) - 3)
    r = _rounded(math.floor(x / unit + 1e-9) * unit)
    return r if r <= x else _rounded(r - unit)


class CutoffSearch:
    """The walk over candidate cutoffs in [lo, hi] from `start` (see the module docstring).
    Pure: no MPI. ``current`` is the cutoff to run at; :meth:`record` takes each plain call's
    seconds there and answers whether to move; ``seconds`` the measurements, ``done`` whether
    the walk has ended."""

    def __init__(self, lo, hi, start):
        if not 0 < lo <= hi:
            raise ValueError(f"cutoff='auto': the lower bound {lo:g} exceeds the box's limit {hi:g} "
                             "(half the smallest cell height)")
        self.lo, self.hi = lo, _rounded_down(hi)
        self.restart(min(max(start, lo), hi))

    def restart(self, start):
        """Walk again from `start` (forgetting what was measured)."""
        self.start = self.current = min(_rounded(start), self.hi)
        self.seconds = {}
        self.samples = []
        self.calls = 0
        self.direction = -1
        self.done = False
        self.duel = None  # the final comparison while it runs: {"pair": (a, b), "first", "ratios"}
        self.duel_result = None  # (a, b, median of t_a / t_b) once it has run

    def best(self):
        """The fastest cutoff measured (the current one before any measurement)."""
        if not self.seconds:
            return self.current
        return min(self.seconds, key=lambda c: (self.seconds[c], c))

    def fresh(self):
        """Whether no call at the current candidate has succeeded yet."""
        return not self.done and self.duel is None and self.calls == 0

    def record(self, seconds):
        """One successful call at ``current`` (None: a call that is not timed, e.g. the
        parameter choice, potentials). Returns the cutoff to move to, or None to stay."""
        if self.done:
            return None
        if self.duel is not None:
            return self._duel_step(seconds)
        self.calls += 1
        if self.calls <= 1 + _WARMUP or seconds is None:
            return None
        self.samples.append(float(seconds))
        if len(self.samples) < _TIMED:
            return None
        self.seconds[self.current] = float(np.median(self.samples))
        return self._step()

    def fail(self):
        """The current candidate's call failed: it counts as infinitely slow. Returns the
        cutoff to move to (the best so far, or the next candidate when nothing was measured)."""
        self.seconds[self.current] = math.inf
        nxt = self._step()
        return nxt if nxt is not None else self.current

    def _step(self):
        t, best = self.seconds[self.current], self.best()
        go_on = math.isfinite(t) and t <= SLOWER * self.seconds[best]  # a failure ends a direction
        nxt = None
        if self.direction < 0:
            down = _rounded(self.current / STEP)
            if go_on and down >= self.lo and down not in self.seconds:
                nxt = down
            elif self.seconds[self.start] <= SLOWER * self.seconds[best] or self.seconds[best] == math.inf:
                self.direction = 1
                up = _rounded(self.start * STEP)
                if up <= self.hi and up not in self.seconds:
                    nxt = up
        else:
            up = _rounded(self.current * STEP)
            if go_on and up <= self.hi and up not in self.seconds:
                nxt = up
        if nxt is None:
            finite = sorted((t, c) for c, t in self.seconds.items() if math.isfinite(t))
            if _DUEL > 0 and len(finite) >= 2:  # the two fastest, call by call
                self.duel = {"pair": (finite[0][1], finite[1][1]), "first": None, "ratios": []}
                return self._move(finite[0][1])
            self.done = True
            nxt = self.best()
            if self.seconds.get(nxt, 0.0) == math.inf:  # nothing ran: stay at the start
                nxt = self.start
        return self._move(nxt)

    def _duel_step(self, seconds):
        """A call of the final comparison: at a, then at b, `_DUEL` times; the one whose
        median ratio says faster is kept."""
        if seconds is None:
            return None
        d = self.duel
        a, b = d["pair"]
        if self.current == a:
            d["first"] = float(seconds)
            return self._move(b)
        d["ratios"].append(d["first"] / float(seconds))
        if len(d["ratios"]) < _DUEL:
            return self._move(a)
        ratio = float(np.median(d["ratios"]))
        self.duel, self.duel_result, self.done = None, (a, b, ratio), True
        return self._move(a if ratio <= 1.0 else b)

    def _move(self, cutoff):
        self.samples, self.calls = [], 0
        if cutoff == self.current:
            return None
        self.current = cutoff
        return cutoff


class CutoffTuning:
    """The PME object's side of ``cutoff="auto"``: a :class:`CutoffSearch` made at the first
    call (from the atom density), the (Problem, Tuner) of the current candidate and of the
    two fastest measured, the timing of plain calls (the slowest rank's) and the box the choice
    was made in. `make_tuner(problem)` makes a fresh Tuner for a problem."""

    def __init__(self, comm, opts, make_tuner):
        self.comm, self.opts, self.make_tuner = comm, opts, make_tuner
        self.search = None
        self.kept = {}  # cutoff -> (problem, tuner) of the two fastest so far (their solvers and plans)
        self.chosen = {}  # cutoff -> what Tuner.seed takes, of the candidates chosen afresh
        self.box = None  # the box the walk's measurements are of
        self.started = None
        self.layout_trial = False  # the call begun is one of the solver's layout trial

    def first_call(self, problem, n_atoms):
        """The setting (problem, tuner) to run the first call with: the start cutoff."""
        hi = half_height(problem.box)
        volume = problem.volume_filled()
        lo = self.opts.cutoff_min if self.opts.cutoff_min is not None else min(
            neighbour_cutoff(_MIN_NEIGHBOURS, n_atoms, volume), hi)
        self.search = CutoffSearch(lo, hi, neighbour_cutoff(_START_NEIGHBOURS, n_atoms, volume))
        self.box = problem.box.copy()
        return self._setting(problem, None, self.search.current)

    def begin(self, tuner):
        """Collective (every rank calls it at the same point of the call): start the clock,
        and note whether `tuner`'s solver is still timing its pair list's layouts
        (pair_layout="auto"): those calls are not timed (their layouts alternate)."""
        solver = tuner.state.solver
        self.layout_trial = solver is not None and solver.pair_layout_trial == "trying"
        self.started = time.perf_counter()

    def timed_seconds(self):
        """The slowest rank's seconds since begin() (collective)."""
        from .._mpi.collective import allmax

        return float(allmax(self.comm, [time.perf_counter() - self.started])[0])

    def after_call(self, problem, tuner, timed):
        """After a successful call at the current candidate; `timed`: whether the call is one
        to time (plain, and no parameter choice in it). Collective while the walk runs.
        Returns the (problem, tuner) for the next call."""
        s = self.search
        if s.done:
            return problem, tuner
        seconds = self.timed_seconds() if timed and not self.layout_trial else None
        here = s.current
        st = tuner.state
        if st.choice is not None and not tuner.from_seed:  # chosen afresh: what later candidates seed from
            self.chosen.setdefault(here, (dict(st.params), st.precision, st.scale, st.pair_force2, st.mesh_target))
        nxt = s.record(seconds)
        if math.isfinite(s.seconds.get(here, math.inf)):  # the two fastest keep their solvers and plans
            self.kept[here] = (problem, tuner)
            self.kept = {c: self.kept[c] for c in sorted(self.kept, key=lambda c: (s.seconds[c], c))[:2]}
        return self._next(problem, tuner, nxt)

    def failed(self, problem, tuner):
        """The current candidate's call failed: the setting to run it again with."""
        return self._next(problem, tuner, self.search.fail())

    def _next(self, problem, tuner, nxt):
        """The setting after the walk answered `nxt` (None: stay); at its end the winner's kept
        one, with the parameters that were measured."""
        if nxt is None:
            return problem, tuner
        return self._setting(problem, tuner, nxt)

    def fresh(self):
        return self.search is not None and self.search.fresh()

    def box_changed(self, problem):
        """After set_box: walk again from the cutoff in use when the box has moved by more
        than _RETUNE_BOX_CHANGE of its longest edge since the measurements."""
        if self.search is None or self.box is None:
            return
        scale = float(np.linalg.norm(self.box, axis=1).max())
        if float(np.abs(problem.box - self.box).max()) > _RETUNE_BOX_CHANGE * scale:
            self.search.hi = _rounded_down(half_height(problem.box))
            self.search.lo = min(self.search.lo, self.search.hi)
            self.search.restart(min(problem.cutoff, self.search.hi))
            self.kept, self.chosen = {}, {}
            self.box = problem.box.copy()

    def report(self):
        """parameters' keys: the measured seconds per cutoff and the walk's state."""
        s = self.search
        if s is None:
            return {"cutoff_seconds": {}, "cutoff_search": "not started", "cutoff_duel": None}
        return {"cutoff_seconds": dict(sorted(s.seconds.items())), "cutoff_search": "done" if s.done else "searching",
                "cutoff_duel": s.duel_result}

    def _setting(self, problem, tuner, cutoff):
        """(problem, tuner) at `cutoff`: the current one (`tuner` not None) or the kept one when
        of this box and slab, else new."""
        if tuner is not None and cutoff == problem.cutoff:
            return problem, tuner
        kept = self.kept.get(cutoff)
        if kept is not None and np.array_equal(kept[0].box, problem.box) and kept[0].slab is problem.slab:
            return kept
        other = problem.with_cutoff(cutoff)
        tuner = self.make_tuner(other)
        if self.chosen:  # seeded by the nearest one chosen afresh (Tuner.seed), checked at its call
            near = min(self.chosen, key=lambda c: (abs(math.log(c / cutoff)), c))
            tuner.seed(*self.chosen[near])
        return other, tuner
