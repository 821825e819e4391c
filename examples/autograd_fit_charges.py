"""Fit per-species charges to reference forces with pmewald's differentiable PME (JAX), on any
number of MPI ranks.

The training set: a few SPC/E-like water boxes whose reference forces come from pmewald's
independent direct Ewald sum (pmewald.reference.ewald) at the true charges (O -0.8476, H
+0.4238). The model: one charge per species, theta = (q_O, q_H), started at (-0.5, +0.3) and not
constrained to be neutral. The loss: the mean squared force error over all frames and atoms.
Its gradient in theta needs the forces' derivative in the charges: pmewald's forces are quadratic
in the charges, so jax.jvp of PMEForces along a charge direction is exact (one call with three
charge sets; pmewald.interfaces.autograd), one jvp per parameter (forward mode: two here).
Adam, then the last steps' loss and the fitted charges are printed.

    python examples/autograd_fit_charges.py [--steps 200] [--frames 3]
    mpirun -n 2 python examples/autograd_fit_charges.py     # each rank its share of every frame
"""

import argparse
import time

import numpy as np

TRUE = (-0.8476, 0.4238)


def _frames(n, molecules, comm):
    """n water boxes (the same on every rank) with reference forces at the true charges."""
    from pmewald import systems
    from pmewald.reference import ewald

    out = []
    for seed in range(n):
        w = systems.water_box(molecules, seed=seed)
        species = (w.charges > 0).astype(int)  # 0: O, 1: H
        q = np.asarray(TRUE)[species]
        ref = ewald(w.box, w.positions, q, exclusions=w.exclusions, accuracy=1e-12) if comm.Get_rank() == 0 else None
        out.append((w, species, comm.bcast(None if ref is None else ref.forces, root=0)))
    return out


def main(argv=None, comm=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--frames", type=int, default=3)
    ap.add_argument("--molecules", type=int, default=64)
    ap.add_argument("--cutoff", type=float, default=5.5, help="Angstrom")
    ap.add_argument("--lr", type=float, default=0.02, help="Adam's step")
    ap.add_argument("--tolerance", type=float, default=1e-6, help="pmewald's force error target")
    ap.add_argument("--quick", action="store_true", help="2 frames, 80 steps, tolerance 1e-5 (the test suite)")
    args = ap.parse_args(argv)
    if args.quick:
        args.frames, args.steps, args.tolerance = 2, 80, 1e-5

    import jax
    import jax.numpy as jnp
    from mpi4py import MPI

    from pmewald.interfaces.jax import PMEForces

    jax.config.update("jax_enable_x64", True)
    comm = MPI.COMM_WORLD if comm is None else comm
    rank, size = comm.Get_rank(), comm.Get_size()
    frames = _frames(args.frames, args.molecules, comm)
    models = [PMEForces(args.cutoff, tolerance=args.tolerance, comm=comm) for _ in frames]  # one solver per box
    n_total = sum(3 * len(w.charges) for w, _, _ in frames)

    def local_loss(theta, frame, model):
        w, species, f_ref = frame
        mine = np.arange(rank, len(w.charges), size)
        f = model(w.positions[mine], theta[species[mine]], w.box, ids=mine,
                  exclusions=w.exclusions if rank == 0 else None)
        return jnp.sum((f - f_ref[mine]) ** 2) / n_total

    # One compiled jvp per frame (traced once: pmewald runs in its ordered host callback).
    jvps = [jax.jit(lambda th, t, f=frame, mo=model: jax.jvp(lambda x: local_loss(x, f, mo), (th,), (t,)))
            for frame, model in zip(frames, models)]

    def loss_and_gradient(theta):
        """The loss (all ranks' atoms) and its gradient: one jvp per charge parameter."""
        out = np.zeros(3)
        for jvp in jvps:
            for s in range(2):
                value, slope = jvp(theta, jnp.eye(2)[s])
                out[1 + s] += float(slope)
            out[0] += float(value)
        comm.Allreduce(MPI.IN_PLACE, out, op=MPI.SUM)
        return out[0], out[1:]

    theta, m, v = jnp.array([-0.5, 0.3]), np.zeros(2), np.zeros(2)
    history, t0 = [], time.perf_counter()
    for step in range(1, args.steps + 1):
        value, grad = loss_and_gradient(theta)
        history.append(value)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad ** 2
        theta = theta - args.lr * (m / (1 - 0.9 ** step)) / (np.sqrt(v / (1 - 0.999 ** step)) + 1e-12)
        if rank == 0 and (step % 20 == 0 or step == 1):
            print(f"step {step:4d}  loss {value:.3e}  q_O {float(theta[0]):+.5f}  q_H {float(theta[1]):+.5f}",
                  flush=True)
    final, _ = loss_and_gradient(theta)
    out = {"ranks": size, "steps": args.steps, "frames": args.frames, "initial_loss": history[0],
           "final_loss": final, "charges": [float(t) for t in theta],
           "charge_error": float(np.abs(np.asarray(theta) - np.asarray(TRUE)).max()),
           "seconds": time.perf_counter() - t0, "mesh": models[0].parameters["mesh"]}
    if rank == 0:
        print(f"fitted q_O {out['charges'][0]:+.5f} q_H {out['charges'][1]:+.5f} (true {TRUE[0]:+.4f} "
              f"{TRUE[1]:+.4f}); loss {out['initial_loss']:.3e} -> {out['final_loss']:.3e} in {out['seconds']:.1f} s "
              f"on {size} rank(s)")
    return out


if __name__ == "__main__":
    main()
