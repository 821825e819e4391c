"""The layout (docs/architecture.md): C++ folders are layers, includes only go down; the
Python package's files are short; the tests mirror the layout.

Parses every ``#include "..."`` under cpp/ (no compiler needed) and checks that
- an include names a file by its path from cpp/ ("comm/exchange.hpp"), and that file exists;
- a folder includes only itself and the folders below it (LAYERS: a folder may include the
  folders listed for it, nothing else; the graph of folders has no cycle);
- the graph of files has no include cycle;
- no file is longer than 600 lines unless its first comment says why ("Longer than 600 lines").

And that no Python file of the package (python/pmewald/) or of the tests is longer than 600
lines unless its module docstring says why, and that every test file lives in one of the folders of
TEST_FOLDERS (none loose in tests/, none with a name another test file has: pytest imports
them by file name) and imports no other test file.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CPP = ROOT / "cpp"
PYTHON = ROOT / "python" / "pmewald"
TESTS = ROOT / "tests"

# folder -> the folders it may include (besides itself). The order of the keys is the layer
# order, bottom first; `pmewald` holds only the public umbrella header.
LAYERS = {
    "base": set(),
    "geometry": {"base"},
    "comm": {"base", "geometry"},
    "fft": {"base", "geometry", "comm"},
    "pme": {"base", "geometry"},
    "realspace": {"base", "geometry", "comm"},
    "tuning": {"base", "geometry", "pme"},
    "solver": {"base", "geometry", "comm", "fft", "pme", "realspace", "tuning"},
    "pmewald": {"base", "geometry", "comm", "fft", "pme", "realspace", "tuning", "solver"},
    "bindings": {"base", "geometry", "comm", "fft", "pme", "realspace", "tuning", "solver"},
}
MAX_LINES = 600
TEST_IMPORT = re.compile(r"^\s*(import|from)\s+test_\w+", re.M)
# tests/<folder>/ -> what it tests (docs/testing.md has the same table).
TEST_FOLDERS = {
    "base": "cpp/base (build configuration, SIMD versions), pmewald._config",
    "geometry": "cpp/geometry, pmewald.geometry",
    "comm": "cpp/comm: exchanges, remaps, halos; the plan lists for virtual rank counts",
    "fft": "cpp/fft, pmewald.fft",
    "pme": "cpp/pme (kernels), pmewald.pme (the solver)",
    "tuning": "cpp/tuning (estimates, cost model, choice), pmewald._tuning (the automatic choice)",
    "qeq": "pmewald.qeq (charge equilibration on PME potentials)",
    "realspace": "cpp/realspace",
    "reference": "pmewald.reference, pmewald.reference2d, pmewald.systems",
    "reliability": "bad input, failures on one rank, threads, signals; the fuzzer",
    "interfaces": "pmewald.ase, pmewald.openmm",
    "bench": "pmewald.bench",
    "docs": "the docs build, examples/, notebooks/",
    "structure": "this layout, the C++ library, the MPI harness",
    "scale": "scale/ (the SimGrid SMPI driver), cpp/solver/plan_census, pmewald.comm_model, pmewald.bench.scale",
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources(root=CPP):
    return sorted(p for p in root.rglob("*") if p.suffix in (".hpp", ".cpp", ".h", ".cc"))


def includes(path):
    return INCLUDE.findall(path.read_text())


def folder_of(rel: str) -> str:
    return rel.split("/", 1)[0]


def check_tree(root=CPP):
    """Every problem found in the tree under `root`, as strings (empty when the layout holds)."""
    problems = []
    files = {str(p.relative_to(root)): p for p in sources(root)}
    graph = {}
    for rel, path in files.items():
        folder = folder_of(rel)
        if "/" not in rel:
            problems.append(f"{rel}: every file belongs in a folder (a layer)")
            continue
        if folder not in LAYERS:
            problems.append(f"{rel}: folder {folder}/ is not a layer of LAYERS in {Path(__file__).name}")
            continue
        graph[rel] = []
        for inc in includes(path):
            if inc not in files:
                problems.append(f"{rel}: #include \"{inc}\" is not a path from cpp/ to a file")
                continue
            target = folder_of(inc)
            if target != folder and target not in LAYERS[folder]:
                problems.append(f"{rel}: #include \"{inc}\" goes from {folder}/ to {target}/, which {folder}/ "
                                f"may not include (upward or sideways)")
            graph[rel].append(inc)
        n = len(path.read_text().splitlines())
        if n > MAX_LINES:
            head = "\n".join(path.read_text().splitlines()[:40])
            if "Longer than 600 lines" not in head:
                problems.append(f"{rel}: {n} lines; split it, or say why in its header comment "
                                f"(\"Longer than 600 lines because ...\")")
    problems += [f"include cycle: {' -> '.join(c)}" for c in cycles(graph)]
    return problems


def cycles(graph):
    """One cycle through each strongly connected part of `graph` that has one."""
    found, state, stack = [], {}, []

    def visit(v):
        state[v] = 1
        stack.append(v)
        for w in graph.get(v, ()):
            if state.get(w) == 1:
                found.append(stack[stack.index(w):] + [w])
            elif w not in state:
                visit(w)
        stack.pop()
        state[v] = 2

    for v in sorted(graph):
        if v not in state:
            visit(v)
    return found


def check_python(root=PYTHON):
    """Python files longer than MAX_LINES whose module docstring does not say why."""
    problems = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        n = len(text.splitlines())
        if n > MAX_LINES and "Longer than 600 lines" not in (ast.get_docstring(ast.parse(text)) or ""):
            problems.append(f"{path.relative_to(root.parent)}: {n} lines; split it, or say why in its module "
                            f"docstring (\"Longer than 600 lines because ...\")")
    return problems


def check_tests(root=TESTS):
    """Test files outside the folders of TEST_FOLDERS, and test file names used twice."""
    problems, seen = [], {}
    for path in sorted(root.rglob("test_*.py")):
        rel = path.relative_to(root)
        if len(rel.parts) != 2 or rel.parts[0] not in TEST_FOLDERS:
            problems.append(f"tests/{rel}: a test file belongs in one of the folders tests/<folder>/ of "
                            f"TEST_FOLDERS ({', '.join(TEST_FOLDERS)})")
        if path.name in seen:
            problems.append(f"tests/{rel}: the name is taken by tests/{seen[path.name]} (pytest imports test "
                            "files by name)")
        seen.setdefault(path.name, rel)
        if TEST_IMPORT.search(path.read_text()):
            problems.append(f"tests/{rel}: imports another test file; what tests share goes in a helper next to "
                            "conftest.py (tests/*_cases.py)")
    return problems


def test_python_files_are_short():
    problems = check_python() + check_python(TESTS)
    assert not problems, "\n".join(problems)


def test_tests_mirror_the_layout():
    problems = check_tests()
    assert not problems, "\n".join(problems)
    assert {p.parent.name for p in TESTS.glob("*/test_*.py")} == set(TEST_FOLDERS), "a folder without tests"


@pytest.mark.parametrize("case", ["long_python", "loose_test", "unknown_folder", "same_name", "imports_test"])
def test_python_and_test_checkers_catch(tmp_path, case):
    """The Python and test-layout checkers fail on each kind of problem (a tree made for each)."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "short.py").write_text('"""short"""\n')
    (tmp_path / "tests" / "fft").mkdir(parents=True)
    (tmp_path / "tests" / "fft" / "test_a.py").write_text("")
    if case == "long_python":
        (tmp_path / "pkg" / "long.py").write_text('"""long"""\n' + "x = 1\n" * (MAX_LINES + 1))
    elif case == "loose_test":
        (tmp_path / "tests" / "test_b.py").write_text("")
    elif case == "unknown_folder":
        (tmp_path / "tests" / "misc").mkdir()
        (tmp_path / "tests" / "misc" / "test_c.py").write_text("")
    elif case == "same_name":
        (tmp_path / "tests" / "pme").mkdir()
        (tmp_path / "tests" / "pme" / "test_a.py").write_text("")
    elif case == "imports_test":
        (tmp_path / "tests" / "fft" / "test_d.py").write_text("def f():\n    import test_a as t\n")
    problems = check_python(tmp_path / "pkg") + check_tests(tmp_path / "tests")
    assert len(problems) == 1, (case, problems)
    (tmp_path / "pkg" / "long.py").unlink(missing_ok=True)
    if case == "long_python":  # a reason in the docstring makes it acceptable
        (tmp_path / "pkg" / "long.py").write_text('"""Longer than 600 lines because it must."""\n'
                                                  + "x = 1\n" * (MAX_LINES + 1))
        assert not check_python(tmp_path / "pkg")


def test_layers_are_acyclic():
    order = list(LAYERS)
    for folder, below in LAYERS.items():
        for b in below:
            assert order.index(b) < order.index(folder), f"{folder} may include {b}, which is not below it"


def test_cpp_tree_follows_the_layers():
    problems = check_tree()
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("case", ["upward", "cycle", "not_from_root", "long", "loose"])
def test_checker_catches(tmp_path, case):
    """The checker itself fails on each kind of problem (a tree made for each)."""
    def write(rel, text):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    write("base/a.hpp", "#pragma once\n")
    write("geometry/b.hpp", '#include "base/a.hpp"\n')
    if case == "upward":
        write("base/c.hpp", '#include "geometry/b.hpp"\n')
    elif case == "cycle":
        write("comm/x.hpp", '#include "comm/y.hpp"\n')
        write("comm/y.hpp", '#include "comm/x.hpp"\n')
    elif case == "not_from_root":
        write("geometry/d.hpp", '#include "b.hpp"\n')
    elif case == "long":
        write("pme/e.cpp", "// a file\n" + "int x;\n" * (MAX_LINES + 1))
    elif case == "loose":
        write("f.hpp", "#pragma once\n")
    problems = check_tree(tmp_path)
    assert len(problems) >= 1, case
    if case == "cycle":
        assert any("cycle" in p for p in problems)
