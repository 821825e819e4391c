"""The PME energy as a JAX function with gradients in positions, charges and cell (a
``jax.custom_vjp`` around pmewald's solver), on one or many MPI ranks.

    import jax
    jax.config.update("jax_enable_x64", True)       # double precision (else float32 in and out)
    from pmewald.interfaces.jax import PMEEnergy

    energy = PMEEnergy(cutoff=8.0, tolerance=1e-5, coulomb_constant=units.EV_ANGSTROM)
    e, (d_pos, d_q, d_cell) = jax.value_and_grad(energy, argnums=(0, 1, 2))(positions, charges, cell)

What is computed, the fixed parameters, the MPI convention (each rank its own atoms; the cell
gradient split over the ranks, to be summed) and the charge sets are those of
:mod:`pmewald.interfaces.autograd`. pmewald runs on the host through an ordered
``jax.experimental.io_callback`` (it is collective over MPI: it must run exactly once per call,
in order, on every rank), inside ``jax.jit`` too; not under ``jax.vmap``. Forward-mode
differentiation (``jax.jvp``, ``jax.jacfwd``, ``jax.hessian``) and second reverse-mode
derivatives are refused with an error (:data:`pmewald.interfaces.autograd.SECOND_ORDER_MESSAGE`).

:class:`PMEForces` gives this rank's forces as a function of the charges with an exact
forward-mode derivative in them (``jax.jvp``; the forces are quadratic in the charges), for
losses on forces of a model with a few charge parameters (``examples/autograd_fit_charges.py``);
``jax.grad`` through it, or tangents in positions or cell, are refused.
"""

from __future__ import annotations

import numpy as np

from .autograd import SECOND_ORDER_MESSAGE, DifferentiableEnergy

__all__ = ["PMEEnergy", "PMEForces"]


class _OnTheHost:
    """What both functions share: pmewald's solver, run on the host, and its parameters."""

    def __init__(self, cutoff, options):
        self.function = DifferentiableEnergy(cutoff, **options)

    @property
    def parameters(self):
        return self.function.parameters


def _host_inputs(positions, charges, cell, ids, exclusions):
    """`ids` and `exclusions` as NumPy int64 arrays (never traced) and the results' dtype."""
    import jax.numpy as jnp

    ids = None if ids is None else np.asarray(ids, dtype=np.int64)
    exclusions = None if exclusions is None else np.asarray(exclusions, dtype=np.int64)
    return ids, exclusions, jnp.result_type(positions, charges, cell)


class PMEEnergy(_OnTheHost):
    """A differentiable PME energy ``energy(positions, charges, cell, ids=None, exclusions=None)``.

    Parameters are those of :class:`pmewald.interfaces.autograd.DifferentiableEnergy`, plus
    ``charge_gradient`` (default True): compute ``dE/dq`` in the forward pass (JAX cannot say
    beforehand whether it will be asked for; False saves the potential pass, and the charges'
    gradient is then NaN).

    ``positions`` (n, 3), ``charges`` (n,) or (n, m) (m charge sets: m energies), ``cell``
    (3, 3), JAX or NumPy arrays; ``ids`` and ``exclusions`` NumPy integer arrays (not traced).
    Returns the energy (a scalar, or (m,)), the same on every rank. ``last`` holds the last
    :class:`pmewald.interfaces.autograd.Evaluation` (forces, potentials, virial).
    """

    def __init__(self, cutoff, *, charge_gradient=True, **options):
        super().__init__(cutoff, options)
        self.charge_gradient = bool(charge_gradient)
        self.last = None

    def __call__(self, positions, charges, cell, ids=None, exclusions=None):
        import jax
        import jax.numpy as jnp
        from jax.experimental import io_callback

        ids, exclusions, dtype = _host_inputs(positions, charges, cell, ids, exclusions)
        n, sets = positions.shape[0], charges.shape[1:]
        shapes = (jax.ShapeDtypeStruct(sets, dtype), jax.ShapeDtypeStruct(sets + (n, 3), dtype),
                  jax.ShapeDtypeStruct(sets + (n,), dtype), jax.ShapeDtypeStruct(sets + (3, 3), dtype))

        def host(pos, q, h, with_q):
            ev = self.function.evaluate(np.asarray(pos), np.asarray(q), np.asarray(h), ids, exclusions,
                                        potentials=bool(with_q))
            self.last = ev
            phi = ev.potentials if ev.potentials is not None else np.full(sets + (n,), np.nan)
            return tuple(np.asarray(a, dtype=dtype) for a in (ev.energy, ev.forces, phi, ev.cell_gradient))

        primal = _first_order_only(lambda *a: io_callback(lambda *b: host(*b, False)[0], shapes[0], *a, ordered=True))
        full = _first_order_only(lambda *a: io_callback(lambda *b: host(*b, self.charge_gradient), shapes, *a,
                                                        ordered=True))

        @jax.custom_vjp
        def energy(pos, q, h):
            return primal(pos, q, h)

        def forward(pos, q, h):
            e, f, phi, g = full(pos, q, h)
            return e, (f, phi, g)

        def backward(residuals, cotangent):
            f, phi, g = residuals
            if sets:  # m charge sets: cotangent (m,)
                return (-jnp.einsum("c,cij->ij", cotangent, f), (cotangent[:, None] * phi).T,
                        jnp.einsum("c,cij->ij", cotangent, g))
            return -cotangent * f, cotangent * phi, cotangent * g

        energy.defvjp(forward, backward)
        return energy(positions, charges, cell)


def _first_order_only(call):
    """The host call `call(pos, q, h)` as a function whose derivative is refused with pmewald's
    message: a second derivative of the energy differentiates the forward pass of its custom
    VJP, which ends here (an io_callback has no derivative of its own)."""
    import jax

    f = jax.custom_jvp(call)

    @f.defjvp
    def _refuse(primals, tangents):
        raise NotImplementedError(SECOND_ORDER_MESSAGE)

    return f


class PMEForces(_OnTheHost):
    """This rank's PME forces ``forces(positions, charges, cell, ids=None, exclusions=None)``
    (n, 3), differentiable in the charges in forward mode: ``jax.jvp`` with a charge tangent
    ``t`` gives ``dF[t] = (F(q + t) - F(q - t)) / 2``, exact, from one call with three charge
    sets (:meth:`pmewald.interfaces.autograd.DifferentiableEnergy.forces_along_charges`). One
    ``jax.jvp`` per parameter of a charge model: for a few parameters (per-species charges), not
    for a network. Tangents in positions or cell, and reverse mode (``jax.grad``), raise
    ``NotImplementedError``. ``energy`` of the last call is kept (the same on every rank).

    Parameters are those of :class:`pmewald.interfaces.autograd.DifferentiableEnergy`.
    """

    def __init__(self, cutoff, **options):
        super().__init__(cutoff, options)
        self.energy = None

    def __call__(self, positions, charges, cell, ids=None, exclusions=None):
        import jax
        import jax.numpy as jnp
        from jax.custom_derivatives import SymbolicZero
        from jax.experimental import io_callback

        ids, exclusions, dtype = _host_inputs(positions, charges, cell, ids, exclusions)
        shape = jax.ShapeDtypeStruct((positions.shape[0], 3), dtype)

        def host(pos, q, h, t):
            e, f, _, df = self.function.forces_along_charges(np.asarray(pos), np.asarray(q), np.asarray(h),
                                                             np.asarray(t)[:, None], ids, exclusions)
            self.energy = e
            return np.asarray(f, dtype=dtype), np.asarray(df[0], dtype=dtype)

        def primal_host(pos, q, h):
            return host(pos, q, h, np.zeros(len(q)))[0]

        @jax.custom_jvp
        def forces(pos, q, h):
            return io_callback(primal_host, shape, pos, q, h, ordered=True)

        def rule(primals, tangents):
            t_pos, t_q, t_cell = tangents
            if not (isinstance(t_pos, SymbolicZero) and isinstance(t_cell, SymbolicZero)):
                raise NotImplementedError(SECOND_ORDER_MESSAGE + "; PMEForces differentiates in the charges only")
            pos, q, h = primals
            if isinstance(t_q, SymbolicZero):
                return forces(pos, q, h), jnp.zeros(shape.shape, dtype)
            return io_callback(host, (shape, shape), pos, q, h, t_q, ordered=True)

        forces.defjvp(rule, symbolic_zeros=True)
        return forces(positions, charges, cell)
