"""Two threads, each on its own communicator, building and using pmewald objects at once.

Run under mpirun (tests/reliability/test_thread_stress.py; by hand:
``mpirun -n 2 .venv/bin/python tests/reliability/thread_stress.py [rounds] [seed]``). Every
pattern that the threading contract allows (docs/reliability.md, "Threads") is made while the
other thread computes, so that any collective that blocks with a process-wide lock held, or
any communicator creation that races another one, hangs the run:

- objects built on the main thread whose *first* compute runs inside the threads (the first
  call tunes: lazy set-up collectives, the automatic choice's reductions);
- objects built inside the threads on the thread's own communicator, then used there;
- DistributedFFT and DistributedRealFFT built and run inside the threads;
- every comm mode (``collective`` splits sub-communicators at construction, ``auto`` builds
  all three), ids given and not (``exscan`` of the offsets), both error models, potentials with
  probes, charge sets, a slab and a QEq solve (each had a lowercase reduction before issue 26).

The two threads run the case list in opposite orders with different sizes, so they drift
apart in time; each case's energy is compared with the same case run alone on the main thread
first. Prints "STRESS OK <rank> <created> <retries>" at the end (the core's communicator
creations in this process, and the attempts that found another thread creating and retried).
"""
from __future__ import annotations

import faulthandler
import os
import sys
import threading

import numpy as np
from mpi4py import MPI

import pmewald
from pmewald import _core, qeq as pmewald_qeq, systems

# PMEWALD_STRESS_DUMP_AFTER=s: every rank dumps its threads' stacks and exits after s seconds
# (the test sets it 20 s before its limit, so a hang shows where each thread was).
if os.environ.get("PMEWALD_STRESS_DUMP_AFTER"):
    faulthandler.dump_traceback_later(float(os.environ["PMEWALD_STRESS_DUMP_AFTER"]), exit=True)

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 1
SEED = int(sys.argv[2]) if len(sys.argv) > 2 else 0
MODES = ("pt2pt", "nonblocking", "collective", "auto")

# Two small systems (one per thread, different sizes so the threads drift apart).
BOX = [np.array([11.0, 12.0, 13.0]), np.array([12.5, 12.0, 11.5])]
SYSTEMS = [systems.random_charges(90 + 40 * k, BOX[k], neutral=True, seed=SEED + k, min_distance=1.2)
           for k in range(2)]


def mine(n):
    return np.arange(rank, n, size)


def case_list(k):
    """(name, run(comm) -> float) of thread k's cases; run builds its objects on `comm`."""
    s = SYSTEMS[k]
    idx = mine(s.n_atoms)
    pos, q, ids = s.positions[idx], s.charges[idx], s.ids[idx]
    cases = []
    for i, mode in enumerate(MODES):
        with_ids = i % 2 == 0
        model = "correlated" if i < 2 else "uncorrelated"

        def tuned(c, mode=mode, with_ids=with_ids, model=model):
            pme = pmewald.PME(s.box, cutoff=4.5, tolerance=1e-3, comm=c, comm_mode=mode, error_model=model)
            return pme.compute(pos, q, ids=ids if with_ids else None).energy
        cases.append((f"tuned {mode} ids={with_ids} {model}", tuned))

        def explicit(c, mode=mode):
            pme = pmewald.PME(s.box, cutoff=4.5, alpha=0.75, mesh=(16, 18, 20), comm=c, comm_mode=mode)
            return sum(pme.compute(pos, q).energy for _ in range(2))
        cases.append((f"explicit {mode}", explicit))

    def probes(c):
        pme = pmewald.PME(s.box, cutoff=4.5, alpha=0.75, mesh=16, comm=c)
        res = pme.compute(pos, q, ids=ids, potentials=True, probes=np.full((1, 3), 0.37 + rank))
        return res.energy + float(np.sum(comm_sum(c, res.probe_potentials.sum())))
    cases.append(("potentials and probes", probes))

    def sets(c):
        pme = pmewald.PME(s.box, cutoff=4.5, alpha=0.75, mesh=16, comm=c)
        return float(pme.compute(pos, np.stack([q, 0.5 * q], axis=1), ids=ids).energy.sum())
    cases.append(("charge sets", sets))

    def slab(c):
        zpos = pos.copy()
        lz = float(s.box[2][2])
        zpos[:, 2] = 0.5 + np.mod(zpos[:, 2], lz) * (lz - 1.0) / lz
        pme = pmewald.PME(s.box, cutoff=4.5, alpha=0.75, mesh=(16, 16, 32), comm=c, slab=True, slab_gap=10.0)
        return pme.compute(zpos, q).energy
    cases.append(("slab", slab))

    def qeq(c):
        pme = pmewald.PME(s.box, cutoff=4.5, alpha=0.75, mesh=16, comm=c)
        solver = pmewald_qeq.QEq(pme, tolerance=1e-8)
        chi = np.where(q > 0, 1.0, 2.0)
        return solver.solve(pos, chi, np.full(len(q), 10.0), ids=ids).energy
    cases.append(("qeq", qeq))

    def ffts(c):
        mesh = (12 + 2 * k, 14, 10)
        f = pmewald.DistributedFFT(mesh, comm=c, planner="estimate")
        a = np.full(f.inshape, k + 1.0, complex)
        r = pmewald.DistributedRealFFT(mesh, comm=c, planner="estimate")
        x = np.full(r.inshape, k + 2.0)
        return comm_sum(c, np.abs(f.forward(a)).sum() + np.abs(r.forward(x)).sum())
    cases.append(("FFTs", ffts))
    return cases


def comm_sum(c, x):
    buf = np.array([float(x)])
    c.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
    return buf[0]


def same(a, b):  # the order receives complete in changes the last bits between calls
    return abs(a - b) <= 1e-10 * max(abs(b), 1e-300)


def main():
    cases = [case_list(k) for k in range(2)]
    want = [[run(comm) for _, run in cases[k]] for k in range(2)]  # alone, on the main thread
    comms = [comm.Dup() for _ in range(2)]  # the threads' communicators, made before they start

    # Objects built here whose first compute runs in the threads.
    first = []
    for k in range(2):
        s = SYSTEMS[k]
        idx = mine(s.n_atoms)
        first.append((pmewald.PME(s.box, cutoff=4.5, tolerance=1e-3, comm=comms[k]),
                      s.positions[idx], s.charges[idx]))
    first_want = [pmewald.PME(SYSTEMS[k].box, cutoff=4.5, tolerance=1e-3).compute(first[k][1], first[k][2]).energy
                  for k in range(2)]

    errors, start = [], threading.Barrier(2)

    def thread(k):
        try:
            start.wait()
            pme, pos, q = first[k]
            got = pme.compute(pos, q).energy
            assert same(got, first_want[k]), ("first compute in the thread", k, got, first_want[k])
            order = list(range(len(cases[k])))
            if k == 1:
                order.reverse()
            for r in range(ROUNDS):
                for i in order[r % len(order):] + order[:r % len(order)]:
                    name, run = cases[k][i]
                    got = run(comms[k])
                    assert same(got, want[k][i]), (name, k, got, want[k][i])
        except BaseException as e:  # noqa: BLE001 - reported below, on this rank
            errors.append(f"thread {k}: {type(e).__name__}: {e}")

    ts = [threading.Thread(target=thread, args=(k,)) for k in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    stats = getattr(_core, "communicator_creation_stats", lambda: {"created": -1, "retries": -1})()
    print(f"STRESS OK {rank} {stats['created']} {stats['retries']}", flush=True)


if __name__ == "__main__":
    main()
