"""One simulation (``smpirun`` of the driver on P simulated ranks), the progress line of a sweep, and the
comparison of a run's forces and energy with the one-rank reference."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from .build import ROOT, simgrid_tool, simgrid_version
from .study import MODES, PLATFORMS, SMPI_CONFIG, System

# ---------------------------------------------------------------------------- one run


def hostfile(platform: str, directory: Path) -> Path:
    n = PLATFORMS[platform][1]
    path = directory / f"hosts_{platform}.txt"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"node-{i}\n" for i in range(n)))
    return path


# The communication-only series: computation runs (results are real) but takes no simulated
# time, so the simulated time of a call is its communication alone (and the waits it causes):
# what the communication model predicts, free of this shared machine's timing noise.
COMM_ONLY = ("smpi/simulate-computation", "no")


def smpirun_command(exe: Path, P: int, platform: str, args: list[str], work: Path,
                    comm_only: bool = False, extra_cfg=()) -> list[str]:
    xml = ROOT / PLATFORMS[platform][0]
    if P > PLATFORMS[platform][1]:
        raise ValueError(f"{platform} has {PLATFORMS[platform][1]} hosts, fewer than {P} ranks")
    cfg = [f"--cfg={k}:{v}" for k, v, _ in SMPI_CONFIG]
    if comm_only:
        cfg.append(f"--cfg={COMM_ONLY[0]}:{COMM_ONLY[1]}")
    cfg += [f"--cfg={k}:{v}" for k, v in extra_cfg]  # a study's own settings (benchmarks/overlap_scale.py)
    return [simgrid_tool("smpirun"), "-np", str(P), "-platform", str(xml), "-hostfile", str(hostfile(platform, work)),
            *cfg, "--log=root.thres:warning", str(exe), *args]


def driver_args(system: System, params: dict, modes=MODES, warmup=1, steps=2, json_path=None,
                dump=None, ghosts="auto", balance="off", compute_speedup=1.0,
                progress_call_seconds=0.0, overlap_poll=None, one_solver=False) -> list[str]:
    a = ["--system", system.kind, "--cells", str(system.cells), "--mesh", str(params["mesh"]),
         "--alpha", repr(params["alpha"]), "--cutoff", repr(params["cutoff"]), "--order", str(params["order"]),
         "--diff", params["differentiation"], "--modes", ",".join(modes), "--warmup", str(warmup),
         "--steps", str(steps)]
    if system.vacuum:
        a += ["--vacuum", repr(system.vacuum)]
    if ghosts != "auto":
        a += ["--ghosts", ghosts]
    if balance != "off":
        a += ["--balance", balance]
    if compute_speedup != 1.0:
        a += ["--compute-speedup", repr(float(compute_speedup))]
    if progress_call_seconds:
        a += ["--progress-call-seconds", repr(float(progress_call_seconds))]
    if overlap_poll:
        a += ["--overlap-poll", f"{int(overlap_poll[0])},{float(overlap_poll[1])!r}"]
    if one_solver:
        a += ["--one-solver"]
    if json_path:
        a += ["--json", str(json_path)]
    if dump:
        a += ["--dump", str(dump)]
    return a


def run_simulation(exe: Path, P: int, platform: str, system: System, params: dict, out: Path, *,
                   modes=MODES, warmup=1, steps=2, dump=None, timeout=None, comm_only=False,
                   extra_cfg=(), compute_costs: Path | None = None, ghosts="auto", balance="off",
                   compute_speedup=1.0, progress_call_seconds=0.0, overlap_poll=None, one_solver=False) -> dict:
    """One smpirun of the driver (every mode), under /usr/bin/time -v; the driver's
    JSON plus the simulation's own wall time, peak memory and SimGrid's timing line.
    With ``compute_costs`` (a file of :mod:`pmewald.bench.scale.compute_costs`) the computation is
    modelled: SimGrid does not time it, the driver charges units x seconds per unit (divided by
    ``compute_speedup``: ranks that compute that many times faster). ``ghosts`` and ``balance``:
    the solver's ghost_exchange and balance. ``progress_call_seconds``: each MPI_Test,
    MPI_Testsome and MPI_Testall costs that much, once per call (the driver's
    --progress-call-seconds; pair it with smpi/test at ~0 in ``extra_cfg``). ``overlap_poll``:
    (rows, seconds), the overlap's progress-call interval (None: the solver's default).
    ``one_solver``: one solver for every fixed-mode variant, switched between them (the driver's
    --one-solver: its plans built once)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    args = driver_args(system, params, modes, warmup, steps, out.with_suffix(".driver.json"), dump, ghosts, balance,
                       compute_speedup, progress_call_seconds, overlap_poll, one_solver)
    if compute_costs is not None:
        args += ["--compute-costs", str(compute_costs)]
        extra_cfg = [COMM_ONLY, *extra_cfg]
    cmd = smpirun_command(exe, P, platform, args, out.parent, comm_only, extra_cfg)
    timed = (["/usr/bin/time", "-v"] if Path("/usr/bin/time").exists() else []) + cmd
    t0 = time.time()
    proc = subprocess.run(timed, capture_output=True, text=True, timeout=timeout)
    wall = time.time() - t0
    if proc.returncode != 0 or not out.with_suffix(".driver.json").exists():
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise RuntimeError(f"simulation failed ({' '.join(cmd)}):\n{tail}")
    res = json.loads(out.with_suffix(".driver.json").read_text())
    err = proc.stderr
    mem = re.search(r"Maximum resident set size \(kbytes\): (\d+)", err)
    cpu = [re.search(rf"{k} time \(seconds\): ([\d.]+)", err) for k in ("User", "System")]
    took = re.search(r"simulation took ([\d.]+) seconds", proc.stdout + err)
    app = re.search(r"([\d.]+) seconds were actual computation", proc.stdout + err)
    res["simulation"] = {
        "platform": platform, "command": " ".join(cmd), "wall_s": wall, "comm_only": comm_only,
        "simgrid": simgrid_version(),
        "modelled_compute": str(compute_costs) if compute_costs is not None else None,
        "load_average": os.getloadavg(),
        "max_rss_kb": int(mem.group(1)) if mem else None,
        "cpu_s": sum(float(c.group(1)) for c in cpu) if all(cpu) else None,
        "simgrid_s": float(took.group(1)) if took else None,
        "application_s": float(app.group(1)) if app else None,
    }
    res["system_name"] = system.name
    out.write_text(json.dumps(res, indent=1))
    return res


# ---------------------------------------------------------------------------- progress


class Progress:
    """A one-line progress bar on stderr: done/total, elapsed, the current item."""

    def __init__(self, total: int):
        self.total, self.done, self.t0 = total, 0, time.time()

    def show(self, what: str):
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        el = time.time() - self.t0
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                         f"{el / 60:5.1f} min  {what[:60]:<60}")
        sys.stderr.flush()

    def step(self, what: str):
        self.done += 1
        self.show(what)

    def close(self):
        sys.stderr.write("\n")


# ---------------------------------------------------------------------------- correctness


def read_forces(path: Path):
    """A driver dump: (ids, forces n x 3), sorted by id."""
    import numpy as np
    raw = Path(path).read_bytes()
    n = int(np.frombuffer(raw[:8], dtype=np.int64)[0])
    rec = np.frombuffer(raw[8:], dtype=[("id", "<i8"), ("f", "<f8", 3)])
    if len(rec) != n:
        raise ValueError(f"{path}: {len(rec)} records, header says {n}")
    return rec["id"], rec["f"]


def force_error(ref: Path, other: Path) -> float:
    """max over atoms |F - F_ref| / RMS |F_ref| (same atoms, by id)."""
    import numpy as np
    ia, fa = read_forces(ref)
    ib, fb = read_forces(other)
    if not np.array_equal(ia, ib):
        raise ValueError(f"{other} does not hold the atoms of {ref}")
    rms = float(np.sqrt((fa ** 2).sum(axis=1).mean()))
    return float(np.abs(fb - fa).max() / rms)


def energy_error(ref_run: dict, run: dict) -> float:
    """|E - E_ref| relative to the sum of the terms' magnitudes."""
    scale = sum(abs(v) for v in ref_run["terms"].values()) or 1.0
    return abs(run["energy"] - ref_run["energy"]) / scale


def run_of(res: dict, mode: str) -> dict:
    """The run of one communication mode without overlap in a simulation's result (which may hold
    several variants of a mode, in any order, or, from before variants, one run per mode)."""
    return next(r for r in res["runs"] if r["mode"] == mode and r.get("variant", mode) == mode)
