"""Real systems from LAMMPS data files (:func:`read_lammps_data`: charges, box, bonds as
exclusions to the given depth)."""

from __future__ import annotations

import numpy as np

from .chains import _bond_exclusions
from .system import System, _no_exclusions


def read_lammps_data(path, special_depth=3):
    """A :class:`System` from a LAMMPS data file with ``atom_style full`` (e.g. the
    ``peptide`` and ``HEAT/data.spce`` examples of Debian's ``lammps-examples``).

    Orthorhombic or triclinic (``xy xz yz``) boxes; positions are taken as written (the
    solver wraps them); ids are renumbered ``0..n-1`` in the file's id order. Exclusions:
    every pair at most ``special_depth`` bonds apart (3: 1-2, 1-3 and 1-4, LAMMPS's
    ``special_bonds lj/coul 0 0 0``; 0: none). The bonds themselves are kept as
    ``System.bonds`` (ids), so the system can be written back for LAMMPS.
    """
    lines = open(path).read().splitlines()
    bounds, tilt = {}, (0.0, 0.0, 0.0)
    sections, current = {None: []}, None
    for line in lines[1:]:
        text = line.split("#")[0].strip()
        if not text:
            continue
        words = text.split()
        if len(words) >= 4 and words[-2] in ("xlo", "ylo", "zlo"):
            bounds[words[-2][0]] = (float(words[0]), float(words[1]))
        elif len(words) == 6 and words[3:] == ["xy", "xz", "yz"]:
            tilt = tuple(float(w) for w in words[:3])
        elif words[0][0].isalpha():
            current = text.split()[0] if words[0] != "Pair" else None
            sections[current] = []
        elif current is not None:
            sections[current].append(words)
    if "Atoms" not in sections or set(bounds) != {"x", "y", "z"}:
        raise ValueError(f"{path}: not a LAMMPS data file with an Atoms section and a box")
    lx, ly, lz = (bounds[c][1] - bounds[c][0] for c in "xyz")
    xy, xz, yz = tilt
    box = np.array([[lx, 0, 0], [xy, ly, 0], [xz, yz, lz]], dtype=np.float64)
    atoms = sorted(sections["Atoms"], key=lambda w: int(w[0]))
    index = {int(w[0]): i for i, w in enumerate(atoms)}
    q = np.array([float(w[3]) for w in atoms])
    pos = np.array([[float(v) for v in w[4:7]] for w in atoms])
    bonds = [(index[int(w[2])], index[int(w[3])]) for w in sections.get("Bonds", [])]
    ex = _bond_exclusions(len(q), bonds, special_depth) if special_depth > 0 else _no_exclusions()
    return System(box=box, positions=pos, charges=q, ids=np.arange(len(q), dtype=np.int64), exclusions=ex,
                  name=f"lammps data {path}", bonds=np.array(bonds, dtype=np.int64).reshape(-1, 2))
