"""The vacuum gap of ``PME(..., slab=True)``: ``python benchmarks/slab_gap.py``.

1. The error of the EW3DC method itself (no mesh error): the 3-D direct Ewald sum
   (pmewald.reference, converged to 1e-13) on the box extended by a gap, plus the
   Yeh-Berkowitz correction, against the 2-D Ewald sum (pmewald.reference.slab), as a relative
   RMS force error, for several slabs and gaps; ``C = error x exp(g_min gap)`` (g_min the
   shortest in-plane reciprocal vector) is what the gap rule bounds (GAP_PREFACTOR); the
   errors shown are the first draw's, C the largest over three draws.
2. LAMMPS's fixed choice (total height 3 Lz, i.e. gap 2 Lz) on the same slabs, and the
   automatic gap of pmewald at tolerance 1e-5 (the PME result against the 2-D reference).

Not a test; serial; a few minutes (three random draws per slab).
"""

from __future__ import annotations

import math

import numpy as np
from mpi4py import MPI

from pmewald import PME, reference
from pmewald.reference import slab as reference2d
from pmewald.pme import slab as _slab


def slab(lx, ly, lz, n, how, seed):
    rng = np.random.default_rng(seed)
    pos = rng.uniform(0, 1, (n, 3)) * [lx, ly, lz * 0.999]
    if how == "random":
        q = rng.choice([-1.0, 1.0], n)
    elif how == "dipolar":
        q = np.where(pos[:, 2] > lz / 2, 1.0, -1.0)
    else:  # "lateral": charges modulated at the cell's wavelength
        q = np.where(pos[:, 0] > lx / 2, 1.0, -1.0)
    return np.diag([lx, ly, lz]), pos, q - q.mean()


def ew3dc_forces(box, pos, q, gap):
    ext = box.copy()
    ext[2, 2] += gap
    vol = np.linalg.det(ext)
    f = reference.ewald(ext, pos, q, accuracy=1e-13).forces
    f[:, 2] += -4 * math.pi / vol * q * ((q * pos[:, 2]).sum() - q.sum() * pos[:, 2])
    return f


def rel(f, ref):
    return math.sqrt(((f - ref) ** 2).sum() / (ref ** 2).sum())


CASES = [(10, 10, 10, 40, "random"), (20, 20, 5, 40, "random"), (20, 20, 5, 40, "dipolar"),
         (30, 30, 3, 40, "random"), (15, 10, 8, 60, "random"), (10, 10, 10, 100, "dipolar"),
         (10, 10, 10, 40, "lateral"), (20, 20, 5, 60, "lateral"), (30, 30, 3, 40, "lateral")]


def main():
    seeds = range(3)
    print("| slab (Lx x Ly x Lz, atoms, charges) | gap / L_xy = 0.5 | 1 | 1.5 | 2 | C, largest of 3 | LAMMPS gap 2 Lz "
          "| pmewald auto gap (tol 1e-5) | its error, largest of 3 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for case, (lx, ly, lz, n, how) in enumerate(CASES):
        cs, autos = [], []
        for seed in seeds:
            box, pos, q = slab(lx, ly, lz, n, how, 10 * case + seed)
            ref = reference2d.ewald2d(box, pos, q).forces
            g = _slab.shortest_reciprocal(box[:2, :2])
            errs = []
            for fac in (0.5, 1.0, 1.5, 2.0):
                gap = fac * max(lx, ly)
                errs.append(rel(ew3dc_forces(box, pos, q, gap), ref))
                cs.append(errs[-1] * math.exp(g * gap))
            if seed == 0:
                first = errs
                lammps = rel(ew3dc_forces(box, pos, q, 2 * lz), ref)
            cut = min(0.45 * min(lx, ly), 5.0)
            pme = PME(box, cut, tolerance=1e-5, slab=True, comm=MPI.COMM_SELF)
            autos.append(rel(pme.compute(pos, q).forces, ref))
        print(f"| {lx} x {ly} x {lz}, {n}, {how} | " + " | ".join(f"{e:.1e}" for e in first)
              + f" | {max(cs):.2f} | {lammps:.1e} | {pme.parameters['slab_gap']:.1f} | {max(autos):.1e} |", flush=True)


if __name__ == "__main__":
    main()
