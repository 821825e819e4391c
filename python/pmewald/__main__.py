"""Command line: ``python -m pmewald [--version | info | demo | mesh-info]``.

Run it under ``mpirun -n N`` to use N ranks. With no arguments it runs the main
job (``demo``).
"""

from __future__ import annotations

import argparse
import sys


from ._mpi import COMM_MODES as MODES


def _rank_block(n, comm):
    """Contiguous block of atom indices for this rank (rank 0's atoms first)."""
    import numpy as np

    P, r = comm.Get_size(), comm.Get_rank()
    return np.arange(r * n // P, (r + 1) * n // P)


def _gather_forces(forces, n, comm):
    import numpy as np

    parts = comm.allgather(forces)
    return np.concatenate(parts, axis=0).reshape(n, 3)


def _rel_rms(f, fref):
    import numpy as np

    return float(np.sqrt(np.sum((f - fref) ** 2) / np.sum(fref ** 2)))


def _report(comm, title, pme, res, seconds, measured=None, measured_what=""):
    if comm.Get_rank() != 0:
        return
    p = pme.parameters
    mesh = "x".join(str(m) for m in p["mesh"])
    print(f"\n{title}")
    print(f"  alpha {p['alpha']:.6g}  mesh {mesh}  order {p['order']}  cutoff {p['cutoff']:g}  "
          f"differentiation {p['differentiation']}  comm_mode {p['comm_mode']}")
    print(f"  energy {res.energy:.12g}   " +
          "  ".join(f"{k} {v:.10g}" for k, v in res.terms.items()))
    line = (f"  estimated relative RMS force error {res.estimated_error:.3e} "
            f"(absolute {p['estimated_error_absolute']:.3e})")
    if measured is not None:
        line += f"; measured {measured:.3e} {measured_what}"
    print(line)
    t = pme.timings()
    calls = max(1.0, t.get("calls", 1.0))
    phases = ("migrate", "exclusions", "ghost_atoms", "real_space", "spread", "ghost", "fft", "solve",
              "gather", "reduce")
    print(f"  time per compute {seconds * 1e3:.2f} ms on {comm.Get_size()} ranks; rank 0 phases (ms): " +
          "  ".join(f"{k} {t[k] * 1e3 / calls:.2f}" for k in phases if k in t))
    print(f"  FFT: 1-D transforms {t.get('fft_1d', 0) * 1e3 / calls:.2f} ms, remap wait "
          f"{t.get('fft_comm_wait', 0) * 1e3 / calls:.2f} ms, {t.get('fft_messages', 0) / calls:.0f} messages "
          f"{t.get('fft_bytes', 0) / calls / 2**20:.1f} MiB per compute; halo "
          f"{t.get('ghost_messages', 0) / calls:.0f} messages {t.get('ghost_bytes', 0) / calls / 2**20:.1f} MiB")


def _timed(pme, comm, args, repeat):
    import time

    res = pme.compute(*args[:2], ids=args[2], exclusions=args[3])     # warm-up (and mesh choice)
    pme.reset_timings()
    comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(repeat):
        res = pme.compute(*args[:2], ids=args[2], exclusions=args[3])
    comm.Barrier()
    return res, (time.perf_counter() - t0) / repeat


def _demo(args) -> int:
    """The main job: a water box and a rock-salt crystal in every communication mode."""
    import numpy as np
    from mpi4py import MPI

    from . import PME, reference, show_config, systems, units

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    show_config(comm=comm)
    k = units.KCAL_MOL_ANGSTROM

    # --- water box (generated once, broadcast) -------------------------------------------
    water = systems.water_box(target_atoms=args.water_atoms, seed=0) if rank == 0 else None
    water = comm.bcast(water, root=0)
    n = water.n_atoms
    mine = _rank_block(n, comm)
    ex_local = water.exclusions[rank::comm.Get_size()]
    wargs = (water.positions[mine], water.charges[mine], water.ids[mine], ex_local)
    if rank == 0:
        print(f"\nWater box: {water.n_atoms} atoms, box {np.round(np.diag(water.box), 3)} A, "
              f"{water.exclusions.shape[0]} excluded pairs, kcal/mol/A, tolerance "
              f"{args.tolerance:g}, {comm.Get_size()} ranks")
    tight_forces = None
    if args.water_check:
        # self-consistency reference: the same solver at a much tighter tolerance
        tight = PME(water.box, args.cutoff, tolerance=args.tolerance * 1e-3, order=8,
                    coulomb_constant=k, comm=comm)
        tight_forces = _gather_forces(tight.compute(*wargs[:2], ids=wargs[2],
                                                    exclusions=wargs[3]).forces, n, comm)
    for mode in MODES:
        pme = PME(water.box, args.cutoff, tolerance=args.tolerance, coulomb_constant=k,
                  comm=comm, comm_mode=mode)
        res, sec = _timed(pme, comm, wargs, args.repeat)
        measured = None
        if tight_forces is not None:
            measured = _rel_rms(_gather_forces(res.forces, n, comm), tight_forces)
        _report(comm, f"water box, comm_mode={mode}", pme, res, sec, measured,
                f"(vs the same solver at tolerance {args.tolerance * 1e-3:g})")

    # --- rock-salt crystal, thermally displaced, vs the direct Ewald sum -------------------
    crystal = systems.displace(systems.rock_salt((args.crystal_cells,) * 3), 0.1, seed=1)
    ref = None
    if rank == 0:
        ref = reference.ewald(crystal.box, crystal.positions, crystal.charges,
                              coulomb_constant=units.EV_ANGSTROM)
    ref = comm.bcast(ref, root=0)
    n = crystal.n_atoms
    mine = _rank_block(n, comm)
    cargs = (crystal.positions[mine], crystal.charges[mine], crystal.ids[mine], None)
    cutoff = 0.45 * float(np.min(reference.cell_heights(crystal.box)))
    if rank == 0:
        print(f"\nRock salt {crystal.name}: {n} atoms, eV/A, cutoff {cutoff:.3f} A, "
              f"direct Ewald energy {ref.energy:.12g} eV")
    for mode in MODES:
        pme = PME(crystal.box, cutoff, tolerance=args.tolerance,
                  coulomb_constant=units.EV_ANGSTROM, comm=comm, comm_mode=mode)
        res, sec = _timed(pme, comm, cargs, args.repeat)
        measured = _rel_rms(_gather_forces(res.forces, n, comm), ref.forces)
        _report(comm, f"rock salt, comm_mode={mode}", pme, res, sec, measured,
                f"(vs the direct Ewald sum; energy error {abs(res.energy - ref.energy):.3e} eV)")
    return 0


def _mesh_info(args) -> int:
    from mpi4py import MPI

    from . import geometry

    comm = MPI.COMM_WORLD
    mesh = tuple(args.mesh)
    P = comm.Get_size()
    grid = geometry.processor_grid_3d(P, mesh)
    boxes = comm.allgather(geometry.brick_box(P, mesh, comm.Get_rank()))
    if comm.Get_rank() == 0:
        print(f"Mesh {mesh[0]}x{mesh[1]}x{mesh[2]} on {P} ranks: processor grid {grid}, "
              f"brick surface {geometry.grid_surface(grid, mesh)} points")
        for r, (lo, hi) in enumerate(boxes):
            print(f"  rank {r}: brick {lo} .. {hi}  ({geometry.volume((lo, hi))} points)")
        for axis, name in enumerate("xyz"):
            pencils = geometry.pencil_boxes(axis, P, mesh)
            print(f"  {name}-pencils: " + ", ".join(f"{lo}..{hi}" for lo, hi in pencils))
        ok, why = geometry.tiles_exactly(boxes, mesh)
        print(f"  bricks tile the mesh exactly: {ok} {why}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pmewald", description=__doc__)
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("info", help="print the build and MPI configuration")
    demo = sub.add_parser("demo", help="run the main job (default)")
    demo.add_argument("--water-atoms", type=int, default=20000)
    demo.add_argument("--crystal-cells", type=int, default=4)
    demo.add_argument("--tolerance", type=float, default=1e-5)
    demo.add_argument("--cutoff", type=float, default=9.0)
    demo.add_argument("--repeat", type=int, default=3)
    demo.add_argument("--no-water-check", dest="water_check", action="store_false",
                      help="skip the tight-tolerance self-consistency check of the water box")
    mi = sub.add_parser("mesh-info", help="print the processor grid, bricks and pencils of a mesh")
    mi.add_argument("--mesh", type=int, nargs=3, default=[60, 60, 45])
    args = parser.parse_args(argv)
    if args.version:
        from ._version import __version__

        print(f"pmewald {__version__}")
        return 0
    if args.command == "info":
        from . import show_config

        show_config()
        return 0
    if args.command is None:
        args = parser.parse_args(["demo"] + list(argv or sys.argv[1:]))
    if args.command == "mesh-info":
        return _mesh_info(args)
    return _demo(args)


if __name__ == "__main__":
    sys.exit(main())
