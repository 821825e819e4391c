"""The LAMMPS peptide on 1 and 2 ranks (issue 30, item 4): where a call's time goes.

``data.peptide`` (Debian's ``lammps-examples``: 2,004 atoms, 1-2/1-3/1-4 pairs excluded)
repeated 3x3x3 by ``systems.replicate`` (54,108 atoms), Coulomb only in kcal/mol, cutoff 10 A,
automatic parameters at ``--tolerance``; two calls, then ``--calls`` timed calls at fixed
positions (the pair list reused), each rank holding a block of ids. Rank 0 prints the median
and fastest call and every rank's ``timings()`` phases (seconds over the timed calls)::

    mpirun -n 1 .venv/bin/python benchmarks/peptide_ranks.py --tolerance 1e-4
    mpirun -n 2 .venv/bin/python benchmarks/peptide_ranks.py --tolerance 1e-4

The 1 -> 2 rank speed-up is the ratio of the medians of two such runs (run them alternately:
one run's median moves by 5-15% on the shared 2-core machine).
"""

from __future__ import annotations

import argparse
import json
import statistics

from mpi4py import MPI

import pmewald
from pmewald import systems, units
from pmewald.bench.mpi_timing import timed_compute

PEPTIDE = "/usr/share/lammps/examples/peptide/data.peptide"
PHASES = ["real_space", "pair_list_evaluate", "pair_list_refresh", "migrate", "exclusions", "spread", "fft",
          "fft_1d", "fft_pack_unpack", "fft_comm_wait",
          "solve", "gather", "ghost", "reduce", "comm_wait", "real_space_imbalance", "real_space_pairs_imbalance"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--cells", type=int, default=3, help="repetitions per axis")
    ap.add_argument("--calls", type=int, default=8)
    ap.add_argument("--balance", default="off", choices=["off", "once", "dynamic"])
    ap.add_argument("--precision", default="double", choices=("double", "mixed", "auto"))
    ap.add_argument("--pair-layout", default="auto", choices=("auto", "atoms", "clusters"))
    ap.add_argument("--json", help="write the result here (rank 0)")
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    s = systems.replicate(systems.read_lammps_data(PEPTIDE), a.cells)
    n = s.n_atoms
    mine = slice(rank * n // size, (rank + 1) * n // size)
    args = (s.positions[mine], s.charges[mine], s.ids[mine], s.exclusions)
    pme = pmewald.PME(s.box, 10.0, tolerance=a.tolerance, comm=comm, coulomb_constant=units.KCAL_MOL_ANGSTROM,
                      balance=a.balance, precision=a.precision, pair_layout=a.pair_layout)
    pme.compute(*args)
    pme.compute(*args)
    pme.reset_timings()
    times = [timed_compute(comm, pme, *args) for _ in range(a.calls)]
    phases = comm.gather({k: pme.timings().get(k) for k in PHASES}, root=0)
    if rank == 0:
        p = pme.parameters
        out = {"ranks": size, "atoms": n, "tolerance": a.tolerance, "precision": p["precision"],
               "pair_layout": p["pair_layout_used"], "mesh": list(p["mesh"]), "order": p["order"],
               "alpha": p["alpha"], "median_s": statistics.median(times), "min_s": min(times), "phases": phases}
        print(f"{size} ranks, {n} atoms, tolerance {a.tolerance:g} ({p['differentiation']} p{p['order']} "
              f"{tuple(p['mesh'])}): median {1e3 * out['median_s']:.1f} ms, fastest {1e3 * out['min_s']:.1f} ms")
        for k in PHASES:
            print(f"  {k:28s}" + "".join(f"{(ph[k] or 0.0):10.4f}" for ph in phases))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
