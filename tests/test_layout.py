"""The layout of the C++ core (docs/architecture.md): folders are layers, includes only go down.

Parses every ``#include "..."`` under cpp/ (no compiler needed) and checks that
- an include names a file by its path from cpp/ ("comm/exchange.hpp"), and that file exists;
- a folder includes only itself and the folders below it (LAYERS: a folder may include the
  folders listed for it, nothing else; the graph of folders has no cycle);
- the graph of files has no include cycle;
- no file is longer than 600 lines unless its first comment says why ("Longer than 600 lines").
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

CPP = Path(__file__).resolve().parent.parent / "cpp"

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
