"""GROMACS's side of ``python -m pmewald.bench peers`` (:mod:`pmewald.bench.peers`): a
Coulomb-only topology of a :class:`pmewald.systems.System`, the run parameters, a
trajectory, ``gmx grompp`` + ``gmx mdrun -rerun`` (or, in the MD-loop mode, GROMACS's own
MD loop: :func:`run_gromacs_md`) and the parsing of its log and forces.

Physics, chosen to be exactly pmewald's:

* one atom type with zero C6 and C12 (no Lennard-Jones; GROMACS's kernels still evaluate
  the zero LJ terms: that is part of its cost), charges as given, no bonds;
* the excluded pairs are exactly ``System.exclusions``: atoms are grouped into molecules
  by the connected components of the exclusion graph (a water, a chain, an ion), every
  molecule's pairs are written in its ``[ exclusions ]`` section, ``nrexcl`` 0; identical
  molecules (same charges, same excluded pairs) share one molecule type, so GROMACS's atom
  order is a permutation of the system's (:func:`molecules` returns it, forces are mapped
  back);
* ``coulombtype PME``, ``coulomb-modifier None`` (no potential shift, so energies are the
  plain Ewald sum), ``ewald-geometry 3d``, ``epsilon-surface 0``, no dispersion correction;
  ``verlet-buffer-tolerance -1`` with ``rlist`` = ``rcoulomb``: a rerun builds the pair list
  for every frame, so no buffer is needed;
* positions and box written in nm with 9 decimals (``.gro`` with extended precision: GROMACS
  reads the precision from the spacing of the decimal points), so no rounding reaches the
  forces; forces read from the binary ``.trr`` (kJ/mol/nm, single precision in the default
  mixed-precision build).

Units: GROMACS uses nm and kJ/mol with ``ONE_4PI_EPS0`` = :data:`K_GROMACS`; the harness
compares forces in ``k = 1`` units per Angstrom^2 (:func:`forces_to_harness`).

Time per force evaluation: ``mdrun -rerun`` on ``frames`` frames; from the log's cycle
accounting, the wall time of every counted part of the loop (domain decomposition, neighbour
search, force, PME mesh, buffer operations, communication and waits) except "Rest" and
"Write traj.", over the number of frames. "Rest" is mostly the rerun reading each frame from
the text trajectory (measured: as much as the force itself at 30,000 atoms), which no MD step
does, and the start-up (run input, threads, FFT plans) is outside the loop. (A first version
took the difference of two runs' wall times, on all frames and on one: it includes the frame
reading and came out negative under load.) A rerun does the neighbour search on every frame
whatever ``nstlist`` says (GROMACS's manual, "Re-running a simulation"), so GROMACS's figure
always includes a pair search, in the single-call mode as in the MD-loop mode.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np

K_GROMACS = 138.935458        # GROMACS 2022's ONE_4PI_EPS0 (kJ/mol nm e^-2), src/gromacs/math/units.h
NM = 10.0                     # Angstrom per nm


def gmx_binary(name=None):
    """The GROMACS binary: ``name``, else ``$PMEWALD_GMX``, else ``gmx``; ``None`` when absent."""
    return shutil.which(name or os.environ.get("PMEWALD_GMX", "gmx"))


def forces_to_harness(f_kj_mol_nm):
    """GROMACS forces (kJ/mol/nm) -> the harness's ``k = 1`` forces (e^2/A^2).

    E[kJ/mol] = K q^2 / r[nm] = 10 K q^2 / r[A], so E(k = 1, A) = E[kJ/mol] / (10 K) and
    F(k = 1, A) = dE(k = 1)/dr[A] = F[kJ/mol/nm] / (100 K)."""
    return np.asarray(f_kj_mol_nm, dtype=np.float64) / (K_GROMACS * NM * NM)


def molecules(n, exclusions, charges):
    """Group atoms into molecules by the exclusion graph.

    Returns ``(order, types, counts)``: ``order[k]`` is the system's index of GROMACS atom
    ``k``; ``types`` the molecule types as ``(charges, local_pairs)`` (``local_pairs`` 0-based
    within the molecule); ``counts`` the ``[ molecules ]`` list as ``(type index, count)``
    in GROMACS order.
    """
    parent = np.arange(n)

    def find(a):
        root = a
        while parent[root] != root:
            root = parent[root]
        while parent[a] != root:
            parent[a], a = root, parent[a]
        return root

    ex = np.asarray(exclusions, dtype=np.int64).reshape(-1, 2)
    for i, j in ex.tolist():
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)
    roots = np.array([find(a) for a in range(n)])
    members = {}
    for a, r in enumerate(roots.tolist()):
        members.setdefault(r, []).append(a)
    pairs_of = {}
    for i, j in ex.tolist():
        pairs_of.setdefault(roots[i], []).append((min(i, j), max(i, j)))
    sig_index, types, mols = {}, [], []
    for r, atoms in members.items():
        local = {a: k for k, a in enumerate(atoms)}
        lp = tuple(sorted({(local[i], local[j]) for i, j in pairs_of.get(r, [])}))
        sig = (tuple(np.round(charges[atoms], 10).tolist()), lp)
        if sig not in sig_index:
            sig_index[sig] = len(types)
            types.append((np.asarray(charges)[atoms].copy(), lp))
        mols.append((sig_index[sig], atoms[0], atoms))
    mols.sort(key=lambda m: (m[0], m[1]))
    order = np.array([a for m in mols for a in m[2]], dtype=np.int64)
    counts = []
    for t, _, _ in mols:
        if counts and counts[-1][0] == t:
            counts[-1][1] += 1
        else:
            counts.append([t, 1])
    return order, types, [tuple(c) for c in counts]


def write_topology(path, types, counts):
    """A Coulomb-only ``.top``: one LJ-free atom type, one molecule type per ``types`` entry."""
    L = ["; pmewald bench: point charges only (zero C6/C12), exclusions = pmewald's", "[ defaults ]",
         "; nbfunc comb-rule gen-pairs fudgeLJ fudgeQQ", "  1      2         no        1.0     1.0", "",
         "[ atomtypes ]", "; name mass charge ptype sigma epsilon", "  Q  1.0  0.0  A  0.0  0.0", ""]
    for t, (q, pairs) in enumerate(types):
        L += ["[ moleculetype ]", f"  M{t}  0", "", "[ atoms ]", "; nr type resnr res atom cgnr charge mass"]
        L += [f"  {k + 1} Q 1 M{t} Q{k + 1} {k + 1} {qk!r} 1.0" for k, qk in enumerate(q.tolist())]
        if pairs:
            by_first = {}
            for i, j in pairs:
                by_first.setdefault(i, []).append(j)
            # grompp accepts [ exclusions ] only after [ bonds ], [ constraints ] or [ settles ]: none here
            L += ["", "[ bonds ]", "", "[ exclusions ]"]
            L += ["  " + " ".join(str(v + 1) for v in [i] + js) for i, js in sorted(by_first.items())]
        L.append("")
    L += ["[ system ]", "pmewald bench", "", "[ molecules ]"]
    L += [f"  M{t}  {c}" for t, c in counts]
    Path(path).write_text("\n".join(L) + "\n")


def read_topology_exclusions(path):
    """The excluded pairs a ``.top`` written by :func:`write_topology` describes, as a set of
    0-based GROMACS atom index pairs ``(i < j)`` over the whole system (for the tests)."""
    text = Path(path).read_text()
    types, cur, section = {}, None, None
    for line in text.splitlines():
        line = line.split(";")[0].strip()
        if not line:
            continue
        if line.startswith("["):
            section = line.strip("[] ")
            continue
        w = line.split()
        if section == "moleculetype":
            cur = types.setdefault(w[0], {"n": 0, "pairs": set()})
        elif section == "atoms":
            cur["n"] += 1
        elif section == "exclusions":
            i = int(w[0]) - 1
            cur["pairs"] |= {(min(i, int(j) - 1), max(i, int(j) - 1)) for j in w[1:]}
        elif section == "molecules":
            types.setdefault("_order", []).append((w[0], int(w[1])))
    out, base = set(), 0
    for name, count in types.get("_order", []):
        t = types[name]
        for _ in range(count):
            out |= {(base + i, base + j) for i, j in t["pairs"]}
            base += t["n"]
    return out


def whole_shifts(box, positions, exclusions):
    """Per-atom shifts (Angstrom, whole box vectors) that make every molecule whole: each atom
    is moved to the periodic image nearest the atom it was reached from in a walk over the
    exclusion graph. GROMACS's domain decomposition takes the spread of a molecule's excluded
    pairs for the minimum cell size, so molecules must not be split across the box."""
    from ...geometry.cell import minimum_image

    n = len(positions)
    nbr = [[] for _ in range(n)]
    for i, j in np.asarray(exclusions, dtype=np.int64).reshape(-1, 2).tolist():
        nbr[i].append(j)
        nbr[j].append(i)
    x = np.array(positions, dtype=np.float64)
    done = np.zeros(n, dtype=bool)
    for s in range(n):
        if done[s]:
            continue
        done[s], stack = True, [s]
        while stack:
            a = stack.pop()
            for b in nbr[a]:
                if not done[b]:
                    x[b] = x[a] + minimum_image(box, (x[b] - x[a])[None])[0]
                    done[b] = True
                    stack.append(b)
    return x - np.asarray(positions)


def write_gro(path, box, frames):
    """Frames (Angstrom, GROMACS order, orthorhombic ``box`` rows) as a multi-frame ``.gro``
    in nm with 9 decimals (positions as given: molecules must be whole, :func:`whole_shifts`)."""
    L = np.diag(box) / NM
    with open(path, "w") as f:
        for k, x in enumerate(frames):
            p = np.asarray(x) / NM
            n = len(p)
            f.write(f"pmewald bench t= {float(k):.1f} step= {k}\n{n}\n")
            f.writelines(f"{(a + 1) % 100000:5d}{'M':<5}{'Q':>5}{(a + 1) % 100000:5d}"
                         f"{p[a, 0]:15.9f}{p[a, 1]:15.9f}{p[a, 2]:15.9f}\n" for a in range(n))
            f.write(f"{L[0]:15.9f}{L[1]:15.9f}{L[2]:15.9f}\n")


def _mdp_lines(cutoff_A, rtol, spacing_nm, order, rlist_nm=None):
    """The physics every run shares (module docstring): PME, no modifier, no LJ, 3-D Ewald."""
    rc = cutoff_A / NM
    return ["cutoff-scheme = Verlet", "pbc = xyz", "verlet-buffer-tolerance = -1",
            f"rlist = {rlist_nm if rlist_nm is not None else rc!r}",
            "coulombtype = PME", "coulomb-modifier = None", f"rcoulomb = {rc!r}",
            "vdwtype = Cut-off", "vdw-modifier = None", f"rvdw = {rc!r}", "DispCorr = no",
            f"fourierspacing = {spacing_nm!r}", f"pme-order = {int(order)}", f"ewald-rtol = {rtol!r}",
            "ewald-geometry = 3d", "epsilon-surface = 0", "constraints = none", "tcoupl = no", "pcoupl = no",
            "nstxout = 0", "nstvout = 0"]


def write_mdp(path, cutoff_A, rtol, spacing_nm, order, nstfout):
    """A rerun's run parameters: the pair list built for every frame, so ``rlist`` = ``rcoulomb``."""
    lines = ["integrator = md", "nsteps = 0", "nstlist = 10"] + _mdp_lines(cutoff_A, rtol, spacing_nm, order)
    lines += ["nstcalcenergy = 1", "nstenergy = 1", "nstlog = 1", f"nstfout = {int(nstfout)}"]
    Path(path).write_text("\n".join(lines) + "\n")


def write_md_mdp(path, cutoff_A, rtol, spacing_nm, order, steps, buffer_nm, nstlist):
    """GROMACS's own MD loop (:func:`run_gromacs_md`): ``steps`` steps with every atom frozen (a
    Coulomb-only system without Lennard-Jones would collapse if it moved), the pair list kept for
    ``nstlist`` steps with ``rlist`` = ``rcoulomb`` + ``buffer_nm`` (what its Verlet buffer
    estimate gives for water at 300 K and ``nstlist`` 10: about 0.1 nm), energies every 100
    steps, the forces of steps 0 and ``steps`` written."""
    lines = ["integrator = md", "dt = 0.001", f"nsteps = {int(steps)}", f"nstlist = {int(nstlist)}"]
    lines += _mdp_lines(cutoff_A, rtol, spacing_nm, order, rlist_nm=cutoff_A / NM + buffer_nm)
    lines += ["freezegrps = System", "freezedim = Y Y Y", "comm-mode = None", "nstcalcenergy = 100",
              "nstenergy = 0", f"nstlog = {int(steps)}", f"nstfout = {int(steps)}"]
    Path(path).write_text("\n".join(lines) + "\n")


def read_trr_forces(path):
    """Forces of every frame of a ``.trr`` (XDR, big-endian; single or double precision)."""
    data = Path(path).read_bytes()
    pos, frames = 0, []

    def ints(k):
        nonlocal pos
        v = struct.unpack(f">{k}i", data[pos:pos + 4 * k])
        pos += 4 * k
        return v

    while pos < len(data):
        magic, _ = ints(2)
        if magic != 1993:
            raise ValueError(f"{path}: not a .trr frame at byte {pos - 8}")
        slen, = ints(1)
        pos += (slen + 3) // 4 * 4                          # the version string, padded to 4 bytes
        (ir, e, box, vir, pres, top, sym, xs, vs, fs, natoms, step, nre) = ints(13)
        nbytes = next((sz // cnt for sz, cnt in ((box, 9), (vir, 9), (pres, 9), (xs, 3 * natoms),
                                                  (vs, 3 * natoms), (fs, 3 * natoms)) if sz), 4)
        pos += 2 * nbytes + ir + e + box + vir + pres + top + sym + xs + vs   # t, lambda, blocks before f
        if fs:
            dt = ">f4" if nbytes == 4 else ">f8"
            frames.append(np.frombuffer(data, dtype=dt, count=3 * natoms, offset=pos).reshape(natoms, 3)
                          .astype(np.float64))
        pos += fs
    return frames


_FLOAT = r"([-+0-9.eE]+)"


def parse_log(text):
    """From an ``mdrun`` log: wall time, 1/beta, grid, the first frame's Coulomb energies and
    the cycle-accounting wall seconds of neighbour search, force and PME mesh."""
    out = {}
    m = re.search(r"^\s*Time:\s+" + _FLOAT + r"\s+" + _FLOAT, text, re.M)
    if m:
        out["wall_s"] = float(m.group(2))
    m = re.search(r"Gaussian width \(1/beta\) of " + _FLOAT + " nm", text)
    if m:
        out["alpha_per_A"] = 1.0 / (float(m.group(1)) * NM)
    mesh = [re.search(rf"^\s*fourier-n{c}\s*=\s*(\d+)", text, re.M) for c in "xyz"]
    if all(mesh):
        out["mesh"] = [int(v.group(1)) for v in mesh]
    m = re.search(r"Energies \(kJ/mol\)\s*\n(.*?)\n\s*\n", text, re.S)
    if m:
        rows = m.group(1).splitlines()
        names, vals = [], []
        for head, val in zip(rows[0::2], rows[1::2]):
            names += [head[i:i + 15].strip() for i in range(0, len(head), 15)]
            vals += [float(v) for v in val.split()]
        en = dict(zip(names, vals))
        out["energy_kj_mol"] = en.get("Coulomb (SR)", 0.0) + en.get("Coul. recip.", 0.0)
    table = text.split("R E A L   C Y C L E   A N D   T I M E   A C C O U N T I N G", 1)[-1]
    table = table.split("Breakdown of PME mesh computation", 1)[0]
    rows = {m.group(1).strip(): (int(m.group(2)), float(m.group(3)))
            for m in re.finditer(r"^ (\S.*?)\s+\d+\s+\d+\s+(\d+)\s+" + _FLOAT + r"\s+" + _FLOAT, table, re.M)}
    for key, label in (("neigh_s", "Neighbor search"), ("force_s", "Force"), ("pme_s", "PME mesh")):
        if label in rows:
            out[key] = rows[label][1]
    if "Force" in rows:
        out["cycle_rows"] = {k: v[1] for k, v in rows.items()}
        out["cycle_counts"] = {k: v[0] for k, v in rows.items()}
        out["calls"] = rows["Force"][0]
        m = re.search(r"^\s*Rest\s+" + _FLOAT, table, re.M)
        out["rest_s"] = float(m.group(1)) if m else None
        out["eval_total_s"] = sum(v[1] for k, v in rows.items() if k != "Write traj.")
        m = re.search(r"^\s*Total\s+" + _FLOAT + r"\s+" + _FLOAT, table, re.M)
        if m:
            out["loop_total_s"] = float(m.group(1))
    return out


class GromacsSystem:
    """A system's GROMACS files in ``workdir``: topology and atom order, written once."""

    def __init__(self, s, workdir, tag):
        self.box, self.n = s.box, s.n_atoms
        self.workdir, self.tag = Path(workdir), tag
        self.order, types, counts = molecules(s.n_atoms, s.exclusions, s.charges)
        self.shift = whole_shifts(s.box, s.positions, s.exclusions)   # the same for every frame
        self.top = self.workdir / f"{tag}.top"
        write_topology(self.top, types, counts)
        self.conf = self.trajectory([s.positions], "conf")

    def trajectory(self, frames, name):
        """Frames (Angstrom, system order) as a ``.gro`` trajectory in GROMACS order, every
        molecule whole (the shifts of frame 0: the frames are small moves from it)."""
        path = self.workdir / f"{self.tag}_{name}.gro"
        write_gro(path, self.box, [(np.asarray(x) + self.shift)[self.order] for x in frames])
        return path


def _run(cmd, env, cwd):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=cwd)
    if p.returncode != 0:
        raise RuntimeError(f"GROMACS failed ({' '.join(map(str, cmd))}):\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return p


def _grompp_mdrun(gs, tag, write, threads, mdrun_args, want_forces, env, gmx):
    """``write(mdp)``, ``grompp`` on the system's start, ``mdrun`` with ``mdrun_args`` on the
    thread layout; returns the parsed log and (``want_forces``) the first force frame of the
    ``.trr`` in the system's order, k = 1 units. The run's files are removed."""
    gmx = gmx_binary(gmx) or gmx
    wd = gs.workdir
    mdp, tpr = wd / f"{tag}.mdp", wd / f"{tag}.tpr"
    write(mdp)
    _run([gmx, "-quiet", "grompp", "-f", mdp, "-c", gs.conf, "-p", gs.top, "-o", tpr, "-po",
          wd / f"{tag}_out.mdp", "-maxwarn", "5"], env, wd)
    deffnm = wd / f"{tag}_mpi{threads['ntmpi']}_omp{threads['ntomp']}"
    _run([gmx, "-quiet", "mdrun", "-s", tpr, *mdrun_args, "-deffnm", deffnm, "-ntmpi", str(threads["ntmpi"]),
          "-ntomp", str(threads["ntomp"]), "-npme", "0", "-pin", "off", "-nb", "cpu", "-notunepme"],
         dict(env, OMP_NUM_THREADS=str(threads["ntomp"])), wd)
    r = parse_log(Path(f"{deffnm}.log").read_text())
    if want_forces:
        f = read_trr_forces(f"{deffnm}.trr")[0]
        out = np.empty_like(f)
        out[gs.order] = f
        r["forces"] = forces_to_harness(out)
    for ext in (".log", ".trr", ".edr", ".gro", ".cpt"):
        Path(f"{deffnm}{ext}").unlink(missing_ok=True)
    return r


def _setting_tag(gs, setting, cutoff):
    return f"{gs.tag}_r{setting['rtol']:g}_s{setting['spacing']:g}_o{setting['order']}_c{cutoff:g}"


def run_gromacs(gs, setting, cutoff, threads, traj, n_frames, want_forces, env, gmx="gmx"):
    """One setting on one thread layout: ``grompp`` then ``mdrun -rerun`` on the ``n_frames``
    frames of ``traj``; returns the parsed log, the time per frame (``frame_s``, see the module
    docstring) and (``want_forces``) frame 0's forces in the system's order, k = 1 units.

    setting: dict(rtol, spacing (nm), order); threads: dict(ntmpi, ntomp).
    """
    tag = _setting_tag(gs, setting, cutoff)
    r = _grompp_mdrun(gs, tag, lambda mdp: write_mdp(mdp, cutoff, setting["rtol"], setting["spacing"],
                                                     setting["order"], 1 if want_forces else 0),
                      threads, ["-rerun", traj], want_forces, env, gmx)
    calls = max(r.get("calls", n_frames), 1)
    r["frames"] = n_frames
    r["frame_s"] = r["eval_total_s"] / calls
    _per_call(r, calls)
    return r


def _per_call(r, calls):
    """The neighbour search, force and PME mesh rows of a parsed log, per force evaluation."""
    for key in ("neigh_s", "force_s", "pme_s"):
        if key in r:
            r[key] /= calls


# Cycle-accounting rows of an MD run that are not the force evaluation: the integrator (which
# no other code's figure includes) and the trajectory output; "Rest" (uncounted) goes too.
MD_NOT_FORCE_ROWS = ("Write traj.", "Update", "Constraints")


def run_gromacs_md(gs, setting, cutoff, threads, steps, want_forces, env, gmx="gmx", buffer_nm=0.1,
                   nstlist=10):
    """GROMACS's own MD loop (:func:`write_md_mdp`: ``steps`` steps, atoms frozen, the pair list
    rebuilt every ``nstlist`` steps with a ``buffer_nm`` buffer), as a user's run evaluates
    forces; the rerun of :func:`run_gromacs` searches neighbours on every frame instead.
    Returns the parsed log with ``step_s``, the loop's ``Total`` less :data:`MD_NOT_FORCE_ROWS`
    and "Rest" over the steps (``force_s``, ``pme_s`` and ``neigh_s`` per step too), and (``want_forces``)
    the forces of step 0 in the system's order, k = 1 units."""
    tag = _setting_tag(gs, setting, cutoff) + f"_md{int(steps)}"
    r = _grompp_mdrun(gs, tag, lambda mdp: write_md_mdp(mdp, cutoff, setting["rtol"], setting["spacing"],
                                                        setting["order"], steps, buffer_nm, nstlist),
                      threads, [], want_forces, env, gmx)
    rows = r.get("cycle_rows", {})
    if "loop_total_s" not in r or "Force" not in rows:
        raise RuntimeError(f"GROMACS's log has no cycle accounting (rows {sorted(rows)})")
    calls = max(r["calls"], 1)
    r["step_s"] = (r["loop_total_s"] - sum(v for k, v in rows.items() if k in MD_NOT_FORCE_ROWS)
                   - (r.get("rest_s") or 0.0)) / calls
    _per_call(r, calls)
    r.update(steps=int(steps), nstlist=int(nstlist), rlist_nm=cutoff / NM + buffer_nm)
    return r
