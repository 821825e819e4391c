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
