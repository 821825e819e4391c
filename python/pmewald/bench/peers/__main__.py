"""``python -m pmewald.bench.peers [_worker KIND JOB | peers options]``: the peer benchmark's
entry point; ``_worker`` runs one measurement in a process of its own (the runner in
:mod:`pmewald.bench.peers` starts them)."""

import argparse
import sys

from . import _worker_main, add_parser, bench_peers

if len(sys.argv) > 1 and sys.argv[1] == "_worker":
    _worker_main(sys.argv[2:])
else:
    ap = argparse.ArgumentParser(prog="python -m pmewald.bench.peers")
    sp = ap.add_subparsers(dest="what", required=True)
    add_parser(sp)
    sys.exit(bench_peers(ap.parse_args(sys.argv[1:])))
