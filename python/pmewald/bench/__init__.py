"""Benchmarks: ``python -m pmewald.bench fft [options]`` (run it under mpirun),
``python -m pmewald.bench peers [options]`` (run it without mpirun: pmewald against LAMMPS
and OpenMM at matched measured force error, see :mod:`pmewald.bench.peers`) and
``python -m pmewald.bench cost [options]`` (calibrates the cost model of the automatic
parameter choice, see :mod:`pmewald.bench.cost`) and ``python -m pmewald.bench scale [options]``
(run it without mpirun: the solver on 16-1,024 simulated ranks under SimGrid SMPI and the
communication model to 65,536, see :mod:`pmewald.bench.scale` and docs/scaling.md) and
``python -m pmewald.bench accuracy [options]`` (the error estimates' validation sweep against
direct Ewald sums, see :mod:`pmewald.bench.accuracy` and docs/accuracy.md).

The benchmarks' one home: this subpackage holds the benchmarks with a subcommand, one module
each (:mod:`pmewald.bench.fft`, :mod:`pmewald.bench.peers`, :mod:`pmewald.bench.cost`,
:mod:`pmewald.bench.scale`, :mod:`pmewald.bench.accuracy`);
standalone measurement scripts live in the repository's ``benchmarks/`` folder
(docs/benchmarks.md lists both).
"""

from __future__ import annotations

import argparse
import importlib

#: subcommand -> (module, the function of it that runs the subcommand); each module has
#: ``add_parser(sub)``. Imported when the command runs (``python -m pmewald.bench.peers
#: _worker`` must not find its module imported already).
SUBCOMMANDS = {"fft": ("fft", "bench_fft"), "peers": ("peers", "bench_peers"), "cost": ("cost", "bench_cost"),
               "scale": ("scale", "main"), "accuracy": ("accuracy", "bench_accuracy")}


def main(argv=None) -> int:
    modules = {name: importlib.import_module(f".{module}", __name__) for name, (module, _) in SUBCOMMANDS.items()}
    # The help text: the subcommands (this package's docstring) and what the FFT benchmark measures.
    description = __doc__.split("\n\n")[0] + "\n\n" + modules["fft"].__doc__.split("\n\n", 1)[1]
    parser = argparse.ArgumentParser(prog="python -m pmewald.bench", description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    for module in modules.values():
        module.add_parser(sub)
    args = parser.parse_args(argv)
    return getattr(modules[args.what], SUBCOMMANDS[args.what][1])(args)
