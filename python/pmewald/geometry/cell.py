"""Cell algebra shared by the solver's checks and the validation references: a box as a 3x3
array of rows, its heights, the lattice shifts within a radius and the minimum image in any
(triclinic) cell. Pure NumPy; no MPI.

Tested on its own (tests/geometry/test_cell.py: heights against V / |a x b|, the minimum image
against a brute-force search of the images on strongly skewed cells).
"""

from __future__ import annotations

import math

import numpy as np

# Largest image enumeration grid accepted (guards against absurd radii or cells).
MAX_GRID = 4.0e6


def as_box(box):
    """Return the 3x3 float box (rows = lattice vectors) and its volume."""
    b = np.asarray(box, dtype=float)
    if b.shape == (3,):
        b = np.diag(b)
    if b.shape != (3, 3):
        raise ValueError(f"box must be a length-3 or 3x3 array, got shape {b.shape}")
    if not np.all(np.isfinite(b)):
        raise ValueError("box must be finite")
    vol = abs(float(np.linalg.det(b)))
    scale = float(np.prod(np.linalg.norm(b, axis=1)))
    if scale == 0.0 or vol <= 1e-12 * scale:
        raise ValueError("box is degenerate (zero volume)")
    return b, vol


def cell_heights(box):
    """Perpendicular heights of the cell: distances between opposite faces.

    Parameters
    ----------
    box : array_like
        3x3 array with lattice vectors as rows (or length-3 orthorhombic).

    Returns
    -------
    numpy.ndarray
        ``heights[k] = V / |h_l x h_m|``, the spacing of the lattice planes
        spanned by the two lattice vectors other than ``h_k``.
    """
    b, vol = as_box(box)
    areas = np.array([
        np.linalg.norm(np.cross(b[1], b[2])),
        np.linalg.norm(np.cross(b[2], b[0])),
        np.linalg.norm(np.cross(b[0], b[1])),
    ])
    return vol / areas


def half_height(box):
    """Half the cell's smallest perpendicular height: the longest cutoff with one image per
    pair (the real-space sum's and the ghost exchange's limit)."""
    return 0.5 * float(cell_heights(box).min())


def image_shifts(box, radius, half_extent=0.5):
    """Integer lattice shifts n that can bring a displacement within ``radius``.

    Displacements have fractional coordinates in ``[-half_extent,
    half_extent]``; returns an (m, 3) float array of integer shifts ``n`` such
    that some such displacement ``(d + n) @ box`` may have length < radius.
    """
    heights = cell_heights(box)
    nmax = np.floor(radius / heights + half_extent).astype(int)
    if float(np.prod(2.0 * nmax + 1.0)) > MAX_GRID:
        raise ValueError(f"a radius of {radius:.6g} spans too many periodic images of this cell "
                         "(for an Ewald sum: alpha is too small for this box)")
    rngs = [np.arange(-m, m + 1) for m in nmax]
    grid = np.stack(np.meshgrid(*rngs, indexing="ij"), axis=-1).reshape(-1, 3)
    grid = grid.astype(float)
    # lower bound 1: slabs between lattice planes
    lb1 = np.max(np.maximum(np.abs(grid) - half_extent, 0.0) * heights, axis=1)
    # lower bound 2: distance of the cell-image centre minus circumradius
    corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)],
                       dtype=float) * half_extent
    circ = float(np.max(np.linalg.norm(corners @ box, axis=1)))
    lb2 = np.linalg.norm(grid @ box, axis=1) - circ
    keep = np.maximum(lb1, lb2) < radius
    return grid[keep]


def minimum_image(box, displacements):
    """Minimum-image displacement vectors in an arbitrary (triclinic) cell.

    Unlike rounding fractional coordinates, this searches all lattice
    images that can be shorter, so it is correct for strongly skewed cells.

    Parameters
    ----------
    box : array_like
        3x3 array with lattice vectors as rows (or length-3 orthorhombic).
    displacements : array_like, shape (m, 3) or (3,)
        Cartesian displacement vectors.

    Returns
    -------
    numpy.ndarray
        The shortest lattice-equivalent vectors, same shape as the input.
    """
    b, _ = as_box(box)
    d = np.asarray(displacements, dtype=float)
    single = d.ndim == 1
    d = np.atleast_2d(d)
    frac = d @ np.linalg.inv(b)
    frac -= np.round(frac)
    best = (frac + minimum_image_shifts(b, frac)) @ b
    return best[0] if single else best


def minimum_image_shifts(box, frac):
    """Integer shifts n minimising |(frac + n) @ box| for rows frac in [-1/2, 1/2]^3."""
    nshift = np.zeros_like(frac)
    if frac.shape[0] == 0:
        return nshift
    d0 = frac @ box
    best_r2 = np.einsum("ij,ij->i", d0, d0)
    rmax = math.sqrt(float(np.max(best_r2)))
    for n in image_shifts(box, rmax * (1.0 + 1e-12) + 1e-300):
        if not np.any(n):
            continue
        v = (frac + n) @ box
        r2 = np.einsum("ij,ij->i", v, v)
        better = r2 < best_r2 * (1.0 - 1e-14)
        nshift[better] = n
        best_r2[better] = r2[better]
    return nshift
