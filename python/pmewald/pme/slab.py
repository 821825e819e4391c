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

from .._mpi.collective import allsum
from .._checks.validate import as_box, auto_or_length, checked_box

# The gap rule (docs/slab.md): the relative RMS force error of EW3DC is C exp(-g_min gap),
# g_min the shortest in-plane reciprocal vector; C measured (benchmarks/slab_gap.py) up to
# 0.7 on random, dipolar and laterally modulated slabs: 2 leaves a margin of 3 (it costs a
# gap longer by ln(2) / g_min, 0.11 in-plane lengths).
GAP_PREFACTOR = 2.0
# Share of the tolerance the gap may use (the mesh is tuned to 0.8 of it; in quadrature
# the two stay within the tolerance).
GAP_SHARE = 0.5
# set_box keeps an automatic gap while the rule's error for it in the new cell is within this
# factor of its share (then the mesh's 0.8 and the gap's 0.6 add to the tolerance in quadrature),
# and chooses it again beyond: an NPT run does not change its gap at every step.
GAP_KEEP = 1.2
# The gap's error (gap_force_error) sums the image term over the in-plane reciprocal vectors G
# whose factor exp(-|G| gap) is within exp(-GAP_MODES_RANGE) of the shortest one's (the modes
# left out change the RMS by less than 1e-5 of it: measured at most 2.4e-6 on the test slabs
# for gaps of 1-10 at cells of 8-9, with 8-280 modes; 1.3e-4 with a range of ln(1e3)), at most
# GAP_MODES_MAX of them (one of each +-G; only gaps far below an in-plane length need more, and
# their error is then of order 1).
GAP_MODES_RANGE = math.log(1e4)
GAP_MODES_MAX = 400
_ATOM_BLOCK = 2048  # atoms per block of the (atoms x modes) arrays of gap_force_error


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


def rule_error(cell2, gap):
    """The rule's bound on the relative RMS force error of a gap: GAP_PREFACTOR exp(-g gap)."""
    return GAP_PREFACTOR * math.exp(-shortest_reciprocal(cell2) * gap)


def gap_modes(cell2, gap):
    """The in-plane reciprocal vectors (rows, 2-D) of the gap's error sum: one of each +-G pair,
    shortest first, those with exp(-|G| gap) within exp(-GAP_MODES_RANGE) of the shortest's,
    at most GAP_MODES_MAX."""
    rec = 2.0 * math.pi * np.linalg.inv(cell2).T
    g_min = shortest_reciprocal(cell2)
    area_rec = abs(float(np.linalg.det(rec)))
    g_cap = math.sqrt(2.0 * GAP_MODES_MAX * area_rec / math.pi) + g_min  # about GAP_MODES_MAX in a half disc
    g_max = min(g_min + GAP_MODES_RANGE / gap, g_cap) if gap > 0 else g_cap
    # |m_d| <= g_max |a_d| / (2 pi): G . a_d = 2 pi m_d
    reach = [int(math.ceil(g_max * float(np.linalg.norm(cell2[d])) / (2.0 * math.pi))) for d in range(2)]
    m1, m2 = np.meshgrid(np.arange(0, reach[0] + 1), np.arange(-reach[1], reach[1] + 1), indexing="ij")
    m1, m2 = m1.ravel(), m2.ravel()
    half = (m1 > 0) | ((m1 == 0) & (m2 > 0))
    g = np.outer(m1[half], rec[0]) + np.outer(m2[half], rec[1])
    norm = np.linalg.norm(g, axis=1)
    order = np.argsort(norm, kind="stable")
    g, norm = g[order], norm[order]
    return g[norm <= g_max * (1 + 1e-12)][:GAP_MODES_MAX]


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
        g = auto_or_length(gap, "slab_gap")
        is_auto = g is None
        if is_auto:
            g = auto_gap(b[:2, :2], tolerance)
        return cls(b, float(b[2, 2]), g, is_auto)

    def rebuilt(self, box, cutoff, tolerance):
        """The slab on a new slab box (set_box), its extended box checked: the same gap, unless
        it is automatic and its rule error in the new cell exceeds GAP_KEEP x its share, when
        it is chosen again for the new cell."""
        new = Slab.build(box, 0.5, self.gap)
        if self.gap_auto and rule_error(new.box[:2, :2], self.gap) > GAP_KEEP * GAP_SHARE * tolerance:
            new = Slab.build(box, tolerance, "auto")
        new.gap_auto = self.gap_auto
        checked_box(new.extended, cutoff, "the new")
        return new

    def gap_force_error(self, comm, pos, q, k):
        """Collective: the RMS over all atoms of EW3DC's force error at this gap, for these
        charges: the interaction with the images in z beyond the dipole, which the correction
        leaves out (docs/slab.md, "The gap"; the term of Arnold, de Joannis and Holm's ELC).
        Not a model: with the in-plane reciprocal vectors G of :func:`gap_modes`, it is
        ``-dE/dr_i`` of ``k sum_G 2 pi / (A G) sum_ij q_i q_j cos(G . rho_ij) cosh(G z_ij) /
        (exp(G L) - 1)`` (measured equal to the exact sums' error to 1e-11). O(N x modes)
        and two allreduces."""
        modes = gap_modes(self.box[:2, :2], self.gap)
        if len(modes) == 0:
            return 0.0
        g = np.linalg.norm(modes, axis=1)
        area = abs(float(np.linalg.det(self.box[:2, :2])))
        # Scaled to stay finite: cosh(G z) exp(-G Lz/2) with z from the slab's middle (|z| <=
        # Lz/2), and the weight 1/(exp(G L) - 1) times exp(G Lz) = exp(-G gap)/(1 - exp(-G L)).
        half = 0.5 * self.lz
        weight = np.exp(-g * self.gap) / -np.expm1(-g * self.length)
        pref = 8.0 * math.pi * k * weight / (area * g)  # 2 (the pair's derivative) x 2 (+-G) x 2 pi / (A G)

        def blocks():
            for lo in range(0, len(q), _ATOM_BLOCK):
                z = pos[lo:lo + _ATOM_BLOCK, 2] - half
                phase = np.exp(-1j * (pos[lo:lo + _ATOM_BLOCK, :2] @ modes.T))
                up, down = np.exp(np.outer(z - half, g)), np.exp(np.outer(-z - half, g))
                yield lo, phase, 0.5 * (up + down), 0.5 * (up - down)  # cosh, sinh, scaled

        sums = np.zeros((4, len(modes)))
        for lo, phase, ch, sh in blocks():
            qb = q[lo:lo + _ATOM_BLOCK, None]
            c, s_ = (qb * phase * ch).sum(axis=0), (qb * phase * sh).sum(axis=0)
            sums += np.stack([c.real, c.imag, s_.real, s_.imag])
        sums = allsum(comm, sums.ravel()).reshape(4, -1)
        c_g, s_g = sums[0] + 1j * sums[1], sums[2] + 1j * sums[3]
        f2 = 0.0
        for lo, phase, ch, sh in blocks():
            p = np.conj(phase) * (ch * c_g - sh * s_g)   # sum_j q_j cos(G.rho_ij) cosh(G z_ij), as Re
            dz = np.conj(phase) * (sh * c_g - ch * s_g)  # its z-derivative / G, as Re
            qb = q[lo:lo + _ATOM_BLOCK]
            f_xy = qb[:, None] * ((pref * p.imag) @ modes)
            f_z = -qb * ((pref * g * dz.real).sum(axis=1))
            f2 += float((f_xy * f_xy).sum() + (f_z * f_z).sum())
        n_atoms = allsum(comm, [f2, len(q)])
        return math.sqrt(n_atoms[0] / n_atoms[1]) if n_atoms[1] > 0 else 0.0

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
