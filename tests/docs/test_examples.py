"""The examples run, with their --quick settings: as scripts on one process, and
through their ``main(argv, comm)`` under the MPI harness on 2 ranks."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from example_scripts import EXAMPLES, ROOT, load


@pytest.mark.parametrize("script", ["water_box.py", "custom_decomposition.py"])
def test_example_runs_as_a_script(script):
    proc = subprocess.run([sys.executable, os.path.join(EXAMPLES, script), "--quick"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "energy" in proc.stdout


@pytest.mark.mpi(ranks=[2])
@pytest.mark.timeout(180)
def test_water_box_example(comm):
    out = load("water_box").main(["--quick", "--all-modes"], comm)
    modes = out["modes"]
    assert set(modes) == {"pt2pt", "nonblocking", "collective"}
    energies = {m["energy"] for m in modes.values()}
    assert len(energies) == 1                                    # bitwise equal in every mode
    for m in modes.values():
        assert m["forces"].shape == (len(out["atoms"]), 3)
        assert abs(sum(m["terms"].values()) - m["energy"]) < 1e-9 * max(map(abs, m["terms"].values()))
        assert m["parameters"]["mesh"] is not None
        assert set(m["phases"]) >= {"spread", "fft", "solve", "gather", "real_space"}
    # every atom is on exactly one rank
    assert comm.allreduce(len(out["atoms"])) == out["n_atoms"]


@pytest.mark.mpi(ranks=[2])
@pytest.mark.timeout(180)
def test_custom_decomposition_example(comm):
    out = load("custom_decomposition").main(["--quick"], comm)
    assert out["ok"], out
    assert out["split_exclusions"] > 0                           # pairs across ranks were exercised
    assert out["forces"].shape == (len(out["atoms"]), 3)
    assert comm.allreduce(len(out["atoms"])) == out["n_atoms"]
    assert np.isfinite(out["forces"]).all()
