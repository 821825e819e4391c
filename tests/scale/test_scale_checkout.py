"""pmewald.bench.scale needs a source checkout for its driver: without one it says so (an installed
wheel has no cpp/ or scale/driver), instead of failing inside CMake."""
from pathlib import Path

import pytest

from pmewald.bench.scale import build


def test_the_source_checkout_is_found_here():
    build.check_source_checkout()  # the tests run from a clone
    assert (build.ROOT / "scale" / "driver").is_dir()


def test_without_a_source_checkout_the_error_names_what_is_missing(tmp_path, monkeypatch):
    (tmp_path / "cpp").mkdir()
    with pytest.raises(RuntimeError, match=r"source checkout.*CMakeLists.txt, scale/driver not found"):
        build.check_source_checkout(tmp_path)
    monkeypatch.setattr(build, "ROOT", tmp_path)
    with pytest.raises(RuntimeError, match="source checkout"):
        build.build_scale_driver(Path(tmp_path / "b"), ".stamp", [])
    assert not (tmp_path / "b").exists()


def test_the_simgrid_in_use_is_the_systems_or_the_one_named(tmp_path, monkeypatch):
    """$PMEWALD_SIMGRID names another SimGrid (scripts/simgrid-setup.sh): its smpirun and smpicxx,
    its version in the build folder's name and in each result; a folder without bin/smpirun is
    refused, naming the variable; unset, PATH's tools and the system's version."""
    monkeypatch.delenv(build.SIMGRID_ENV, raising=False)
    assert build.simgrid_prefix() is None and build.simgrid_tool("smpirun") == "smpirun"
    if Path("/usr/include/simgrid/version.h").exists():  # Debian's libsimgrid-dev
        assert build.simgrid_version().count(".") == 2
    prefix = tmp_path / "sg"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "smpirun").write_text("#!/bin/sh\n")
    (prefix / "include" / "simgrid").mkdir(parents=True)
    (prefix / "include" / "simgrid" / "version.h").write_text(
        "#define SIMGRID_VERSION_MAJOR 4\n#define SIMGRID_VERSION_MINOR 1\n#define SIMGRID_VERSION_PATCH 0\n")
    monkeypatch.setenv(build.SIMGRID_ENV, str(prefix))
    assert build.simgrid_tool("smpirun") == str(prefix.resolve() / "bin" / "smpirun")
    assert build.simgrid_version() == "4.1.0"
    from pmewald.bench.scale.simulate import smpirun_command

    assert smpirun_command(Path("exe"), 4, "fat_tree", [], tmp_path)[0] == str(prefix.resolve() / "bin" / "smpirun")
    monkeypatch.setenv(build.SIMGRID_ENV, str(tmp_path / "nothing"))
    with pytest.raises(RuntimeError, match="PMEWALD_SIMGRID.*bin/smpirun"):
        build.simgrid_tool("smpicxx")


def test_run_of_is_the_plain_variant_of_a_mode():
    """A result may hold a mode's variants in any order (scale_regime --variants merges one
    simulation per variant): run_of(res, mode) is the one without overlap; a result from before
    variants were named has one run per mode."""
    from pmewald.bench.scale.simulate import run_of

    res = {"runs": [{"mode": "collective", "variant": "collective+overlap", "step_s": 1.0},
                    {"mode": "collective", "variant": "collective", "step_s": 2.0},
                    {"mode": "nonblocking", "step_s": 3.0}]}
    assert run_of(res, "collective")["step_s"] == 2.0
    assert run_of(res, "nonblocking")["step_s"] == 3.0
    with pytest.raises(StopIteration):
        run_of({"runs": [{"mode": "pt2pt", "variant": "pt2pt+overlap"}]}, "pt2pt")
