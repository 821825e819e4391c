"""pmewald supplies the electrostatics, OpenMM everything else, in a simple velocity-Verlet loop.

Flexible SPC/E-like water: OpenMM computes bonds, angles and Lennard-Jones (a copy of the
System whose NonbondedForce charges and exception charge products are zeroed, on the
Reference platform); pmewald computes the PME electrostatics with OpenMM's alpha, mesh and
order, excluding the same pairs. Prints the total-energy drift.

    python examples/openmm_md.py [--steps 500] [--molecules 64]
    mpirun -n 2 python examples/openmm_md.py
"""

import argparse
import time

import numpy as np


def main(argv=None, comm=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--molecules", type=int, default=64)
    ap.add_argument("--cutoff", type=float, default=0.6, help="nm")
    ap.add_argument("--dt", type=float, default=0.5, help="time step, fs (flexible water)")
    ap.add_argument("--temperature", type=float, default=300.0, help="K")
    ap.add_argument("--quick", action="store_true", help="20 steps (for the test suite)")
    args = ap.parse_args(argv)
    if args.quick:
        args.steps = 20

    import openmm
    from mpi4py import MPI
    from openmm import unit

    from pmewald.interfaces.openmm import from_openmm
    from pmewald.systems.openmm import water_box_system

    comm = MPI.COMM_WORLD if comm is None else comm
    system, x = water_box_system(args.molecules, cutoff=args.cutoff, bonded=True)
    problem = from_openmm(system, x)          # charges, exclusions, alpha, mesh (OpenMM's)
    pme = problem.pme(comm=comm)

    # OpenMM without electrostatics: zero every charge and exception charge product.
    others = openmm.XmlSerializer.clone(system)
    nb = [f for f in others.getForces() if isinstance(f, openmm.NonbondedForce)][0]
    for i in range(nb.getNumParticles()):
        _, sig, eps = nb.getParticleParameters(i)
        nb.setParticleParameters(i, 0.0, sig, eps)
    for k in range(nb.getNumExceptions()):
        i, j, _, sig, eps = nb.getExceptionParameters(k)
        nb.setExceptionParameters(k, i, j, 0.0, sig, eps)
    ctx = openmm.Context(others, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("Reference"))

    def forces(pos):
        ctx.setPositions(pos)
        st = ctx.getState(getEnergy=True, getForces=True)
        e_o = st.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole)
        f_o = st.getForces(asNumpy=True).value_in_unit(unit.kilojoule_per_mole / unit.nanometer)
        e_p, f_p = problem.compute(pme=pme, positions=pos)
        return e_o + e_p, np.asarray(f_o) + f_p

    mass = np.array([system.getParticleMass(i).value_in_unit(unit.dalton) for i in range(len(x))])[:, None]
    kT = unit.MOLAR_GAS_CONSTANT_R.value_in_unit(unit.kilojoule_per_mole / unit.kelvin) * args.temperature
    rng = np.random.default_rng(1)
    v = rng.normal(size=x.shape) * np.sqrt(kT / mass)       # nm/ps with kJ/mol and dalton
    v -= (mass * v).sum(axis=0) / mass.sum()
    dt = args.dt * 1e-3                                      # ps
    e_pot, f = forces(x)
    energies = []
    t0 = time.perf_counter()
    for _ in range(args.steps):
        v += 0.5 * dt * f / mass
        x = x + dt * v
        e_pot, f = forces(x)
        v += 0.5 * dt * f / mass
        energies.append(e_pot + 0.5 * (mass * v * v).sum())
    seconds = time.perf_counter() - t0
    e = np.array(energies)
    n = len(x)
    out = {"atoms": n, "steps": args.steps, "dt_fs": args.dt, "alpha": problem.alpha, "mesh": problem.mesh,
           "drift_kj_mol_per_atom": float((e[-1] - e[0]) / n),
           "max_deviation_kj_mol_per_atom": float(np.abs(e - e[0]).max() / n), "seconds": seconds}
    if comm.Get_rank() == 0:
        print(f"{n} atoms, {args.steps} steps of {args.dt} fs, alpha {problem.alpha:.4f}/nm, mesh {problem.mesh}, "
              f"{comm.Get_size()} rank(s), {seconds:.1f} s")
        print(f"total energy drift per atom: {out['drift_kj_mol_per_atom']:.2e} kJ/mol "
              f"(max |E-E0| {out['max_deviation_kj_mol_per_atom']:.2e})")
    return out


if __name__ == "__main__":
    main()
