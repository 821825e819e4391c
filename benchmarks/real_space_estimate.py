"""The real-space error estimate alone against the measured real-space error (issue 15).

For each system of the accuracy sweep (``python -m pmewald.bench accuracy``'s random-neutral,
water and nacl-displaced, the sizes of its ``full`` set) and alpha * cutoff in 3.0, 3.5, 4.0:
one compute with explicit alpha, order 8 and a mesh of 6 * alpha * L points per edge (so the
reciprocal error is below 1e-8 and what is measured is the real-space truncation), its force
error against ``pmewald.reference.ewald``, the real-space estimates of the correlated model
(the default: the truncation force sampled on the system, ``pmewald.pme.error_model.real_factors``) and of
the uncorrelated one (Kolafa-Perram), and their ratios to the measured error. Serial;
accuracy does not depend on the load::

    .venv/bin/python benchmarks/real_space_estimate.py

docs/accuracy.md ("The real-space part alone") has the table it printed (the same to 3 digits on every run: the systems are seeded).
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from pmewald import PME, reference, systems

CASES = {
    "random-neutral": lambda: systems.random_charges(1000, 22.0, seed=1),
    "water": lambda: systems.water_box(700, seed=44),
    "nacl-displaced": lambda: systems.displace(systems.rock_salt((5,) * 3), 0.1, seed=43),
}


def main():
    print(f"{'system':16s} {'N':>5s} {'alpha*rc':>8s} {'mesh':>5s} {'measured':>10s} {'est_real':>10s} "
          f"{'est_KP':>10s} {'est_recip':>9s} {'est/meas':>8s} {'KP/meas':>8s}")
    for name, make in CASES.items():
        s = make()
        rc = min(9.0, 0.45 * float(reference.cell_heights(s.box).min()))
        ref = reference.ewald(s.box, s.positions, s.charges, exclusions=s.exclusions if len(s.exclusions) else None)
        for ar in (3.0, 3.5, 4.0):
            alpha = ar / rc
            n = int(np.ceil(np.linalg.norm(s.box, axis=1).max() * alpha * 6))
            n += n % 2
            est = {}
            for model in ("correlated", "uncorrelated"):
                pme = PME(s.box, rc, alpha=alpha, mesh=(n, n, n), order=8, differentiation="ad", comm=MPI.COMM_SELF,
                          error_model=model)
                r = pme.compute(s.positions, s.charges, ids=s.ids, exclusions=s.exclusions)
                p = pme.parameters  # absolute estimates of this call's parts
                est[model] = p["estimated_error_real"] / r.rms_force
            measured = float(np.sqrt(((r.forces - ref.forces) ** 2).sum() / (ref.forces ** 2).sum()))
            recip = p["estimated_error_reciprocal"] / r.rms_force
            real, kp = est["correlated"], est["uncorrelated"]
            print(f"{name:16s} {s.n_atoms:5d} {ar:8.1f} {n:5d} {measured:10.3e} {real:10.3e} {kp:10.3e} {recip:9.1e} "
                  f"{real / measured:8.2f} {kp / measured:8.2f}", flush=True)


if __name__ == "__main__":
    main()
