"""The C++ core as a library a C++ program uses without Python (docs/cpp_api.md).

pmewald::core is installed (``cmake --install --component cpp``) from the build tree the
Python extension was built in, into a prefix under build/cpp-example/; examples/cpp, a
separate CMake project, finds it with find_package(pmewald), is built against the
installed headers and library, and runs under ``mpirun -n 2``: a rock-salt crystal in
every communication mode against its Madelung energy, and both distributed FFTs on a
plane wave (the program exits non-zero on a mismatch), once with Kokkos initialised by
pmewald and once by the program. The prefix and the example's build tree are kept, so
later runs only copy changed headers and rebuild what they touch.

Also: the library configures with -DPMEWALD_PYTHON=OFF and no Python, pybind11 or mpi4py.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import _mpi_env

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "build" / "cpp-example"
CMAKE = shutil.which("cmake")

# The whole file runs alone (builds the shared build/cpp-example tree and runs it under mpirun -n 2).
pytestmark = [pytest.mark.exclusive, pytest.mark.skipif(CMAKE is None, reason="needs cmake")]


def _run(cmd, timeout=900, env=None, cwd=ROOT):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


def _core_build_tree() -> Path:
    """The CMake tree that built this checkout's extension (scikit-build's build/<wheel tag>),
    else a tree of the library alone (configured and built here: slow, the first time)."""
    trees = []
    for cache in (ROOT / "build").glob("*/CMakeCache.txt"):
        text = cache.read_text(errors="replace")
        if f"CMAKE_HOME_DIRECTORY:INTERNAL={ROOT}\n" in text:
            trees.append(cache.parent)
    trees = [t for t in trees if t.name != "cpp-example"]
    if trees:
        return max(trees, key=lambda t: (t / "CMakeCache.txt").stat().st_mtime)
    tree = ROOT / "build" / "cpp-core"
    _run([CMAKE, "-S", ROOT, "-B", tree, "-DPMEWALD_PYTHON=OFF", "-DCMAKE_BUILD_TYPE=Release"])
    return tree


@pytest.fixture(scope="module")
def example():
    tree = _core_build_tree()
    _run([CMAKE, "--build", tree, "--target", "pmewald_core", "--parallel", str(os.cpu_count() or 2)])
    prefix = WORK / "prefix"
    _run([CMAKE, "--install", tree, "--component", "cpp", "--prefix", prefix])
    build = WORK / "build"
    if not (build / "CMakeCache.txt").exists():
        _run([CMAKE, "-S", ROOT / "examples" / "cpp", "-B", build, f"-DCMAKE_PREFIX_PATH={prefix}",
              "-DCMAKE_BUILD_TYPE=Release"])
    _run([CMAKE, "--build", build, "--parallel", str(os.cpu_count() or 2)])
    return build / "rocksalt", prefix


def test_installed_package_layout(example):
    _, prefix = example
    assert (prefix / "include" / "pmewald" / "pmewald.hpp").is_file()
    for header in ("fft/fft3d.hpp", "fft/rfft3d.hpp", "solver/pme_solver.hpp", "base/virial.hpp"):
        assert (prefix / "include" / "pmewald" / header).is_file(), header
    assert not (prefix / "include" / "pmewald" / "bindings").exists()  # the Python glue is not installed
    assert (prefix / "lib" / "cmake" / "pmewald" / "pmewaldConfig.cmake").is_file()
    assert any((prefix / "lib").glob("libpmewald.*"))


@pytest.mark.parametrize("kokkos", ["by pmewald", "by the program"])
def test_cpp_example_under_mpirun(example, kokkos):
    exe, _ = example
    cmd = [shutil.which("mpirun") or "mpirun", "-n", "2", exe] + (["--own-kokkos"] if kokkos == "by the program" else [])
    out = _run(cmd, timeout=300, env=_mpi_env())
    assert f"Kokkos initialised {kokkos}" in out
    assert "all checks passed" in out, out
    for mode in ("pt2pt", "nonblocking", "collective"):
        assert f"{mode}: energy -158.64415" in out, out
    assert out.count(" ok\n") == 19 and "MISMATCH" not in out


def test_library_configures_without_python(tmp_path):
    """-DPMEWALD_PYTHON=OFF: no Python, pybind11 or mpi4py is looked for (an unusable
    Python_EXECUTABLE would fail the configure otherwise)."""
    out = _run([CMAKE, "-S", ROOT, "-B", tmp_path / "b", "-DPMEWALD_PYTHON=OFF",
                f"-DPython_EXECUTABLE={tmp_path / 'no-python'}", "-Dpybind11_DIR=/nonexistent"], timeout=300)
    assert "pybind11" not in out.lower()
    cache = (tmp_path / "b" / "CMakeCache.txt").read_text()
    assert "PMEWALD_PYTHON:BOOL=OFF" in cache
    assert "MPI4PY" not in cache
