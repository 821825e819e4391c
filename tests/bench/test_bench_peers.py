"""The side-by-side benchmark's command line parses (the benchmark itself is not run here)."""

import subprocess
import sys

from pmewald.bench import peers_report


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
