"""Runs reproducible bit for bit (docs/reproducibility.md): with PMEWALD_FFTW_PLANNER=estimate
two processes computing the same system get identical energies, forces, virials and
potentials (a measured FFTW plan may differ between runs, and with it the last bits); a bad
value of the variable is a clear ValueError; the automatic choice's solvers plan by estimate and
the one kept by the configured planner from the next call on.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

# One process's results on a water box: tuned parameters, exclusions, potentials, two
# charge sets, with the real-space sum and without.
RUN = """
import sys, numpy as np, pmewald
from pmewald.systems import water_box
s = water_box(90, seed=4)
out = {}
for rs in (True, False):
    pme = pmewald.PME(s.box, 4.5, tolerance=1e-5, real_space=rs, comm_mode="pt2pt")
    r = pme.compute(s.positions, s.charges, s.ids, s.exclusions, potentials=True)
    out[f"{rs}/energy"] = np.array([r.energy])
    out[f"{rs}/forces"] = r.forces
    out[f"{rs}/virial"] = np.asarray(r.virial)
    out[f"{rs}/potentials"] = r.potentials
    m = pme.compute(s.positions, np.stack([s.charges, -0.5 * s.charges], axis=1), s.ids, s.exclusions)
    out[f"{rs}/sets"] = m.forces
np.savez(sys.argv[1], **out)
"""


def run(tmp_path, name, planner):
    dest = tmp_path / f"{name}.npz"
    env = dict(os.environ, PMEWALD_FFTW_PLANNER=planner)
    r = subprocess.run([sys.executable, "-c", RUN, str(dest)], env=env, capture_output=True, text=True, timeout=200)
    return r, dest


@pytest.mark.timeout(400)
def test_estimate_planner_gives_the_same_bits_in_two_processes(tmp_path):
    results = []
    for name in ("first", "second"):
        r, dest = run(tmp_path, name, "estimate")
        assert r.returncode == 0, r.stderr[-2000:]
        results.append(np.load(dest))
    a, b = results
    assert sorted(a.files) == sorted(b.files) and len(a.files) == 10
    for key in a.files:
        assert np.array_equal(a[key], b[key]), key


@pytest.mark.timeout(200)
def test_a_bad_planner_name_is_a_value_error_naming_the_variable(tmp_path):
    r, _ = run(tmp_path, "bad", "fastest")
    assert r.returncode != 0
    assert "ValueError" in r.stderr and "PMEWALD_FFTW_PLANNER must be one of" in r.stderr, r.stderr[-2000:]


@pytest.mark.mpi(ranks=(1, 2))
def test_the_tuning_plans_by_estimate_and_the_kept_solver_by_the_configured_planner(comm, monkeypatch):
    """The automatic choice's solvers plan their FFTs by estimate (most run once); the
    solver it keeps is planned again with the configured planner at the next call, with the
    same results (1e-12) and the mode in use; an explicit mesh plans with it at once."""
    import pmewald
    from pmewald import _core
    from pmewald.systems import water_box

    monkeypatch.setenv("PMEWALD_FFTW_PLANNER", "measure")
    assert _core.fftw_planner() == "measure"
    s = water_box(300, seed=5)
    n, r, p = s.n_atoms, comm.Get_rank(), comm.Get_size()
    mine = slice(r * n // p, (r + 1) * n // p)
    args = (s.positions[mine], s.charges[mine], s.ids[mine], s.exclusions)
    pme = pmewald.PME(s.box, 6.0, tolerance=1e-5, comm=comm, skin=0.0, comm_mode="auto")
    first = pme.compute(*args)
    assert pme.parameters["fft_planner"] == "estimate"
    assert pme.timings()["fft_contiguous_real_x"] == 0.0  # by estimate: no timing, the in-place read
    second = pme.compute(*args)
    assert pme.parameters["fft_planner"] == "measure"
    # Measured on 2 ranks, the solver timed the r2c in place and after an x-fastest copy and
    # kept one, the same on every rank (either gives the same results, below).
    chosen = pme.timings()["fft_contiguous_real_x"]
    assert chosen in (0.0, 1.0) and comm.allgather(chosen) == [chosen] * comm.Get_size()
    # "auto" is still trying the variants (one call each after a warm-up; one rank: nothing to try)
    assert pme.parameters["comm_mode_used"] == (None if comm.Get_size() > 1 else "nonblocking")
    scale = np.abs(first.forces).max()
    assert np.abs(second.forces - first.forces).max() <= 1e-12 * scale
    assert second.energy == pytest.approx(first.energy, rel=1e-12)
    fixed = pmewald.PME(s.box, 6.0, alpha=0.5, mesh=(24, 24, 24), order=5, comm=comm)
    assert fixed.parameters["fft_planner"] == "measure"
    monkeypatch.setenv("PMEWALD_FFTW_PLANNER", "estimate")  # read when the parameters are chosen, not per call
    pme.compute(*args)
    assert pme.parameters["fft_planner"] == "measure"
    monkeypatch.setenv("PMEWALD_FFTW_PLANNER", "fastest")  # a bad name: ValueError on every rank, no hang
    again = pmewald.PME(s.box, 6.0, tolerance=1e-5, comm=comm)
    with pytest.raises(ValueError, match="PMEWALD_FFTW_PLANNER must be one of"):
        again.compute(*args)
