"""The layout (docs/architecture.md): C++ folders are layers, includes only go down; the
Python package's files and every function are short, its imports acyclic; the tests mirror the layout.

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

The Python package: no import cycle (deferred imports count), no product module importing
validation or tooling (reference, systems, bench), at most TOP_LEVEL_MAX entries at its top.
Functions, Python (ast) and C++ (a brace scan of the sources): at most 150 lines, unless a reason
is written in the docstring or the comment above ("Longer than 150 lines because ..."); the ones
still to be split are listed in LONG_FUNCTION_DEBT, which may only shrink.
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
    "particles": {"base", "geometry", "comm"},
    "realspace": {"base", "geometry", "comm", "particles"},
    "tuning": {"base", "geometry", "pme"},
    "solver": {"base", "geometry", "comm", "fft", "pme", "particles", "realspace", "tuning"},
    "pmewald": {"base", "geometry", "comm", "fft", "pme", "particles", "realspace", "tuning", "solver"},
    "bindings": {"base", "geometry", "comm", "fft", "pme", "particles", "realspace", "tuning", "solver"},
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
    "tuning": "cpp/tuning (estimates, cost model, choice), pmewald.pme.tuning (the automatic choice)",
    "qeq": "pmewald.qeq (charge equilibration on PME potentials)",
    "particles": "cpp/particles: migration, ghost atoms, exclusion routing",
    "realspace": "cpp/realspace: the pair sum, its search, kernels and the pair list",
    "reference": "pmewald.reference, pmewald.reference.slab, pmewald.systems",
    "reliability": "bad input, failures on one rank, threads, signals; the fuzzer",
    "interfaces": "pmewald.interfaces.ase, pmewald.interfaces.openmm",
    "bench": "pmewald.bench",
    "docs": "the docs build, examples/, notebooks/",
    "structure": "this layout, the C++ library, the MPI harness",
    "scale": "scale/ (the SimGrid SMPI driver), cpp/solver/plan_census, pmewald.bench.scale.comm_model, pmewald.bench.scale",
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


# ---------------------------------------------------------------------------- the Python package's imports

# The package's top level: at most this many entries (modules and subpackages; docs/architecture.md).
TOP_LEVEL_MAX = 16
# Compiled modules of the package (not in the source tree; an import of them is no edge).
EXTENSIONS = {"_core"}
# Validation and tooling: the product (everything else) imports none of these.
TOOLING = {"reference", "systems", "bench"}
# Modules outside TOOLING that may import it, and why.
MAY_IMPORT_TOOLING = {
    "pmewald.__main__": "the command line: its demo runs a built-in system and checks it against the reference",
}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def python_imports(path: Path, name: str, modules) -> set:
    """The package's modules that module `name` (file `path`) imports, at module level or inside a
    function (a deferred import is still a dependency), except in a module ``__getattr__`` (a forward
    of a moved name). ``from pkg import sub`` is an edge to the submodule ``pkg.sub``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    skip = {id(n) for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "__getattr__"
            for n in ast.walk(f)}

    def known(n):
        while n and n not in modules:
            n = n.rpartition(".")[0]
        return n

    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out |= {known(a.name) for a in node.names if not EXTENSIONS & set(a.name.split("."))}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            if EXTENSIONS & set(base.split(".")):
                continue  # from ._core import x
            for a in node.names:
                if a.name in EXTENSIONS:
                    continue
                out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else known(base))
    out.discard(name)
    out.discard("")
    return out


def check_python_imports(root=PYTHON):
    """Import cycles in the package under `root`, and product modules that import TOOLING."""
    modules = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph = {n: sorted(python_imports(p, n, modules)) for n, p in modules.items()}
    top = root.name
    problems = [f"import cycle: {' -> '.join(c)}" for c in cycles(graph)]

    def tooling(n):
        parts = n.split(".")
        return len(parts) > 1 and parts[1] in TOOLING

    for n, targets in graph.items():
        if tooling(n) or n in MAY_IMPORT_TOOLING or not n.startswith(top):
            continue
        for t in targets:
            if tooling(t):
                problems.append(f"{n} imports {t}: the product does not depend on validation or tooling "
                                f"({', '.join(sorted(TOOLING))}); move the code, or list the module in "
                                "MAY_IMPORT_TOOLING with the reason")
    entries = [p.name for p in root.iterdir() if p.name != "__pycache__" and not p.name.endswith((".so", ".pyd"))]
    if len(entries) > TOP_LEVEL_MAX:
        problems.append(f"{top}/ holds {len(entries)} entries (at most {TOP_LEVEL_MAX}): group them in subpackages")
    return problems


def test_python_package_has_no_import_cycle_and_the_product_no_tooling():
    problems = check_python_imports()
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("case", ["cycle", "deferred_cycle", "tooling", "crowded"])
def test_import_checker_catches(tmp_path, case):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "reference").mkdir()
    (pkg / "__init__.py").write_text("from . import a\nfrom . import _core\n")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from .. import _core\nfrom .._core import geometry\nimport math\n")
    (pkg / "reference" / "__init__.py").write_text("from .. import sub\n")
    (pkg / "c.py").write_text("def __getattr__(name):\n    from .reference import y\n    return y\n")
    assert not check_python_imports(pkg)
    if case == "cycle":
        (pkg / "sub" / "b.py").write_text("from ..a import f\n")
    elif case == "deferred_cycle":
        (pkg / "sub" / "b.py").write_text("def f():\n    from .. import a\n")
    elif case == "tooling":
        (pkg / "sub" / "b.py").write_text("def f():\n    from ..reference import ewald\n")
    elif case == "crowded":
        for k in range(TOP_LEVEL_MAX):
            (pkg / f"m{k}.py").write_text("")
    problems = check_python_imports(pkg)
    assert len(problems) == 1, (case, problems)


# ---------------------------------------------------------------------------- function length

FUNCTION_LINES = 150
LONG_REASON = "Longer than 150 lines because"
# Functions over FUNCTION_LINES that are still to be split (each holds several steps): the debt,
# named so that it only shrinks. A new long function needs a reason in its docstring or in the
# comment right above it (LONG_REASON), or splitting.
LONG_FUNCTION_DEBT: set = set()


def python_long_functions(root=PYTHON):
    """(file, function, lines) of every Python function over FUNCTION_LINES without LONG_REASON."""
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > FUNCTION_LINES and LONG_REASON not in (ast.get_docstring(node) or ""):
                    out.append((str(path.relative_to(root.parent)), node.name, n))
    return out


_CPP_NOISE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|^[ \t]*#[^\n]*', re.S | re.M)
# What precedes a function body: a parameter list, then qualifiers or a trailing return type, or a
# constructor's initialiser list.
_CPP_HEAD = re.compile(r"\)\s*(?:(?:const|noexcept|override|final|mutable)\s*|->[^;{}()]*)*$|\)\s*:[^;{}]*$")
_CPP_NAME = re.compile(r"(~?[A-Za-z_][\w:]*(?:<[^<>()]*>)?|operator\s*[^\s(]+)\s*\(")


def cpp_functions(text: str):
    """(name, first line, lines) of every function body in C++ `text`: a ``{`` after a parameter
    list (see _CPP_HEAD) at namespace or class scope; lambdas and blocks inside a body are part of it."""
    clean = _CPP_NOISE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)

    def line(i):
        return clean.count("\n", 0, i) + 1

    out, scopes, last = [], [], 0  # scopes: (kind, name, first line); kind fn | in (inside a body) | scope
    for m in re.finditer(r"[;{}]", clean):
        i, ch = m.start(), m.group()
        if ch == "{":
            head = clean[last:i]
            if scopes and scopes[-1][0] in ("fn", "in"):
                scopes.append(("in", None, 0))
            elif _CPP_HEAD.search(head.rstrip()):
                names = list(_CPP_NAME.finditer(head))
                start = names[0] if names else None
                scopes.append(("fn", start.group(1) if start else "?", line(last + (start.start() if start else 0))))
            else:
                scopes.append(("scope", None, 0))
        elif ch == "}" and scopes:
            kind, name, first = scopes.pop()
            if kind == "fn":
                out.append((name, first, line(i) - first + 1))
        last = i + 1
    return out


def cpp_long_functions(root=CPP):
    """(file, function, lines) of every C++ function over FUNCTION_LINES without LONG_REASON in the
    ten lines above it or its first ten lines."""
    out = []
    for path in sources(root):
        text = path.read_text()
        lines = text.splitlines()
        for name, first, n in cpp_functions(text):
            near = "\n".join(lines[max(0, first - 11):first + 10])
            if n > FUNCTION_LINES and LONG_REASON not in near:
                out.append((str(path.relative_to(root)), name, n))
    return out


def check_function_lengths(py_root=PYTHON, cpp_root=CPP, debt=None):
    debt = LONG_FUNCTION_DEBT if debt is None else debt
    found = python_long_functions(py_root) + cpp_long_functions(cpp_root)
    problems = [f"{f}: {name} is {n} lines (at most {FUNCTION_LINES}); split it where it holds several steps, "
                f"or say why (\"{LONG_REASON} ...\")" for f, name, n in found if (f, name) not in debt]
    gone = debt - {(f, name) for f, name, _ in found}
    problems += [f"{f}: {name} is no longer over {FUNCTION_LINES} lines: take it off LONG_FUNCTION_DEBT"
                 for f, name in sorted(gone)]
    return problems


def test_functions_are_short():
    problems = check_function_lengths()
    assert not problems, "\n".join(problems)


def test_cpp_function_finder():
    text = """// a comment with { braces }
namespace a {
struct S {
  int x{0};
  double f(int k) const noexcept {
    auto g = [&](int j) { return j; };
    if (k) { return g(k); }
    return "}"[0];
  }
};
S::S(int k) : x(k), y{k} {
}
auto h(int k) -> std::vector<int> {
  return {k};
}
}  // namespace a
"""
    found = {name: (first, n) for name, first, n in cpp_functions(text)}
    assert found["f"] == (5, 5) and found["h"] == (13, 3), found
    assert "g" not in found and "S" not in found or found["S"][0] == 11


@pytest.mark.parametrize("case", ["python", "cpp", "reason", "debt_paid"])
def test_function_length_checker_catches(tmp_path, case):
    py, cpp = tmp_path / "pkg", tmp_path / "cpp"
    py.mkdir()
    cpp.mkdir()
    (py / "a.py").write_text("def short():\n    return 1\n")
    (cpp / "a.cpp").write_text("int f() {\n  return 1;\n}\n")
    long_body = "\n".join(["    x = 1"] * FUNCTION_LINES)
    debt = set()
    if case == "python":
        (py / "b.py").write_text(f"def long():\n{long_body}\n")
    elif case == "cpp":
        (cpp / "b.cpp").write_text("int g(int k) {\n" + "  k += 1;\n" * FUNCTION_LINES + "  return k;\n}\n")
    elif case == "reason":
        (py / "b.py").write_text(f'def long():\n    """{LONG_REASON} it must."""\n{long_body}\n')
        (cpp / "b.cpp").write_text(f"// {LONG_REASON} it must.\nint g(int k) {{\n" + "  k += 1;\n" * FUNCTION_LINES
                                   + "}\n")
    elif case == "debt_paid":
        debt = {("pkg/a.py", "short")}
    problems = check_function_lengths(py, cpp, debt)
    assert len(problems) == (0 if case == "reason" else 1), (case, problems)
