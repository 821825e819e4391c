"""Local argument checks of the public API (agreed over the ranks by the callers).

Each function converts one kind of argument (atoms, boxes) or raises ValueError (TypeError
where the caller says so) naming it, and :func:`coincident_pair` names the atoms that made a
result infinite; nothing here communicates: pme/solver.py and fft.py run these checks
through :func:`pmewald._mpi.collective.agree`, so every rank raises what one rank found.
"""

from __future__ import annotations

import math

import numpy as np

from ..geometry.cell import cell_heights, half_height, minimum_image

# Positions beyond this many box lengths from the origin are refused: wrapping them
# into the cell would keep no significant digits of their place in it.
MAX_WRAPS = 1e6


def as_int(v, name, error=ValueError):
    """v as an int: an integer, or a float with an integral value (not a bool)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        if isinstance(v, (float, np.floating)) and float(v).is_integer():
            return int(v)
        raise error(f"{name} must be an integer, got {v!r}")
    return int(v)


def float_array(x, name, shape):
    """x as a C-contiguous float64 array: numbers only (bool, integer, real floating point,
    or an object array of numbers); strings, complex numbers and records are refused."""
    try:
        a = x if isinstance(x, np.ndarray) else np.asarray(x)
        if a.dtype.kind == "O":
            a = a.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a numeric {shape} array") from None
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be a numeric {shape} array of real numbers, got dtype {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.float64)


def int_array(x, name):
    """x as a C-contiguous int64 array of integers (values that fit in int64)."""
    try:
        a = x if isinstance(x, np.ndarray) else np.asarray(x)
        if a.dtype.kind == "O":  # an object array of Python ints: its natural dtype
            a = np.array(a.tolist())
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an integer array") from None
    if a.size and a.dtype.kind not in "iu":
        raise ValueError(f"{name} must be integers, got dtype {a.dtype}")
    if a.size and a.dtype.kind == "u" and a.dtype.itemsize >= 8 and int(a.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"{name} must fit in 64-bit signed integers")
    return np.ascontiguousarray(a, dtype=np.int64)


def check_atoms(positions, charges, ids, exclusions, box):
    pos = float_array(positions, "positions", "(n, 3)")
    if pos.ndim != 2 or pos.shape[1] != 3:
        if pos.size == 0 and pos.ndim in (1, 2):
            pos = pos.reshape(0, 3)
        else:
            raise ValueError(f"positions must have shape (n, 3), got {pos.shape}")
    q = float_array(charges, "charges", "(n,)")
    if q.ndim > 1:
        raise ValueError(f"charges must have shape (n,), got {q.shape}")
    q = q.reshape(-1)
    if len(q) != len(pos):
        raise ValueError(f"positions has {len(pos)} atoms but charges has {len(q)}")
    if len(q):
        # Two reductions each (NaN propagates through min/max): finite, and positions not
        # so far out that wrapping them into the cell keeps no significant digits.
        reach = MAX_WRAPS * float(np.abs(box).sum())
        if not (pos.min() >= -reach and pos.max() <= reach):
            if not np.isfinite(pos).all():
                raise ValueError("positions contain NaN or inf")
            raise ValueError(f"positions lie more than {MAX_WRAPS:g} box lengths from the origin ({reach:.3g}): "
                             "wrap them into the box first")
        if not (math.isfinite(q.min()) and math.isfinite(q.max())):
            raise ValueError("charges contain NaN or inf")
    idv = None
    if ids is not None:
        idv = int_array(ids, "ids")
        if idv.ndim != 1 or len(idv) != len(q):
            raise ValueError(f"ids must have shape ({len(q)},), got {idv.shape}")
    ex = np.zeros((0, 2), dtype=np.int64)
    if exclusions is not None:
        e = int_array(exclusions, "exclusions")
        if e.size == 0:
            e = e.reshape(0, 2)
        if e.ndim != 2 or e.shape[1] != 2:
            raise ValueError(f"exclusions must have shape (m, 2), got {e.shape}")
        ex = e
    return pos, q, idv, ex


def as_box(box) -> np.ndarray:
    """The box as a C-contiguous 3x3 array of lattice vectors (rows; 3 numbers are an
    orthorhombic box), finite and not degenerate."""
    b = np.asarray(box, dtype=np.float64)
    if b.shape == (3,):
        b = np.diag(b)
    if b.shape != (3, 3):
        raise ValueError(f"box must be a 3x3 array of lattice vectors (rows) or 3 edge lengths, got shape {b.shape}")
    if not np.isfinite(b).all():
        raise ValueError("box contains NaN or inf")
    vol = abs(np.linalg.det(b))
    scale = np.prod(np.linalg.norm(b, axis=1))
    if not vol > 1e-10 * scale or scale == 0:
        raise ValueError("box is degenerate: its lattice vectors are (nearly) linearly dependent")
    return np.ascontiguousarray(b)


def checked_box(box, cutoff, which="the"):
    """The validated 3x3 box, checking that the cutoff is at most half its smallest height."""
    b = as_box(box)
    half = half_height(b)
    if cutoff > half * (1 + 1e-12):
        raise ValueError(f"cutoff {cutoff} is longer than half the smallest cell height of {which} box "
                         f"({half:.6g})")
    return b


def canonical_box(b):
    """The same periodic lattice with every row whose diagonal entry is negative negated.

    Negating a lattice vector changes the basis, not the lattice: positions, energy,
    forces and virial are the same, and mesh axis d still runs along row d. A
    left-handed cell (np.diag([-L, L, L]), which ASE allows) is thus computed in its
    right-handed equivalent."""
    flip = np.where(np.diag(b) < 0, -1.0, 1.0)
    return np.ascontiguousarray(b * flip[:, None]) if (flip < 0).any() else b


def coincident_pair(box, positions, ids, exclusions, r0):
    """(id_a, id_b, position) of the first pair (by ids) of atoms closer than r0 (minimum
    image) that is not an excluded pair, or None. On the failure path only (it looks at
    every atom): cells at least 2 r0 wide along each cell height, in the 8 grids offset by
    half a cell, so that any two atoms within r0 share a cell of one of them."""
    frac = positions @ np.linalg.inv(box)
    frac -= np.floor(frac)
    cells = np.maximum(1.0, np.floor(cell_heights(box) / (2.0 * r0)))
    found = set()
    for offset in np.array(np.meshgrid([0, 0.5], [0, 0.5], [0, 0.5])).reshape(3, -1).T:
        key = np.floor(frac * cells + offset) % cells
        order = np.lexsort(key.T[::-1])
        k = key[order]
        starts = np.concatenate(([0], np.flatnonzero((k[1:] != k[:-1]).any(axis=1)) + 1, [len(k)]))
        for a, b in zip(starts[:-1], starts[1:]):
            for i in range(a, b):
                for j in range(i + 1, b):
                    found.add((min(order[i], order[j]), max(order[i], order[j])))
    excluded = {(int(min(a, b)), int(max(a, b))) for a, b in exclusions}
    candidates = []
    for i, j in found:
        if np.linalg.norm(minimum_image(box, positions[i] - positions[j])) < r0:
            pair = tuple(sorted((int(ids[i]), int(ids[j]))))
            if pair not in excluded:
                candidates.append((pair, int(i)))
    if not candidates:
        return None
    (a, b), i = min(candidates)
    return a, b, positions[i]


def is_auto(value) -> bool:
    return isinstance(value, str) and value == "auto"


def auto_or_length(value, name: str):
    """None for ``"auto"``, else ``value`` as a non-negative finite float; a ValueError naming
    `name` for anything else (booleans, other strings, NaN, negative numbers)."""
    if is_auto(value):
        return None
    message = f"{name} must be 'auto' or a non-negative finite length, got {value!r}"
    try:
        if isinstance(value, (bool, np.bool_)):
            raise TypeError
        length = float(value)
    except (TypeError, ValueError):
        raise ValueError(message) from None
    if not (math.isfinite(length) and length >= 0):
        raise ValueError(message)
    return length
