"""Modelled computation under SimGrid SMPI (docs/scaling.md "Modelled computation").

With ``--compute-costs`` the scale driver turns the work the core reports for each
computation burst (pmewald::charge) into simulated time, units x seconds per unit,
and SimGrid does not time the computation (smpi/simulate-computation:no). A small
rock-salt system with vacuum (ranks without atoms and without k-space) on 1 and 16
simulated ranks, with made-up costs (a different one per kind, so a unit charged to
the wrong kind shows): the simulated step time is the same twice, a
one-rank run's phase times are its units x costs, the work summed over 16 ranks is
the one-rank work where it must be (every atom spread and gathered once), and the
results still agree with the one-rank run.
"""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from pmewald.bench.scale import compute_costs
from pmewald.bench import scale as bench_scale

# The whole file runs alone (builds the shared build-smpi-tests driver and simulates).
pytestmark = [pytest.mark.exclusive, pytest.mark.skipif(shutil.which("smpirun") is None,
                                reason="needs SimGrid (libsimgrid-dev; bash scripts/dev.sh setup installs it)")]

SYSTEM = bench_scale.System("rocksalt4-vacuum", "rocksalt", 4, vacuum=0.5)
PARAMS = {"mesh": 10, "alpha": 0.5, "order": 5, "differentiation": "ad", "cutoff": 6.0}
COSTS = {kind: (k + 1) * 1e-7 for k, kind in enumerate(compute_costs.KINDS)}
MODES = ("nonblocking", "collective+overlap")


@pytest.fixture(scope="module")
def driver():
    return bench_scale.build_driver(for_tests=True)


@pytest.fixture(scope="module")
def costs_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("costs") / "costs.json"
    path.write_text(json.dumps({"seconds_per_unit": COSTS}))
    return path


def _run(driver, P, out, costs, name):
    path = out / f"{name}.json"
    bench_scale.run_simulation(driver, P, "fat_tree", SYSTEM, PARAMS, path, modes=MODES, warmup=1, steps=1,
                               dump=out / name, timeout=600, compute_costs=costs)
    return json.loads(path.read_text())


def _variant(res, name):
    return next(r for r in res["runs"] if r["variant"] == name)


@pytest.mark.timeout(900)
def test_modelled_runs_are_deterministic_and_charge_units_times_costs(driver, costs_file, tmp_path):
    one = _run(driver, 1, tmp_path, costs_file, "P1")
    a = _run(driver, 16, tmp_path, costs_file, "P16a")
    b = _run(driver, 16, tmp_path, costs_file, "P16b")
    assert a["compute_costs"] == str(costs_file) and a["simulation"]["modelled_compute"] == str(costs_file)
    for name in MODES:
        ra, rb, r1 = _variant(a, name), _variant(b, name), _variant(one, name)
        # Deterministic: the same simulated step twice (the machine's load does not enter).
        assert ra["step_s"] > 0
        assert ra["step_s"] == pytest.approx(rb["step_s"], rel=1e-9, abs=0), name
        for phase in ("real_space", "fft", "spread", "gather", "comm_wait"):
            assert ra["phases"][phase]["max"] == pytest.approx(rb["phases"][phase]["max"], rel=1e-9, abs=1e-15)
        # Every atom is spread and gathered once, whichever rank owns it.
        for kind in ("spread", "gather", "migrate", "reduce"):
            assert 16 * ra["work"][kind]["mean"] == pytest.approx(r1["work"][kind]["max"], rel=1e-12), kind
        # Results are the real computation's.
        assert bench_scale.energy_error(r1, ra) < 1e-10
        err = bench_scale.force_error(tmp_path / f"P1.{name}.bin", tmp_path / f"P16a.{name}.bin")
        assert err < 1e-10, (name, err)
    # One rank: each phase's simulated time is its units x seconds per unit.
    r1 = _variant(one, "nonblocking")
    work, ph = r1["work"], r1["phases"]
    for kind, phases in compute_costs.PHASE_OF.items():
        if kind in ("pack", "fft"):
            continue  # the fft phase holds the remaps' packing too: checked together below
        assert work[kind]["max"] > 0, kind
        modelled = work[kind]["max"] * COSTS[kind]
        assert r1["modelled_s"][kind]["max"] == pytest.approx(modelled, rel=1e-12)
        assert sum(ph[p]["max"] for p in phases) == pytest.approx(modelled, rel=1e-6, abs=1e-12), kind
    assert ph["fft_1d"]["max"] == pytest.approx(work["fft"]["max"] * COSTS["fft"], rel=1e-6)
    assert ph["ghost"]["max"] + ph["fft"]["max"] == pytest.approx(
        work["fft"]["max"] * COSTS["fft"] + work["pack"]["max"] * COSTS["pack"], rel=1e-6)
    assert r1["step_s"] == pytest.approx(sum(r1["modelled_s"][k]["max"] for k in COSTS), rel=1e-6)


def test_driver_rejects_a_costs_file_without_every_kind(driver, tmp_path):
    bad = tmp_path / "costs.json"
    bad.write_text(json.dumps({"seconds_per_unit": {k: 1e-9 for k in compute_costs.KINDS if k != "solve"}}))
    args = bench_scale.driver_args(SYSTEM, PARAMS, ("nonblocking",), 0, 1) + ["--compute-costs", str(bad)]
    cmd = bench_scale.smpirun_command(driver, 2, "fat_tree", args, tmp_path)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "no seconds per unit for 'solve'" in proc.stderr


def test_costs_are_the_minimum_over_repeats_of_phase_time_per_unit():
    def run(real_space, ghost, units):
        work = {k: {"max": units} for k in compute_costs.KINDS}
        phases = {"real_space": {"max": real_space}, "ghost": {"max": ghost}, "fft_pack_unpack": {"max": 1.0}}
        return {"runs": [{"work": work, "phases": phases, "step_s": real_space + ghost}]}

    doc = compute_costs.costs_from_runs([run(6.0, 3.0, 2.0), run(4.0, 5.0, 2.0)])
    assert doc["seconds_per_unit"]["pairs"] == 2.0      # min(6, 4) / 2
    assert doc["seconds_per_unit"]["pack"] == 2.0       # min(3 + 1, 5 + 1) / 2
    assert doc["seconds_per_unit"]["solve"] == 0.0      # a phase not timed costs nothing
    assert doc["phase_min_s"]["step"] == 9.0


@pytest.mark.timeout(600)
def test_progress_calls_cost_what_they_are_told_once_per_call(driver, costs_file, tmp_path):
    """``--progress-call-seconds`` (docs/scaling.md, "What a progress call costs") charges every
    MPI_Test, MPI_Testsome and MPI_Testall once, whatever the number of requests it tests, with
    SimGrid's own per-request charge (smpi/test) at 1 ns: an overlap run's time inside MPI grows by
    its progress calls times the cost, and its step with them."""
    cfg = [("smpi/test", "1e-09"), ("smpi/grow-injected-times", "no")]

    def run(name, seconds):
        path = tmp_path / f"{name}.json"
        bench_scale.run_simulation(driver, 4, "fat_tree", SYSTEM, PARAMS, path, modes=("nonblocking+overlap",),
                                   warmup=1, steps=1, timeout=600, compute_costs=costs_file, extra_cfg=cfg,
                                   progress_call_seconds=seconds)
        res = json.loads(path.read_text())
        assert res["progress_call_seconds"] == seconds
        return _variant(res, "nonblocking+overlap")

    free, costly = run("free", 0.0), run("costly", 1e-3)
    calls = {c: costly["mpi"]["calls"].get(c, {"max": 0, "mean": 0}) for c in ("Test", "Testsome", "Testall")}
    polls = sum(s["mean"] for s in calls.values())
    assert calls["Testsome"]["max"] > 0, costly["mpi"]["calls"]  # the overlap polled
    assert polls == sum(s["mean"] for c, s in free["mpi"]["calls"].items() if c in calls)  # the same calls
    grew = costly["mpi"]["seconds"]["mean"] - free["mpi"]["seconds"]["mean"]
    assert grew >= 0.99 * polls * 1e-3, (grew, polls)
    assert costly["step_s"] > free["step_s"] + 1e-3
    assert free["phases"]["overlap_poll_seconds"]["max"] < 1e-5  # 1 ns per request tested


@pytest.mark.timeout(900)
def test_one_solver_switched_and_auto_on_its_calls(driver, costs_file, tmp_path):
    """``--one-solver`` (one solver switched between the fixed-mode variants, its plans built
    once) gives every variant the results and the simulated step of its own solver; "auto" tries
    the variants on its warm-up calls and keeps the fastest: its step is the fastest variant's."""
    variants = ("pt2pt", "nonblocking", "nonblocking+overlap", "collective", "collective+overlap")

    def run(name, modes, **kw):
        path = tmp_path / f"{name}.json"
        bench_scale.run_simulation(driver, 4, "fat_tree", SYSTEM, PARAMS, path, modes=modes, warmup=1, steps=1,
                                   timeout=600, compute_costs=costs_file, **kw)
        return json.loads(path.read_text())

    own, one = run("own", variants), run("one", variants, one_solver=True)
    # The overlapped collective mode (MPI_Ialltoallv) sends what the blocking one sends: under
    # SMPI the driver posts libnbc's schedule, the non-zero counts only (scale/driver/mpi_profile.hpp).
    co, c = _variant(own, "collective+overlap"), _variant(own, "collective")
    assert co["mpi"]["calls"]["Ialltoallv"]["max"] > 0 and "Ialltoallv" not in c["mpi"]["calls"]
    assert co["mpi"]["messages"] == c["mpi"]["messages"] and co["mpi"]["bytes"] == c["mpi"]["bytes"]
    for v in variants:
        a, b = _variant(own, v), _variant(one, v)
        # Two reductions a call, each latency-bound at scale: the migration's agreement (which
        # carries the exclusions' check) and the results (which carry the pair loop's error
        # agreement and the balancer's maxima).
        assert a["mpi"]["calls"]["Allreduce"]["max"] == 2, (v, a["mpi"]["calls"])
        assert not a["one_solver"] and b["one_solver"]
        assert (b["mode"], b["overlap"]) == (a["mode"], a["overlap"]), v
        assert b["energy"] == pytest.approx(a["energy"], rel=1e-12) and b["force_checksum"] == pytest.approx(
            a["force_checksum"], rel=1e-12), v
        assert b["step_s"] == pytest.approx(a["step_s"], rel=0.02), (v, a["step_s"], b["step_s"])
    auto = _variant(run("auto", ("auto",)), "auto")
    assert len(auto["warmup_pairs_imbalance"]) == 1 + 2 * len(variants)  # the trial's calls
    tried = {v: auto["phases"][f"auto_{v}"]["max"] for v in variants}
    picked = auto["mode"] + ("+overlap" if auto["overlap"] else "")
    assert tried[picked] == min(tried.values())
    fastest = min(_variant(own, v)["step_s"] for v in variants)
    assert auto["step_s"] <= 1.05 * fastest, (picked, auto["step_s"], fastest)
