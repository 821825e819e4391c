"""Per-atom potentials, fields and probe points of ``PME.compute(..., potentials=True, probes=...)``.

The C++ solver computes, on request, the potential ``phi_i = dE/dq_i`` of every term and the
field ``E_i`` at each atom (pme_solver.hpp). Probe points are handed to it as extra atoms of
zero charge with ids above every atom's: a zero charge adds nothing to the mesh, the pairs, the
energy, the forces or the virial, and the potential and field at such an atom are those of the
point. Each rank's probes travel with its atoms (migration) and come back in the order passed.
Local checks here; pme/solver.py agrees them over the ranks.
"""

from __future__ import annotations

import numpy as np

from .._mpi.collective import allmax, exscan_sum
from .._checks.validate import MAX_WRAPS, float_array

_INT64_MAX = np.iinfo(np.int64).max


def check_request(potentials, probes, box):
    """Local check of the arguments: (potentials as bool, probes as a C-contiguous (p, 3)
    float64 array, empty when None)."""
    if not isinstance(potentials, (bool, np.bool_)):
        raise ValueError(f"potentials must be True or False, got {potentials!r}")
    if probes is None:
        return bool(potentials), np.zeros((0, 3))
    pts = float_array(probes, "probes", "(p, 3)")
    if pts.size == 0 and pts.ndim in (1, 2):
        return bool(potentials), np.zeros((0, 3))
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise ValueError(f"probes must have shape (p, 3), got {pts.shape}")
    reach = MAX_WRAPS * float(np.abs(box).sum())
    if not (pts.min() >= -reach and pts.max() <= reach):
        if not np.isfinite(pts).all():
            raise ValueError("probes contain NaN or inf")
        raise ValueError(f"probes lie more than {MAX_WRAPS:g} box lengths from the origin ({reach:.3g})")
    return bool(potentials), pts


def probe_ids(comm, idv, n_probes, total_probes):
    """Collective: ids for this rank's probes, above every atom's id on every rank, numbered
    in rank order (the global probe index is ``id - base``). Returns (ids, base)."""
    top = int(allmax(comm, int(idv.max()) if len(idv) else -1, np.int64)[0])
    if top > _INT64_MAX - total_probes - 1:
        raise ValueError("probes need ids above the largest atom id, which is too close to 2^63 - 1")
    base = top + 1
    offset = exscan_sum(comm, n_probes)
    return np.arange(base + offset, base + offset + n_probes, dtype=np.int64), base


def append(pos, q, idv, probes, ids):
    """The atoms followed by the probes (zero charges; in every set for q of shape (n, m))."""
    if len(probes) == 0:
        return pos, q, idv
    zeros = np.zeros((len(probes),) + q.shape[1:])
    return (np.ascontiguousarray(np.vstack((pos, probes))), np.ascontiguousarray(np.concatenate((q, zeros))),
            np.concatenate((idv, ids)))


def split(raw, q, n_local, n_probes):
    """The result's per-atom and per-probe arrays from the solver's raw dict (atoms first,
    then this rank's probes)."""
    if "potentials" not in raw:  # all charges zero: everything is zero
        phi, field = np.zeros(n_local + n_probes), np.zeros((n_local + n_probes, 3))
    else:
        phi, field = raw["potentials"], raw["fields"]
    return {"potentials": phi[:n_local], "energies": 0.5 * q * phi[:n_local], "fields": field[:n_local],
            "probe_potentials": phi[n_local:], "probe_fields": field[n_local:]}


def describe_atom(atom_id, base):
    """How an error message names an id: an atom's id, or the probe it stands for."""
    if base is not None and atom_id >= base:
        return f"probe {atom_id - base} (in rank order)"
    return f"atom with id {atom_id}"
