"""The solver on 64 simulated MPI ranks (SimGrid SMPI, docs/scaling.md).

The driver scale/driver is built with smpicxx into build-smpi-tests/ (at -O1) by pmewald.bench.scale
(once per change of the C++ sources: the first time takes minutes; `bash scripts/dev.sh
setup` installs SimGrid, libsimgrid-dev, with the other Debian packages). A rock-salt
crystal whose upper half is vacuum (ranks without atoms) on a mesh too small for every
FFT pencil (ranks without k-space), spline order 5 on bricks 2-3 points wide (halo
partners beyond the neighbours), runs on 64 simulated ranks of the fat-tree platform in
every communication mode. Its energies and every force agree with the one-rank run to
1e-10, and the FFT and halo messages the solver counted on every rank are the plan
census's (pmewald.bench.scale.comm_model: the model's counts are the real plans'). There the
cutoff spans two domains per axis: the ghost atoms go staged (the automatic choice; 2 pulses
per axis) and, in a second simulation, directly to every domain within the cutoff with the
real-space domains balanced (the vacuum half leaves half the ranks idle on the bricks).
"""
from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest

from pmewald.bench.scale import comm_model
from pmewald.bench import scale as bench_scale

# The whole file runs alone (builds the shared build-smpi-tests driver and simulates).
pytestmark = [pytest.mark.exclusive, pytest.mark.skipif(shutil.which("smpirun") is None,
                                reason="needs SimGrid (libsimgrid-dev; bash scripts/dev.sh setup installs it)")]

SYSTEM = bench_scale.System("rocksalt4-vacuum", "rocksalt", 4, vacuum=0.5)
PARAMS = {"mesh": 10, "alpha": 0.5, "order": 5, "differentiation": "ad", "cutoff": 6.0}


@pytest.fixture(scope="module")
def driver():
    return bench_scale.build_driver(for_tests=True)


def _run(driver, P, out, tag="", warmup=0, **kw):
    name = f"P{P}{tag}"
    bench_scale.run_simulation(driver, P, "fat_tree", SYSTEM, PARAMS, out / f"{name}.json", warmup=warmup, steps=1,
                               dump=out / name, timeout=600, **kw)
    return json.loads((out / f"{name}.json").read_text())


@pytest.mark.timeout(1500)
def test_64_simulated_ranks_agree_with_one(driver, tmp_path):
    one = _run(driver, 1, tmp_path)
    many = _run(driver, 64, tmp_path)
    assert many["ranks"] == 64 and many["smpi"]
    assert many["ranks_without_atoms"] > 0, "the vacuum should leave ranks without atoms"
    assert all(r["ranks_without_kspace"] > 0 for r in many["runs"]), "some pencils should be empty"
    assert many["system"]["atoms"] == one["system"]["atoms"] == SYSTEM.atoms
    for mode in bench_scale.MODES:
        a, b = bench_scale.run_of(one, mode), bench_scale.run_of(many, mode)
        assert bench_scale.energy_error(a, b) < 1e-10, (mode, a["energy"], b["energy"])
        err = bench_scale.force_error(tmp_path / f"P1.{mode}.bin", tmp_path / f"P64.{mode}.bin")
        assert err < 1e-10, (mode, err)
        # Simulated time is MPI_Wtime's: positive, and the ranks spent some of it in MPI.
        assert b["step_s"] > 0 and 0 < b["mpi"]["share"]["mean"] < 1
    # The census counts the same FFT and halo messages as the solver did on every rank.
    cen = bench_scale.census_of(many)
    tr = comm_model.traffic(cen)
    remaps = [k for k in ("in->x", "x->y", "y->z", "z->out") if k in tr]
    fft_msgs = sum(tr[k]["messages"] for k in remaps)
    fft_bytes = sum(tr[k]["bytes"] for k in remaps)
    for mode in bench_scale.MODES:
        ph = bench_scale.run_of(many, mode)["phases"]
        assert ph["fft_messages"]["max"] == fft_msgs.max() and ph["fft_messages"]["mean"] == pytest.approx(fft_msgs.mean())
        assert ph["fft_bytes"]["max"] == fft_bytes.max()
        assert ph["ghost_messages"]["max"] == tr["halo"]["messages"].max()
        assert ph["ghost_bytes"]["mean"] == pytest.approx(tr["halo"]["bytes"].mean())
        # Staged ghosts: 2 messages per axis and pulse each way (a second when a count
        # outgrows its cap, as on this first call), against the direct exchange's 63 partners.
        assert bench_scale.run_of(many, mode)["ghost_exchange"] == "staged"
        assert ph["ghost_atoms_messages"]["max"] <= 2 * 2 * (2 * 3 * 2)


@pytest.mark.timeout(1500)
def test_64_simulated_ranks_direct_and_balanced(driver, tmp_path):
    one = _run(driver, 1, tmp_path, modes=("nonblocking",))
    # (the first call runs on the bricks and measures; the cuts move after it)
    many = _run(driver, 64, tmp_path, "b", warmup=1, modes=("nonblocking",), ghosts="direct", balance="dynamic")
    a, b = bench_scale.run_of(one, "nonblocking"), bench_scale.run_of(many, "nonblocking")
    assert b["ghost_exchange"] == "direct" and b["balance"] == "dynamic"
    assert bench_scale.energy_error(a, b) < 1e-10, (a["energy"], b["energy"])
    assert bench_scale.force_error(tmp_path / "P1.nonblocking.bin", tmp_path / "P64b.nonblocking.bin") < 1e-10
    # After the warm-up call the cuts have moved: less idle than on the bricks, whose vacuum
    # half has no pairs at all (4 ions per rank: balance is coarse at this size).
    bricks = bench_scale.run_of(_run(driver, 64, tmp_path, "o", modes=("nonblocking",), ghosts="direct"),
                                "nonblocking")
    assert bricks["real_space_pairs_imbalance_last"] > 1.9
    assert b["real_space_pairs_imbalance_last"] < bricks["real_space_pairs_imbalance_last"] - 0.3, (
        b["real_space_pairs_imbalance_last"], bricks["real_space_pairs_imbalance_last"])


def test_driver_rejects_bad_arguments(driver, tmp_path):
    cmd = bench_scale.smpirun_command(driver, 2, "fat_tree", ["--system", "rocksalt", "--cells", "2"], tmp_path)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "--mesh and --alpha are required" in proc.stderr
