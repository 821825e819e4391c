"""Per-rank size limits of the distributed mesh, checked before anything is allocated.

Global sizes (mesh volumes, byte counts) are 64-bit throughout; what is limited is
what one rank holds:

- elements: the exchange layer indexes a rank's arrays with 32-bit integers
  (``Index`` in cpp/comm/exchange_plan.hpp), so every array a rank stores (its ghosted brick,
  its FFT pencils) must hold at most 2^31 - 1 elements;
- memory: the arrays a solver or FFT allocates on a rank (a lower bound: the grids,
  spectra and FFT work buffers) must fit in the memory available to that rank.

Both give a ``ValueError`` that says the limit and what to do (more ranks, or a
coarser mesh), agreed over the communicator, instead of an integer overflow or an
out-of-memory error on one rank part-way through a collective set-up.
``PMEWALD_MEMORY_CHECK=0`` turns the memory part off (the element limit stays).
"""

from __future__ import annotations

import math
import os

from .. import geometry

INDEX_LIMIT = 2**31 - 1


def _volume(box):
    lo, hi = box
    return math.prod(max(0, int(h) - int(l)) for l, h in zip(lo, hi))


def _half(mesh, axis):
    m = list(mesh)
    m[axis] = m[axis] // 2 + 1
    return tuple(m)


def solver_footprint(mesh, nranks, rank, order, differentiation):
    """(largest array in elements, bytes at least) of rank `rank` of `nranks` in a PME solver."""
    mesh = tuple(int(n) for n in mesh)
    brick = geometry.brick_box(nranks, mesh, rank)
    n_brick = _volume(brick)
    ext = math.prod(h - l + order - 1 for l, h in zip(*brick)) if n_brick else 0
    halved = 2 if nranks == 1 else 0
    spec = _half(mesh, halved)
    rx = _volume(geometry.pencil_box(0, nranks, mesh, rank))
    pencils = [_volume(geometry.pencil_box(a, nranks, spec, rank)) for a in range(3)]
    fields = 4 if differentiation == "ik" else 1
    nbytes = (8 * ext * fields            # charge grid (+ 3 field grids for ik)
              + 16 * pencils[2] * fields  # spectrum (+ 3 field spectra)
              + 16 * pencils[2]           # influence function and virial coefficients
              + 8 * rx + 32 * max(pencils)  # FFT work buffers
              + _remaps(nranks, [(rx, 8), (pencils[1], 16), (pencils[2], 16)]))
    return max(ext, rx, *pencils), nbytes


def _remaps(nranks, stages):
    """Bytes of the remap plans between the FFT stages (volume, bytes per element) on
    several ranks: 32-bit index lists and message buffers for the part that moves,
    (P - 1) / P of a stage (measured within ~20% on 2 ranks, docs/reliability.md)."""
    if nranks == 1:
        return 0
    return sum((4 + item) * volume for volume, item in stages) * (nranks - 1) // nranks


def fft_footprint(mesh, nranks, rank, boxes, real=False, halved_axis=0):
    """(largest array in elements, bytes at least) of a DistributedFFT (`real`: a
    DistributedRealFFT) with this rank's user boxes `boxes` (inbox, outbox[, storage])."""
    mesh = tuple(int(n) for n in mesh)
    own = [_volume(b) for b in boxes]
    if real:
        spec = _half(mesh, halved_axis)
        rx = _volume(geometry.pencil_box(0, nranks, mesh, rank))
        pencils = [_volume(geometry.pencil_box(a, nranks, spec, rank)) for a in range(3)]
        big = max(pencils + own[1:2])
        return (max(rx, *pencils, *own),
                8 * max(rx, *own) + 32 * big + _remaps(nranks, [(rx, 8), (big, 16), (big, 16), (own[1], 16)]))
    pencils = [_volume(geometry.pencil_box(a, nranks, mesh, rank)) for a in range(3)]
    big = max(pencils + own)
    return max(*pencils, *own), 32 * big + _remaps(nranks, [(big, 16)] * 4)


def _read_int(path):
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _status_kib(field):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return 1024 * int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def available_bytes(node_ranks=1):
    """(bytes this rank may still allocate, where that limit comes from), or (None, "")
    when nothing is known. Node-wide memory (MemAvailable, a cgroup limit) is shared
    by the `node_ranks` ranks of the communicator on this node; the process limits
    (RLIMIT_AS, RLIMIT_DATA) are this rank's own."""
    found = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    found.append((1024 * int(line.split()[1]) // node_ranks,
                                  f"MemAvailable / {node_ranks} rank(s) on this node"))
    except (OSError, ValueError, IndexError):
        pass
    limit, used = _read_int("/sys/fs/cgroup/memory.max"), _read_int("/sys/fs/cgroup/memory.current")
    if limit is not None and used is not None:
        found.append((max(0, limit - used) // node_ranks, f"cgroup memory.max / {node_ranks} rank(s)"))
    try:
        import resource

        for name, field in (("RLIMIT_AS", "VmSize"), ("RLIMIT_DATA", "VmData")):
            soft = resource.getrlimit(getattr(resource, name))[0]
            now = _status_kib(field)
            if soft != resource.RLIM_INFINITY and now is not None:
                found.append((max(0, soft - now), f"{name} of this process"))
    except (ImportError, OSError, ValueError, AttributeError):
        pass
    if not found:
        return None, ""
    return min(found)


def node_ranks(comm):
    """Collective: how many ranks of `comm` share this rank's node (its memory). The node's
    communicator is made by the core, safely while other threads create theirs
    (pmewald._mpi.collective)."""
    from .. import _core

    return _core.ranks_on_node(comm)


def check_fits(what, elements, nbytes, nranks, ranks_on_node):
    """ValueError naming the limit and the remedy when this rank's share does not fit."""
    if elements > INDEX_LIMIT:
        more = max(nranks + 1, math.ceil(nranks * elements / INDEX_LIMIT))
        raise ValueError(f"{what}: this rank's largest array would hold {elements:,} elements, more than the "
                         f"2^31 - 1 = {INDEX_LIMIT:,} a rank can index (32-bit local indices of the exchange "
                         f"layer); use more ranks (at least about {more}) or a coarser mesh")
    if os.environ.get("PMEWALD_MEMORY_CHECK", "1").strip() == "0":
        return
    avail, source = available_bytes(ranks_on_node)
    if avail is not None and nbytes > avail:
        raise ValueError(f"{what}: needs at least {nbytes / 2**30:.3g} GiB on this rank, but only "
                         f"{avail / 2**30:.3g} GiB are available to it ({source}); use more ranks (on more "
                         f"nodes) or a coarser mesh (a looser tolerance)")
