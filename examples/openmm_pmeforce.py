"""An OpenMM Simulation whose electrostatics are pmewald's: alanine dipeptide in TIP3P water built
with OpenMM's own amber14 force field, NVE with a StateDataReporter, on any number of MPI ranks
(rank 0 runs OpenMM, the others serve pmewald's share of each step).

    python examples/openmm_pmeforce.py [--steps 1000] [--box 3.0] [--tolerance 1e-4]
    mpirun -n 2 python examples/openmm_pmeforce.py

Prints the reporter's lines, the total-energy drift (linear fit, kJ/mol/ns per atom), the speed
(ns/day) and pmewald's parameters.
"""

import argparse
import sys
import time

import numpy as np


def main(argv=None, comm=None, out=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--box", type=float, default=3.0, help="cubic box edge, nm")
    ap.add_argument("--cutoff", type=float, default=0.9, help="nm")
    ap.add_argument("--tolerance", type=float, default=1e-4, help="pmewald's relative RMS force error")
    ap.add_argument("--dt", type=float, default=2.0, help="fs (HBonds constraints, rigid water)")
    ap.add_argument("--platform", default="CPU", help="OpenMM platform (CPU, Reference)")
    ap.add_argument("--quick", action="store_true", help="20 steps in a 2.2 nm box (the test suite)")
    args = ap.parse_args(argv)
    if args.quick:
        args.steps, args.box, args.cutoff = 20, 2.2, 0.8

    import openmm
    from mpi4py import MPI
    from openmm import app, unit

    from pmewald.interfaces.openmm_force import PMEForce
    from pmewald.systems.openmm import solvated_peptide

    comm = MPI.COMM_WORLD if comm is None else comm
    out = sys.stdout if out is None else out
    topology, system, positions = solvated_peptide(box=args.box, cutoff=args.cutoff)  # the same on every rank
    result = {"ranks": comm.Get_size(), "atoms": system.getNumParticles(), "steps": args.steps}
    with PMEForce(system, tolerance=args.tolerance, comm=comm) as pme:
        if not pme.is_driver:
            pme.serve()
        else:
            integrator = openmm.VerletIntegrator(args.dt * unit.femtoseconds)
            platform = openmm.Platform.getPlatformByName(args.platform)
            sim = app.Simulation(topology, system, integrator, platform)
            sim.context.setPositions(positions)
            sim.context.setVelocitiesToTemperature(300 * unit.kelvin, 1)
            every = max(1, args.steps // 10)
            sim.reporters.append(app.StateDataReporter(out, every, step=True, potentialEnergy=True,
                                                       totalEnergy=True, temperature=True))
            energies = []
            t0 = time.perf_counter()
            for _ in range(args.steps // every):
                sim.step(every)
                st = sim.context.getState(getEnergy=True)
                energies.append((st.getPotentialEnergy() + st.getKineticEnergy()).value_in_unit(unit.kilojoule_per_mole))
            seconds = time.perf_counter() - t0
            t_ns = np.arange(1, len(energies) + 1) * every * args.dt * 1e-6
            slope = np.polyfit(t_ns, energies, 1)[0] if len(energies) > 1 else 0.0
            result.update(drift_kj_mol_ns_atom=float(slope / result["atoms"]),
                          max_deviation_kj_mol_atom=float(np.abs(np.array(energies) - energies[0]).max() / result["atoms"]),
                          ns_per_day=args.steps * args.dt * 1e-6 / seconds * 86400.0,
                          parameters={k: pme.parameters[k] for k in ("alpha", "mesh", "order", "differentiation")})
            print(f"{result['atoms']} atoms, {args.steps} steps on {result['ranks']} rank(s): drift "
                  f"{result['drift_kj_mol_ns_atom']:.3e} kJ/mol/ns per atom, {result['ns_per_day']:.2f} ns/day, "
                  f"pmewald {result['parameters']}", file=out)
    return result


if __name__ == "__main__":
    main()
