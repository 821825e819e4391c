"""The slab's error estimate with the gap's error in it: ``python benchmarks/slab_estimate.py``.

For three slabs of benchmarks/slab_gap.py (random, dipolar and laterally modulated charges) at
tolerance 1e-5: the measured relative RMS force error of ``PME(..., slab=True)`` against the
2-D Ewald sum (pmewald.reference.slab) and ``parameters["estimated_error"]``, (1) for explicit
gaps of 2-45 and (2) after ``set_box`` scales the slab in-plane by 1.1-2 (positions scaled
with it), with the automatic gap (chosen again when its rule error in the new cell exceeds
_slab.GAP_KEEP x its share) and with an explicit gap of 5 (kept). Prints Markdown tables
(docs/slab.md, "The estimate"). Not a test; serial; about a minute.
"""

from __future__ import annotations

import math

import numpy as np
from mpi4py import MPI

from pmewald import PME
from pmewald.reference import slab as reference2d
from slab_gap import rel, slab

TOL = 1e-5
CASES = [(10, 10, 10, 100, "dipolar", 5), (20, 20, 5, 40, "random", 1), (20, 20, 5, 60, "lateral", 7)]


def _pme(box, gap):
    cut = min(0.45 * min(box[0, 0], box[1, 1]), 0.45 * (box[2, 2] + 2.0), 4.0)  # fits the smallest gap
    return PME(box, cut, tolerance=TOL, slab=True, slab_gap=gap, comm=MPI.COMM_SELF)


def _row(label, pme, res, ref):
    err = rel(res.forces, ref)
    p = pme.parameters
    est = res.estimated_error
    return (f"| {label} | {p['slab_gap']:.1f} | {err:.2e} | {est:.2e} | {p['estimated_error_slab_gap']:.2e} "
            f"| {est / err:.2f} |")


def main():
    head = "| gap used | measured error | estimate | its gap part | estimate / measured |"
    print("Explicit gaps (tolerance 1e-5):\n")
    print("| slab, gap " + head + "\n|---|---|---|---|---|---|")
    for lx, ly, lz, n, how, seed in CASES:
        box, pos, q = slab(lx, ly, lz, n, how, seed)
        ref = reference2d.ewald2d(box, pos, q).forces
        for gap in (2.0, 5.0, 10.0, 20.0, 45.0):
            pme = _pme(box, gap)
            print(_row(f"{lx} x {ly} x {lz} {how}, {gap:g}", pme, pme.compute(pos, q), ref), flush=True)
    print("\nset_box scaling the slab in-plane (tolerance 1e-5):\n")
    print("| slab, scale, gap " + head + "\n|---|---|---|---|---|---|")
    for lx, ly, lz, n, how, seed in CASES:
        box, pos, q = slab(lx, ly, lz, n, how, seed)
        for scale in (1.0, 1.1, 1.5, 2.0):
            wide, wpos = box.astype(float), pos.copy()
            wide[:2, :2] *= scale
            wpos[:, :2] *= scale
            ref = reference2d.ewald2d(wide, wpos, q).forces
            for gap in ("auto", 5.0):
                pme = _pme(box, gap)
                pme.compute(pos, q)
                pme.set_box(wide)
                label = f"{lx} x {ly} x {lz} {how}, {scale:g}, {gap}"
                print(_row(label, pme, pme.compute(wpos, q), ref), flush=True)


if __name__ == "__main__":
    main()
