"""LAMMPS's side of ``python -m pmewald.bench peers`` (:mod:`pmewald.bench.peers`): the data
file (``atom_style full``, units real), the input script (``pair_style coul/long``,
``kspace_style pppm``, ``timer full``), one run of ``lmp`` (under ``mpirun -n P`` for P > 1)
and the parsing of its log and force dump.
"""

from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path

import numpy as np

K_REAL = 332.06371           # LAMMPS's qqr2e for units real (kcal/mol A e^-2)
MOLECULAR = ("water", "chains", "peptide")     # systems with bonds (bond_style zero, special_bonds 0 0 0)


def bonds_of(s, max_bond=1.55):
    """The bonds behind ``s.exclusions``: ``s.bonds`` where the system carries them (a LAMMPS
    data file, :func:`pmewald.systems.read_lammps_data`), else the excluded pairs closer than
    ``max_bond`` (bonds are 1.0-1.45 A, 1-3 pairs 1.63 A and more in the water and chain
    builders). Checked either way: the pairs at most three bonds apart must be exactly
    ``s.exclusions``, so LAMMPS's ``special_bonds 0 0 0`` excludes what pmewald does."""
    from ...geometry.cell import minimum_image
    from ...systems.chains import _bond_exclusions
    from ...systems.system import index_pairs

    ex = np.asarray(s.exclusions, dtype=np.int64).reshape(-1, 2)
    if getattr(s, "bonds", None) is not None:
        bonds, ex = index_pairs(s.ids, s.bonds), index_pairs(s.ids, ex)
    else:
        d = minimum_image(s.box, s.positions[ex[:, 0]] - s.positions[ex[:, 1]])
        bonds = ex[np.einsum("ij,ij->i", d, d) < max_bond ** 2]
    again = _bond_exclusions(len(s.charges), bonds.tolist())
    if {tuple(sorted(p)) for p in ex.tolist()} != set(map(tuple, again.tolist())):
        raise ValueError("the exclusions are not the 1-2/1-3/1-4 pairs of a bond graph: LAMMPS cannot express them")
    return bonds


def write_lammps_data(s, kind, path):
    """atom_style full, units real; molecules (water, chains) get their bonds (bond_style zero,
    :func:`bonds_of`) so that LAMMPS's default special_bonds 0 0 0 excludes the same pairs as
    pmewald (water: O-H and H-H)."""
    L = np.diag(s.box)
    assert np.allclose(s.box, np.diag(L)), "orthorhombic boxes only"
    pos = np.mod(s.positions, L)
    pos[pos >= L] = 0.0
    n = len(s.charges)
    water = kind in MOLECULAR
    if water:
        bonds = bonds_of(s)
        types = np.where(s.charges < 0, 1, 2)
        mol = np.arange(n) + 1
        masses = {1: 15.9994, 2: 1.008}
    else:
        types = np.where(s.charges > 0, 1, 2)
        mol = np.arange(n) + 1
        masses = {1: 22.98977, 2: 35.453}
    with open(path, "w") as f:
        f.write(f"pmewald bench {kind}\n\n{n} atoms\n2 atom types\n")
        if water:
            f.write(f"{len(bonds)} bonds\n1 bond types\n")
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
            f.writelines(f"{k + 1} 1 {i + 1} {j + 1}\n" for k, (i, j) in enumerate(bonds.tolist()))


def md_timestep(sigma, temperature=300.0, mass=1.0):
    """The time step (fs) at which atoms of ``mass`` (g/mol) with Maxwell-Boltzmann velocities
    at ``temperature`` move ``sigma`` Angstrom per coordinate per step (rms)."""
    kb, amu = 1.380649e-23, 1.0e-3 / 6.02214076e23
    v = (kb * temperature / (mass * amu)) ** 0.5 * 1e-5        # m/s -> A/fs
    return sigma / v


def _lammps_input(data, cutoff, acc, diff, steps, dump, water, md_sigma=None, order=None):
    lines = ["units real", "atom_style full", "boundary p p p"]
    if water:
        lines.append("bond_style zero")
    lines += [f"read_data {data}"]
    if water:
        lines.append("bond_coeff *")
    lines += [f"pair_style coul/long {cutoff}", "pair_coeff * *", f"kspace_style pppm {acc}",
              f"kspace_modify diff {diff}" + ("" if order is None else f" order {int(order)}"),
              "neighbor 2.0 bin", "timer full", "thermo_style one"]
    if dump:
        lines += [f"dump d all custom 1 {dump} id fx fy fz", "dump_modify d sort id format float %.17g",
                  "run 0", "undump d"]
    if md_sigma:
        # MD-loop mode (pmewald.bench.peers.md): LAMMPS's own loop, so its neighbour list (skin 2 A,
        # rebuilt when an atom moved half of it) is reused as in a user's run: unit masses, 300 K
        # Gaussian velocities and the time step at which atoms move md_sigma A per step (rms).
        # nve/limit caps a step at 5 x the rms 3-D step: with unit masses the Coulomb-only forces
        # accelerate some atoms far beyond the random walk the other codes see (at 250k water
        # on 2 ranks plain nve stopped with "Bond atoms missing" at step 20).
        lines += ["mass * 1.0", "velocity all create 300.0 4928459 dist gaussian mom no rot no",
                  f"fix md all nve/limit {5 * math.sqrt(3) * md_sigma!r}",
                  f"timestep {md_timestep(md_sigma)!r}", "neigh_modify every 1 delay 0 check yes"]
    lines += [f"run {steps}"]
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
    """job: dict(data, kind, cutoff, acc, diff, n, optionally order (``kspace_modify order``; LAMMPS's
    default 5 when None), and for the MD-loop mode md_sigma). Returns the
    parsed dict (+ forces in k=1 units); in the MD-loop mode ``total_s`` is Pair + Kspace + Neigh
    + Comm per step and ``neigh_builds`` the list builds of the run."""
    tag = (f"{Path(job['data']).stem}_{job['diff']}_{job['acc']:g}_{ranks}_c{job['cutoff']:g}"
           + ("" if job.get("order") is None else f"_p{job['order']}"))
    inp = workdir / f"in.{tag}"
    dump = workdir / f"forces.{tag}.dump" if want_forces else None
    inp.write_text(_lammps_input(job["data"], job["cutoff"], job["acc"], job["diff"], steps, dump,
                                 job["kind"] in MOLECULAR, job.get("md_sigma"), job.get("order")))
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
    if job.get("md_sigma"):
        r["total_s"] += r.get("neigh_s", 0.0) + r.get("comm_s", 0.0)
        builds = re.findall(r"Neighbor list builds = (\d+)", log.read_text())
        r["neigh_builds"] = int(builds[-1]) if builds else None
    if want_forces:
        r["forces"] = read_lammps_dump(dump, job["n"]) / K_REAL
        dump.unlink()
    return r
