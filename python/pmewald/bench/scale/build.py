"""Building the scale driver (``scale/driver``) with ``smpicxx`` (or natively), once per change of the sources.

Needs a source checkout (the driver's sources are not in the wheel)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]

# ---------------------------------------------------------------------------- which SimGrid

# Where a SimGrid other than the system's is installed (its bin/smpicxx, bin/smpirun,
# include/simgrid/version.h): scripts/simgrid-setup.sh builds SimGrid 4.1 from PyPI's sdist,
# whose simulations of 256 ranks run ~4x faster than Debian's 3.32 (docs/scaling.md).
SIMGRID_ENV = "PMEWALD_SIMGRID"


def simgrid_prefix() -> Path | None:
    """The SimGrid installation named by $PMEWALD_SIMGRID, or None for the system's (PATH).
    Raises RuntimeError if the variable names a folder without bin/smpirun."""
    value = os.environ.get(SIMGRID_ENV, "").strip()
    if not value:
        return None
    prefix = Path(value).expanduser().resolve()
    if not (prefix / "bin" / "smpirun").is_file():
        raise RuntimeError(f"${SIMGRID_ENV}={value}: no bin/smpirun there (scripts/simgrid-setup.sh installs "
                           "SimGrid 4.1 and prints its prefix)")
    return prefix


def simgrid_tool(name: str) -> str:
    """smpicxx, smpicc or smpirun of the SimGrid in use (simgrid_prefix, else PATH's)."""
    prefix = simgrid_prefix()
    return str(prefix / "bin" / name) if prefix is not None else name


def simgrid_version() -> str:
    """The SimGrid in use, "major.minor.patch" from its version.h ("?" if not found)."""
    prefix = simgrid_prefix()
    header = (prefix / "include" if prefix is not None else Path("/usr/include")) / "simgrid" / "version.h"
    try:
        text = header.read_text()
    except OSError:
        return "?"
    parts = [re.search(rf"#define SIMGRID_VERSION_{k} (\d+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts) if all(parts) else "?"


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
    build-smpi/ (``for_tests``: build-smpi-tests/, at -O1; with $PMEWALD_SIMGRID set,
    build-smpi-simgrid<version>/ with that SimGrid's smpicxx), once per change of the sources;
    returns the driver's path."""
    cxx, cc = simgrid_tool("smpicxx"), simgrid_tool("smpicc")
    if shutil.which(cxx) is None:
        raise RuntimeError("smpicxx not found: install SimGrid (Debian: libsimgrid-dev; "
                           "bash scripts/dev.sh setup installs it)")
    name = "build-smpi-tests" if for_tests else "build-smpi"
    if simgrid_prefix() is not None:
        name += f"-simgrid{simgrid_version()}"
    return build_scale_driver(Path(build_dir or ROOT / name), ".pmewald-smpi-build",
                              ["-DPMEWALD_SMPI=ON", f"-DCMAKE_CXX_COMPILER={cxx}", f"-DCMAKE_C_COMPILER={cc}",
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
