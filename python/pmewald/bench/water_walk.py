"""The water box of the MD-like loop benchmarks (benchmarks/pair_list.py, cutoff_auto.py): the
arguments they share, each rank's contiguous block of molecules with its exclusions, and their
JSON output."""
from __future__ import annotations

import json

import numpy as np


def add_arguments(ap, cutoff_help="real-space cutoff (A)"):
    """--atoms, --cutoff, --tolerance, --steps, --step and --json."""
    ap.add_argument("--atoms", type=int, default=30000)
    ap.add_argument("--cutoff", type=float, default=10.0, help=cutoff_help)
    ap.add_argument("--tolerance", type=float, nargs="+", default=[1e-4, 1e-5])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--step", type=float, default=0.01, help="random-walk step per component (A)")
    ap.add_argument("--json", help="write the rows here (rank 0)")


def local_water(comm, n_atoms, seed=1):
    """(system, positions, charges, ids, exclusions) of this rank: a contiguous block of the
    molecules of ``systems.water_box(target_atoms=n_atoms, seed=seed)``, positions a copy."""
    from .. import systems

    s = systems.water_box(target_atoms=n_atoms, seed=seed)
    rank, size = comm.Get_rank(), comm.Get_size()
    mine = np.arange(s.n_atoms)[rank * s.n_atoms // size:(rank + 1) * s.n_atoms // size]
    ex = s.exclusions[np.isin(s.exclusions[:, 0], s.ids[mine])]
    return s, s.positions[mine].copy(), s.charges[mine], s.ids[mine], ex


def write_json(path, rows):
    """The rows as JSON at `path` (nothing when `path` is None)."""
    if path:
        with open(path, "w") as f:
            json.dump(rows, f, indent=1)
