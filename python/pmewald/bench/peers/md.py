"""The MD-loop mode of ``python -m pmewald.bench peers --mode md`` (:mod:`pmewald.bench.peers`).

Positions take a small Gaussian random walk (``--md-sigma`` Angstrom per coordinate per
step, ``--md-steps`` steps); frame 0 is the system itself, so every code's forces there are
compared with the single-call reference for its measured error, and frames 1..N are timed
one force evaluation each, as an integrator would call them. Per code:

* pmewald: ``compute()`` on one :class:`pmewald.PME` object for every frame, so whatever it
  keeps between calls (a pair list with a ``skin``, when ``PME`` accepts one) is reused;
  :func:`pme_kwargs` passes ``--skin`` through only if ``PME``'s signature has it and the
  run records which;
* OpenMM: ``setPositions`` + ``getState(getForces=True)`` on one ``Context`` (its CPU
  platform keeps its neighbour list while atoms stay within its padding);
* LAMMPS: its own loop, ``run N`` with ``fix nve`` (unit masses, 300 K Gaussian velocities,
  the time step at which atoms move ``--md-sigma`` per step, rms), ``neighbor 2.0 bin``
  rebuilt when needed (``neigh_modify every 1 delay 0 check yes``), so its list is reused as
  in a user's run (``rerun`` of the frames would rebuild it on every frame and prints no
  timing breakdown); time per step = Pair + Kspace + Neigh + Comm from the breakdown;
* GROMACS: its own ``mdrun`` loop (:func:`pmewald.bench.peers.gromacs.run_gromacs_md`):
  ``--gromacs-md-steps`` steps with every atom frozen (a Coulomb-only system without
  Lennard-Jones cannot move), its pair list searched every 10 steps with a 0.1 nm buffer, as
  in a user's run; the time per step leaves out the integrator's rows. ``--gromacs-loop
  rerun`` times ``mdrun -rerun`` of the frames instead, which searches neighbours on every
  frame (this benchmark's GROMACS figure before 2026-12-07: 1.7-2.0x GROMACS's own loop).

The per-step figure is the mean over the timed steps (what a run of that many steps costs,
list rebuilds included); the median is kept too.
"""

from __future__ import annotations

import inspect
import statistics
import time

import numpy as np

from ..mpi_timing import slowest


def trajectory(positions, steps, sigma, seed=0):
    """``steps + 1`` frames: ``positions`` and a Gaussian random walk from it."""
    rng = np.random.default_rng(seed)
    steps_ = rng.normal(scale=float(sigma), size=(int(steps),) + np.shape(positions))
    return np.concatenate([np.asarray(positions)[None], np.asarray(positions)[None] + np.cumsum(steps_, axis=0)])


def pme_accepts(name):
    """Whether :class:`pmewald.PME` takes the keyword ``name``."""
    from ...pme import PME

    return name in inspect.signature(PME.__init__).parameters


def pme_kwargs(kw, skin):
    """``kw`` plus ``skin`` when given and accepted; returns ``(kwargs, record)`` where
    ``record`` says what happened (for the results)."""
    accepted = pme_accepts("skin")
    rec = dict(pme_accepts_skin=accepted, skin_requested=skin)
    if skin is not None and accepted:
        kw = dict(kw, skin=skin)
    rec["skin_passed"] = skin is not None and accepted
    return kw, rec


def summary(times):
    """Mean and median seconds per step of a list of step times."""
    return dict(step_mean_s=statistics.fmean(times), step_median_s=statistics.median(times),
                step_times_s=list(times))


def pme_loop(pme, frames, lo, hi, q, ids, ex, comm):
    """Time ``compute()`` on frames 1.. (each rank its slice ``lo:hi``); frame 0 computed first
    (set-up). Returns (frame-0 result, per-step times, slowest rank)."""
    from mpi4py import MPI

    res0 = pme.compute(np.ascontiguousarray(frames[0][lo:hi]), q, ids, ex)
    times = []
    for x in frames[1:]:
        xl = np.ascontiguousarray(x[lo:hi])
        comm.Barrier()
        t0 = time.perf_counter()
        pme.compute(xl, q, ids, ex)
        times.append(slowest(comm, time.perf_counter() - t0))
    return res0, times


def openmm_loop(ctx, frames_nm):
    """setPositions + getState(forces) per frame on one Context; frame 0 untimed."""
    ctx.setPositions(frames_nm[0])
    st0 = ctx.getState(getForces=True)
    times = []
    for x in frames_nm[1:]:
        t0 = time.perf_counter()
        ctx.setPositions(x)
        ctx.getState(getForces=True)
        times.append(time.perf_counter() - t0)
    return st0, times
