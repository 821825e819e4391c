"""LAMMPS's peptide example (Debian's lammps-examples) with pmewald in place of pppm, NVE, on
LAMMPS's own ranks and domain decomposition.

    python examples/lammps_peptide.py [--steps 1000] [--mode kspace|full] [--tolerance 1e-5]
    mpirun -n 4 python examples/lammps_peptide.py

in.peptide's force field (CHARMM, SHAKE on the bonds and angle of its waters and hydrogens) with
``fix nve`` instead of ``fix nvt``, and SHAKE defined after pmewald's fix (so that its constraint
forces see pmewald's). kspace mode keeps the pair style lj/charmm/coul/long (its
real-space part) and pmewald computes the reciprocal part; full mode gives pmewald all the
electrostatics and the pair style only CHARMM's LJ. Prints LAMMPS's thermo every 100 steps, the
total-energy drift (linear fit) and the time per step.
"""

import argparse
import time

import numpy as np

DATA = "/usr/share/lammps/examples/peptide/data.peptide"
INPUT = """
units real
atom_style full
pair_style {pair}
bond_style harmonic
angle_style charmm
dihedral_style charmm
improper_style harmonic
read_data {data}
neighbor 2.0 bin
neigh_modify delay 5
timestep {dt}
velocity all create 275.0 4928459 mom yes rot yes dist gaussian
thermo_style custom step temp pe etotal press
thermo_modify norm no
thermo {thermo}
"""
PAIRS = {"kspace": "lj/charmm/coul/long 8.0 10.0 10.0", "full": "lj/charmm/coul/charmm 8.0 10.0 0.05 0.1"}


def main(argv=None, comm=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--mode", choices=("kspace", "full"), default="kspace")
    ap.add_argument("--tolerance", type=float, default=1e-5, help="pmewald's relative RMS force error")
    ap.add_argument("--dt", type=float, default=2.0, help="fs")
    ap.add_argument("--quick", action="store_true", help="20 steps (the test suite)")
    args = ap.parse_args(argv)
    if args.quick:
        args.steps = 20

    from mpi4py import MPI

    from pmewald.interfaces.lammps import attach, open_lammps

    comm = MPI.COMM_WORLD if comm is None else comm
    lmp = open_lammps(["-log", "none", "-screen", "none", "-nocite"], comm=comm)
    lmp.commands_string(INPUT.format(pair=PAIRS[args.mode], data=DATA, dt=args.dt, thermo=max(1, args.steps // 10)))
    fix = attach(lmp, mode=args.mode, cutoff=10.0, tolerance=args.tolerance, special_coul=(0.0, 0.0, 0.0))
    # The fixes after pmewald's: SHAKE's constraint forces must see every other force (LAMMPS
    # runs post-force fixes in the order they are defined).
    lmp.command("fix 1 all nve")
    lmp.command("fix 2 all shake 0.0001 10 100 b 4 6 8 10 12 14 18 a 31")
    energies, every = [], max(1, args.steps // 10)
    t0 = time.perf_counter()
    for k in range(args.steps // every):
        fix.run(every, "pre no post no" if k else "post no")  # the first run sets SHAKE up
        energies.append(lmp.get_thermo("etotal"))
    seconds = time.perf_counter() - t0
    t_ps = np.arange(1, len(energies) + 1) * every * args.dt * 1e-3
    out = {"ranks": comm.Get_size(), "mode": args.mode, "steps": args.steps, "ms_per_step": seconds / args.steps * 1e3,
           "drift_kcal_mol_ps": float(np.polyfit(t_ps, energies, 1)[0]) if len(energies) > 1 else 0.0,
           "max_deviation_kcal_mol": float(np.abs(np.array(energies) - energies[0]).max()),
           "parameters": {k: fix.parameters[k] for k in ("alpha", "mesh", "order", "differentiation")}}
    if comm.Get_rank() == 0:
        print(f"{args.mode}: {args.steps} steps on {out['ranks']} LAMMPS rank(s), {out['ms_per_step']:.1f} ms/step, "
              f"drift {out['drift_kcal_mol_ps']:.3e} kcal/mol/ps, pmewald {out['parameters']}")
    lmp.close()
    return out


if __name__ == "__main__":
    main()
