"""The sweep of ``python -m pmewald.bench peers`` (:mod:`pmewald.bench.peers`): its set-up
(the systems and their files, the reference check, every system's reference forces), the
rounds of the codes' runs (each in its own process: ``lmp``, ``gmx``, or a worker of
``python -m pmewald.bench.peers _worker``), and the report written from what they measured.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from . import gromacs
from . import md
from . import report
from .lammps import run_lammps, write_lammps_data

PEPTIDE = "/usr/share/lammps/examples/peptide/data.peptide"     # Debian's lammps-examples

# GROMACS thread layouts per core count: (thread-MPI ranks, OpenMP threads, variant name).
GMX_LAYOUTS = {1: [(1, 1, "gromacs")], 2: [(2, 1, "gromacs-tmpi"), (1, 2, "gromacs-omp")]}


# ---------------------------------------------------------------- progress bar

class _Progress:
    def __init__(self, total, desc=""):
        try:
            from tqdm import tqdm
            self._t = tqdm(total=total, desc=desc, file=sys.stderr)
        except ImportError:
            self._t = None
        self.total, self.n, self.desc, self.t0 = total, 0, desc, time.time()

    def update(self, label=""):
        self.n += 1
        if self._t is not None:
            self._t.set_postfix_str(label)
            self._t.update(1)
            return
        width = 30
        done = int(width * self.n / max(self.total, 1))
        el = time.time() - self.t0
        eta = el / self.n * (self.total - self.n)
        sys.stderr.write(f"\r{self.desc} [{'#' * done}{'.' * (width - done)}] {self.n}/{self.total} "
                         f"{el:5.0f}s eta {eta:4.0f}s {label[:40]:<40}")
        sys.stderr.flush()

    def close(self):
        if self._t is not None:
            self._t.close()
        else:
            sys.stderr.write("\n")


# ----------------------------------------------------------------- systems

def make_system(kind, size, seed=0):
    from ... import systems

    if kind == "nacl":
        n = max(2, int(round((size / 8.0) ** (1.0 / 3.0))))
        s = systems.displace(systems.rock_salt((n, n, n)), 0.1, seed=seed)
        s.exclusions = np.zeros((0, 2), dtype=np.int64)
        return s
    if kind == "water":
        return systems.water_box(target_atoms=int(size), seed=seed)
    if kind == "chains":
        # Peptide-like: about a tenth of the atoms in 10-residue chains (CHARMM-like partial charges,
        # 1-2/1-3/1-4 exclusions), the rest water; the waters overlapping a chain are removed.
        # The chain builder gives up now and then on a random backbone: the next seeds, deterministically.
        for k in range(20):
            try:
                return systems.solvated_chains(max(1, int(size) // 600), 10, n_water=int(size) // 3,
                                               seed=seed + 1000 * k)
            except RuntimeError:
                continue
        raise RuntimeError(f"could not build {size} atoms of chains in water")
    if kind == "peptide":
        # LAMMPS's solvated peptide (2,004 atoms, CHARMM charges, 1-2/1-3/1-4 pairs excluded) repeated
        # n x n x n, n the nearest to size / 2004 atoms (30000 -> 2 (16,032), 54000 -> 3 (54,108)).
        n = max(1, int(round((size / 2004.0) ** (1.0 / 3.0))))
        return systems.replicate(systems.read_lammps_data(PEPTIDE), n)
    raise ValueError(kind)


def save_system(s, path):
    np.savez(path, box=s.box, positions=s.positions, charges=s.charges, ids=s.ids, exclusions=s.exclusions)


# ---------------------------------------------------------------- processes

def _clean_env(threads=1):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_COMM", "PMIX_", "OMPI_MCA_ess", "PMI_"))}
    if os.getuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    env["OMP_NUM_THREADS"] = "1"
    env["OPENMM_CPU_THREADS"] = str(threads)
    return env


def _run_worker(kind, job, ranks, workdir, env):
    path = workdir / f"job_{kind}_{os.getpid()}_{time.time_ns()}.json"
    job = dict(job, result=str(path) + ".out")
    path.write_text(json.dumps(job))
    cmd = [sys.executable, "-m", "pmewald.bench.peers", "_worker", kind, str(path)]
    if ranks > 1 or kind == "pme":
        cmd = ["mpirun", "-n", str(ranks)] + cmd
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"worker failed ({' '.join(cmd)}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    res = json.loads(Path(job["result"]).read_text())
    path.unlink()
    Path(job["result"]).unlink()
    return res


def rel_error(f, ref):
    return float(np.sqrt(((f - ref) ** 2).sum() / (ref ** 2).sum()))


def _uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


# ---------------------------------------------------------------- the sweep

class Sweep:
    """One ``bench peers`` run into ``out`` (its files in ``work``): :meth:`set_up`, then
    :meth:`run_round` per round, then :meth:`finish` (the report)."""

    def __init__(self, args, out, work):
        self.args, self.out, self.work = args, out, work
        self.gmx_settings = [dict(zip(("rtol", "spacing", "order"), (float(a), float(b), int(c))), label=v)
                             for v in args.gromacs_settings for a, b, c in [v.split(":")]]
        self.md_mode = args.mode == "md"
        # GROMACS's own loop in the MD-loop mode (--gromacs-loop md), else mdrun -rerun of the frames
        self.gmx_own_loop = self.md_mode and args.gromacs_loop == "md"
        # Every code runs at every cutoff; the common one (--cutoff) keeps the plain variant names,
        # the others are "<variant>@rc<cutoff>" (report.family strips it for the best-setting table).
        self.cutoffs = sorted({float(args.cutoff)} | {float(c) for c in (args.cutoffs or [])})
        # GROMACS's frames: its time per frame is a difference of two runs' wall times, so at least 10 frames
        self.n_frames = args.md_steps + 1 if self.md_mode else max(args.steps, 10) + 1
        self.meta = dict(started=time.strftime("%Y-%m-%d %H:%M:%S %Z"), uptime_start=_uptime(), args=vars(args),
                         host=os.uname().nodename, cpus=os.cpu_count(), cpu_model=report.cpu_model())
        print(f"[bench peers] {self.meta['started']}  load: {self.meta['uptime_start']}", flush=True)
        self.env1 = _clean_env(1)
        self.systems, self.validation = [], []
        self.raw = {}  # (system, P, code-variant, setting) -> dict with lists over rounds
        self.lammps_params = {}  # (system, PPPM accuracy) -> LAMMPS's G, grid and order (ik)
        self.pme_params = {}     # (system, variant, tolerance, cutoff) -> pmewald's first automatic choice
        self.bar = None

    # ---------------------------------------------------------- set-up

    def set_up(self):
        """The systems, their files and frames; the reference check; the reference forces."""
        self._make_systems()
        if not self.args.skip_validation:
            self._check_reference()
        self._reference_forces()
        n_jobs = sum(len(self.jobs_for(P)) for _ in self.systems for P in self.args.ranks) * self.args.rounds
        self.bar = _Progress(n_jobs, "bench peers")

    def _make_systems(self):
        args, work = self.args, self.work
        for size in args.sizes:
            for kind in args.systems:
                s = make_system(kind, size, seed=args.seed)
                name = f"{kind}{s.n_atoms}"
                npz = work / f"{name}.npz"
                save_system(s, npz)
                data = work / f"{name}.data"
                if not args.skip_lammps:
                    write_lammps_data(s, kind, data)
                entry = dict(name=name, kind=kind, n=s.n_atoms, npz=str(npz), data=str(data),
                             box=np.diag(s.box).tolist())
                # The frames every code evaluates: the MD loop's random walk, or (single-call mode, GROMACS's
                # rerun only) the system repeated.
                frames = (md.trajectory(s.positions, args.md_steps, args.md_sigma, seed=args.seed) if self.md_mode
                          else np.repeat(s.positions[None], self.n_frames, axis=0))
                if self.md_mode:
                    entry["frames"] = str(work / f"{name}_frames.npy")
                    np.save(entry["frames"], frames)
                if not args.skip_gromacs:
                    entry["gmx"] = gromacs.GromacsSystem(s, work, name)
                    if not self.gmx_own_loop:      # (its own loop starts from the system: no frames)
                        entry["gmx_traj"] = entry["gmx"].trajectory(frames, "md" if self.md_mode else "repeat")
                self.systems.append(entry)
        print(f"[bench peers] systems: {', '.join(s['name'] for s in self.systems)}", flush=True)

    def _check_reference(self):
        """pmewald at the reference settings against pmewald.reference.ewald on small copies."""
        args = self.args
        small = [("nacl", 512), ("water", 810)] + ([("peptide", 2004)] if "peptide" in args.systems else [])
        for kind, size in small:
            s = make_system(kind, size, seed=args.seed + 1)
            npz = self.work / f"validate_{kind}.npz"
            save_system(s, npz)
            rc = min(12.0, 0.5 * float(np.diag(s.box).min()) * 0.999)
            v = _run_worker("validate", dict(system=str(npz), cutoff=rc, tolerance=args.ref_tolerance), 1,
                            self.work, self.env1)
            v["system"] = kind
            self.validation.append(v)
            print(f"[bench peers] reference check {kind} n={v['n']}: pmewald(tol {args.ref_tolerance:g}, order 8, "
                  f"mesh {v['mesh']}) vs reference.ewald: rel force error {v['rel_force_error_vs_ewald']:.2e}",
                  flush=True)

    def _reference_forces(self):
        for s in self.systems:
            rc = min(12.0, 0.5 * min(s["box"]) * 0.999)
            cfg = dict(tolerance=self.args.ref_tolerance, order=8, cutoff=rc, diff="ad")
            r = _run_worker("pme", dict(system=s["npz"], configs=[cfg], cutoff=rc, comm_mode="nonblocking", steps=1,
                                        forces_out=str(self.work / f"ref_{s['name']}")), 1, self.work, self.env1)[0]
            s["reference"] = {k: r[k] for k in ("mesh", "alpha", "order", "cutoff", "tolerance", "estimated_error")}
            s["ref_forces_file"] = r["forces_file"]
            print(f"[bench peers] reference {s['name']}: mesh {r['mesh']} order 8 alpha {r['alpha']:.3f} "
                  f"rc {rc:.1f} (est. error {r['estimated_error']:.1e})", flush=True)

    def variant(self, name, rc):
        """A code's variant name at cutoff ``rc``: plain at the common cutoff, else ``@rc<rc>``."""
        return name if rc == float(self.args.cutoff) else f"{name}@rc{rc:g}"

    def jobs_for(self, P):
        """The job list of one round on P ranks: (code, options) per run, every cutoff."""
        args = self.args
        j = []
        for rc in self.cutoffs:
            if not args.skip_lammps:
                for diff in args.lammps_diffs:
                    for order in args.lammps_orders or [None]:
                        for acc in args.lammps_accuracies or args.tolerances:
                            j.append(("lammps", dict(diff=diff, acc=acc, order=order, rc=rc)))
            if not args.skip_openmm:
                j.append(("openmm", dict(rc=rc)))
            if not args.skip_gromacs:
                for ntmpi, ntomp, variant in GMX_LAYOUTS.get(P, [(P, 1, "gromacs-tmpi")]):
                    j.append(("gromacs", dict(ntmpi=ntmpi, ntomp=ntomp, variant=variant, rc=rc)))
            for mode in (["nonblocking"] if P == 1 else args.modes):
                j.append(("pme", dict(mode=mode, rc=rc)))
        return j

    # ---------------------------------------------------------- the peers' runs

    def run_round(self, rnd):
        """Every code on every system and rank count once; round 0 also measures the errors."""
        run = {"lammps": self._run_lammps, "openmm": self._run_openmm, "gromacs": self._run_gromacs,
               "pme": self._run_pme}
        for s in self.systems:
            ref = np.load(s["ref_forces_file"])
            for P in self.args.ranks:
                envP = _clean_env(P)
                for code, opt in self.jobs_for(P):
                    run[code](s, P, opt, rnd == 0, ref, envP)
                self.write(partial=True)

    def _record(self, key, r):
        self.raw.setdefault(key, {"rounds": []})["rounds"].append(r)

    def _failed(self, what, err):
        """A peer's run that failed (its error's last lines kept in meta["failures"] and the
        report): the sweep goes on without it."""
        lines = [ln for ln in str(err).splitlines() if ln.strip()]
        self.meta.setdefault("failures", []).append(dict(run=what, error=" / ".join(lines[:1] + lines[-3:])[:600]))
        print(f"[bench peers] FAILED {what}: {lines[0] if lines else err}", file=sys.stderr, flush=True)
        self.bar.update(f"{what} FAILED")

    def _run_lammps(self, s, P, opt, want, ref, envP):
        args = self.args
        try:
            r = run_lammps(dict(data=s["data"], kind=s["kind"], cutoff=opt["rc"], acc=opt["acc"], diff=opt["diff"],
                                n=s["n"], md_sigma=args.md_sigma if self.md_mode else None, order=opt["order"]),
                           P, self.work, args.md_steps if self.md_mode else args.steps, want, envP)
        except RuntimeError as e:  # a peer's failure: recorded, the run goes on
            self._failed(f"{s['name']} P{P} lammps {opt['diff']} {opt['acc']:g} rc {opt['rc']:g}", e)
            return
        if want:
            r["error"] = rel_error(r.pop("forces"), ref)
        r["cutoff"] = opt["rc"]
        if opt["diff"] == "ik" and opt["order"] is None and opt["rc"] == float(args.cutoff):
            self.lammps_params[(s["name"], opt["acc"])] = (r["G"], r["mesh"], int(r["order"]))
        name = f"lammps-{opt['diff']}" + ("" if opt["order"] is None else f"-p{opt['order']}")
        self._record((s["name"], P, self.variant(name, opt["rc"]), opt["acc"]), r)
        self.bar.update(f"{s['name']} P{P} {name} {opt['acc']:g} rc {opt['rc']:g}")

    def _run_openmm(self, s, P, opt, want, ref, envP):
        args = self.args
        try:
            rs = _run_worker("openmm", dict(system=s["npz"], cutoff=opt["rc"], threads=P,
                                            tolerances=args.openmm_tolerances or args.tolerances,
                                            steps=args.steps, budget_s=args.budget, frames=s.get("frames"),
                                            forces_out=str(self.work / f"omm_{s['name']}_{P}") if want else None),
                             1, self.work, envP)
        except RuntimeError as e:
            self._failed(f"{s['name']} P{P} openmm rc {opt['rc']:g}", e)
            return
        for r in rs:
            if want:
                r["error"] = rel_error(np.load(r["forces_file"]), ref)
            r["cutoff"] = opt["rc"]
            self._record((s["name"], P, self.variant("openmm", opt["rc"]), r["tolerance"]), r)
        self.bar.update(f"{s['name']} P{P} openmm rc {opt['rc']:g}")

    def _run_gromacs(self, s, P, opt, want, ref, envP):
        """Single-call mode: ``mdrun -rerun`` of the repeated frame. MD-loop mode: GROMACS's own
        loop (:func:`gromacs.run_gromacs_md`, its pair list kept for ``nstlist`` steps), as
        LAMMPS runs its own; ``--gromacs-loop rerun`` keeps the rerun of the frames (a pair
        search on every frame, the figure of the benchmarks before 2026-12-07)."""
        args, own_loop = self.args, self.gmx_own_loop
        for st in self.gmx_settings:
            try:
                if own_loop:
                    r = gromacs.run_gromacs_md(s["gmx"], st, opt["rc"], opt, args.gromacs_md_steps, want, envP,
                                               args.gmx)
                    r["total_s"] = r["step_s"]
                else:
                    r = gromacs.run_gromacs(s["gmx"], st, opt["rc"], opt, s["gmx_traj"], self.n_frames, want,
                                            envP, args.gmx)
                    r["total_s"] = r["frame_s"]
            except RuntimeError as e:
                self._failed(f"{s['name']} P{P} {opt['variant']} {st['label']} rc {opt['rc']:g}", e)
                continue
            if want:
                r["error"] = rel_error(r.pop("forces"), ref)
            r.update(cutoff=opt["rc"], loop="md" if own_loop else "rerun")
            self._record((s["name"], P, self.variant(opt["variant"], opt["rc"]), st["label"]), r)
        self.bar.update(f"{s['name']} P{P} {opt['variant']} rc {opt['rc']:g}")

    def _run_pme(self, s, P, opt, want, ref, envP):
        args = self.args
        rc, common = opt["rc"], opt["rc"] == float(args.cutoff)
        cfgs = []
        for model in args.pme_models:
            for d in args.pme_diffs:
                for t in args.tolerances:
                    v = f"pmewald-{d}" + ("" if model == "correlated" else "-uncorr")
                    c = dict(tolerance=t, diff=d, variant=v, error_model=model, cutoff=rc)
                    # The automatic choice is rank-count independent: tune once (first run),
                    # then pass the chosen alpha, mesh, order and differentiation explicitly.
                    c.update(self.pme_params.get((s["name"], v, t, rc), {}))
                    cfgs.append(c)
        if common and args.pme_auto_cutoff is not None:
            # cutoff=("auto", lower bound): the cutoff timed at the first calls on this machine and
            # rank count (so chosen again on every run: it is not rank-count independent).
            for t in args.tolerances:
                cfgs.append(dict(tolerance=t, diff="auto", variant="pmewald-rcauto", cutoff=["auto", args.pme_auto_cutoff]))
        if common and not args.skip_lammps:
            for acc in args.lammps_accuracies or args.tolerances:
                if (s["name"], acc) in self.lammps_params:
                    G, mesh, order = self.lammps_params[(s["name"], acc)]
                    cfgs.append(dict(alpha=G, mesh=mesh, order=order, diff="ik", lammps_acc=acc,
                                     variant="pmewald-ik@lammps"))
        rs = _run_worker("pme", dict(system=s["npz"], configs=cfgs, cutoff=rc, comm_mode=opt["mode"],
                                     steps=args.steps, fft_only=(P == 1 and not self.md_mode),
                                     frames=s.get("frames"), skin=args.skin, precision=args.precision,
                                     budget_s=args.budget, fft_repeats=args.fft_repeats,
                                     forces_out=str(self.work / f"pme_{s['name']}_{P}_{opt['mode']}_{rc:g}")
                                     if want else None), P, self.work, envP)
        for r in rs:
            if want:
                r["error"] = rel_error(np.load(r["forces_file"]), ref)
            if r["variant"] not in ("pmewald-ik@lammps", "pmewald-rcauto"):
                self.pme_params.setdefault((s["name"], r["variant"], r["tolerance"], rc),
                                           dict(alpha=r["alpha"], mesh=r["mesh"], order=r["order"],
                                                differentiation=r["differentiation"]))
            setting = r.get("tolerance") if r["variant"] != "pmewald-ik@lammps" else r["lammps_acc"]
            variant = self.variant(r["variant"] + ("" if P == 1 else f"-{opt['mode']}"), rc)
            self._record((s["name"], P, variant, setting), r)
        self.bar.update(f"{s['name']} P{P} pmewald {opt['mode']} rc {rc:g}")

    # ---------------------------------------------------------- the report

    def write(self, partial):
        """Tables from what has been measured so far (rewritten after every rank count of every
        system of every round); the markdown and the plots' file names."""
        meta, out = self.meta, self.out
        meta["uptime_end"] = _uptime()
        meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z") + (" (partial)" if partial else "")
        rows = report.summarise(self.raw)
        ratios = report.ratios(rows, self.systems, self.args.ranks)
        best = report.best_ratios(rows, self.systems, self.args.ranks)
        result = dict(meta=meta, validation=self.validation, rows=rows, ratios=ratios, best=best,
                      systems=[{k: v for k, v in s.items() if not k.startswith("gmx")} for s in self.systems])
        (out / "results.json").write_text(json.dumps(result, indent=1, default=float))
        text = report.markdown(result)
        (out / "results.md").write_text(text)
        return text, report.plots(rows, self.systems, self.args.ranks, out)

    def finish(self):
        """The final report, printed with the files written."""
        self.bar.close()
        md_text, plots = self.write(partial=False)
        print(md_text)
        print(f"[bench peers] wrote {self.out / 'results.json'}, {self.out / 'results.md'}, " + ", ".join(plots))
        print(f"[bench peers] load at end: {self.meta['uptime_end']}")
