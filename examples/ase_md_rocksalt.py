"""NVE molecular dynamics of a hot rock-salt crystal with ASE: pmewald electrostatics plus a
Born-Mayer repulsion, combined with ASE's SumCalculator. Prints the total-energy drift per atom.

    python examples/ase_md_rocksalt.py --steps 1000
    mpirun -n 2 python examples/ase_md_rocksalt.py --steps 1000

Every MPI rank holds the whole Atoms (ASE's convention); PMECalculator splits the atoms
across the ranks internally and gives every rank the full forces, so all ranks integrate
identical trajectories.
"""

import argparse
import time

import numpy as np


def build(n_cells, temperature_K, seed=0, rattle=0.1):
    from ase import units
    from ase.build import bulk

    atoms = bulk("NaCl", "rocksalt", a=5.64, cubic=True).repeat(n_cells)
    atoms.set_initial_charges([1.0 if s == "Na" else -1.0 for s in atoms.get_chemical_symbols()])
    rng = np.random.default_rng(seed)
    atoms.positions += rng.normal(scale=rattle, size=atoms.positions.shape)
    m = atoms.get_masses()[:, None]
    p = np.sqrt(m * units.kB * temperature_K) * rng.normal(size=(len(atoms), 3))
    atoms.set_momenta(p - m * p.sum(axis=0) / m.sum())  # Maxwell-Boltzmann, no net momentum
    return atoms


def main(argv=None, comm=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--cells", type=int, default=2, help="conventional cells per axis (8 ions each)")
    ap.add_argument("--dt", type=float, default=1.0, help="time step in fs")
    ap.add_argument("--temperature", type=float, default=1500.0, help="initial Maxwell-Boltzmann temperature, K")
    ap.add_argument("--tolerance", type=float, default=1e-5, help="pmewald relative RMS force tolerance")
    ap.add_argument("--cutoff", type=float, default=5.5, help="real-space and repulsion cutoff, Angstrom")
    ap.add_argument("--comm-mode", default="nonblocking")
    ap.add_argument("--quick", action="store_true", help="20 steps, tolerance 1e-4 (for the test suite)")
    args = ap.parse_args(argv)
    if args.quick:
        args.steps, args.tolerance = 20, 1e-4

    from ase import units
    from ase.calculators.mixing import SumCalculator
    from ase.md.verlet import VelocityVerlet
    from mpi4py import MPI

    from pmewald.interfaces.ase import BornMayer, PMECalculator

    comm = MPI.COMM_WORLD if comm is None else comm
    rank = comm.Get_rank()
    atoms = build(args.cells, args.temperature)
    rho = 0.317
    pme = PMECalculator(cutoff=args.cutoff, tolerance=args.tolerance, comm=comm, comm_mode=args.comm_mode)
    atoms.calc = SumCalculator([pme, BornMayer(BornMayer.rock_salt_prefactor(2.82, rho), rho, args.cutoff)])
    dyn = VelocityVerlet(atoms, timestep=args.dt * units.fs)
    n = len(atoms)
    energies = []
    dyn.attach(lambda: energies.append(atoms.get_total_energy()), interval=1)
    t0 = time.perf_counter()
    dyn.run(args.steps)
    seconds = time.perf_counter() - t0
    e = np.array(energies) / n
    steps = np.arange(len(e))
    slope = np.polyfit(steps, e, 1)[0] if len(e) > 1 else 0.0
    out = {
        "atoms": n, "ranks": comm.Get_size(), "steps": args.steps, "dt_fs": args.dt, "tolerance": args.tolerance,
        "mesh": pme.pme.parameters["mesh"], "alpha": pme.pme.parameters["alpha"],
        "final_temperature_K": atoms.get_temperature(),
        "drift_end_minus_start_eV_per_atom": float(e[-1] - e[0]),
        "max_deviation_eV_per_atom": float(np.abs(e - e[0]).max()),
        "fitted_drift_eV_per_atom": float(slope * (len(e) - 1)),
        "seconds": seconds,
    }
    if rank == 0:
        print(f"NaCl {n} ions on {out['ranks']} rank(s): {args.steps} steps of {args.dt} fs, "
              f"tolerance {args.tolerance:g}, mesh {out['mesh']}, alpha {out['alpha']:.4f}/A, "
              f"T_end {out['final_temperature_K']:.0f} K, {seconds:.1f} s")
        print(f"energy drift per atom: end-start {out['drift_end_minus_start_eV_per_atom']:.2e} eV, "
              f"fitted {out['fitted_drift_eV_per_atom']:.2e} eV, max |E-E0| {out['max_deviation_eV_per_atom']:.2e} eV")
    return out


if __name__ == "__main__":
    main()
