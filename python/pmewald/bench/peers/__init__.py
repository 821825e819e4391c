"""Side-by-side benchmark: pmewald against LAMMPS's PPPM, OpenMM's CPU PME and GROMACS's PME.

``python -m pmewald.bench peers [options]`` (run it *without* mpirun: it launches
``lmp``, ``mpirun -n P lmp`` and ``mpirun -n P python`` workers itself).

For every system (a displaced rock-salt crystal, an SPC/E-like water box and, with
``--systems chains``, peptide-like chains in water, with ``--systems peptide`` LAMMPS's
solvated peptide repeated to about the size, per ``--sizes`` entry) and every rank
count it runs, in rounds (``--rounds``), one after the other in each round so every code
sees the same stretch of machine time:

* LAMMPS (Debian's ``lmp``): ``pair_style coul/long rc`` + ``kspace_style pppm acc``,
  ``kspace_modify diff ik`` and ``ad``, ``timer full``, ``run 0`` (forces dumped, round 0
  only) then ``run --steps``; Pair and Kspace seconds per step from the timing breakdown,
  G, grid, order and LAMMPS's own error estimate from the log;
* OpenMM's CPU platform (``Threads`` = ranks, i.e. one thread per rank), NonbondedForce PME
  with charges only (water: intramolecular exceptions with chargeProd 0), same cutoff,
  ``ewaldErrorTolerance`` sweep; ``getState(getForces=True)`` timed per evaluation, and with
  the reciprocal part in its own force group, each group timed alone for the split;
* GROMACS (Debian's ``gmx``): a Coulomb-only topology with the system's exclusions,
  ``gmx mdrun -rerun`` per ``--gromacs-settings`` entry (ewald-rtol, fourierspacing,
  pme-order) on ``-ntmpi 1 -ntomp 1`` and, on 2 cores, ``-ntmpi 2`` and ``-ntomp 2``
  (:mod:`pmewald.bench.peers.gromacs`; in the MD-loop mode its own ``mdrun`` loop);
* pmewald (``mpirun -n P``, each comm_mode when P > 1), ``PME.compute`` timed per call, with
  ``pme.timings()`` per phase; plus pmewald ``ik`` with LAMMPS's own G, grid and order (the
  like-for-like reciprocal comparison).

Every code's forces are compared with a tight pmewald reference (order 8, tolerance
``--ref-tolerance``, cutoff up to 12 A; validated once against ``pmewald.reference.ewald``
on small copies of both systems) to get its measured relative RMS force error
``sqrt(sum |F - F_ref|^2 / sum |F_ref|^2)``. Times are medians over rounds (each round's
figure is itself the mean over ``--steps`` LAMMPS steps or the median of ``--steps``
evaluations). Ratios compare codes at the *same measured error*: each code's
time-versus-error points are interpolated in log-log (linear between the two bracketing
points; outside the measured range extrapolated from the nearest two, and flagged).

Each code at its best (``--cutoffs``, ``--lammps-orders``, ``--pme-auto-cutoff``): every code
runs at every cutoff as well as the common ``--cutoff``, and the best-setting table takes each
code's fastest time at the same measured error over every cutoff, setting, thread layout and
comm mode it ran (:func:`pmewald.bench.peers.report.best_ratios`); pmewald also with
``cutoff=("auto", lower)``. GROMACS's ``-tunepme`` would not do this here: GROMACS 2022 tunes
only with separate PME ranks or a GPU (``pme_loadbal_init``), and with a separate PME rank on
these 2 cores the pair ranks are the bottleneck, which tuning (the cutoff only grows) cannot
help; the cutoff sweep is the search it would make.

Physics is identical in all codes: point charges, Ewald sum, for water the three
intramolecular pairs excluded, for the chains and the peptide every pair at most three bonds
apart (LAMMPS: bonds + ``special_bonds`` 0; OpenMM: exceptions; GROMACS: ``[ exclusions ]``).
Units: LAMMPS ``real``; errors are unit-free.

``--mode md`` times an MD loop instead (:mod:`pmewald.bench.peers.md`: a random walk of
``--md-steps`` frames, one evaluation per frame, each code reusing what it keeps between
steps).

Writes ``results.json``, ``results.md`` (tables) and ``<system>_<P>rank.png`` (time vs
measured error per code) into ``--out``. This module has the command line and the pmewald
workers; the sweep (set-up, the rounds of runs, the report) is :mod:`pmewald.bench.peers.sweep`,
LAMMPS's files and log :mod:`pmewald.bench.peers.lammps`, GROMACS's
:mod:`pmewald.bench.peers.gromacs`, OpenMM's worker :mod:`pmewald.bench.peers.openmm`, the
tables and plots :mod:`pmewald.bench.peers.report`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from . import gromacs
from . import md
from . import sweep
from .lammps import K_REAL
from .openmm import maxrss_mb as _maxrss_mb
from .openmm import worker_openmm
from ..._mpi import COMM_MODES
from ..mpi_timing import slowest, total
from .report import PME_PHASES

GMX_SETTINGS = ["1e-5:0.12:5", "1e-5:0.12:6", "1e-6:0.08:6", "1e-7:0.06:6"]   # measured 2e-4 ... 7e-6
RECIP_PHASES = ["spread", "ghost", "fft", "solve", "gather"]
REAL_PHASES = ["real_space", "ghost_atoms", "exclusions"]


# ---------------------------------------------------------------- workers

def worker_pme(job):
    """Run under mpirun: time pmewald for each config of the job; rank 0 writes the result."""
    from mpi4py import MPI

    from ... import _core
    from ...pme import PME

    comm = MPI.COMM_WORLD
    rank, P = comm.Get_rank(), comm.Get_size()
    d = np.load(job["system"])
    n = len(d["charges"])
    lo, hi = n * rank // P, n * (rank + 1) // P
    pos, q, ids = (np.ascontiguousarray(d["positions"][lo:hi]), np.ascontiguousarray(d["charges"][lo:hi]),
                   np.ascontiguousarray(d["ids"][lo:hi]))
    ex = d["exclusions"]
    ex = np.ascontiguousarray(ex[rank::P]) if len(ex) else None
    frames = np.load(job["frames"]) if job.get("frames") else None
    out = []
    for cfg in job["configs"]:
        # "differentiation" (the resolved choice of an earlier automatic run) over "diff" (the request)
        kw = dict(differentiation=cfg.get("differentiation") or cfg.get("diff", "auto"), comm_mode=job["comm_mode"],
                  coulomb_constant=K_REAL, error_model=cfg.get("error_model", "correlated"))
        for key in ("alpha", "mesh", "order", "tolerance"):
            if cfg.get(key) is not None:
                kw[key] = tuple(cfg[key]) if key == "mesh" else cfg[key]
        if job.get("precision"):
            kw["precision"] = job["precision"]       # the pair kernel's (PME(precision=...))
        skin_rec = {}
        if frames is not None:                       # MD-loop mode: a fresh object per setting, one call per frame
            kw, skin_rec = md.pme_kwargs(kw, job.get("skin"))
        cutoff = cfg.get("cutoff", job["cutoff"])
        pme = PME(d["box"], tuple(cutoff) if isinstance(cutoff, list) else cutoff, **kw)
        t0 = time.perf_counter()
        res = pme.compute(pos, q, ids, ex)           # chooses the mesh (several computes)
        search_calls = _settle_cutoff(pme, frames[1:] if frames is not None else None, lo, hi, pos, q, ids, ex)
        t_setup = time.perf_counter() - t0
        if frames is not None:
            pme.reset_timings()
            res, steps_t = md.pme_loop(pme, frames, lo, hi, q, ids, ex, comm)
            tm = pme.timings()
            p = pme.parameters
            row = dict(cfg, comm_mode=job["comm_mode"], ranks=P, mesh=list(p["mesh"]), alpha=p["alpha"],
                       order=p["order"], differentiation=p["differentiation"], chosen_cutoff=p["cutoff"],
                       cutoff_search_calls=search_calls,
                       estimated_error=p["estimated_error"], setup_s=t_setup, **skin_rec, **md.summary(steps_t),
                       precision=p.get("precision"),
                       timer_counts={k: v for k, v in tm.items() if "rebuild" in k or k == "calls"})
            row["wall_s"] = row["step_mean_s"]
            forces = comm.gather(res.forces, root=0)
            if rank == 0 and job.get("forces_out"):
                fpath = f"{job['forces_out']}_{len(out)}.npy"
                np.save(fpath, np.concatenate(forces) / K_REAL)
                row["forces_file"] = fpath
            out.append(row)
            del pme
            continue
        t0 = time.perf_counter()
        res = pme.compute(pos, q, ids, ex)           # warm-up
        t_warm = slowest(comm, time.perf_counter() - t0)
        # Fewer calls for slow settings: about job["budget_s"] seconds each, 3 to job["steps"] calls.
        steps = max(3, min(job["steps"], int(job.get("budget_s", 1e9) / max(t_warm, 1e-9))))
        pme.reset_timings()
        walls = []
        for _ in range(steps):
            comm.Barrier()
            t0 = time.perf_counter()
            res = pme.compute(pos, q, ids, ex)
            walls.append(slowest(comm, time.perf_counter() - t0))
        tm = pme.timings()
        calls = max(tm.get("calls", 1), 1)
        phases = {k: slowest(comm, tm.get(k, 0.0) / calls) for k in PME_PHASES}
        phases_mean = {k: total(comm, tm.get(k, 0.0) / calls) / P for k in PME_PHASES}
        cpp_sum = slowest(comm, sum(tm.get(k, 0.0) for k in PME_PHASES) / calls)
        extra = {k: slowest(comm, tm.get(k, 0.0) / calls)
                 for k in ("fft_comm_wait", "fft_pack_unpack", "fft_1d", "ghost_comm_wait")}
        # The bare C++ call (no argument checks, reductions, result object) for the overhead.
        solver = pme._tuner.state.solver
        idv = ids if ids is not None else None
        exv = ex if ex is not None else np.zeros((0, 2), dtype=np.int64)
        raw = []
        for _ in range(max(2, steps // 2)):
            comm.Barrier()
            t0 = time.perf_counter()
            solver.compute(pos, q, idv, exv)
            raw.append(slowest(comm, time.perf_counter() - t0))
        p = pme.parameters
        row = dict(cfg, comm_mode=job["comm_mode"], ranks=P, mesh=list(p["mesh"]), alpha=p["alpha"],
                   order=p["order"], differentiation=p["differentiation"], estimated_error=p["estimated_error"],
                   chosen_cutoff=p["cutoff"], cutoff_search_calls=search_calls,
                   wall_s=statistics.median(walls), wall_mean_s=statistics.fmean(walls), steps=steps,
                   wall_min_s=min(walls), raw_cpp_call_s=statistics.median(raw), setup_s=t_setup,
                   phases=phases, phases_mean=phases_mean, cpp_phases_s=cpp_sum, comm_detail=extra,
                   recip_s=sum(phases[k] for k in RECIP_PHASES), real_s=sum(phases[k] for k in REAL_PHASES))
        if job.get("fft_only") and rank == 0:
            # The solver's transforms are real-to-complex: the limit is FFTW's serial r2c+c2r pair.
            row["fft_pair_s"] = statistics.median(
                _core.fftw_serial_r2c_pair_times(tuple(p["mesh"]), job["fft_repeats"]))
            row["fft_pair_kind"] = "r2c"
        row["maxrss_mb"] = slowest(comm, _maxrss_mb())
        forces = comm.gather(res.forces, root=0)
        if rank == 0 and job.get("forces_out"):
            f = np.concatenate(forces) / K_REAL
            fpath = f"{job['forces_out']}_{len(out)}.npy"
            np.save(fpath, f)
            row["forces_file"] = fpath
        out.append(row)
        del pme, solver
    if rank == 0:
        with open(job["result"], "w") as fh:
            json.dump(out, fh)


def _settle_cutoff(pme, frames, lo, hi, pos, q, ids, ex, limit=400):
    """With ``cutoff="auto"``, the calls of the cutoff search (on the MD frames in turn, or at
    the fixed positions), so that the timed calls after it run at the chosen cutoff; returns
    how many it took (0 for a given cutoff)."""
    calls = 0
    while pme.parameters.get("cutoff_search") == "searching":
        if calls == limit:
            raise RuntimeError(f"the cutoff search did not end in {limit} calls")
        x = pos if frames is None else np.ascontiguousarray(frames[calls % len(frames)][lo:hi])
        pme.compute(x, q, ids, ex)
        calls += 1
    return calls


def worker_validate(job):
    """pmewald at the reference settings vs pmewald.reference.ewald on a small system."""
    from ...pme import PME
    from ...reference import ewald

    d = np.load(job["system"])
    ex = d["exclusions"] if len(d["exclusions"]) else None
    pme = PME(d["box"], job["cutoff"], tolerance=job["tolerance"], order=8, differentiation="ad")
    r = pme.compute(d["positions"], d["charges"], d["ids"], ex)
    e = ewald(d["box"], d["positions"], d["charges"], exclusions=ex)
    err = float(np.sqrt(((r.forces - e.forces) ** 2).sum() / (e.forces ** 2).sum()))
    with open(job["result"], "w") as fh:
        json.dump(dict(n=len(d["charges"]), mesh=list(pme.parameters["mesh"]), alpha=pme.parameters["alpha"],
                       cutoff=job["cutoff"], rel_force_error_vs_ewald=err,
                       rel_energy_error=abs(r.energy - e.energy) / abs(e.energy)), fh)


# ------------------------------------------------------------------ driver

def bench_peers(args) -> int:
    """The benchmark of `args` (:func:`add_parser`): 0, or 2 when a peer's binary is missing."""
    out = Path(args.out).resolve()     # GROMACS runs in the work folder: absolute paths
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    if shutil.which("lmp") is None and not args.skip_lammps:
        print("lmp not found: run scripts/bench-setup.sh (Debian package lammps)", file=sys.stderr)
        return 2
    if gromacs.gmx_binary(args.gmx) is None and not args.skip_gromacs:
        print(f"{args.gmx} not found: run scripts/bench-setup.sh (Debian package gromacs)", file=sys.stderr)
        return 2
    run = sweep.Sweep(args, out, work)
    run.set_up()
    for rnd in range(args.rounds):
        run.run_round(rnd)
    run.finish()
    return 0


def add_parser(sub):
    p = sub.add_parser("peers", help="pmewald vs LAMMPS PPPM and OpenMM PME at matched measured force error",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[3000, 30000],
                   help="target atom counts (the crystal is rounded to whole cells: 30000 -> 32768 ions)")
    p.add_argument("--systems", nargs="+", default=["nacl", "water"], choices=["nacl", "water", "chains", "peptide"],
                   help="chains: peptide-like chains with partial charges in water (systems.solvated_chains); "
                        "peptide: LAMMPS's data.peptide (lammps-examples) repeated n x n x n to about --sizes atoms")
    p.add_argument("--tolerances", type=float, nargs="+", default=[3e-4, 1e-4, 3e-5],
                   help="pmewald tolerances")
    # Defaults chosen so every code's *measured* errors bracket 1e-4 and 1e-5: pmewald delivers
    # 0.4-0.7x its tolerance, LAMMPS's accuracy (relative to two unit charges 1 A apart) 10-30x
    # its setting relative to the RMS force, OpenMM 3-5x its ewaldErrorTolerance.
    p.add_argument("--lammps-accuracies", type=float, nargs="+", default=[1e-5, 3e-6, 1e-6, 3e-7],
                   help="PPPM accuracies")
    p.add_argument("--openmm-tolerances", type=float, nargs="+", default=[3e-5, 1e-5, 3e-6, 1e-6],
                   help="OpenMM ewaldErrorTolerance values")
    p.add_argument("--lammps-orders", type=int, nargs="+", default=None,
                   help="PPPM stencil orders ('kspace_modify order'; default LAMMPS's 5 only): variants lammps-ik-p<N>")
    p.add_argument("--lammps-diffs", nargs="+", default=["ik"], choices=["ik", "ad"],
                   help="LAMMPS 'kspace_modify diff' (ad's set-up takes minutes at accuracies below 1e-5)")
    p.add_argument("--pme-diffs", nargs="+", default=["auto"], choices=["auto", "ik", "ad"],
                   help="pmewald differentiation requests; 'auto' (variant pmewald-auto) lets the cost model "
                        "choose differentiation, order, alpha and mesh (the tables show the choice)")
    p.add_argument("--pme-models", nargs="+", default=["correlated"], choices=["correlated", "uncorrelated"],
                   help="pmewald error models (PME(error_model=...)); 'uncorrelated' runs as variant "
                        "pmewald-<diff>-uncorr: the textbook estimate, for the before/after comparison at the "
                        "same measured error (issue 15)")
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    p.add_argument("--modes", nargs="+", default=list(COMM_MODES),
                   choices=list(COMM_MODES), help="pmewald comm modes on more than 1 rank")
    p.add_argument("--cutoff", type=float, default=10.0,
                   help="the common real-space cutoff, Angstrom (the ratio table at the common cutoff)")
    p.add_argument("--cutoffs", type=float, nargs="+", default=None, metavar="RC",
                   help="more cutoffs every code runs at (variants '<code>@rc<RC>'): the best-setting table takes "
                        "each code's fastest time over all of them at the same measured error")
    p.add_argument("--pme-auto-cutoff", type=float, default=None, metavar="LOWER",
                   help="also run pmewald with cutoff=('auto', LOWER) (variant pmewald-rcauto: the cutoff timed at "
                        "the first calls on this machine and rank count; the search's calls are not timed)")
    p.add_argument("--steps", type=int, default=5, help="timed steps/evaluations per run")
    p.add_argument("--rounds", type=int, default=2, help="rounds over all codes; medians over rounds")
    p.add_argument("--budget", type=float, default=2.0,
                   help="seconds of timed calls per OpenMM/pmewald setting (at least 3 calls)")
    p.add_argument("--fft-repeats", type=int, default=7)
    p.add_argument("--ref-tolerance", type=float, default=1e-8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gromacs-settings", nargs="+", default=GMX_SETTINGS, metavar="RTOL:SPACING:ORDER",
                   help="GROMACS ewald-rtol, fourierspacing (nm) and pme-order per setting")
    p.add_argument("--gmx", default="gmx", help="the GROMACS binary (Debian: gmx, mixed precision)")
    p.add_argument("--gromacs-loop", choices=["md", "rerun"], default="md",
                   help="MD-loop mode: GROMACS's own MD loop (atoms frozen, pair list kept for nstlist 10 steps "
                        "with a 0.1 nm buffer) or 'mdrun -rerun' of the frames (a pair search every frame)")
    p.add_argument("--gromacs-md-steps", type=int, default=200, help="steps of GROMACS's own MD loop")
    p.add_argument("--mode", choices=["single", "md"], default="single",
                   help="single: repeated calls at the same positions; md: the MD loop of pmewald.bench.peers.md "
                        "(a random walk of --md-steps steps of --md-sigma A, one evaluation per step)")
    p.add_argument("--md-steps", type=int, default=20)
    p.add_argument("--md-sigma", type=float, default=0.01, help="Gaussian step per coordinate, Angstrom")
    p.add_argument("--precision", choices=("double", "mixed", "auto"), default=None,
                   help="pmewald's pair kernel, PME(precision=...) (default: PME's own default)")
    p.add_argument("--skin", type=float, default=None,
                   help="MD-loop mode: passed to PME(skin=...) if PME accepts it (the results record whether)")
    p.add_argument("--skip-lammps", action="store_true")
    p.add_argument("--skip-gromacs", action="store_true")
    p.add_argument("--skip-openmm", action="store_true")
    p.add_argument("--skip-validation", action="store_true")
    p.add_argument("--out", default="bench-out")
    return p


def _worker_main(argv):
    kind, path = argv
    job = json.loads(Path(path).read_text())
    {"pme": worker_pme, "openmm": worker_openmm, "validate": worker_validate}[kind](job)
