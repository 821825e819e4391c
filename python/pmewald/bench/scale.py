"""``python -m pmewald.bench scale``: pmewald on 16-1,024 simulated MPI ranks (SimGrid SMPI).

The C++ driver ``scale/driver`` (built here with ``smpicxx`` into ``build-smpi/``) runs the
real solver on P simulated ranks of a platform file (``scale/platforms/``): a non-blocking
fat tree and a Cray-EX-like dragonfly, 25 GB/s and ~2 us per endpoint. Computation is
executed and timed (thread CPU time, one second here = one simulated second), communication
is simulated by SimGrid's flow model; every time is ``MPI_Wtime``. For each system, platform
and rank count one simulation runs every communication mode; the results (JSON), tables,
plots and the communication model's validation and predictions go into ``docs/scaling.md``
and ``docs/scaling/``. See docs/scaling.md for what is simulated and how.

Runs are cached: a result file that exists is reused (``--force`` reruns), so an interrupted
sweep resumes where it stopped; ``--report`` only rebuilds the docs from the results.
One simulation runs at a time.

Longer than 600 lines because it is one pipeline whose stages share the run records: building
the driver, the sweep's systems and platforms, running and caching simulations, parsing their
results, and writing the tables, plots and model validation into the docs; the communication
model itself is separate (:mod:`pmewald.comm_model`). The natural split, when it grows, is
running (build, simulate, cache) apart from reporting (tables, plots, docs).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PLATFORMS = {
    # name: (platform file, hosts in it)
    "fat_tree": ("scale/platforms/fat_tree_1024.xml", 1024),
    "dragonfly": ("scale/platforms/dragonfly_2048.xml", 2048),
}
MODES = ("pt2pt", "nonblocking", "collective")

# SMPI settings of every simulation, with the reason for each (docs/scaling.md repeats them).
SMPI_CONFIG = [
    ("smpi/host-speed", "1Gf",
     "the platforms' host speed: one second of this machine's CPU time is one simulated second"),
    ("smpi/send-is-detached-thresh", "0",
     "sends complete at delivery: SimGrid 3.32 keeps eager (detached) sends in one global list "
     "whose every removal scans it, which made 64 ranks take 3x and 128 ranks 20x longer"),
    ("smpi/coll-selector", "mpich",
     "MPICH's choice of collective algorithms (recursive doubling, Bruck, ring by size), as Cray "
     "MPICH makes on Slingshot machines; SMPI's default ones post O(P) messages per rank"),
    ("smpi/bw-factor", "0:1", "the platform's bandwidths are end-to-end values (no SMPI correction)"),
    ("smpi/lat-factor", "0:1", "the platform's latencies are end-to-end values (no SMPI correction)"),
    ("smpi/wtime", "0", "MPI_Wtime injects no simulated time (the solver's timers call it often)"),
    ("smpi/display-timing", "yes", "SimGrid reports its own wall time and the application's"),
]

# ---------------------------------------------------------------------------- systems


@dataclass(frozen=True)
class System:
    """One test system of the driver (scale/driver/systems.hpp) and its parameters."""
    name: str
    kind: str           # rocksalt | water
    cells: int          # unit cells (rock salt) or lattice sites (water) per axis
    vacuum: float = 0.0

    @property
    def atoms(self) -> int:
        kept = max(1, round(self.cells * (1.0 - self.vacuum)))
        return (8 if self.kind == "rocksalt" else 3) * self.cells * self.cells * kept

    @property
    def box(self) -> float:
        return self.cells * (5.64 if self.kind == "rocksalt" else (1.0 / 0.0334) ** (1.0 / 3.0))


def water(atoms_wanted: int, name: str | None = None) -> System:
    cells = max(2, round((atoms_wanted / 3.0) ** (1.0 / 3.0)))
    s = System(name or "", "water", cells)
    return System(name or f"water{s.atoms}", "water", cells)


# ~100k and ~1M atoms (32^3 and 70^3 molecules); the weak series at 1,024 ranks is the 1M system.
STRONG = [System("water98k", "water", 32), System("water1.03M", "water", 70)]
WEAK_ATOMS_PER_RANK = 1000


# Correctness at scale: a rock-salt crystal whose upper half is vacuum (ranks without atoms),
# 8,192 ions in a 90 A box, on a 32^3 mesh: one FFT pencil per rank at 1,024 ranks, bricks 2
# points thick along z there (halo partners beyond the neighbours), fixed parameters. Cheap to
# compute, so the simulation's cost is its MPI calls. 16 cells, not 8: with 8 (45 A) the 9 A
# cutoff spans 3-4 domains per axis at 1,024 ranks, every rank exchanges ghost atoms with
# hundreds of partners, and SimGrid's flow solver (lmm, ~45% of the simulation's time) grows
# ~6x per doubling of P: 256 ranks took 56 s of CPU per mode with 8 cells, 22 s with 16.
CORRECTNESS = System("rocksalt16-vacuum", "rocksalt", 16, vacuum=0.5)
CORRECTNESS_PARAMS = {"mesh": 32, "alpha": 0.35, "order": 4, "differentiation": "ad", "cutoff": 9.0}


def weak_system(P: int) -> System:
    return water(WEAK_ATOMS_PER_RANK * P)


# Parameters: pmewald's own choice (pmewald.PME, relative tolerance TOLERANCE, cutoff CUTOFF)
# on a sample of the same material, its mesh spacing carried to the large box.
CUTOFF = 9.0
TOLERANCE = 1e-4


def choose_parameters(kind: str, box: float, cache: dict) -> dict:
    key = f"{kind}/{CUTOFF}/{TOLERANCE}"
    if key not in cache:
        import pmewald
        from pmewald import systems
        if kind == "water":
            sample = systems.water_box(target_atoms=6000, seed=1)
        else:
            sample = systems.displace(systems.rock_salt((8, 8, 8)), 0.1, seed=1)
        pme = pmewald.PME(sample.box, cutoff=CUTOFF, tolerance=TOLERANCE)
        pme.compute(sample.positions, sample.charges, ids=sample.ids,
                    exclusions=sample.exclusions if len(sample.exclusions) else None)
        p = pme.parameters
        spacing = float(max(sample.box[d, d] / p["mesh"][d] for d in range(3)))
        cache[key] = dict(alpha=float(p["alpha"]), order=int(p["order"]), differentiation=p["differentiation"],
                          spacing=spacing, sample_atoms=int(sample.n_atoms))
    from pmewald import _core
    c = cache[key]
    K = int(_core.tuning.fft_friendly(math.ceil(box / c["spacing"])))
    return dict(mesh=K, alpha=c["alpha"], order=c["order"], differentiation=c["differentiation"], cutoff=CUTOFF)


# ---------------------------------------------------------------------------- build


def _tree_hash(paths) -> str:
    h = hashlib.sha1()
    for base in paths:
        p = ROOT / base
        files = sorted(p.rglob("*")) if p.is_dir() else [p]
        for f in files:
            if f.is_file() and "__pycache__" not in f.parts:
                h.update(str(f.relative_to(ROOT)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()


def build_driver(build_dir: Path | None = None, quiet: bool = True) -> Path:
    """Configures and builds scale/driver with smpicxx (CMake option PMEWALD_SMPI) into
    build-smpi/, once per change of the sources; returns the driver's path."""
    if shutil.which("smpicxx") is None:
        raise RuntimeError("smpicxx not found: install SimGrid (Debian: libsimgrid-dev; "
                           "bash scripts/dev.sh setup installs it)")
    return build_scale_driver(Path(build_dir or ROOT / "build-smpi"), ".pmewald-smpi-build",
                              ["-DPMEWALD_SMPI=ON", "-DCMAKE_CXX_COMPILER=smpicxx", "-DCMAKE_C_COMPILER=smpicc"],
                              quiet)


def build_scale_driver(build_dir: Path, stamp_name: str, defines: list[str], quiet: bool = True) -> Path:
    """Configures (with ``defines``) and builds the pmewald_scale target into ``build_dir``,
    once per change of the sources (a hash in ``build_dir/stamp_name``); returns its path."""
    exe = build_dir / "scale" / "pmewald_scale"
    stamp = build_dir / stamp_name
    want = _tree_hash(["CMakeLists.txt", "cmake", "cpp", "scale/driver"])
    if exe.exists() and stamp.exists() and stamp.read_text() == want:
        return exe
    build_dir.mkdir(parents=True, exist_ok=True)
    out = None if not quiet else subprocess.DEVNULL
    subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DPMEWALD_PYTHON=OFF",
                    "-DCMAKE_BUILD_TYPE=Release", *defines], check=True, stdout=out)
    jobs = str(max(1, min(2, os.cpu_count() or 1)))
    subprocess.run(["nice", "cmake", "--build", str(build_dir), "--target", "pmewald_scale", "-j", jobs],
                   check=True, stdout=out)
    stamp.write_text(want)
    return exe


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
    return ["smpirun", "-np", str(P), "-platform", str(xml), "-hostfile", str(hostfile(platform, work)),
            *cfg, "--log=root.thres:warning", str(exe), *args]


def driver_args(system: System, params: dict, modes=MODES, warmup=1, steps=2, json_path=None,
                dump=None) -> list[str]:
    a = ["--system", system.kind, "--cells", str(system.cells), "--mesh", str(params["mesh"]),
         "--alpha", repr(params["alpha"]), "--cutoff", repr(params["cutoff"]), "--order", str(params["order"]),
         "--diff", params["differentiation"], "--modes", ",".join(modes), "--warmup", str(warmup),
         "--steps", str(steps)]
    if system.vacuum:
        a += ["--vacuum", repr(system.vacuum)]
    if json_path:
        a += ["--json", str(json_path)]
    if dump:
        a += ["--dump", str(dump)]
    return a


def run_simulation(exe: Path, P: int, platform: str, system: System, params: dict, out: Path, *,
                   modes=MODES, warmup=1, steps=2, dump=None, timeout=None, comm_only=False,
                   extra_cfg=(), compute_costs: Path | None = None) -> dict:
    """One smpirun of the driver (every mode), under /usr/bin/time -v; the driver's
    JSON plus the simulation's own wall time, peak memory and SimGrid's timing line.
    With ``compute_costs`` (a file of :mod:`pmewald.bench.compute_costs`) the computation is
    modelled: SimGrid does not time it, the driver charges units x seconds per unit."""
    out.parent.mkdir(parents=True, exist_ok=True)
    args = driver_args(system, params, modes, warmup, steps, out.with_suffix(".driver.json"), dump)
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
    took = re.search(r"The simulation took ([\d.]+) seconds", proc.stdout + err)
    app = re.search(r"([\d.]+) seconds were actual computation", proc.stdout + err)
    res["simulation"] = {
        "platform": platform, "command": " ".join(cmd), "wall_s": wall, "comm_only": comm_only,
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


# ---------------------------------------------------------------------------- sweep


@dataclass
class Plan:
    runs: list = field(default_factory=list)  # (kind, system, platform, P)


def sweep_plan(ranks, platforms, strong=True, weak=True, systems=None, correctness=True) -> Plan:
    plan = Plan()
    if correctness:
        for P in ranks:
            plan.runs.append(("correctness", CORRECTNESS, "fat_tree", P))
    if strong:
        for s in (systems or STRONG):
            for pf in platforms:
                for P in ranks:
                    plan.runs.append(("strong", s, pf, P))
    if weak:
        for P in ranks:
            plan.runs.append(("weak", weak_system(P), "fat_tree", P))
    # Equal runs (the weak 1M point is the strong 1M run) are simulated once.
    seen, unique = set(), []
    for r in plan.runs:
        key = (r[1].kind, r[1].cells, r[1].vacuum, r[2], r[3])
        if key not in seen:
            seen.add(key)
            unique.append(r)
    plan.runs = unique
    return plan


def _tag(system: System) -> str:
    return f"{system.kind}{system.cells}" + (f"v{system.vacuum:g}" if system.vacuum else "")


def result_path(results: Path, system: System, platform: str, P: int) -> Path:
    return results / f"{_tag(system)}_{platform}_P{P}.json"


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


# ---------------------------------------------------------------------------- model


def allreduces_per_step(results: list) -> float:
    """The solver's MPI_Allreduce calls per compute call, as the driver counted them."""
    for res in results:
        for run in res["runs"]:
            c = run["mpi"]["calls"].get("Allreduce")
            if c:
                return float(c["mean"])
    return 0.0


_CENSUS_CACHE: dict = {}


def cached_census(P, mesh, order, differentiation, box, cutoff, atoms):
    """comm_model.census, computed once per argument set (the report asks for each several times)."""
    from .. import comm_model
    mesh = (mesh,) * 3 if isinstance(mesh, int) else tuple(mesh)
    key = (P, mesh, order, differentiation, float(box), float(cutoff), int(atoms))
    if key not in _CENSUS_CACHE:
        _CENSUS_CACHE[key] = comm_model.census(P, mesh, order, differentiation, [box] * 3, cutoff, atoms)
    return _CENSUS_CACHE[key]


def census_of(res: dict):
    p = res["parameters"]
    return cached_census(res["ranks"], p["mesh"], p["order"], p["differentiation"], res["system"]["box"],
                         p["cutoff"], res["system"]["atoms"])


def calibration(res: dict, mode: str) -> dict:
    """Computation of one simulated run, split by how it scales (comm_model.step_time):
    remap packing, halo packing, ghost-atom handling, the real space (per pair row: owned
    and ghost atoms), and the rest (per owned atom)."""
    from .. import comm_model
    run = next(r for r in res["runs"] if r["mode"] == mode)
    ph = {k: v["max"] for k, v in run["phases"].items()}
    total = run["compute_s"]["max"]
    remap = ph.get("fft_pack_unpack", 0.0)
    halo = max(0.0, ph.get("ghost", 0.0) - ph.get("ghost_comm_wait", 0.0))
    ghosts = ph.get("ghost_atoms", 0.0)
    pairs = min(ph.get("real_space", 0.0), max(0.0, total - remap - halo - ghosts))
    rest = max(0.0, total - remap - halo - ghosts - pairs)
    return {"ranks": res["ranks"], "atoms": res["system"]["atoms"],
            "compute": {"atoms": rest, "pairs": pairs, "ghost_atoms": ghosts, "remap": remap, "halo": halo},
            "work": comm_model.work(census_of(res))}


def model_row(res: dict, calib_res: dict, mode: str, allreduces: float) -> dict:
    from .. import comm_model
    net = comm_model.NETWORKS[res["simulation"]["platform"]]
    m = comm_model.step_time(census_of(res), net, mode, calibration(calib_res, mode), allreduces)
    run = next(r for r in res["runs"] if r["mode"] == mode)
    return {"ranks": res["ranks"], "mode": mode, "simulated": run["step_s"], "model": m["total"],
            "model_comm": m["comm"], "simulated_mpi": run["mpi"]["seconds"]["max"],
            "ratio": m["total"] / run["step_s"]}


def validation_rows(results: dict, allreduces: float) -> list:
    """Model communication time against the communication-only simulations, per rank count and mode."""
    from .. import comm_model
    rows = []
    for (kind, s, pf, P), res in sorted(results.items(), key=lambda kv: kv[0][3]):
        if not res.get("simulation", {}).get("comm_only"):
            continue
        cen = census_of(res)
        for m in MODES:
            run = _run(res, m)
            t = comm_model.comm_time(cen, comm_model.NETWORKS[pf], m, allreduces)["total"]
            rows.append({"ranks": P, "mode": m, "platform": pf, "simulated": run["step_s"], "model": t,
                         "ratio": t / run["step_s"] if run["step_s"] > 0 else float("nan")})
    return rows


def predictions(system: System, params: dict, platform: str, ranks, calib_res: dict, allreduces: float) -> list:
    """Messages, bytes and modelled time per compute call at rank counts beyond the simulations."""
    from .. import comm_model
    import numpy as np
    net = comm_model.NETWORKS[platform]
    rows = []
    # Rows are kept in PREDICTION_CACHE (a JSON file in the results folder) under everything
    # they depend on: at 65,536 ranks one row takes minutes.
    cache = json.loads(PREDICTION_CACHE.read_text()) if PREDICTION_CACHE and PREDICTION_CACHE.exists() else {}
    for P in ranks:
        key = json.dumps([system.name, system.cells, params, platform, P, calib_res["ranks"],
                          [_run(calib_res, m)["phases"].get("real_space") for m in MODES], allreduces,
                          comm_model.MODEL_VERSION])
        if key in cache:
            rows.append(cache[key])
            continue
        cen = cached_census(P, params["mesh"], params["order"], params["differentiation"], system.box,
                            params["cutoff"], system.atoms)
        tr = comm_model.traffic(cen)
        msgs = sum(v["messages"] for v in tr.values())
        byts = sum(v["bytes"] for v in tr.values())
        row = {"ranks": P, "messages_max": float(msgs.max()), "messages_mean": float(msgs.mean()),
               "bytes_max": float(byts.max()), "bytes_mean": float(byts.mean())}
        for mode in MODES:
            st = comm_model.step_time(cen, net, mode, calibration(calib_res, mode), allreduces)
            row[mode] = st["total"]
            row[mode + "_comm"] = st["comm"]
        rows.append(row)
        if PREDICTION_CACHE:
            cache[key] = row
            PREDICTION_CACHE.write_text(json.dumps(cache))
    return rows


PREDICTION_CACHE: Path | None = None  # set by main()


# ---------------------------------------------------------------------------- report

BEGIN = "<!-- generated by `python -m pmewald.bench scale`: begin -->"
END = "<!-- generated by `python -m pmewald.bench scale`: end -->"


def _fmt_ms(s):
    return f"{1e3 * s:.2f}" if s is not None else "-"


def _run(res, mode):
    return next(r for r in res["runs"] if r["mode"] == mode)


def strong_table(series: list) -> str:
    """series: results of one system on one platform, by rank count."""
    lines = ["| ranks | atoms/rank | " + " | ".join(f"{m} ms (comm %)" for m in MODES) +
             " | fastest | msgs/rank | KB/rank | sim. wall |",
             "|---:|---:|" + "---:|" * len(MODES) + "---|---:|---:|---:|"]
    for res in series:
        cells = []
        best = min(MODES, key=lambda m: _run(res, m)["step_s"])
        for m in MODES:
            r = _run(res, m)
            cells.append(f"{_fmt_ms(r['step_s'])} ({100 * r['mpi']['share']['max']:.0f})")
        r = _run(res, "nonblocking")
        lines.append(f"| {res['ranks']} | {res['atoms_per_rank']['mean']:.0f} | " + " | ".join(cells) +
                     f" | {best} | {r['mpi']['messages']['max']:.0f} | {r['mpi']['bytes']['max'] / 1e3:.0f} | "
                     f"{res['simulation']['wall_s'] / 60:.1f} min |")
    return "\n".join(lines)


def plot_series(series_by_platform: dict, title: str, path: Path, model_rows: dict | None = None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    styles = {"fat_tree": "-", "dragonfly": "--"}
    colours = {"pt2pt": "tab:blue", "nonblocking": "tab:orange", "collective": "tab:green"}
    for pf, series in series_by_platform.items():
        P = [r["ranks"] for r in series]
        for m in MODES:
            t = [1e3 * _run(r, m)["step_s"] for r in series]
            share = [100 * _run(r, m)["mpi"]["share"]["max"] for r in series]
            axes[0].plot(P, t, styles[pf], marker="o", color=colours[m], label=f"{m}, {pf}")
            axes[1].plot(P, share, styles[pf], marker="o", color=colours[m], label=f"{m}, {pf}")
            if model_rows and pf in model_rows:
                rows = [x for x in model_rows[pf] if x["mode"] == m]
                axes[0].plot([x["ranks"] for x in rows], [1e3 * x["model"] for x in rows], ":", color=colours[m],
                             alpha=0.6)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("simulated MPI ranks")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("time per compute call (ms)")
    axes[1].set_ylabel("communication share (% of the call in MPI)")
    axes[0].set_title(title, fontsize=9)
    axes[1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(doc: Path, generated: str):
    """Replaces the generated part of docs/scaling.md (between BEGIN and END)."""
    text = doc.read_text() if doc.exists() else f"# Scaling\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        text = text.rstrip() + f"\n\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(head + BEGIN + "\n" + generated.strip() + "\n" + END + tail)


# ---------------------------------------------------------------------------- command line


def add_parser(sub):
    p = sub.add_parser("scale", help="the solver on 16-1,024 simulated ranks (SimGrid SMPI) and the "
                                     "communication model to 65,536 (docs/scaling.md)",
                       description=__doc__)
    p.add_argument("--ranks", default="16,64,256,1024", help="simulated rank counts (default %(default)s)")
    p.add_argument("--platforms", default="fat_tree,dragonfly", help="of: " + ", ".join(PLATFORMS))
    p.add_argument("--systems", default=",".join(s.name for s in STRONG),
                   help="strong-scaling systems (default %(default)s)")
    p.add_argument("--no-strong", action="store_true", help="skip the strong-scaling series")
    p.add_argument("--no-weak", action="store_true", help="skip the weak-scaling series (1,000 atoms per rank)")
    p.add_argument("--no-correctness", action="store_true",
                   help="skip the correctness series (rock salt with vacuum, empty ranks, fat tree)")
    p.add_argument("--steps", type=int, default=2, help="timed compute calls per mode (after one warm-up)")
    p.add_argument("--predict", default="1024,4096,16384,65536", help="rank counts the model predicts")
    p.add_argument("--work", default=None,
                   help="raw results and force dumps (default build-smpi/scale-results/, "
                        "build-smpi/scale-results-modelled/ with --modelled-compute)")
    p.add_argument("--docs", default=str(ROOT / "docs"), help="where scaling.md and scaling/ go")
    p.add_argument("--force", action="store_true", help="rerun simulations whose results exist")
    p.add_argument("--report", action="store_true", help="only rebuild the report from existing results")
    p.add_argument("--list", action="store_true", help="print the planned simulations and exit")
    p.add_argument("--modelled-compute", action="store_true",
                   help="model the computation's simulated time (units x seconds per unit, calibrated once per "
                        "system by native one-rank runs: pmewald.bench.compute_costs) instead of timing it; "
                        "results go to build-smpi/scale-results-modelled/ unless --work says otherwise")
    p.set_defaults(func=main)
    return p


def _reference(exe, system, params, work, progress):
    """The one-rank run of a system (every mode), whose forces the others are compared with."""
    out = work / f"{_tag(system)}_reference_P1.json"
    dump = work / "dumps" / f"{_tag(system)}_P1"
    if not out.exists() or not Path(str(dump) + ".nonblocking.bin").exists():
        progress.show(f"{system.name}: 1-rank reference")
        (work / "dumps").mkdir(parents=True, exist_ok=True)
        run_simulation(exe, 1, "fat_tree", system, params, out, steps=1, warmup=0, dump=dump)
    return json.loads(out.read_text()), dump


def main(args) -> int:
    ranks = [int(x) for x in args.ranks.split(",") if x]
    platforms = [x for x in args.platforms.split(",") if x]
    by_name = {s.name: s for s in STRONG}
    systems = [by_name[n] for n in args.systems.split(",") if n]
    plan = sweep_plan(ranks, platforms, strong=not args.no_strong, weak=not args.no_weak, systems=systems,
                      correctness=not args.no_correctness)
    modelled = getattr(args, "modelled_compute", False)
    default_work = ROOT / "build-smpi" / ("scale-results-modelled" if modelled else "scale-results")
    work, docs = Path(args.work or default_work), Path(args.docs)
    work.mkdir(parents=True, exist_ok=True)
    global PREDICTION_CACHE
    PREDICTION_CACHE = work / "predictions.json"
    pcache_path = work / "parameters.json"
    pcache = json.loads(pcache_path.read_text()) if pcache_path.exists() else {}
    params = {}
    for _, s, _, _ in plan.runs:
        params[s] = CORRECTNESS_PARAMS if s == CORRECTNESS else choose_parameters(s.kind, s.box, pcache)
    pcache_path.write_text(json.dumps(pcache, indent=1))
    if args.list:
        for kind, s, pf, P in plan.runs:
            print(f"{kind:6s} {s.name:12s} {s.atoms:9d} atoms  mesh {params[s]['mesh']}  {pf:9s} P={P}")
        return 0
    exe = None if args.report else build_driver()
    progress = Progress(len(plan.runs))
    results = {}
    refs = {}
    for kind, s, pf, P in plan.runs:
        path = result_path(work, s, pf, P)
        if not args.report and (args.force or not path.exists()):
            if s not in refs:
                refs[s] = _reference(exe, s, params[s], work, progress)
            progress.show(f"{s.name} {pf} P={P}")
            dump = work / "dumps" / f"{_tag(s)}_{pf}_P{P}"
            # The correctness series (communication only) needs no warm-up: its simulated time
            # has no computation, and its communication is the same on every call.
            check = kind == "correctness"
            costs = None
            if modelled and not check:
                from . import compute_costs
                costs = compute_costs.calibrate(s, params[s])
            res = run_simulation(exe, P, pf, s, params[s], path, steps=1 if check else args.steps,
                                 warmup=0 if check else 1, dump=dump, comm_only=check, compute_costs=costs)
            ref_res, ref_dump = refs[s]
            res["correctness"] = {
                m: {"force": force_error(Path(f"{ref_dump}.{m}.bin"), Path(f"{dump}.{m}.bin")),
                    "energy": energy_error(_run(ref_res, m), _run(res, m))} for m in MODES}
            path.write_text(json.dumps(res, indent=1))
            for m in MODES:  # the dumps are large; their comparison is kept
                Path(f"{dump}.{m}.bin").unlink(missing_ok=True)
        if path.exists():
            results[(kind, s, pf, P)] = json.loads(path.read_text())
        progress.step(f"{s.name} {pf} P={P}")
    progress.close()
    generated = report(results, params, ranks, [int(x) for x in args.predict.split(",") if x], docs)
    write_report(docs / "scaling.md", generated)
    print(f"wrote {docs / 'scaling.md'} and {docs / 'scaling'}/")
    return 0


def report(results: dict, params: dict, ranks, predict, docs: Path) -> str:
    out = []
    all_res = list(results.values())
    if not all_res:
        return "No simulation results yet: run `python -m pmewald.bench scale`."
    allreduces = allreduces_per_step(all_res)
    summary = {"runs": [], "model": [], "predictions": {}}
    out.append("### Commands\n")
    out.append("```bash\nbash scripts/dev.sh setup            # installs libsimgrid-dev among the Debian packages\n"
               ".venv/bin/python -m pmewald.bench scale   # builds build-smpi/, runs every simulation, writes this page\n"
               "```\n")
    out.append("Each simulation is one `smpirun` of the driver running every mode, e.g.\n")
    first = all_res[-1]
    out.append("```\n" + first["simulation"]["command"].replace(str(ROOT) + "/", "") + "\n```\n")
    if any(r["simulation"].get("modelled_compute") for r in all_res):
        out.append("**Modelled computation**: in the runs below with computation, SimGrid did not time the "
                   "computation; each burst cost its work x seconds per unit calibrated by native one-rank runs "
                   "(`--modelled-compute`, `pmewald.bench.compute_costs`), so the step times are deterministic "
                   "and independent of this machine's load.\n")
    # Strong scaling, per system and platform.
    systems = []
    for (kind, s, pf, P) in results:
        if kind == "strong" and s not in systems:
            systems.append(s)
    for s in systems:
        p = params[s]
        out.append(f"### Strong scaling: {s.name} ({s.atoms:,} atoms, box {s.box:.1f} A, mesh {p['mesh']}^3, "
                   f"order {p['order']}, {p['differentiation']}, cutoff {p['cutoff']} A, alpha {p['alpha']})\n")
        series_by_pf, model_by_pf = {}, {}
        for pf in PLATFORMS:
            series = sorted((r for (k, ss, ppf, P), r in results.items() if ss == s and ppf == pf),
                            key=lambda r: r["ranks"])
            if not series:
                continue
            series_by_pf[pf] = series
            out.append(f"**{pf}** (time per compute call in ms, in brackets the share of it the slowest rank "
                       "spends inside MPI; messages and kB sent per rank and call, nonblocking):\n")
            out.append(strong_table(series) + "\n")
            calib = series[0]
            rows = []
            for res in series[1:]:
                for m in MODES:
                    rows.append(model_row(res, calib, m, allreduces))
            model_by_pf[pf] = rows
            for res in series:
                summary["runs"].append(_summary(res))
            summary["model"] += [dict(r, system=s.name, platform=pf) for r in rows]
        png = docs / "scaling" / f"strong_{s.name}.png"
        plot_series(series_by_pf, f"{s.name}: strong scaling (solid fat tree, dashed dragonfly, dotted model)",
                    png, model_by_pf)
        out.append(f"![strong scaling of {s.name}](scaling/{png.name})\n")
        # Model against simulation.
        out.append(f"Model / simulated time per call ({s.name}; the model's computation is scaled from the "
                   f"{series_by_pf[next(iter(series_by_pf))][0]['ranks']}-rank run):\n")
        out.append("| platform | ranks | " + " | ".join(MODES) + " |\n|---|---:|" + "---:|" * len(MODES))
        for pf, rows in model_by_pf.items():
            for P in sorted({r["ranks"] for r in rows}):
                cells = [f"{r['ratio']:.2f}" for m in MODES for r in rows if r["ranks"] == P and r["mode"] == m]
                out.append(f"| {pf} | {P} | " + " | ".join(cells) + " |")
        out.append("")
        # Predictions.
        pf0 = next(iter(series_by_pf))
        pred = predictions(s, p, pf0, predict, series_by_pf[pf0][0], allreduces)
        summary["predictions"][f"{s.name}/{pf0}"] = pred
        out.append(f"Model predictions ({s.name}, {pf0}; per rank and compute call):\n")
        out.append("| ranks | messages (max) | kB (max) | " + " | ".join(f"{m} ms" for m in MODES) +
                   " | comm share (nonblocking) |\n|---:|---:|---:|" + "---:|" * (len(MODES) + 1))
        for row in pred:
            share = row["nonblocking_comm"] / row["nonblocking"] if row["nonblocking"] else 0
            out.append(f"| {row['ranks']} | {row['messages_max']:.0f} | {row['bytes_max'] / 1e3:.0f} | " +
                       " | ".join(_fmt_ms(row[m]) for m in MODES) + f" | {100 * share:.0f}% |")
        out.append("")
    # Weak scaling.
    weak = sorted((r for (k, s, pf, P), r in results.items() if k == "weak"), key=lambda r: r["ranks"])
    weak += [r for (k, s, pf, P), r in results.items()
             if k == "strong" and pf == "fat_tree" and s.cells == weak_system(P).cells and r not in weak]
    weak = sorted(weak, key=lambda r: r["ranks"])
    if weak:
        out.append(f"### Weak scaling: water, {WEAK_ATOMS_PER_RANK:,} atoms per rank, fat tree\n")
        out.append(strong_table(weak) + "\n")
        png = docs / "scaling" / "weak_water.png"
        plot_series({"fat_tree": weak}, "water, 1,000 atoms per rank: weak scaling (fat tree)", png)
        out.append(f"![weak scaling](scaling/{png.name})\n")
        for res in weak:
            if _summary(res) not in summary["runs"]:
                summary["runs"].append(_summary(res))
    # The communication model against communication-only simulations.
    comm_rows = validation_rows(results, allreduces)
    if comm_rows:
        summary["model_comm_only"] = comm_rows
        out.append(f"### Communication model against communication-only simulations ({CORRECTNESS.name})\n")
        out.append("The correctness series runs with computation taking no simulated time "
                   f"(`--cfg={COMM_ONLY[0]}:{COMM_ONLY[1]}`), so its simulated time per call is communication "
                   "alone; `pmewald.comm_model.comm_time` predicts it from the plan geometry. Simulated and "
                   "modelled ms per call, and model / simulated:\n")
        out.append("| ranks | " + " | ".join(f"{m} sim / model (ratio)" for m in MODES) + " |\n|---:|" +
                   "---:|" * len(MODES))
        for P in sorted({r["ranks"] for r in comm_rows}):
            cells = []
            for m in MODES:
                r = next(x for x in comm_rows if x["ranks"] == P and x["mode"] == m)
                cells.append(f"{_fmt_ms(r['simulated'])} / {_fmt_ms(r['model'])} ({r['ratio']:.2f})")
            out.append(f"| {P} | " + " | ".join(cells) + " |")
        out.append("")
    # Correctness.
    out.append("### Correctness: every run against the one-rank result\n")
    out.append("max over atoms |F - F(1 rank)| / RMS |F(1 rank)|, and |E - E(1 rank)| / sum of |terms|, "
               "worst over the modes:\n")
    out.append("| system | platform | ranks | ranks without atoms | without k-space | force | energy |\n"
               "|---|---|---:|---:|---:|---:|---:|")
    worst = 0.0
    for (k, s, pf, P), r in sorted(results.items(), key=lambda kv: (kv[0][1].atoms, kv[0][2], kv[0][3])):
        c = r.get("correctness")
        if not c:
            continue
        fe = max(v["force"] for v in c.values())
        ee = max(v["energy"] for v in c.values())
        worst = max(worst, fe, ee)
        out.append(f"| {s.name} | {pf} | {P} | {r['ranks_without_atoms']:.0f} | "
                   f"{r['runs'][0].get('ranks_without_kspace', 0):.0f} | {fe:.1e} | {ee:.1e} |")
    out.append(f"\nWorst: {worst:.1e}.\n")
    out.append("Wall time, CPU time (user + system) and peak memory of every simulation, largest first "
               "(all three modes in one simulation; this machine: 2 shared cores):\n")
    out.append("| system | platform | ranks | simulated calls per mode | wall | CPU | peak memory |\n"
               "|---|---|---:|---:|---:|---:|---:|")
    for (k, s, pf, P), r in sorted(results.items(), key=lambda kv: (-kv[0][3], -kv[0][1].atoms)):
        sim = r["simulation"]
        cpu = f"{sim['cpu_s'] / 60:.1f} min" if sim.get("cpu_s") is not None else "-"
        out.append(f"| {s.name} | {pf} | {P} | {r['warmup']} + {r['steps']} | {sim['wall_s'] / 60:.1f} min | {cpu} | "
                   f"{(sim['max_rss_kb'] or 0) / 1e6:.2f} GB |")
    out.append("")
    (docs / "scaling").mkdir(parents=True, exist_ok=True)
    (docs / "scaling" / "results.json").write_text(json.dumps(summary, indent=1))
    return "\n".join(out)


def _summary(res: dict) -> dict:
    return {"system": res.get("system_name"), "atoms": res["system"]["atoms"], "ranks": res["ranks"],
            "platform": res["simulation"]["platform"], "mesh": res["parameters"]["mesh"],
            "wall_s": res["simulation"]["wall_s"], "max_rss_kb": res["simulation"]["max_rss_kb"],
            "modes": {r["mode"]: {"step_s": r["step_s"], "mpi_share": r["mpi"]["share"]["max"],
                                  "messages": r["mpi"]["messages"], "bytes": r["mpi"]["bytes"],
                                  "phases": {k: v["max"] for k, v in r["phases"].items()}}
                      for r in res["runs"]},
            "correctness": res.get("correctness")}
