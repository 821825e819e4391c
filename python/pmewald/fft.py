"""Distributed 3-D FFTs over MPI: complex-to-complex and real-to-complex.

:class:`DistributedFFT` transforms a complex mesh that is spread over the ranks
of a communicator, each rank holding one box of it; :class:`DistributedRealFFT`
transforms a real mesh into its half spectrum (the r2c along x) and back, with
the same machinery and half the remapped bytes. Internally the data are
remapped to x-, y- and z-pencils (each remap is a partner-to-partner exchange,
permuting on unpack so every batch of 1-D FFTW transforms is contiguous) and
back to the output boxes. The communication of each remap is one of three
strategies, chosen with ``comm_mode``:

``"pt2pt"``
    post every receive, then pack and blocking-``MPI_Send`` each outgoing piece
    from one reused buffer; unpack receives in completion order.
``"nonblocking"``
    post every receive, pack every outgoing piece into its own slot and
    ``MPI_Isend`` it; unpack receives as they complete; wait on the sends.
``"collective"``
    one ``MPI_Alltoallv`` over a sub-communicator of only the ranks that
    exchange data with each other (the connected component of overlapping boxes).

All three give bitwise identical results. Boxes are half-open
``((lo_x, lo_y, lo_z), (hi_x, hi_y, hi_z))`` in global mesh indices, and a
rank's data is a C-ordered complex128 array of shape ``hi - lo`` indexed
``[x, y, z]``.
"""

from __future__ import annotations

import numpy as np

from . import _core
from . import geometry
from ._mpi import COMM_MODES  # noqa: F401  (pmewald.fft.COMM_MODES: the accepted values of comm_mode)
from ._mpi.collective import agree, agreed, check_comm, duplicate, require_mpi, same_everywhere
from ._checks.limits import check_fits, fft_footprint, node_ranks
from ._mpi.threads import Busy, Rules
from ._checks.validate import as_int

__all__ = ["DistributedFFT", "DistributedRealFFT", "COMM_MODES"]

_PLANNERS = ("estimate", "measure", "patient", "exhaustive")
_MAX_AXIS = 2**31 - 1


def _box(b, name):
    """A user box as ((lo), (hi)) of ints: TypeError for the wrong kind of object,
    ValueError for lo > hi (an inverted box is not an empty one)."""
    if b is None:
        return None
    kind = f"{name} must be a pair of integer triples ((lo_x, lo_y, lo_z), (hi_x, hi_y, hi_z))"
    try:
        lo, hi = b
        lo = tuple(as_int(v, name, TypeError) for v in lo)
        hi = tuple(as_int(v, name, TypeError) for v in hi)
    except (TypeError, ValueError):
        raise TypeError(kind) from None
    if len(lo) != 3 or len(hi) != 3:
        raise TypeError(kind)
    if any(abs(v) > _MAX_AXIS for v in lo + hi):
        raise ValueError(f"{name} {(lo, hi)} has indices beyond 32 bits")
    for d in range(3):
        if lo[d] > hi[d]:
            raise ValueError(f"{name} {(lo, hi)} is inverted along axis {d} (lo {lo[d]} > hi {hi[d]}); an empty "
                             "box has lo == hi")
    return (lo, hi)


def _mesh_of(shape):
    try:
        mesh = tuple(as_int(n, "shape", TypeError) for n in shape)
    except TypeError:
        raise TypeError("shape must be three positive integers") from None
    if len(mesh) != 3:
        raise ValueError(f"shape must have three entries, not {len(mesh)}")
    if min(mesh) < 1:
        raise ValueError(f"mesh dimensions must be positive, got {mesh}")
    if max(mesh) > _MAX_AXIS:
        raise ValueError(f"mesh dimensions must fit in 32 bits, got {mesh}")
    return mesh


def _choice(value, allowed, name):
    if not (isinstance(value, str) and value in allowed):
        raise ValueError(f"{name} must be one of {', '.join(repr(a) for a in allowed)}, not {value!r}")
    return value


def _shape_of(box):
    lo, hi = box
    return tuple(h - l for l, h in zip(lo, hi))


def _construct(comm, check, make, footprint):
    """Collective construction of a distributed FFT: the local argument checks `check`
    agreed over `comm`, the same options on every rank, the per-rank size limits
    agreed, then the C++ object (`make`), whose own checks are collective."""
    with Rules():
        args = agreed(comm, check)
        same_everywhere(comm, args["same"], "the shape, comm_mode, planner and halved_axis must be the same on "
                        "every rank")
        ranks_here = node_ranks(comm)
        agreed(comm, lambda: check_fits(f"FFT of shape {args['mesh']}", *footprint(args), comm.Get_size(),
                                        ranks_here))
        return args, make(args)


def _checked_arrays(comm, arrays):
    """Collective: the local checks of a transform's arrays, agreed in one allreduce.

    `arrays`: (name, array or None, shape, dtype, writeable). Non-C-contiguous inputs are
    copied (which may run out of memory on one rank: agreed too). Returns the arrays to
    pass to the core, which then skips its own agreement."""
    out, error = [], None
    try:
        for name, a, shape, dtype, writeable in arrays:
            if a is None:
                out.append(None)
                continue
            if not isinstance(a, np.ndarray):
                raise ValueError(f"{name} must be a numpy array")
            if a.dtype != dtype:
                raise ValueError(f"{name} must have dtype {np.dtype(dtype).name}, not {a.dtype}")
            empty = 0 in shape
            if a.ndim != 3 or (a.size != 0 if empty else a.shape != tuple(shape)):
                raise ValueError(f"{name} must have shape {tuple(shape)} (this rank's box), not {a.shape}")
            if writeable:
                if not a.flags.c_contiguous:
                    raise ValueError(f"{name} must be C-contiguous")
                if not a.flags.writeable:
                    raise ValueError(f"{name} must be writeable")
            elif not a.flags.c_contiguous:
                a = np.ascontiguousarray(a)
            out.append(a)
    except Exception as e:  # noqa: BLE001 - agreed
        error = e
    agree(comm, error)
    return out


class _PencilFFT:
    """What the complex and the real distributed FFT share (the C++ side's pencil pipeline,
    ``cpp/fft/pencil_pipeline``): the collective construction with its argument checks, the
    boxes, the forward and backward plumbing and the statistics. A subclass says what is
    its own: its options (:meth:`_options`), its default output box, its footprint, its core
    object, its pencils and its input dtype."""

    #: dtype of the input of :meth:`forward` (and of the output of :meth:`backward`).
    _in_dtype = np.complex128

    def __init__(self, shape, comm, comm_mode, inbox, outbox, planner, collective_self_via_mpi):
        require_mpi()
        comm = check_comm(comm)  # TypeError for a non-communicator (the one local check)
        extra = {} if collective_self_via_mpi is None else {"collective_self_via_mpi": bool(collective_self_via_mpi)}

        def check():
            mesh = _mesh_of(shape)
            own = self._options(mesh, comm)
            _choice(comm_mode, COMM_MODES, "comm_mode")
            _choice(planner, _PLANNERS, "planner")
            ib, ob = _box(inbox, "inbox"), _box(outbox, "outbox")
            own.update(self._boxes(mesh, comm))
            if ib is None:
                ib = geometry.brick_box(comm.Get_size(), mesh, comm.Get_rank())
            if ob is None:
                ob = self._default_outbox(mesh, comm, ib, own)
            return {"mesh": mesh, "inbox": ib, "outbox": ob, **own,
                    "same": (mesh, comm_mode, planner, *self._same(own), tuple(sorted(extra.items())))}

        def footprint(a):
            return self._footprint(a, comm.Get_size(), comm.Get_rank())

        def make(a):
            return self._make(comm, a, comm_mode, planner, extra)

        args, self._fft = _construct(comm, check, make, footprint)
        self.shape = args["mesh"]
        self.comm_mode = comm_mode
        self._inbox, self._outbox = args["inbox"], args["outbox"]
        self._storage = args["storage"] if args.get("storage") is not None else args["inbox"]
        # The object's own communicator for its Python-level collectives (never the caller's, and
        # never the core's: mpi4py locks a communicator it runs a pickled collective on, and the
        # core frees its own when it dies, which the cyclic GC can make happen inside that lock).
        self._comm = duplicate(comm, self)
        self._busy = Busy(type(self).__name__)
        self._adopt(args)

    # -- what a subclass adds ---------------------------------------------
    def _options(self, mesh, comm):
        """The subclass's own options, checked (before comm_mode and planner): a dict."""
        return {}

    def _boxes(self, mesh, comm):
        """The subclass's own boxes, checked (after inbox and outbox): a dict."""
        return {}

    def _same(self, own):
        """What of the subclass's options must be the same on every rank."""
        return ()

    def _default_outbox(self, mesh, comm, inbox, own):
        return inbox

    def _footprint(self, a, size, rank):
        return fft_footprint(a["mesh"], size, rank, (a["inbox"], a["outbox"]))

    def _make(self, comm, a, comm_mode, planner, extra):
        """The core object (``_core.FFT3d`` or ``_core.RealFFT3d``) for the checked arguments `a`."""
        raise NotImplementedError

    def _adopt(self, args):
        """Keep what the subclass needs of the checked arguments and of the core object."""

    # -- geometry ---------------------------------------------------------
    @property
    def inbox(self):
        """This rank's input box ``((lo_x, lo_y, lo_z), (hi_x, hi_y, hi_z))`` (of the real mesh for the real
        FFT), half-open, global indices, as given."""
        return self._inbox

    @property
    def outbox(self):
        """This rank's output box (of the half spectrum, ``spectrum_shape``, for the real FFT), half-open,
        global indices, as given."""
        return self._outbox

    @property
    def inshape(self):
        """Shape of this rank's input arrays (``hi - lo`` of :attr:`inbox`; of ``storage`` for the real FFT)."""
        return _shape_of(self._storage)

    @property
    def outshape(self):
        """Shape of this rank's output array (``hi - lo`` of :attr:`outbox`)."""
        return _shape_of(self.outbox)

    # -- transforms -------------------------------------------------------
    def _transform(self, forward, a, out, *options):
        """The collective array checks, then the core's transform (`options` after its
        arrays), and the result in this rank's shape."""
        require_mpi()
        src, dst = (self.inshape, self.outshape) if forward else (self.outshape, self.inshape)
        src_t, dst_t = (self._in_dtype, np.complex128) if forward else (np.complex128, self._in_dtype)
        with self._busy:
            a, out = _checked_arrays(self._comm, [("a" if forward else "b", a, src, src_t, False),
                                                  ("out", out, dst, dst_t, True)])
            res = (self._fft.forward if forward else self._fft.backward)(a, out, *options, agreed=True)
        return res if out is not None or res.shape == dst else res.reshape(dst)

    # -- measurements -----------------------------------------------------
    def stats(self):
        """Counters and timers of this rank.

        Returns a dict with one entry per remap and direction — ``"in->x"``,
        ``"x->y"``, ``"y->z"``, ``"z->out"`` (forward) and ``"out->z"``,
        ``"z->y"``, ``"y->x"``, ``"x->in"`` (backward) — each a dict of
        ``active`` (whether this rank moves data in it), ``executions``,
        ``messages_sent``, ``messages_received``, ``bytes_sent``,
        ``bytes_received``, ``self_bytes``, ``pack_seconds``, ``wait_seconds``,
        ``unpack_seconds`` and ``self_seconds`` (cumulative). ``"fft"`` holds
        the seconds and counts of the 1-D FFT work per direction,
        ``"allocations"`` the process-wide count of buffers allocated by
        pmewald's exchange/FFT layers (constant while transforms run), and
        ``"comm_mode"`` the mode.
        """
        return self._fft.stats()

    def reset_stats(self):
        """Zero the counters and timers of :meth:`stats` (allocations excepted)."""
        self._fft.reset_stats()

    def __repr__(self):
        return (f"{type(self).__name__}(shape={self.shape}, comm_mode={self.comm_mode!r}, "
                f"inbox={self.inbox}, outbox={self.outbox})")


class DistributedFFT(_PencilFFT):
    """A distributed 3-D complex-to-complex FFT of a ``shape`` mesh.

    Parameters
    ----------
    shape : 3 ints
        The global mesh ``(n_x, n_y, n_z)``.
    comm : mpi4py intracommunicator, optional
        The ranks sharing the mesh; ``None`` means ``MPI.COMM_WORLD``. It is
        duplicated internally, so pmewald's messages never mix with yours.
        Anything that is not an mpi4py intracommunicator raises ``TypeError``.
    comm_mode : {"pt2pt", "nonblocking", "collective"}
        Communication strategy of every remap (see the module docstring);
        anything else raises ``ValueError``.
    inbox : box, optional
        This rank's part of the input of :meth:`forward`. Default: this rank's
        brick of the minimum-surface 3-D processor grid.
    outbox : box, optional
        This rank's part of the output of :meth:`forward`. Default: ``inbox``.
        ``DistributedFFT.z_pencil_box(shape, comm)`` avoids the last remap.
    planner : {"measure", "estimate", "patient", "exhaustive"}
        FFTW planning rigour for the batched 1-D transforms (made once here).
    _collective_self_via_mpi : bool, optional
        Measurement knob for ``"collective"``: send this rank's own piece
        through ``MPI_Alltoallv`` (True) or copy it (False, the default).

    Notes
    -----
    Every rank must construct the object together (it is collective). Over all
    ranks the inboxes, and likewise the outboxes, must tile the mesh exactly;
    empty boxes (``lo == hi`` along some axis) are allowed, and their arrays are any
    empty 3-D arrays (the box's own shape, e.g. ``(1, 7, 0)``, is what :attr:`inshape`
    says). An inverted box (``lo > hi``), a bad tiling, or a mesh / mode / planner that
    differs between ranks raises ``ValueError`` on every rank, whichever rank it is on;
    a mesh whose share on a rank would exceed 2^31 - 1 elements or its memory too,
    before anything is allocated. One call at a time per object (another thread gets
    ``RuntimeError``); see docs/reliability.md.

    Examples
    --------
    >>> fft = DistributedFFT((32, 32, 32))            # doctest: +SKIP
    >>> (lo, hi) = fft.inbox
    >>> a = np.zeros(np.subtract(hi, lo), complex)
    >>> b = fft.forward(a)                           # numpy.fft.fftn, distributed
    >>> a2 = fft.backward(b)                         # == a
    """

    def __init__(self, shape, comm=None, comm_mode="nonblocking", inbox=None, outbox=None, planner="measure",
                 _collective_self_via_mpi=None):
        super().__init__(shape, comm, comm_mode, inbox, outbox, planner, _collective_self_via_mpi)

    def _make(self, comm, a, comm_mode, planner, extra):
        return _core.FFT3d(comm, a["mesh"], a["inbox"], a["outbox"], comm_mode, planner, **extra)

    @property
    def pencils(self):
        """This rank's x-, y- and z-pencil boxes (the internal stages)."""
        return (self._fft.x_pencil, self._fft.y_pencil, self._fft.z_pencil)

    @staticmethod
    def z_pencil_box(shape, comm=None):
        """This rank's z-pencil box for ``shape`` on ``comm``: as ``outbox`` it saves the last remap."""
        from mpi4py import MPI

        comm = MPI.COMM_WORLD if comm is None else comm
        return geometry.pencil_box(2, comm.Get_size(), tuple(shape), comm.Get_rank())

    # -- transforms -------------------------------------------------------
    def forward(self, a, out=None):
        """Forward transform (sign -1, unscaled, like ``numpy.fft.fftn``).

        ``a`` is this rank's part of the input: complex128, shape
        :attr:`inshape`, indexed ``[x, y, z]`` (non-contiguous arrays are copied
        first). Returns this rank's part of the output (shape :attr:`outshape`),
        written into ``out`` when given (complex128, C-contiguous). Collective:
        every rank must call it; a wrong dtype or shape on any rank raises
        ``ValueError`` on every rank. For an empty box any empty 3-D array does.
        """
        return self._transform(True, a, out)

    def backward(self, b, out=None):
        """Backward transform scaled by 1/N (like ``numpy.fft.ifftn``): ``backward(forward(a)) == a``.

        ``b`` has shape :attr:`outshape`; the result has shape :attr:`inshape`.
        Collective, with the same argument rules as :meth:`forward`.
        """
        return self._transform(False, b, out)


class DistributedRealFFT(_PencilFFT):
    """A distributed 3-D real-to-complex FFT of a real ``shape`` mesh.

    :meth:`forward` takes this rank's part of a real ``(n_x, n_y, n_z)`` mesh to
    its part of the half spectrum, the ``(n_x // 2 + 1, n_y, n_z)`` complex mesh
    ``numpy.fft.rfftn(a, axes=(1, 2, 0))`` (the r2c halves axis **x**: entry
    ``[k_x, k_y, k_z]``, ``0 <= k_x <= n_x // 2``, is the full spectrum's; the
    others follow from ``F(-k) = conj F(k)``). :meth:`backward` is the inverse,
    ``numpy.fft.irfftn(b, s=(n_y, n_z, n_x), axes=(1, 2, 0))``.

    Internally: a real remap to x-pencils, batched r2c along x, then the half
    spectrum moves through y- and z-pencils as in :class:`DistributedFFT` (so
    every remap after the first moves half the bytes), with the same three
    communication modes.

    Parameters
    ----------
    shape : 3 ints
        The real mesh ``(n_x, n_y, n_z)``.
    comm, comm_mode, planner
        As for :class:`DistributedFFT`.
    inbox : box, optional
        This rank's part of the real mesh. Default: this rank's brick of the
        minimum-surface 3-D processor grid.
    outbox : box, optional
        This rank's part of the half spectrum (a box of ``spectrum_shape``).
        Default: this rank's z-pencil of it
        (``DistributedRealFFT.z_pencil_box(shape, comm)``), which needs no last
        remap.
    storage : box, optional
        The box of this rank's real arrays, containing ``inbox`` (e.g. the inbox
        with ghost layers): :meth:`forward` reads, and :meth:`backward` writes,
        only the inbox's elements of such an array. Default: ``inbox``.
    halved_axis : {0, 1, 2}
        The axis the r2c halves: 0 (x, the default) works on any number of
        ranks; 1 or 2 only on a single rank (one 3-D FFTW plan), where 2, the
        contiguous axis of the C-order input, is faster (what the PME solver
        uses there). The spectrum is then ``rfftn(a)``-like along that axis;
        ``ValueError`` on several ranks.

    Notes
    -----
    Every rank must construct the object together (it is collective). The
    inboxes must tile the real mesh and the outboxes the half spectrum exactly
    (empty boxes allowed); otherwise ``ValueError`` on every rank. Every other rule
    of :class:`DistributedFFT` holds too: inverted boxes, arguments that differ
    between ranks (``halved_axis`` included) and per-rank limits are refused on every
    rank, one call at a time per object.

    Examples
    --------
    >>> fft = DistributedRealFFT((32, 32, 32))        # doctest: +SKIP
    >>> (lo, hi) = fft.inbox
    >>> a = np.zeros(np.subtract(hi, lo))            # float64
    >>> b = fft.forward(a)                           # this rank's part of rfftn(a, axes=(1, 2, 0))
    >>> a2 = fft.backward(b)                         # == a
    """

    _in_dtype = np.float64

    def __init__(self, shape, comm=None, comm_mode="nonblocking", inbox=None, outbox=None, planner="measure",
                 storage=None, halved_axis=0, _collective_self_via_mpi=None):
        self._storage_arg, self._halved_arg = storage, halved_axis  # read by the checks below
        super().__init__(shape, comm, comm_mode, inbox, outbox, planner, _collective_self_via_mpi)

    # -- what the real FFT adds -------------------------------------------
    def _options(self, mesh, comm):
        halved_axis = self._halved_arg
        if isinstance(halved_axis, (bool, np.bool_)) or halved_axis not in (0, 1, 2):
            raise ValueError(f"halved_axis must be 0, 1 or 2, not {halved_axis!r}")
        if halved_axis != 0 and comm.Get_size() != 1:
            raise ValueError(f"halving axis {halved_axis} needs a single rank (across ranks the r2c runs in the "
                             "first pencil stage, along x)")
        return {"halved": int(halved_axis)}

    def _boxes(self, mesh, comm):
        return {"storage": _box(self._storage_arg, "storage")}

    def _adopt(self, args):
        self.halved_axis = args["halved"]
        self.spectrum_shape = tuple(self._fft.spectrum_mesh)

    def _same(self, own):
        return (own["halved"],)

    def _default_outbox(self, mesh, comm, inbox, own):
        return self.z_pencil_box(mesh, comm, own["halved"])

    def _footprint(self, a, size, rank):
        boxes = (a["inbox"], a["outbox"]) + ((a["storage"],) if a["storage"] is not None else ())
        return fft_footprint(a["mesh"], size, rank, boxes, real=True, halved_axis=a["halved"])

    def _make(self, comm, a, comm_mode, planner, extra):
        return _core.RealFFT3d(comm, a["mesh"], a["inbox"], a["outbox"], comm_mode, planner, a["storage"],
                               a["halved"], **extra)

    # -- geometry ---------------------------------------------------------
    @property
    def storage(self):
        """The box of this rank's real arrays (``inbox`` unless given)."""
        return self._storage

    @property
    def pencils(self):
        """This rank's real x-pencil and the half spectrum's x-, y- and z-pencil boxes."""
        f = self._fft
        return (f.real_x_pencil, f.x_pencil, f.y_pencil, f.z_pencil)

    @staticmethod
    def spectrum_shape_of(shape, halved_axis=0):
        """``(n_x // 2 + 1, n_y, n_z)``: the half spectrum of a real ``shape`` mesh (axis x halved)."""
        n = list(_mesh_of(shape))
        n[halved_axis] = n[halved_axis] // 2 + 1
        return tuple(n)

    @staticmethod
    def z_pencil_box(shape, comm=None, halved_axis=0):
        """This rank's z-pencil box of the half spectrum of ``shape`` (the default ``outbox``)."""
        from mpi4py import MPI

        comm = MPI.COMM_WORLD if comm is None else comm
        spec = DistributedRealFFT.spectrum_shape_of(shape, halved_axis)
        return geometry.pencil_box(2, comm.Get_size(), spec, comm.Get_rank())

    # -- transforms -------------------------------------------------------
    def forward(self, a, out=None):
        """Real-to-complex forward transform (sign -1, unscaled, like ``numpy.fft.rfftn``).

        ``a``: float64, shape :attr:`inshape` (this rank's storage box), indexed
        ``[x, y, z]``; only its :attr:`inbox` elements are read. Returns this
        rank's part of the half spectrum (complex128, shape :attr:`outshape`),
        written into ``out`` when given. ``a`` is not modified. Collective; a
        wrong dtype or shape on any rank raises ``ValueError`` on every rank.
        """
        return self._transform(True, a, out)

    def backward(self, b, out=None, normalise=True):
        """Complex-to-real inverse, scaled by 1/N (like ``numpy.fft.irfftn``) unless ``normalise=False``.

        ``b`` has shape :attr:`outshape` and must be the half spectrum of a real
        mesh (else the result is that of its Hermitian part, as with FFTW's
        c2r). Returns float64 of shape :attr:`inshape`: into ``out`` when given,
        where only the :attr:`inbox` elements are written; a new array is zero
        outside the inbox. ``b`` is not modified. Collective.
        """
        return self._transform(False, b, out, bool(normalise))

    # -- measurements -----------------------------------------------------
    def stats(self):
        """Counters and timers of this rank, as :meth:`DistributedFFT.stats`.

        Remap ``"in->x"`` / ``"x->in"`` moves float64 values, the others
        complex128. ``"fft"`` also holds ``unaligned_copies``: transforms that
        went through an internal copy because a caller's array was not aligned
        like FFTW's planning buffers (numpy's arrays are).
        """
        return super().stats()
