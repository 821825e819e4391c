"""The side-by-side benchmark's command line parses (the benchmark itself is not run here)."""

import subprocess
import sys

from pmewald.bench.peers import report as peers_report


def test_bench_peers_help():
    p = subprocess.run([sys.executable, "-m", "pmewald.bench", "peers", "--help"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert "--tolerances" in p.stdout and "--ranks" in p.stdout


def test_interp_time_log_log():
    t, ex = peers_report.interp_time([(1e-4, 1.0), (1e-6, 100.0)], 1e-5)
    assert abs(t - 10.0) < 1e-9 and ex is False
    t, ex = peers_report.interp_time([(1e-4, 1.0), (1e-5, 10.0)], 1e-6)
    assert abs(t - 100.0) < 1e-6 and ex is True


def test_ratios_do_not_extrapolate_far_beyond_a_peers_measured_errors():
    rows = [dict(system="s", ranks=1, code="pmewald-auto", error=e, total_s=t, setting=0.0)
            for e, t in ((2e-4, 1.0), (2e-5, 2.0), (5e-6, 3.0))]
    rows += [dict(system="s", ranks=1, code="gromacs", error=e, total_s=t, setting="x") for e, t in ((3e-4, 1.0),
                                                                                                   (4.4e-5, 2.0),
                                                                                                   (4.3e-5, 3.0))]
    out = peers_report.ratios(rows, [dict(name="s")], [1])
    at = {e["target_error"]: e["peers"]["gromacs"] for e in out}
    assert at[1e-4]["ratio"] > 0 and not at[1e-4].get("not_reached")
    assert at[1e-5]["not_reached"] and at[1e-5]["best_error"] == 4.3e-5
