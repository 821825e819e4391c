"""Compare pmewald's electrostatics with OpenMM's Reference-platform PME for a water box
built as an OpenMM System (same alpha, mesh and order 5; kJ/mol and nm).

    python examples/openmm_compare.py [--molecules 216] [--cutoff 0.9]
    mpirun -n 2 python examples/openmm_compare.py
"""

import argparse


def main(argv=None, comm=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--molecules", type=int, default=216)
    ap.add_argument("--cutoff", type=float, default=0.9, help="nm")
    ap.add_argument("--ewald-error-tolerance", type=float, default=5e-4, help="OpenMM's, chooses alpha and mesh")
    ap.add_argument("--scaled-pairs", action="store_true", help="give the H-H exceptions a non-zero chargeProd")
    ap.add_argument("--quick", action="store_true", help="64 molecules, cutoff 0.6 nm (for the test suite)")
    args = ap.parse_args(argv)
    if args.quick:
        args.molecules, args.cutoff = 64, 0.6

    from mpi4py import MPI

    from pmewald.interfaces.openmm import compare_with_openmm
    from pmewald.systems.openmm import water_box_system

    comm = MPI.COMM_WORLD if comm is None else comm
    system, positions = water_box_system(args.molecules, cutoff=args.cutoff,
                                         ewald_error_tolerance=args.ewald_error_tolerance,
                                         scaled_pairs=args.scaled_pairs)
    r = compare_with_openmm(system, positions, comm=comm)
    if comm.Get_rank() == 0:
        print(f"water box: {args.molecules} molecules, cutoff {r.cutoff} nm, alpha {r.alpha:.6f}/nm, "
              f"mesh {r.mesh}, order {r.order}, {comm.Get_size()} rank(s)")
        print(f"energy  OpenMM Reference {r.energy_openmm:.10f} kJ/mol   pmewald {r.energy_pmewald:.10f} kJ/mol")
        print(f"relative energy difference    {r.relative_energy_difference:.3e}")
        print(f"relative RMS force difference {r.relative_rms_force_difference:.3e}")
    return r


if __name__ == "__main__":
    main()
