"""Electrostatics of a water box on several MPI ranks.

    mpirun -n 2 python examples/water_box.py                 # ~3000 atoms
    mpirun -n 4 python examples/water_box.py --atoms 30000 --all-modes
    python examples/water_box.py --quick                     # 300 atoms, one rank

Rank 0 builds an SPC/E-like water box (``pmewald.systems.water_box``: charges
-0.8476/+0.4238, three intramolecular exclusions per molecule) and broadcasts it;
each rank then takes a contiguous block of whole molecules, with their
exclusions, and all ranks compute the energy, forces and virial together with
``pmewald.PME`` in kcal/mol and Angstrom. Rank 0 prints the energy terms, the
parameters chosen for the tolerance, the error estimate and the time per phase.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def molecule_block(n_molecules, comm):
    """Atom indices of this rank's contiguous block of whole molecules (3 atoms each)."""
    size, rank = comm.Get_size(), comm.Get_rank()
    lo, hi = rank * n_molecules // size, (rank + 1) * n_molecules // size
    return np.arange(3 * lo, 3 * hi)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--atoms", type=int, default=3000, help="about this many atoms (default 3000)")
    p.add_argument("--tolerance", type=float, default=1e-5, help="relative RMS force error (default 1e-5)")
    p.add_argument("--cutoff", type=float, default=None,
                   help="real-space cutoff in Angstrom (default min(9, 0.45 x smallest box edge))")
    p.add_argument("--mode", default="nonblocking", choices=("pt2pt", "nonblocking", "collective"),
                   help="communication mode (default nonblocking)")
    p.add_argument("--all-modes", action="store_true", help="run and time every communication mode")
    p.add_argument("--repeat", type=int, default=5, help="timed calls after one warm-up call (default 5)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="PATH", help="also write the seconds per call and per phase of each "
                   "mode (slowest rank) to PATH as JSON (rank 0)")
    p.add_argument("--quick", action="store_true", help="300 atoms, 1 timed call (for tests)")
    args = p.parse_args(argv)
    if args.quick:
        args.atoms, args.repeat = 300, 1
    return args


def main(argv=None, comm=None):
    """Run the example; returns a dict of results on every rank (used by the tests)."""
    from mpi4py import MPI

    import pmewald
    from pmewald import systems, units

    args = parse_args(sys.argv[1:] if argv is None else argv)
    comm = MPI.COMM_WORLD if comm is None else comm
    rank, size = comm.Get_rank(), comm.Get_size()

    t0 = time.perf_counter()
    water = systems.water_box(target_atoms=args.atoms, seed=args.seed) if rank == 0 else None
    water = comm.bcast(water, root=0)
    build_seconds = time.perf_counter() - t0
    n_mol = water.n_atoms // 3
    mine = molecule_block(n_mol, comm)
    lo, hi = (mine[0], mine[-1] + 1) if len(mine) else (0, 0)
    # this rank's molecules' exclusions (any rank may give any pair; here each gives its own)
    ex = water.exclusions
    my_ex = ex[(ex[:, 0] >= lo) & (ex[:, 0] < hi)]
    cutoff = args.cutoff if args.cutoff is not None else min(9.0, 0.45 * float(np.min(np.diag(water.box))))

    if rank == 0:
        print(f"water box: {water.n_atoms} atoms ({n_mol} molecules), box "
              f"{' x '.join(f'{L:.3f}' for L in np.diag(water.box))} A, {len(ex)} excluded pairs; "
              f"built in {build_seconds:.2f} s")
        print(f"{size} rank(s), {len(mine)} atoms on rank 0; cutoff {cutoff:.3f} A, "
              f"tolerance {args.tolerance:g}, units kcal/mol and A")

    modes = ("pt2pt", "nonblocking", "collective") if args.all_modes else (args.mode,)
    out = {"n_atoms": water.n_atoms, "modes": {}}
    for mode in modes:
        pme = pmewald.PME(water.box, cutoff, tolerance=args.tolerance, comm=comm, comm_mode=mode,
                          coulomb_constant=units.KCAL_MOL_ANGSTROM)
        call = (water.positions[mine], water.charges[mine])
        kw = dict(ids=water.ids[mine], exclusions=my_ex)
        t0 = time.perf_counter()
        res = pme.compute(*call, **kw)                 # first call: chooses the mesh
        first = time.perf_counter() - t0
        pme.reset_timings()
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(args.repeat):
            res = pme.compute(*call, **kw)
        comm.Barrier()
        per_call = (time.perf_counter() - t0) / max(args.repeat, 1)
        timings = pme.timings()
        # the slowest rank decides the time of a collective call
        phases = {k: v for k, v in timings.items()
                  if k != "calls" and (not k.startswith(("fft_", "ghost_")) or k == "ghost_atoms")}
        slowest = {k: comm.allreduce(v, op=MPI.MAX) / max(args.repeat, 1) for k, v in sorted(phases.items())}
        p = pme.parameters
        if rank == 0:
            print(f"\ncomm_mode {mode}")
            print(f"  parameters: alpha {p['alpha']:.5f} 1/A, mesh {'x'.join(map(str, p['mesh']))}, "
                  f"order {p['order']}, differentiation {p['differentiation']}")
            print(f"  energy {res.energy:.6f} kcal/mol = " +
                  " + ".join(f"{k} {v:.6f}" for k, v in res.terms.items()))
            print(f"  estimated relative RMS force error {res.estimated_error:.2e} "
                  f"(absolute {res.estimated_error_absolute:.2e} kcal/mol/A; RMS force "
                  f"{res.rms_force:.3f} kcal/mol/A)")
            print(f"  pressure contribution trace(W)/3V = "
                  f"{np.trace(res.virial) / (3 * abs(np.linalg.det(water.box))):.6f} kcal/mol/A^3")
            print(f"  first call (with mesh choice) {first * 1e3:.1f} ms; then {per_call * 1e3:.2f} ms per call")
            print("  per phase, ms per call (slowest rank): " +
                  "  ".join(f"{k} {v * 1e3:.2f}" for k, v in slowest.items()))
        out["modes"][mode] = {"energy": res.energy, "terms": res.terms, "forces": res.forces,
                              "virial": res.virial, "parameters": p, "seconds_per_call": per_call,
                              "phases": slowest}
    out["atoms"] = mine
    if args.json and rank == 0:
        import json

        with open(args.json, "w") as f:
            json.dump({"ranks": size, "n_atoms": water.n_atoms,
                       "modes": {m: {"seconds_per_call": v["seconds_per_call"], "phases": v["phases"]}
                                 for m, v in out["modes"].items()}}, f, indent=1)
    return out


if __name__ == "__main__":
    main()
