"""2-D periodic slab geometry of ``PME(..., slab=True)``: the Yeh-Berkowitz / EW3DC method
with the charged-slab terms of Ballenegger, Arnold and Cerda (J. Chem. Phys. 131, 094107
(2009)). docs/slab.md has the formulas, the gap rule and its measurements.

The slab box has its first two rows in the xy plane and the third ``(0, 0, Lz)``; the atoms
lie in ``0 <= z < Lz`` (not wrapped in z). The solver runs on the extended box whose third
row is ``(0, 0, Lz + gap)``, and :meth:`Slab.correct` adds, with ``V`` the extended volume,
``L = Lz + gap``, ``M = sum q_i z_i``, ``S = sum q_i z_i^2`` and ``Q = sum q_i``::

    E_corr   = 2 pi k / V (M^2 - Q S - Q^2 L^2 / 12)
    F_i,z   += -4 pi k / V q_i (M - Q z_i)
    phi_i   += 2 pi k / V (2 M z_i - S - Q z_i^2 - Q L^2 / 6)       (= dE_corr/dq_i)
    E_i,z   += -4 pi k / V (M - Q z_i)                              (field; probes too)
    W       += E_corr diag(1, 1, -1)

The virial term is ``-dE_corr/d(eps)`` for the strains that are defined for a slab: a
lateral strain of the in-plane cell and the atoms (``E_corr ~ 1/A``: ``W_xx = W_yy =
E_corr``, ``W_xy = 0``), the shear ``x += eps z`` of the atoms (0) and the scaling of the
extended cell's height with the atoms' z (``E_corr ~ L``: ``W_zz = -E_corr``, which cancels
the PME sum's own dipole term, so the total ``W_zz`` is that of scaling the atoms' z in the
2-D system). Pure geometry plus one allreduce; the PME object calls it after its solver.
"""

from __future__ import annotations

import math

import numpy as np

from ._collective import allsum
from ._validate import as_box, checked_box

# The gap rule (docs/slab.md): the relative RMS force error of EW3DC is C exp(-g_min gap),
# g_min the shortest in-plane reciprocal vector; C measured (benchmarks/slab_gap.py) up to
# 0.7 on random, dipolar and laterally modulated slabs: 2 leaves a margin of 3 (it costs a
# gap longer by ln(2) / g_min, 0.11 in-plane lengths).
GAP_PREFACTOR = 2.0
# Share of the tolerance the gap may use (the mesh is tuned to 0.8 of it; in quadrature
# the two stay within the tolerance).
GAP_SHARE = 0.5


def shortest_reciprocal(cell2):
    """The length of the shortest nonzero reciprocal vector of a 2x2 in-plane cell (rows)."""
    rec = 2.0 * math.pi * np.linalg.inv(cell2).T
    # a Lagrange-Gauss reduction makes a small search exact for any tilt
    u, v = rec[0].copy(), rec[1].copy()
    while True:
        if u @ u > v @ v:
            u, v = v, u
        m = round(float(u @ v) / float(u @ u))
        if m == 0:
            break
        v = v - m * u
    return float(np.sqrt(min(u @ u, v @ v)))


def auto_gap(cell2, tolerance):
    """The vacuum gap whose EW3DC force error is ``GAP_SHARE x tolerance`` by the rule."""
    return max(0.0, math.log(GAP_PREFACTOR / (GAP_SHARE * tolerance))) / shortest_reciprocal(cell2)


class Slab:
    """The slab's geometry (the user's box, its height ``lz`` and the ``gap``) and the
    correction of the solver's 3-D periodic result."""

    def __init__(self, box, lz, gap, gap_auto):
        self.box, self.lz, self.gap, self.gap_auto = box, lz, gap, gap_auto
        self.length = lz + gap
        self.extended = box.copy()
        self.extended[2, 2] = self.length
        self.volume = abs(float(np.linalg.det(self.extended)))
        self.volume_occupied = abs(float(np.linalg.det(box)))  # the slab's, without the gap

    @classmethod
    def build(cls, box, tolerance, gap="auto"):
        """The slab of a box (checks its shape) with the gap given or chosen."""
        b = as_box(box)
        scale = float(np.abs(b).max())
        if (abs(b[0, 2]) > 1e-14 * scale or abs(b[1, 2]) > 1e-14 * scale or abs(b[2, 0]) > 1e-14 * scale
                or abs(b[2, 1]) > 1e-14 * scale or not b[2, 2] > 0):
            raise ValueError("slab=True needs a box whose first two rows lie in the xy plane and whose third is "
                             f"(0, 0, Lz) with Lz > 0 (orthorhombic or xy-tilted), got {b.tolist()}")
        b = b.copy()
        b[0, 2] = b[1, 2] = b[2, 0] = b[2, 1] = 0.0
        if isinstance(gap, str) and gap == "auto":
            g, is_auto = auto_gap(b[:2, :2], tolerance), True
        else:
            try:
                if isinstance(gap, (bool, np.bool_)):
                    raise TypeError
                g = float(gap)
            except (TypeError, ValueError):
                raise ValueError(f"slab_gap must be 'auto' or a non-negative finite length, got {gap!r}") from None
            if not (math.isfinite(g) and g >= 0):
                raise ValueError(f"slab_gap must be 'auto' or a non-negative finite length, got {gap!r}")
            is_auto = False
        return cls(b, float(b[2, 2]), g, is_auto)

    def rebuilt(self, box, cutoff):
        """The same gap on a new slab box (set_box), its extended box checked."""
        new = Slab.build(box, 0.5, self.gap)
        new.gap_auto = self.gap_auto
        checked_box(new.extended, cutoff, "the new")
        return new

    def check_positions(self, pos, name="positions"):
        """Local check: every z within the slab, ``0 <= z < Lz``."""
        if len(pos) and not (pos[:, 2].min() >= 0.0 and pos[:, 2].max() < self.lz):
            raise ValueError(f"slab=True: {name} must lie in the slab 0 <= z < Lz = {self.lz:.6g} (not wrapped in "
                             f"z), got z from {pos[:, 2].min():.6g} to {pos[:, 2].max():.6g}")

    def correct(self, comm, res, pos, q, k, probes=None):
        """Collective: add the dipole correction to a PMEResult (energy, terms, forces,
        virial, rms force and, when present, potentials, energies, fields and probes)."""
        z = pos[:, 2]
        local = np.array([float((q * z).sum()), float((q * z * z).sum()), float(q.sum())])
        m, s, qt = allsum(comm, local)
        c = 2.0 * math.pi * k / self.volume
        energy = c * (m * m - qt * s - qt * qt * self.length ** 2 / 12.0)
        res.energy += energy
        res.terms["slab"] = energy
        res.virial = res.virial + energy * np.diag([1.0, 1.0, -1.0])
        field_z = -2.0 * c * (m - qt * z)
        forces = res.forces.copy()
        forces[:, 2] += q * field_z
        res.forces = forces
        f2 = float(allsum(comm, float((forces * forces).sum()))[0])
        res.rms_force = math.sqrt(f2 / res.n_atoms)
        res.estimated_error = res.estimated_error_absolute / res.rms_force if res.rms_force > 0 else math.inf
        if res.potentials is not None:
            res.potentials = res.potentials + c * (2.0 * m * z - s - qt * z * z - qt * self.length ** 2 / 6.0)
            res.energies = 0.5 * q * res.potentials
            res.fields = res.fields.copy()
            res.fields[:, 2] += field_z
            if probes is not None and len(probes):
                zp = probes[:, 2]
                res.probe_potentials = res.probe_potentials + c * (2.0 * m * zp - s - qt * zp * zp
                                                                   - qt * self.length ** 2 / 6.0)
                res.probe_fields = res.probe_fields.copy()
                res.probe_fields[:, 2] += -2.0 * c * (m - qt * zp)
        return res
