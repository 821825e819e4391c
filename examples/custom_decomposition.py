"""Caller-owned atoms: each rank passes the atoms of its own slab, in its own order.

    mpirun -n 2 python examples/custom_decomposition.py
    mpirun -n 3 python examples/custom_decomposition.py --atoms 3000
    python examples/custom_decomposition.py --quick

An MD code usually owns atoms by its own domain decomposition and numbers them its
own way. pmewald takes whatever each rank holds. Here every rank owns a slab of
the water box along x (in reverse rank order, so rank 0 holds the last slab),
keeps its atoms in a shuffled order, names them by its own ids (not 0..n-1), and
passes the exclusions of the pairs whose first atom it owns — so molecules cut by
a slab boundary have excluded pairs whose atoms live on different ranks.

The forces come back on each rank in exactly the order it passed the atoms. The
script then repeats the calculation with every atom on rank 0 (the other ranks
pass none), with the same alpha, mesh and order, and checks that energy, virial
and every atom's force agree to rounding.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def slab_owner(box, positions, size):
    """The rank owning each atom: slabs of equal thickness along the first lattice
    vector (fractional coordinate), starting a quarter of a slab into the box and
    numbered in reverse rank order."""
    frac = positions @ np.linalg.inv(box)
    slab = np.minimum((np.mod(frac[:, 0] - 0.25 / size, 1.0) * size).astype(int), size - 1)
    return size - 1 - slab


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--atoms", type=int, default=1500, help="about this many atoms (default 1500)")
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="300 atoms (for tests)")
    args = p.parse_args(argv)
    if args.quick:
        args.atoms = 300
    return args


def main(argv=None, comm=None):
    """Run the example; returns a dict of the comparison on every rank (used by the tests)."""
    from mpi4py import MPI

    import pmewald
    from pmewald import systems, units

    args = parse_args(sys.argv[1:] if argv is None else argv)
    comm = MPI.COMM_WORLD if comm is None else comm
    rank, size = comm.Get_rank(), comm.Get_size()

    water = systems.water_box(target_atoms=args.atoms, seed=args.seed) if rank == 0 else None
    water = comm.bcast(water, root=0)
    n = water.n_atoms
    cutoff = 0.45 * float(np.min(np.diag(water.box)))

    # --- the caller's decomposition -------------------------------------------------------
    my_ids_of = 1000 + 7 * np.arange(n, dtype=np.int64)     # the caller's own atom names
    owner = slab_owner(water.box, water.positions, size)
    mine = np.nonzero(owner == rank)[0]
    mine = np.random.default_rng(args.seed + 17 * rank).permutation(mine)   # the caller's order
    ex = water.exclusions
    my_ex = my_ids_of[ex[owner[ex[:, 0]] == rank]]          # pairs whose first atom is mine
    split = np.sum(owner[ex[:, 0]] != owner[ex[:, 1]])

    pme = pmewald.PME(water.box, cutoff, tolerance=args.tolerance, comm=comm,
                      coulomb_constant=units.KCAL_MOL_ANGSTROM)
    res = pme.compute(water.positions[mine], water.charges[mine], ids=my_ids_of[mine],
                      exclusions=my_ex)
    assert res.forces.shape == (len(mine), 3)               # this rank's atoms, in its order
    p = pme.parameters

    # --- the same problem with every atom on rank 0 ----------------------------------------
    everything = np.arange(n) if rank == 0 else np.arange(0)
    one = pmewald.PME(water.box, cutoff, alpha=p["alpha"], mesh=p["mesh"], order=p["order"],
                      differentiation=p["differentiation"], comm=comm,
                      coulomb_constant=units.KCAL_MOL_ANGSTROM)
    ref = one.compute(water.positions[everything], water.charges[everything],
                      ids=my_ids_of[everything], exclusions=my_ids_of[ex] if rank == 0 else None)

    # compare atom by atom: rank 0 holds the reference forces of every atom, indexed as
    # the system; send it each rank's (atom index, force) and look them up
    pieces = comm.gather((mine, res.forces), root=0)
    out = {"n_atoms": n, "atoms": mine, "forces": res.forces, "energy": res.energy,
           "reference_energy": ref.energy, "split_exclusions": int(split)}
    if rank == 0:
        f_ref = ref.forces                                   # rank 0 passed atoms 0..n-1 in order
        worst = 0.0
        for idx, f in pieces:
            worst = max(worst, float(np.max(np.abs(f - f_ref[idx]), initial=0.0)))
        scale = float(np.max(np.abs(f_ref)))
        de = abs(res.energy - ref.energy) / max(abs(t) for t in ref.terms.values())
        dw = float(np.max(np.abs(res.virial - ref.virial))) / max(abs(ref.energy), 1e-300)
        out.update(force_difference=worst / scale, energy_difference=de, virial_difference=dw)
        counts = [len(idx) for idx, _ in pieces]
        print(f"water box: {n} atoms, {len(ex)} excluded pairs ({split} across ranks), cutoff {cutoff:.3f} A")
        print(f"slabs along x, atoms per rank {counts}; caller's ids 1000 + 7 i, shuffled order")
        print(f"parameters: alpha {p['alpha']:.5f}, mesh {'x'.join(map(str, p['mesh']))}, order {p['order']}")
        print(f"energy (slabs)      {res.energy:.12f} kcal/mol")
        print(f"energy (all on 0)   {ref.energy:.12f} kcal/mol")
        print(f"max force difference / max force {worst / scale:.2e}; energy difference / largest term "
              f"{de:.2e}; virial difference / |E| {dw:.2e}")
        ok = worst <= 1e-10 * scale and de <= 1e-12 and dw <= 1e-10
        print("slab decomposition == all on rank 0:", "yes" if ok else "NO")
        out["ok"] = ok
    out = comm.bcast({k: v for k, v in out.items() if k not in ("atoms", "forces")}, root=0) | {
        "atoms": mine, "forces": res.forces}
    return out


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
