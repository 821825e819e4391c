"""The options of a PME object, checked once into one frozen value (:class:`Options`).

``Options.parse`` is what ``PME.__init__`` runs on every rank inside the error agreement
(:func:`pmewald._mpi.collective.agreed`): every argument checked locally, with a ValueError that
names it; the result is compared across ranks (:meth:`Options.agreement_key`) and then read by the
solver, never changed. "'auto' or a length" is parsed in one place
(:func:`pmewald._checks.validate.auto_or_length`), for ``skin`` and ``slab_gap``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import slab as _slab
from .._checks.validate import as_box, as_int, auto_or_length, checked_box, is_auto
from ..geometry.cell import half_height
from .._mpi import COMM_MODES
from .tuning import MIXED_MAX_ALPHA_R

COMM_MODE_CHOICES = COMM_MODES + ("auto",)
# Default progress-call intervals of overlap=True: (pair rows, microseconds); docs/overlap.md.
DEFAULT_POLL = (256, 100.0)
DIFFERENTIATIONS = ("auto", "ad", "ik")
ERROR_MODELS = ("correlated", "uncorrelated")
PRECISIONS = ("auto", "double", "mixed")
GHOST_EXCHANGES = ("auto", "direct", "staged")
BALANCES = ("off", "once", "dynamic")
PAIR_LAYOUTS = ("auto", "atoms", "clusters")
BALANCE_BY = ("pairs", "time")
# skin="auto": this fraction of the cutoff (docs/realspace.md, "The skin", has the measurements).
AUTO_SKIN_FRACTION = 0.1


def _positive(value, name: str) -> float:
    x = float(value)
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return x


def _flag(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


@dataclass(frozen=True, eq=False)  # eq=False: a box array has no single truth value; compare agreement_key()
class Options:
    """A PME object's checked options. ``box`` is the solver's box (with a slab: extended in z),
    ``slab`` the slab geometry (:class:`pmewald.pme.slab.Slab`) or None; ``alpha``, ``mesh`` and
    ``order`` are None where the tuning chooses them; ``skin`` is the length, ``skin_auto`` whether
    it was ``"auto"``; ``overlap`` None, True or False. With ``cutoff="auto"`` (``cutoff_auto``)
    ``cutoff`` is provisional (the lower bound, else half the box's limit) and ``cutoff_min`` the
    lower bound given (None: from the atom density at the first call; pme/cutoff_search.py)."""
    box: np.ndarray
    cutoff: float
    tolerance: float
    alpha: float | None
    mesh: tuple | None
    order: int | None
    differentiation: str
    comm_mode: str
    coulomb_constant: float
    real_space: bool
    error_model: str
    overlap: bool | None
    poll: tuple
    skin: float
    skin_auto: bool
    slab: object
    precision: str
    ghost_exchange: str = "auto"
    balance: str = "off"
    balance_by: str = "pairs"
    balance_threshold: float = 1.05
    cutoff_auto: bool = False
    cutoff_min: float | None = None
    pair_layout: str = "auto"

    @classmethod
    def parse(cls, box, cutoff, tolerance, alpha, mesh, order, differentiation, comm_mode, coulomb_constant,
              real_space, error_model, overlap, overlap_poll, skin, slab, slab_gap, precision,
              ghost_exchange="auto", balance="off", balance_by="pairs", balance_threshold=1.05,
              pair_layout="auto") -> "Options":
        """Checks every argument of ``PME(...)`` on this rank (no communication)."""
        rc_auto, rc_min = _auto_cutoff(cutoff)
        if rc_auto:
            if alpha is not None or mesh is not None:
                raise ValueError("cutoff='auto' chooses alpha and the mesh with the cutoff: pass neither alpha nor "
                                 "mesh with it")
            if not real_space:
                raise ValueError("cutoff='auto' times the real-space pairs against the mesh: it needs "
                                 "real_space=True (with real_space=False the cutoff is the engine's)")
            half = half_height(as_box(box))
            rc = rc_min if rc_min is not None else 0.5 * half
        else:
            rc = _positive(cutoff, "cutoff")
        tol = float(tolerance)
        if not (0 < tol < 1):
            raise ValueError(f"tolerance must be in (0, 1), got {tolerance!r}")
        _flag(slab, "slab")
        if not slab and not is_auto(slab_gap):
            raise ValueError(f"slab_gap={slab_gap!r} was given without slab=True")
        sl = _slab.Slab.build(box, tol, slab_gap) if slab else None  # the solver's box: extended in z
        b = checked_box(box if sl is None else sl.extended, rc)
        a = None if alpha is None else _positive(alpha, "alpha")
        p = None if order is None else as_int(order, "order")
        if p is not None and not 3 <= p <= 10:
            raise ValueError(f"order must be between 3 and 10, got {p}")
        m = None
        if mesh is not None:
            m = tuple(as_int(v, "mesh") for v in np.broadcast_to(np.asarray(mesh, dtype=object), (3,)))
            lowest = p if p is not None else 5
            if any(v < lowest or v > 4096 for v in m):
                raise ValueError(f"mesh must have between order ({lowest}) and 4096 points per axis, got {m}")
        if differentiation not in DIFFERENTIATIONS:
            raise ValueError(f"differentiation must be 'auto', 'ad' or 'ik', got {differentiation!r}")
        if comm_mode not in COMM_MODE_CHOICES:
            raise ValueError(f"comm_mode must be one of {', '.join(COMM_MODE_CHOICES)}, got {comm_mode!r}")
        if error_model not in ERROR_MODELS:
            raise ValueError(f"error_model must be 'correlated' or 'uncorrelated', got {error_model!r}")
        if not isinstance(precision, str) or precision not in PRECISIONS:
            raise ValueError(f"precision must be 'auto', 'double' or 'mixed', got {precision!r}")
        if precision == "mixed" and a is not None and not a * rc < MIXED_MAX_ALPHA_R:
            raise ValueError(f"precision='mixed' needs alpha * cutoff < {MIXED_MAX_ALPHA_R:g} (the range of its "
                             f"erfc), got {a * rc:.6g}")
        k = _positive(coulomb_constant, "coulomb_constant")
        _flag(real_space, "real_space")
        if overlap is not None and not isinstance(overlap, (bool, np.bool_)):
            raise ValueError(f"overlap must be None, True or False, got {overlap!r}")
        poll = DEFAULT_POLL if overlap_poll is None else overlap_poll
        try:
            rows, us = poll
            rows, us = as_int(rows, "overlap_poll rows"), float(us)
        except (TypeError, ValueError):
            raise ValueError(f"overlap_poll must be (rows, microseconds), got {overlap_poll!r}") from None
        if rows < 1 or not (math.isfinite(us) and us > 0):
            raise ValueError(f"overlap_poll must be (rows >= 1, microseconds > 0), got {overlap_poll!r}")
        sk = auto_or_length(skin, "skin")
        if not isinstance(ghost_exchange, str) or ghost_exchange not in GHOST_EXCHANGES:
            raise ValueError(f"ghost_exchange must be 'auto', 'direct' or 'staged', got {ghost_exchange!r}")
        if not isinstance(balance, str) or balance not in BALANCES:
            raise ValueError(f"balance must be 'off', 'once' or 'dynamic', got {balance!r}")
        if not isinstance(balance_by, str) or balance_by not in BALANCE_BY:
            raise ValueError(f"balance_by must be 'pairs' or 'time', got {balance_by!r}")
        if not isinstance(pair_layout, str) or pair_layout not in PAIR_LAYOUTS:
            raise ValueError(f"pair_layout must be 'auto', 'atoms' or 'clusters', got {pair_layout!r}")
        bt = float(balance_threshold)
        if not (math.isfinite(bt) and bt >= 1.0):
            raise ValueError(f"balance_threshold must be a finite number of at least 1, got {balance_threshold!r}")
        return cls(box=b, cutoff=rc, tolerance=tol, alpha=a, mesh=m, order=p, differentiation=differentiation,
                   comm_mode=comm_mode, coulomb_constant=k, real_space=bool(real_space), error_model=error_model,
                   overlap=None if overlap is None else bool(overlap), poll=(rows, us),
                   skin=AUTO_SKIN_FRACTION * rc if sk is None else sk, skin_auto=sk is None, slab=sl,
                   precision=precision, ghost_exchange=ghost_exchange, balance=balance, balance_by=balance_by,
                   balance_threshold=bt, cutoff_auto=rc_auto, cutoff_min=rc_min, pair_layout=pair_layout)

    def cutoff_request(self):
        """The cutoff as asked for: a length, ``"auto"`` or ``("auto", lower bound)``."""
        if not self.cutoff_auto:
            return self.cutoff
        return "auto" if self.cutoff_min is None else ("auto", self.cutoff_min)

    def agreement_key(self) -> tuple:
        """What every rank must have the same of (compared by ``same_everywhere``)."""
        return (self.box.tobytes(), self.cutoff, self.tolerance, self.alpha, self.mesh, self.order,
                self.differentiation, self.comm_mode, self.coulomb_constant, self.real_space, self.error_model,
                self.overlap, self.poll, self.skin, self.slab is None, self.precision, self.ghost_exchange,
                self.balance, self.balance_by, self.balance_threshold, self.cutoff_auto, self.cutoff_min,
                self.pair_layout)


def _auto_cutoff(cutoff):
    """(auto, lower bound) of a cutoff argument: (False, None) for a length (checked by the
    caller), (True, None) for ``"auto"``, (True, lo) for ``("auto", lo)``."""
    if is_auto(cutoff):
        return True, None
    if isinstance(cutoff, (tuple, list)):
        if len(cutoff) != 2 or not is_auto(cutoff[0]):
            raise ValueError(f"cutoff must be a length, 'auto' or ('auto', lower bound), got {cutoff!r}")
        return True, _positive(cutoff[1], "cutoff's lower bound")
    if isinstance(cutoff, str):
        raise ValueError(f"cutoff must be a length, 'auto' or ('auto', lower bound), got {cutoff!r}")
    return False, None
