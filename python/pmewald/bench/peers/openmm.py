"""OpenMM's side of ``python -m pmewald.bench peers`` (:mod:`pmewald.bench.peers`): the worker
that builds a charges-only ``NonbondedForce`` PME system (exclusions as exceptions with
chargeProd 0) on the CPU platform and times ``getState(getForces=True)`` per
``ewaldErrorTolerance``, the reciprocal part in its own force group (each group timed alone
for the split); in the MD-loop mode ``setPositions`` + ``getState`` per frame on one
``Context`` (:mod:`pmewald.bench.peers.md`).
"""

from __future__ import annotations

import json
import statistics
import time

import numpy as np

from . import md

K_OPENMM = 138.935456        # OpenMM's ONE_4PI_EPS0 (kJ/mol nm e^-2)


def maxrss_mb():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def worker_openmm(job):
    import openmm

    d = np.load(job["system"])
    box_nm = d["box"] / 10.0
    pos_nm = d["positions"] / 10.0
    out = []
    for tol in job["tolerances"]:
        system = openmm.System()
        system.setDefaultPeriodicBoxVectors(*[openmm.Vec3(*row) for row in box_nm])
        nb = openmm.NonbondedForce()
        nb.setNonbondedMethod(openmm.NonbondedForce.PME)
        nb.setCutoffDistance(job["cutoff"] / 10.0)
        nb.setEwaldErrorTolerance(tol)
        nb.setUseDispersionCorrection(False)
        nb.setReciprocalSpaceForceGroup(1)
        for qi in d["charges"]:
            system.addParticle(1.0)
            nb.addParticle(float(qi), 0.1, 0.0)
        for i, j in d["exclusions"]:
            nb.addException(int(i), int(j), 0.0, 0.1, 0.0)
        system.addForce(nb)
        plat = openmm.Platform.getPlatformByName("CPU")
        ctx = openmm.Context(system, openmm.VerletIntegrator(0.001), plat, {"Threads": str(job["threads"])})
        if job.get("frames"):                         # MD-loop mode
            st, steps_t = md.openmm_loop(ctx, np.load(job["frames"]) / 10.0)
            alpha, nx, ny, nz = nb.getPMEParametersInContext(ctx)
            row = dict(tolerance=tol, threads=job["threads"], alpha_per_A=alpha / 10.0, mesh=[nx, ny, nz], order=5,
                       maxrss_mb=maxrss_mb(), **md.summary(steps_t))
            row["total_s"] = row["step_mean_s"]
            if job.get("forces_out"):
                fpath = f"{job['forces_out']}_{len(out)}.npy"
                np.save(fpath, np.asarray(st.getForces(asNumpy=True)._value) / K_OPENMM * 0.01)
                row["forces_file"] = fpath
            out.append(row)
            del ctx
            continue
        ctx.setPositions(pos_nm)
        st = ctx.getState(getForces=True)
        t0 = time.perf_counter()
        st = ctx.getState(getForces=True)
        t_warm = time.perf_counter() - t0
        steps = max(3, min(job["steps"], int(job.get("budget_s", 1e9) / max(t_warm, 1e-9))))
        times = {"total": [], "recip": [], "direct": []}
        for _ in range(steps):
            for key, groups in (("total", -1), ("recip", {1}), ("direct", {0})):
                t0 = time.perf_counter()
                st = ctx.getState(getForces=True, groups=groups)
                times[key].append(time.perf_counter() - t0)
        st = ctx.getState(getForces=True)
        alpha, nx, ny, nz = nb.getPMEParametersInContext(ctx)
        row = dict(tolerance=tol, threads=job["threads"], alpha_per_A=alpha / 10.0, mesh=[nx, ny, nz], order=5,
                   total_s=statistics.median(times["total"]), recip_s=statistics.median(times["recip"]),
                   real_s=statistics.median(times["direct"]), maxrss_mb=maxrss_mb(), steps=steps)
        if job.get("forces_out"):
            f = np.asarray(st.getForces(asNumpy=True)._value) / K_OPENMM * 0.01
            fpath = f"{job['forces_out']}_{len(out)}.npy"
            np.save(fpath, f)
            row["forces_file"] = fpath
        out.append(row)
        del ctx
    with open(job["result"], "w") as fh:
        json.dump(out, fh)
