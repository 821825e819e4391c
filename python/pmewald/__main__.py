"""Command line: ``python -m pmewald [--version | info | demo]``.

Run it under ``mpirun -n N`` to use N ranks. With no arguments it runs the main
job (``demo``).
"""

from __future__ import annotations

import argparse
import sys


def _demo(args) -> int:
    from mpi4py import MPI

    from . import geometry, show_config

    comm = MPI.COMM_WORLD
    show_config(comm=comm)
    mesh = tuple(args.mesh)
    P = comm.Get_size()
    grid = geometry.processor_grid_3d(P, mesh)
    boxes = comm.allgather(geometry.brick_box(P, mesh, comm.Get_rank()))
    if comm.Get_rank() == 0:
        print(f"\nMesh {mesh[0]}x{mesh[1]}x{mesh[2]} on {P} ranks: processor grid {grid}, "
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
    demo.add_argument("--mesh", type=int, nargs=3, default=[60, 60, 45])
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
    return _demo(args)


if __name__ == "__main__":
    sys.exit(main())
