"""An MPI-free model of pmewald's communication at any rank count (docs/scaling.md).

:func:`census` asks the C++ plan geometry (``_core.solver_census``, the functions the
solver's own plans are built from) what one compute call sends, rank by rank: every
message of the FFT remaps, the halo, the ghost atoms and their forces. From it
:func:`traffic` gives messages and bytes per rank per exchange, and :func:`comm_time` a
latency-bandwidth estimate of the communication time of one call in each communication
mode on a :class:`Network`:

* a message from rank r to s costs ``alpha(r, s) + bytes / beta``: latency by the number
  of links between their endpoints, bandwidth of one endpoint link;
* ``nonblocking``: all sends and receives at once, each endpoint's link serialises its
  bytes: ``max alpha + max(bytes out, bytes in) / beta`` per rank;
* ``pt2pt``: blocking sends one after another (a send completes at delivery):
  ``sum over sends (alpha + bytes / beta)``, or the receive side if longer;
* ``collective``: MPICH's scattered ``MPI_Alltoallv`` on the sub-communicator (the
  exchange graph's connected component): its ranks taken 32 at a time, each block
  waited before the next, zero counts skipped: ``sum over non-empty blocks (alpha +
  max(block bytes out, in) / beta)``;
* the ghost-atom exchange (every mode): direct, sizes and data together, ``2 alpha + bytes /
  beta``; staged, ``alpha + bytes / beta`` per axis and pulse, one after another;
* with a per-message CPU cost ``o`` (``Network.overhead``; 0 on the platforms as given), every
  rank adds ``o x (messages sent + received)`` to each exchange;
* the slowest rank sets each exchange's time; on a dragonfly the bytes between two
  groups also share one bundle of global links, and those from one switch to another
  group one gateway link (SimGrid's minimal routing);
* ``allreduce`` calls: recursive doubling, ``ceil(log2 P)`` latencies each.

:func:`step_time` adds computation, scaled from a calibration run (the simulated per-phase
times at one rank count) by each phase's work per rank: owned atoms, the pair search's
candidates (owned atoms plus :data:`GHOST_PAIR_WEIGHT` per ghost atom), ghost atoms, mesh
points of the ghosted brick, spectrum points of the pencils. Everything is numpy over the
census arrays: 65,536 ranks take seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ... import _core
from ..._mpi import COMM_MODES

MODES = COMM_MODES
MODEL_VERSION = 2  # in the keys of cached predictions (bench scale): bump when step_time changes
THROTTLE = 32  # MPICH's MPIR_CVAR_ALLTOALL_THROTTLE


@dataclass(frozen=True)
class Network:
    """Endpoints joined by links of one bandwidth and latency (scale/platforms/*.xml).

    fat tree: radix-64 switches, 32 endpoints per leaf, 32 leaves per pod (2 links within a
    leaf, 4 within a pod, 6 across pods: the 1,024-endpoint platform is one pod).
    dragonfly: 16 endpoints per switch, 32 switches per group (2 links on one switch, 3 in a
    group, 5 between groups), groups joined by bundles of ``global_links`` links.
    """
    name: str
    topology: str
    link_latency: float
    bandwidth: float
    leaf: int = 32
    pod: int = 1024
    router: int = 16
    group: int = 512
    global_links: int = 16
    ranks_per_host: int = 1
    # Per-message CPU cost (LogGP's o): seconds each send and each receive keeps its rank
    # busy, one after another (SimGrid's smpi/os, ois and or; 0 in the platforms as given).
    overhead: float = 0.0

    def links(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        a, b = src // self.ranks_per_host, dst // self.ranks_per_host
        if self.topology == "fat_tree":
            n = np.where(a // self.leaf == b // self.leaf, 2, np.where(a // self.pod == b // self.pod, 4, 6))
        else:
            n = np.where(a // self.router == b // self.router, 2, np.where(a // self.group == b // self.group, 3, 5))
        return np.where(a == b, 0, n)

    def latency(self, src, dst) -> np.ndarray:
        return self.links(np.asarray(src), np.asarray(dst)) * self.link_latency


FAT_TREE = Network("fat_tree", "fat_tree", link_latency=0.5e-6, bandwidth=25e9)
DRAGONFLY = Network("dragonfly", "dragonfly", link_latency=0.4e-6, bandwidth=25e9)
NETWORKS = {n.name: n for n in (FAT_TREE, DRAGONFLY)}


def census(ranks, mesh, order, differentiation, box, cutoff, atoms, ghost_exchange="auto"):
    """Per exchange of one compute call: the C++ census as numpy arrays (see _core.solver_census).
    ``ghost_exchange``: "direct", "staged" or "auto" (the solver's rule); staged ghosts are one
    exchange per axis and pulse ("ghost atoms z2", "ghost forces z2"), run one after another."""
    box = np.asarray(box, dtype=float)
    if box.shape == (3,):
        box = np.diag(box)
    if np.isscalar(mesh):
        mesh = (int(mesh),) * 3
    out = _core.solver_census(int(ranks), tuple(int(k) for k in mesh), int(order), differentiation, box,
                              float(cutoff), int(atoms), ghost_exchange)
    for c in out:
        c["ranks"] = int(ranks)
        c["atoms"] = int(atoms)
        c["src"] = np.repeat(np.arange(ranks), np.diff(c["start"]))
        c["bytes"] = c["elements"] * (c["element_bytes"] or 1)
    return out


def _per_rank(P, idx, values):
    """Sum of values per rank (idx: rank of each value; a scalar value counts each once)."""
    idx = np.asarray(idx, dtype=np.int64)
    w = np.broadcast_to(np.asarray(values, dtype=float), idx.shape)
    return np.bincount(idx, weights=w, minlength=P).astype(float)


def traffic(cen) -> dict:
    """Messages and bytes per rank (sent) of each exchange over one compute call (forward
    and reverse executions together): {name: {messages: array, bytes: array}}."""
    res = {}
    for c in cen:
        P = c["ranks"]
        f, r = c["forward_calls"], c["reverse_calls"]
        msgs = f * _per_rank(P, c["src"], 1.0) + r * _per_rank(P, c["dst"], 1.0)
        byts = f * _per_rank(P, c["src"], c["bytes"]) + r * _per_rank(P, c["dst"], c["bytes"])
        res[c["name"]] = {"messages": msgs, "bytes": byts}
    return res


def _direction(c, reverse):
    """(senders, receivers, bytes) of one execution of exchange c."""
    if reverse:
        return c["dst"], c["src"], c["bytes"]
    return c["src"], c["dst"], c["bytes"]


def _contention(net: Network, s, d, b) -> float:
    """Dragonfly (minimal routing): the busiest global bundle and gateway link."""
    if net.topology != "dragonfly" or len(b) == 0:
        return 0.0
    hs, hd = s // net.ranks_per_host, d // net.ranks_per_host
    gs, gd = hs // net.group, hd // net.group
    inter = gs != gd
    if not np.any(inter):
        return 0.0
    gs, gd, hs, bi = gs[inter], gd[inter], hs[inter], b[inter]
    ngroups = int(max(gs.max(), gd.max())) + 1
    pair = np.minimum(gs, gd) * ngroups + np.maximum(gs, gd)
    # A bundle is full duplex: each direction has the bundle's capacity.
    directed = gs * ngroups + gd
    t_bundle = np.bincount(directed, weights=bi).max() / (net.bandwidth * net.global_links)
    # All traffic from one switch to one other group leaves through one gateway link.
    switch = hs // net.router
    t_gateway = np.bincount(switch * ngroups + gd, weights=bi).max() / net.bandwidth
    del pair
    return max(t_bundle, t_gateway)


def exchange_time(c, net: Network, mode: str, reverse: bool = False) -> float:
    """Modelled time of one execution of exchange c in `mode` (the slowest rank's)."""
    P = c["ranks"]
    s, d, b = _direction(c, reverse)
    if len(b) == 0:
        return 0.0
    beta = net.bandwidth
    # Per exchange and network (not per mode or direction: both are symmetric in s and d),
    # kept in the census entry: the latencies, each rank's bytes out and in, largest latency.
    memo = c.setdefault("_memo", {})
    if net.name not in memo:
        lat = net.latency(c["src"], c["dst"])
        memo[net.name] = (lat, _per_rank(P, c["src"], c["bytes"]), _per_rank(P, c["dst"], c["bytes"]),
                          np.maximum(_maxat(P, c["src"], lat), _maxat(P, c["dst"], lat)))
    lat, by_src, by_dst, max_lat = memo[net.name]
    out_b, in_b = (by_dst, by_src) if reverse else (by_src, by_dst)
    # Every message costs its sender and its receiver `overhead` of CPU time, in series.
    cpu = net.overhead * (_per_rank(P, s, 1.0) + _per_rank(P, d, 1.0)) if net.overhead > 0 else 0.0
    if c["name"].startswith(("ghost atoms", "ghost forces")):
        # Direct: NeighborExchange (sizes with the data) / plain Isend-Irecv; staged: one
        # round of two messages (the count in the header) per axis and pulse. The same in
        # every mode.
        rounds = 2.0 if c["name"] == "ghost atoms" else 1.0
        t = rounds * max_lat + np.maximum(out_b, in_b) / beta + cpu
    elif mode == "nonblocking":
        t = max_lat + np.maximum(out_b, in_b) / beta + cpu
    elif mode == "pt2pt":
        t = np.maximum(_per_rank(P, s, lat + b / beta), max_lat + in_b / beta) + cpu
    elif mode == "collective":
        size, pos = c["component_size"], c["component_rank"]
        # MPICH scattered: receives from (pos + i) % size and sends to (pos - i) % size in block i // 32.
        recv_block = ((pos[s] - pos[d]) % size[d]) // THROTTLE  # at the receiver d
        send_block = ((pos[s] - pos[d]) % size[s]) // THROTTLE  # at the sender s
        nb = int(max(recv_block.max(), send_block.max())) + 1
        key_out, key_in = s * nb + send_block, d * nb + recv_block
        bo = np.bincount(key_out, weights=b, minlength=P * nb).reshape(P, nb)
        bi = np.bincount(key_in, weights=b, minlength=P * nb).reshape(P, nb)
        lo = np.zeros(P * nb)
        np.maximum.at(lo, key_out, lat)
        np.maximum.at(lo, key_in, lat)
        lo = lo.reshape(P, nb)
        busy = (bo > 0) | (bi > 0)
        t = (np.where(busy, lo, 0.0) + np.maximum(bo, bi) / beta).sum(axis=1) + cpu
    else:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    return float(max(t.max(), _contention(net, s, d, b)))


def _maxat(P, idx, values):
    out = np.zeros(P)
    np.maximum.at(out, idx, values)
    return out


def allreduce_time(P: int, net: Network) -> float:
    """MPICH's recursive doubling (small counts): ceil(log2 P) rounds (+2 when P is not
    a power of two), each at most the largest latency of a round's pair."""
    if P <= 1:
        return 0.0
    rounds = math.ceil(math.log2(P)) + (0 if P & (P - 1) == 0 else 2)
    total = 0.0
    r = np.arange(P)
    for k in range(math.ceil(math.log2(P))):
        partner = r ^ (1 << k)
        ok = partner < P
        total += float(net.latency(r[ok], partner[ok]).max()) if np.any(ok) else 0.0
    return total + (rounds - math.ceil(math.log2(P))) * float(net.link_latency * 4)


def comm_time(cen, net: Network, mode: str, allreduces: float = 0.0) -> dict:
    """Modelled communication time of one compute call: per exchange and in total."""
    parts = {}
    for c in cen:
        t = c["forward_calls"] * exchange_time(c, net, mode) + c["reverse_calls"] * exchange_time(c, net, mode, True)
        parts[c["name"]] = t
    P = cen[0]["ranks"]
    parts["allreduce"] = allreduces * allreduce_time(P, net)
    parts["total"] = sum(parts.values())
    return parts


# ------------------------------------------------------------------------- computation


def work(cen) -> dict:
    """Per-rank work measures of one compute call, max over ranks: ghost atoms received,
    the pair search's rows (owned atoms at the uniform share plus GHOST_PAIR_WEIGHT per
    ghost atom), halo elements and remap elements moved (pack and unpack), from the census."""
    P = cen[0]["ranks"]
    by = {c["name"]: c for c in cen}
    out = {}
    received = np.zeros(P)
    for c in cen:
        if c["name"] == "ghost atoms":  # direct: size messages (8 bytes) and records
            data = c["bytes"] > 8
            received += _per_rank(P, c["dst"][data], c["bytes"][data] / 72.0)
        elif c["name"].startswith("ghost atoms "):  # staged: a count header and records
            received += _per_rank(P, c["dst"], (c["bytes"] - 8) / 72.0)
    out["ghost_atoms"] = float(received.max())
    # Pair candidates in owned-atom units: the uniform share plus the ghosts' weight.
    out["pair_rows"] = float(cen[0]["atoms"] / P + GHOST_PAIR_WEIGHT * out["ghost_atoms"])
    moved = np.zeros(P)
    for name in ("in->x", "x->y", "y->z", "z->out"):
        if name in by:
            c = by[name]
            moved += _per_rank(P, c["src"], c["elements"]) + _per_rank(P, c["dst"], c["elements"]) + c["self_elements"]
    out["remap_elements"] = float(moved.max())
    h = by["halo"]
    out["halo_elements"] = float((_per_rank(P, h["src"], h["elements"]) + _per_rank(P, h["dst"], h["elements"])
                                  + h["self_elements"]).max())
    return out


def step_time(cen, net: Network, mode: str, calib: dict, allreduces: float) -> dict:
    """Modelled time of one compute call: computation scaled from a calibration run plus
    comm_time. `calib`: {"ranks": P0, "compute": {phase: seconds}, "work": work(census at P0),
    "atoms": N}; phases scale with owned atoms (P0 / P, the uniform share), pair rows
    (real space), ghost atoms, remap and halo elements."""
    w = work(cen)
    P = cen[0]["ranks"]
    cw = calib["work"]
    scale = {
        "atoms": calib["ranks"] / P,
        "pairs": w["pair_rows"] / max(cw["pair_rows"], 1.0),
        "ghost_atoms": w["ghost_atoms"] / max(cw["ghost_atoms"], 1.0),
        "remap": w["remap_elements"] / max(cw["remap_elements"], 1.0),
        "halo": w["halo_elements"] / max(cw["halo_elements"], 1.0),
    }
    comp = {k: v * scale[COMPUTE_SCALING[k]] for k, v in calib["compute"].items()}
    comm = comm_time(cen, net, mode, allreduces)
    return {"compute": sum(comp.values()), "comm": comm["total"], "total": sum(comp.values()) + comm["total"],
            "compute_parts": comp, "comm_parts": comm}


# How each compute group of the driver's calibration scales (see calibration()).
COMPUTE_SCALING = {"atoms": "atoms", "pairs": "pairs", "ghost_atoms": "ghost_atoms", "remap": "remap",
                   "halo": "halo"}

# Candidate pairs the real-space search tests per ghost atom, relative to those per owned
# atom (the cell search's geometry, not the system's). Measured with modelled computation on
# water98k (9 A cutoff) at 16, 64 and 256 simulated ranks: candidates per owned atom
# 539, 686, 1,132 with 2.3, 4.3, 9.9 ghost atoms per owned atom, i.e. a + b g with b / a =
# 0.20 from the 16- and 64-rank runs (0.22 from 16 and 256). Geometry gives 3/16 = 0.19 for a
# ghost below a face that scans only the owned part of its half stencil (docs/scaling.md,
# "Where 0.2 comes from").
GHOST_PAIR_WEIGHT = 0.2
