"""Every instruction-set version of the hand-vectorised kernels (cpp/base/simd.hpp): the
real-space selection and pair kernel, the atom layout's reused list (its gather and the shell's
selection), the cluster-pair kernels (double and mixed), B-spline spreading and gathering (ad and
ik, orders with one masked AVX-512 row and beyond). The versions below the one this CPU gets run
in subprocesses capped with PMEWALD_SIMD, and must reproduce this process's results (1e-12
relative; the mixed kernels, whose float sums run over other lane counts, 1e-5).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import numpy as np
import pytest

from pmewald._core._testing import pme as K
from pmewald._core._testing import realspace as rs


def isa_results():
    """Results of this process's kernel versions on fixed inputs."""
    from mpi4py import MPI

    import realspace_cases as t

    out = {}
    for case, (box, mesh, n, neutral) in t.CASES.items():
        pos, q, ids = t.random_system(box, n, seed=500 + len(case), neutral=neutral)
        pairs = [(i, i + 1) for i in range(0, 40, 4)]
        rng = np.random.default_rng(9)
        for i, j in pairs:
            pos[j] = pos[i] + rng.normal(scale=0.7, size=3)
        excl = np.array([[ids[i], ids[j]] for i, j in pairs], dtype=np.int64)
        cutoff = 0.49 * t.heights(box).min()
        e, f, w, terms, tim = rs.compute(MPI.COMM_SELF, box, mesh, pos, q, ids, excl, cutoff, 3.0 / cutoff, 1.0,
                                         timings=True)
        out[f"real/{case}/forces"] = f
        out[f"real/{case}/virial"] = np.asarray(w)
        out[f"real/{case}/energy"] = np.array([e, tim["pairs_evaluated"]])
    import pmewald

    box, mesh, n, neutral = t.CASES[next(iter(t.CASES))]
    pos, q, ids = t.random_system(box, n, seed=77, neutral=True)
    cutoff = 0.45 * t.heights(box).min()
    for precision in ("double", "mixed"):
        p = pmewald.PME(box, cutoff, alpha=3.0 / cutoff, mesh=mesh, skin=0.04 * cutoff, comm=MPI.COMM_SELF,
                        pair_layout="clusters", precision=precision)
        p.compute(pos, q, ids)
        r = p.compute(pos, q, ids)  # the list's second call: by clusters
        assert p.parameters["pair_layout_used"] == "clusters"
        out[f"clusters/{precision}/forces"] = r.forces
        out[f"clusters/{precision}/energy"] = np.array([r.energy])
        out[f"clusters/{precision}/virial"] = r.virial
        # The atom layout's reused list (list_gather.cpp): the atoms moved within half the skin, so
        # the call gathers the inner partners and selects the shell's within the cutoff.
        p = pmewald.PME(box, cutoff, alpha=3.0 / cutoff, mesh=mesh, skin=0.1 * cutoff, comm=MPI.COMM_SELF,
                        pair_layout="atoms", precision=precision)
        p.compute(pos, q, ids)
        moved = pos + np.random.default_rng(12).uniform(-0.015 * cutoff, 0.015 * cutoff, pos.shape)
        r = p.compute(moved, q, ids)
        assert p.timings()["pair_list_builds"] == 1
        out[f"list/{precision}/forces"] = r.forces
        out[f"list/{precision}/energy"] = np.array([r.energy])
    rng = np.random.default_rng(11)
    rj = rng.uniform(-5, 5, (37, 3))
    out["batch/forces"], out["batch/acc"] = rs.pair_batch(np.zeros(3), 1.0, rj, rng.uniform(-1, 1, 37), 0.35)
    box = np.array([[10.0, 0.0, 0.0], [6.0, 9.0, 0.0], [4.0, -3.0, 8.0]])
    pos = rng.random((90, 3)) @ box
    q = rng.choice([-1.0, 1.0], 90)
    q -= q.mean()
    for diff in ("ad", "ik"):
        for order in (4, 5, 6, 8, 9):
            E, F, W, phi = K.serial_reference(box, pos, q, 0.35, (20, 18, 22), order, diff)
            out[f"recip/{diff}{order}/forces"] = F
            out[f"recip/{diff}{order}/energy"] = np.array([E])
            out[f"recip/{diff}{order}/virial"] = np.asarray(W)
    return out


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="one kernel version off x86-64")
@pytest.mark.timeout(120)
def test_every_simd_version_gives_the_same_results(tmp_path):
    here = isa_results()
    mine = rs.pair_kernel_isa()
    seen = {mine}
    for isa in ("x86-64-v3", "baseline"):
        dest = tmp_path / f"{isa}.npz"
        # this folder and tests/ (its helpers) on the path, as pytest puts them
        code = ("import os, sys, numpy as np; sys.path[:0] = [sys.argv[1], os.path.dirname(sys.argv[1])]; "
                "import test_simd as t; "
                "np.savez(sys.argv[2], isa=t.rs.pair_kernel_isa(), **t.isa_results())")
        env = dict(os.environ, PMEWALD_SIMD=isa)
        subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__), str(dest)], env=env, check=True,
                       timeout=100)
        got = np.load(dest)
        seen.add(str(got["isa"]))
        for key, ref in here.items():
            scale = np.abs(ref).max()
            tol = 1e-5 if key.startswith(("clusters/mixed", "list/mixed")) else 1e-12
            assert np.abs(got[key] - ref).max() <= tol * scale, (isa, key)
    # On an AVX-512 machine all three versions ran.
    assert len(seen) == 3 or not mine.startswith("x86-64-v4"), seen
