"""The result of a PME call: :class:`PMEResult` and what builds it on every path.

One place for the result's shape (the energy terms, the per-set layout of charge sets and
``PMEResult.charge_set``) and for the error-estimate report that ``PME.parameters`` shows, so
the single-set, charge-sets, all-zero and slab paths report the same keys.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .potentials import split as potentials_split

TERMS = ("real", "reciprocal", "self", "background", "exclusion")
# The error-estimate keys of PME.parameters, on every path (None before the first call; NaN
# where a call asked for no estimate, as pmewald.qeq's products do; slab_gap only with a slab).
ESTIMATE_KEYS = ("estimated_error", "estimated_error_absolute", "estimated_error_real",
                 "estimated_error_reciprocal", "estimated_error_float", "estimated_error_correlation",
                 "estimated_error_measured", "estimated_error_slab_gap")


# The estimate's parts of an exactly zero result (all charges zero).
ZERO_PARTS = {"real": 0.0, "recip": 0.0, "float": 0.0, "cross": 0.0, "measured": False}


def estimate_report(relative=None, absolute=None, parts=None, slab_gap=None):
    """The error-estimate entries of ``PME.parameters``: every key of ESTIMATE_KEYS.
    ``parts`` is the estimate's split ({"real", "recip", "float", "cross", "measured"}, any
    missing), ``slab_gap`` the gap's relative part with a slab."""
    parts = {} if parts is None else parts
    known = relative is not None
    return {"estimated_error": relative, "estimated_error_absolute": absolute,
            "estimated_error_real": parts.get("real", math.nan if known else None),
            "estimated_error_reciprocal": parts.get("recip", math.nan if known else None),
            "estimated_error_float": parts.get("float", math.nan if known else None),
            "estimated_error_correlation": parts.get("cross", math.nan if known else None),
            "estimated_error_measured": parts.get("measured", False if known else None),
            "estimated_error_slab_gap": slab_gap}


@dataclass
class PMEResult:
    """Result of :meth:`PME.compute`.

    With charges of shape (n, m) (m charge sets, :meth:`PME.compute`) every per-set quantity
    gains a leading set axis: ``energy``, ``rms_force``, ``total_charge``,
    ``estimated_error`` and ``estimated_error_absolute`` (m,), ``forces`` (m, n_local, 3),
    ``virial`` (m, 3, 3), each ``terms`` value (m,), ``potentials`` and ``energies``
    (m, n_local), ``fields`` (m, n_local, 3), ``probe_potentials`` (m, p) and
    ``probe_fields`` (m, p, 3); :meth:`charge_set` gives one set as a plain result.

    Attributes
    ----------
    energy : float
        Total electrostatic energy, global, identical on every rank.
    forces : ndarray (n_local, 3)
        Forces on this rank's atoms, in the order they were passed.
    virial : ndarray (3, 3)
        Global virial ``W = -dE/d(eps)`` for the homogeneous strain
        ``r -> (1 + eps) r`` of positions and box rows. For pair forces
        ``W_ab = sum_pairs r_ij,a F_ij,b``; ``trace(W) == energy`` for the total
        Coulomb energy. The stress (ASE's sign convention) is ``-W / V``. With
        ``slab=True``: xx, yy, xy of the lateral strain (cell and atoms), xz, yz and zz of
        the atoms' coordinates alone (docs/slab.md); the trace is then not the energy.
    terms : dict
        ``real`` (erfc pairs), ``reciprocal`` (mesh sum), ``self``
        (``-k alpha/sqrt(pi) sum q^2``), ``background`` (``-k pi Q^2/(2 V alpha^2)``
        for net charge Q), ``exclusion`` (``-k sum_excluded q_i q_j erf(alpha r)/r``,
        removing the reciprocal-space part of excluded pairs); with ``slab=True`` also
        ``slab`` (the dipole correction, docs/slab.md). They sum to ``energy``.
    estimated_error : float
        Estimated relative RMS force error of this result,
        ``estimated_error_absolute / sqrt(mean |F|^2)``.
    estimated_error_absolute : float
        Estimated absolute RMS force error per atom (LAMMPS's measure, in force units).
    rms_force : float
        ``sqrt(sum_i |F_i|^2 / N)`` over all atoms.
    potentials : ndarray (n_local,) or None
        With ``potentials=True`` (or ``probes``): the electrostatic potential at each of this
        rank's atoms, ``phi_i = dE/dq_i`` at fixed positions, of every term: real-space pairs,
        reciprocal mesh (the convolved mesh interpolated with the atom's B-spline weights),
        self ``-2 k alpha q_i / sqrt(pi)``, background ``-k pi Q / (V alpha^2)`` and the
        exclusion corrections (so an excluded partner does not contribute). Energy per
        charge (with ``coulomb_constant``: e.g. eV/e). With ``real_space=False`` the
        real-space pairs are left out, as in the energy.
    energies : ndarray (n_local,) or None
        Per-atom energies ``q_i phi_i / 2``; they sum (over all ranks) to ``energy``.
    fields : ndarray (n_local, 3) or None
        The electric field at each atom, the force per charge: real-space pairs and
        exclusions from the partners' charges, the reciprocal part interpolated from the
        mesh with unit weight, so it is defined for ``q_i = 0`` (there: the field of all the
        other charges) and ``forces == charges[:, None] * fields`` (to rounding). As in the
        forces, the mesh part of a charged atom includes its own small self-term (the
        interpolation error, of the size of the force error).
    probe_potentials : ndarray (p,) or None
        The potential at this rank's ``probes`` (points without charge), in their order.
    probe_fields : ndarray (p, 3) or None
        The field at this rank's ``probes``.

    """

    energy: float
    forces: np.ndarray
    virial: np.ndarray
    terms: dict
    estimated_error: float
    estimated_error_absolute: float
    rms_force: float
    n_atoms: int = 0
    total_charge: float = 0.0
    potentials: np.ndarray = None
    energies: np.ndarray = None
    fields: np.ndarray = None
    probe_potentials: np.ndarray = None
    probe_fields: np.ndarray = None

    def charge_set(self, s) -> "PMEResult":
        """Of a result with charges of shape (n, m): set ``s`` as the result of a call with
        ``charges[:, s]`` alone (floats and arrays without the set axis)."""
        return one_set(self, s)


def set_potentials(res, q, phi, field, n):
    """The per-set potentials, energies and fields of the atoms (first n) and probes."""
    res.potentials = phi[:, :n]
    res.energies = 0.5 * q.T * phi[:, :n]
    res.fields = field[:, :n]
    res.probe_potentials = phi[:, n:]
    res.probe_fields = field[:, n:]


def one_set(res, s):
    """Set s of a charge-sets result as the PMEResult of a call with that set alone."""
    if np.ndim(res.energy) != 1:
        raise ValueError("charge_set: this result is not of charges of shape (n, m)")

    def pick(v):
        return v[s] if isinstance(v, np.ndarray) else v

    out = dataclasses.replace(res, **{f.name: pick(getattr(res, f.name)) for f in dataclasses.fields(res)
                                      if f.name not in ("terms", "n_atoms")})
    out.terms = {t: float(v[s]) for t, v in res.terms.items()}
    for name in ("energy", "estimated_error", "estimated_error_absolute", "rms_force", "total_charge"):
        setattr(out, name, float(getattr(out, name)))
    return out


def zero_result(n_local, n_atoms, potentials=False, n_probes=0, slab=False):
    """All charges zero: (exactly zero energy, forces, virial (and potentials and fields,
    which are linear in the charges), the estimate report); nothing tuned."""
    res = PMEResult(energy=0.0, forces=np.zeros((n_local, 3)), virial=np.zeros((3, 3)),
                    terms={t: 0.0 for t in TERMS}, estimated_error=0.0, estimated_error_absolute=0.0,
                    rms_force=0.0, n_atoms=n_atoms, total_charge=0.0)
    if potentials:
        for name, value in potentials_split({}, np.zeros(n_local), n_local, n_probes).items():
            setattr(res, name, value)
    if slab:
        res.terms["slab"] = 0.0
    return res, estimate_report(0.0, 0.0, ZERO_PARTS)
