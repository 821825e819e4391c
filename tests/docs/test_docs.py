"""The documentation site builds, with every Sphinx warning an error.

Runs ``sphinx-build -W --keep-going -b html docs <tmp>`` in a subprocess (a fresh
interpreter, as a user would), so autodoc imports pmewald the normal way and every
docstring the API reference pulls in must be valid reStructuredText.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(ROOT, "docs")


def test_docs_build_without_warnings(tmp_path):
    out = tmp_path / "html"
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html", DOCS, str(out)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - t0
    assert proc.returncode == 0, (f"sphinx-build failed (rc {proc.returncode}, {seconds:.1f} s):\n"
                                  f"{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}")
    for page in ("index", "install", "quickstart", "mpi", "accuracy", "theory", "validation",
                 "benchmarks", "api"):
        assert (out / f"{page}.html").is_file(), page
    api = (out / "api.html").read_text()
    # the API reference really was generated from the docstrings
    for name in ("pmewald.PME.compute", "pmewald.PMEResult", "pmewald.DistributedFFT.forward",
                 "pmewald.show_config", "pmewald.reference.ewald", "pmewald.systems.water_box"):
        assert f'id="{name}"' in api, name
