"""Runs reproducible bit for bit (docs/reproducibility.md): with PMEWALD_FFTW_PLANNER=estimate
two processes computing the same system get identical energies, forces, virials and
potentials (a measured FFTW plan may differ between runs, and with it the last bits); a bad
value of the variable is a clear ValueError.
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
