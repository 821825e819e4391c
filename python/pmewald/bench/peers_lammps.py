"""LAMMPS's side of ``python -m pmewald.bench peers`` (:mod:`pmewald.bench.peers`): the data
file (``atom_style full``, units real), the input script (``pair_style coul/long``,
``kspace_style pppm``, ``timer full``), one run of ``lmp`` (under ``mpirun -n P`` for P > 1)
and the parsing of its log and force dump.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np

K_REAL = 332.06371           # LAMMPS's qqr2e for units real (kcal/mol A e^-2)


def write_lammps_data(s, kind, path):
    """atom_style full, units real; water molecules get two O-H bonds (bond_style zero) so
    that LAMMPS's default special_bonds 0 0 0 excludes O-H and H-H pairs."""
    L = np.diag(s.box)
    assert np.allclose(s.box, np.diag(L)), "orthorhombic boxes only"
    pos = np.mod(s.positions, L)
    pos[pos >= L] = 0.0
    n = len(s.charges)
    water = kind == "water"
    if water:
        types = np.where(np.arange(n) % 3 == 0, 1, 2)
        mol = np.arange(n) // 3 + 1
        masses = {1: 15.9994, 2: 1.008}
    else:
        types = np.where(s.charges > 0, 1, 2)
        mol = np.arange(n) + 1
        masses = {1: 22.98977, 2: 35.453}
    with open(path, "w") as f:
        f.write(f"pmewald bench {kind}\n\n{n} atoms\n2 atom types\n")
        if water:
            f.write(f"{2 * (n // 3)} bonds\n1 bond types\n")
        f.write(f"\n0 {float(L[0])!r} xlo xhi\n0 {float(L[1])!r} ylo yhi\n0 {float(L[2])!r} zlo zhi\n\nMasses\n\n")
        for t, m in masses.items():
            f.write(f"{t} {m}\n")
        f.write("\nAtoms # full\n\n")
        qs, ps = s.charges.tolist(), pos.tolist()
        lines = [f"{i + 1} {mol[i]} {types[i]} {qs[i]!r} {ps[i][0]!r} {ps[i][1]!r} {ps[i][2]!r}\n"
                 for i in range(n)]
        f.writelines(lines)
        if water:
            f.write("\nBonds\n\n")
            o = np.arange(0, n, 3)
            k = 1
            for a in o:
                f.write(f"{k} 1 {a + 1} {a + 2}\n{k + 1} 1 {a + 1} {a + 3}\n")
                k += 2


def _lammps_input(data, cutoff, acc, diff, steps, dump, water, rerun=None):
    lines = ["units real", "atom_style full", "boundary p p p"]
    if water:
        lines.append("bond_style zero")
    lines += [f"read_data {data}"]
    if water:
        lines.append("bond_coeff *")
    lines += [f"pair_style coul/long {cutoff}", "pair_coeff * *", f"kspace_style pppm {acc}",
              f"kspace_modify diff {diff}", "neighbor 2.0 bin", "timer full", "thermo_style one"]
    if dump:
        lines += [f"dump d all custom 1 {dump} id fx fy fz", "dump_modify d sort id format float %.17g",
                  "run 0", "undump d"]
    # MD-loop mode (pmewald.bench.peers_md): the frames of a dump, each read_dump + run 0.
    lines += [f"rerun {rerun} first 1 dump x y z box no" if rerun else f"run {steps}"]
    return "\n".join(lines) + "\n"


_FLOAT = r"([-+0-9.eE]+)"


def parse_lammps_log(text, steps):
    out = {}
    for key, pat in [("G", r"G vector \(1/distance\)\s*=\s*" + _FLOAT),
                     ("order", r"stencil order\s*=\s*(\d+)"),
                     ("est_abs", r"estimated absolute RMS force accuracy\s*=\s*" + _FLOAT),
                     ("est_rel", r"estimated relative force accuracy\s*=\s*" + _FLOAT)]:
        m = re.findall(pat, text)
        if m:
            out[key] = float(m[-1])
    g = re.findall(r"grid\s*=\s*(\d+)\s+(\d+)\s+(\d+)", text)
    if g:
        out["mesh"] = [int(v) for v in g[-1]]
    mem = re.findall(r"Per MPI rank memory allocation \(min/avg/max\) = .*\|\s*" + _FLOAT + r"\s*Mbytes", text)
    if mem:
        out["mem_mb"] = float(mem[-1])
    # Last timing breakdown = the timed run.
    block = text.rsplit("MPI task timing breakdown:", 1)[-1]
    for sec in ("Pair", "Kspace", "Neigh", "Comm", "Bond"):
        m = re.search(rf"^{sec}\s*\|\s*{_FLOAT}\s*\|\s*{_FLOAT}\s*\|", block, re.M)
        if m:
            out[sec.lower() + "_s"] = float(m.group(2)) / steps
    m = re.findall(r"Loop time of " + _FLOAT, text)
    if m:
        out["loop_s"] = float(m[-1]) / steps
    return out


def read_lammps_dump(path, n):
    f = np.loadtxt(path, skiprows=9)
    order = np.argsort(f[:, 0])
    f = f[order]
    assert len(f) == n
    return f[:, 1:4]


def run_lammps(job, ranks, workdir, steps, want_forces, env):
    """job: dict(data, kind, cutoff, acc, diff, n, and for the MD-loop mode rerun = a dump of
    ``steps + 1`` frames, frame 0 the data file's). Returns parsed dict (+ forces in k=1 units);
    with ``rerun``, ``total_s`` is Pair + Kspace + Neigh + Comm per frame (a list build per frame)."""
    tag = f"{Path(job['data']).stem}_{job['diff']}_{job['acc']:g}_{ranks}"
    inp = workdir / f"in.{tag}"
    dump = workdir / f"forces.{tag}.dump" if want_forces else None
    inp.write_text(_lammps_input(job["data"], job["cutoff"], job["acc"], job["diff"], steps, dump,
                                 job["kind"] == "water", job.get("rerun")))
    log = workdir / f"log.{tag}"
    cmd = ["lmp", "-in", str(inp), "-log", str(log), "-screen", "none"]
    if ranks > 1:
        cmd = ["mpirun", "-n", str(ranks)] + cmd
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"LAMMPS failed ({' '.join(cmd)}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}\n"
                           f"{log.read_text()[-2000:] if log.exists() else ''}")
    r = parse_lammps_log(log.read_text(), steps)
    r["total_s"] = r.get("pair_s", 0.0) + r.get("kspace_s", 0.0)
    if job.get("rerun"):
        r["total_s"] += r.get("neigh_s", 0.0) + r.get("comm_s", 0.0)
    if want_forces:
        r["forces"] = read_lammps_dump(dump, job["n"]) / K_REAL
        dump.unlink()
    return r
