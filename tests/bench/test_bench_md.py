"""The peer harness's MD-loop mode (``python -m pmewald.bench peers --mode md``,
pmewald.bench.peers.md): the random walk, the ``skin`` pass-through, and a 2-step run on a
tiny water box for pmewald and every peer installed here (LAMMPS ``lmp``, OpenMM, GROMACS
``gmx``), each with a measured error and per-step times."""

import importlib.util
import inspect
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from pmewald import PME
from pmewald.bench.peers import gromacs as peers_gromacs, md as peers_md

# exclusive (docs/testing.md): runs every peer (GROMACS, LAMMPS, OpenMM) with its own threads and ranks.
pytestmark = pytest.mark.exclusive


def test_trajectory_is_a_small_gaussian_walk_from_the_system():
    x = np.random.default_rng(0).random((400, 3)) * 20.0
    fr = peers_md.trajectory(x, 20, 0.01, seed=1)
    assert fr.shape == (21, 400, 3) and np.array_equal(fr[0], x)
    step = np.diff(fr, axis=0)
    assert 0.009 < step.std() < 0.011 and abs(step.mean()) < 1e-3
    assert not np.array_equal(fr[1], fr[2])


def test_skin_is_passed_only_where_pme_accepts_it():
    accepts = "skin" in inspect.signature(PME.__init__).parameters
    kw, rec = peers_md.pme_kwargs({"tolerance": 1e-4}, 1.0)
    assert rec == dict(pme_accepts_skin=accepts, skin_requested=1.0, skin_passed=accepts)
    assert ("skin" in kw) == accepts and kw["tolerance"] == 1e-4
    kw, rec = peers_md.pme_kwargs({"tolerance": 1e-4}, None)
    assert "skin" not in kw and rec["skin_passed"] is False


@pytest.mark.timeout(240)
def test_md_mode_runs_two_steps_for_every_available_peer(tmp_path):
    have = dict(lammps=shutil.which("lmp") is not None, openmm=importlib.util.find_spec("openmm") is not None,
                gromacs=peers_gromacs.gmx_binary() is not None)
    cmd = [sys.executable, "-m", "pmewald.bench", "peers", "--mode", "md", "--md-steps", "2", "--sizes", "1500",
           "--systems", "water", "--ranks", "1", "--rounds", "1", "--cutoff", "8", "--tolerances", "1e-4",
           "--lammps-accuracies", "1e-5", "--openmm-tolerances", "1e-5", "--gromacs-settings", "1e-5:0.1:4",
           "--skip-validation", "--skin", "1.0", "--ref-tolerance", "1e-7", "--out", str(tmp_path)]
    cmd += [f"--skip-{code}" for code, ok in have.items() if not ok]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_COMM", "PMIX_"))}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=230, env=env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    res = json.loads((tmp_path / "results.json").read_text())
    codes = {r["code"]: r for r in res["rows"]}
    want = {"pmewald-auto"} | {c for c, ok in (("lammps-ik", have["lammps"]), ("openmm", have["openmm"]),
                                                 ("gromacs", have["gromacs"])) if ok}
    assert want <= set(codes), (want, set(codes))
    for code in want:
        r = codes[code]
        assert r["total_s"] > 0, code
        assert 1e-7 < r["error"] < 3e-3, (code, r["error"])   # frame 0 against the tight reference
    assert codes["pmewald-auto"]["skin_passed"] == ("skin" in inspect.signature(PME.__init__).parameters)
    assert "MD-loop mode: 2 steps" in (tmp_path / "results.md").read_text()
