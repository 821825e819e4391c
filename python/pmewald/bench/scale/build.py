"""Building the scale driver (``scale/driver``) with ``smpicxx`` (or natively), once per change of the sources.

Needs a source checkout (the driver's sources are not in the wheel)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
# ---------------------------------------------------------------------------- build


def _tree_hash(paths) -> str:
    h = hashlib.sha1()
    for base in paths:
        p = ROOT / base
        files = sorted(p.rglob("*")) if p.is_dir() else [p]
        for f in files:
            if f.is_file() and "__pycache__" not in f.parts:
                h.update(str(f.relative_to(ROOT)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()


def check_source_checkout(root: Path | None = None) -> None:
    """Raises RuntimeError, naming what is missing, unless `root` (default ROOT) is a source
    checkout: the driver is built from ``CMakeLists.txt``, ``cpp/`` and ``scale/driver``, which an
    installed wheel does not have (``--report`` alone needs none of them)."""
    root = ROOT if root is None else root
    missing = [p for p in ("CMakeLists.txt", "cpp", "scale/driver") if not (root / p).exists()]
    if missing:
        raise RuntimeError(f"python -m pmewald.bench scale builds its driver from a source checkout of pmewald; "
                           f"{', '.join(missing)} not found under {root} (run it from a clone of the repository, "
                           "or pass --report to rebuild the docs from existing results)")


# The tests' driver (tests/scale): a tree of its own, compiled at -O1. The tests check results
# (simulated ranks against one rank, message counts), not speed, and -O1 compiles in about
# half the time of the -O3 driver whose simulations the scale study times.
TEST_FLAGS = ["-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG"]


def build_driver(build_dir: Path | None = None, quiet: bool = True, for_tests: bool = False) -> Path:
    """Configures and builds scale/driver with smpicxx (CMake option PMEWALD_SMPI) into
    build-smpi/ (``for_tests``: build-smpi-tests/, at -O1), once per change of the sources;
    returns the driver's path."""
    if shutil.which("smpicxx") is None:
        raise RuntimeError("smpicxx not found: install SimGrid (Debian: libsimgrid-dev; "
                           "bash scripts/dev.sh setup installs it)")
    default = ROOT / ("build-smpi-tests" if for_tests else "build-smpi")
    return build_scale_driver(Path(build_dir or default), ".pmewald-smpi-build",
                              ["-DPMEWALD_SMPI=ON", "-DCMAKE_CXX_COMPILER=smpicxx", "-DCMAKE_C_COMPILER=smpicc",
                               *(TEST_FLAGS if for_tests else [])],
                              quiet)


def build_scale_driver(build_dir: Path, stamp_name: str, defines: list[str], quiet: bool = True) -> Path:
    """Configures (with ``defines``) and builds the pmewald_scale target into ``build_dir``,
    once per change of the sources (a hash in ``build_dir/stamp_name``); returns its path."""
    check_source_checkout()
    exe = build_dir / "scale" / "pmewald_scale"
    stamp = build_dir / stamp_name
    want = _tree_hash(["CMakeLists.txt", "cmake", "cpp", "scale/driver"]) + " " + " ".join(defines)
    if exe.exists() and stamp.exists() and stamp.read_text() == want:
        return exe
    build_dir.mkdir(parents=True, exist_ok=True)
    out = None if not quiet else subprocess.DEVNULL
    subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DPMEWALD_PYTHON=OFF",
                    "-DCMAKE_BUILD_TYPE=Release", *defines], check=True, stdout=out)
    jobs = str(max(1, min(2, os.cpu_count() or 1)))
    subprocess.run(["nice", "cmake", "--build", str(build_dir), "--target", "pmewald_scale", "-j", jobs],
                   check=True, stdout=out)
    stamp.write_text(want)
    return exe
