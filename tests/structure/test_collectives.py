"""The package's collectives cannot deadlock two threads across ranks (issue 26).

Two rules, checked on the source (docs/reliability.md, "Threads"):

- no lowercase mpi4py *reduction* (``allreduce``, ``reduce``, ``scan``, ``exscan``) anywhere in
  the package: mpi4py runs them on a private duplicate of the communicator that it creates on the
  first such call with ``MPI_Comm_dup`` while holding the GIL (two threads on two ranks hung in
  2 of 10 runs with mpi4py alone, pmewald's threads test in 1 of 5). pmewald._mpi.collective has
  ``allsum``, ``allmax``, ``allmin`` and ``exscan_sum`` on NumPy buffers instead;
- no communicator is created in Python (``Dup``, ``Split``, ``Split_type``, ``Create*``...) nor in
  C++ outside cpp/comm/communicators.cpp: every one comes from the core's guarded creation, which
  Open MPI 4.1 needs (two threads each duplicating their own communicator hung in 10 of 10 runs).

Each rule is also checked to catch what it is for (a source that breaks it is found).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "pmewald"
CPP = ROOT / "cpp"

LOWERCASE_REDUCTIONS = {"allreduce", "reduce", "scan", "exscan"}
COMM_CONSTRUCTORS = {"Dup", "Idup", "Dup_with_info", "Clone", "Split", "Split_type", "Create", "Create_group",
                     "Create_cart", "Create_graph", "Create_dist_graph", "Create_dist_graph_adjacent",
                     "Create_intercomm", "Merge", "Spawn", "Spawn_multiple", "Accept", "Connect"}
CPP_CONSTRUCTORS = re.compile(r"\bMPI_(Comm_(dup|dup_with_info|idup|split|split_type|create|create_group|"
                              r"spawn|spawn_multiple|accept|connect|join)|Cart_(create|sub)|Graph_create|"
                              r"Dist_graph_create(_adjacent)?|Intercomm_(create|merge))\s*\(")
CPP_ALLOWED = {"comm/communicators.cpp"}


def _receiver(node: ast.Attribute) -> str:
    return ast.unparse(node.value)


def python_violations(source: str, name: str = "<source>") -> list[str]:
    """Calls in `source` that break the two rules, as 'name:line: what'."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        attr, recv = node.func.attr, _receiver(node.func)
        # `np.maximum.reduce`, `functools.reduce`: reductions of other things, not of a communicator.
        if attr in LOWERCASE_REDUCTIONS and "comm" in recv.lower():
            out.append(f"{name}:{node.lineno}: {recv}.{attr}() (a lowercase mpi4py reduction: use "
                       "pmewald._mpi.collective.allsum/allmax/allmin/exscan_sum)")
        if attr in COMM_CONSTRUCTORS and "comm" in recv.lower():
            out.append(f"{name}:{node.lineno}: {recv}.{attr}() (communicators come from the core: "
                       "_core.duplicate_communicator, _core.ranks_on_node)")
    return out


def cpp_violations(source: str, name: str = "<source>") -> list[str]:
    out = []
    for k, line in enumerate(source.splitlines(), 1):
        code = line.split("//", 1)[0]
        m = CPP_CONSTRUCTORS.search(code)
        if m:
            out.append(f"{name}:{k}: {m.group(0).rstrip('(').strip()} (create communicators with "
                       "comm/communicators.hpp)")
    return out


def test_no_lowercase_reduction_or_communicator_creation_in_the_package():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += python_violations(path.read_text(), str(path.relative_to(ROOT)))
    assert not found, "\n".join(found)


def test_communicators_are_created_only_in_communicators_cpp():
    found = []
    for path in sorted(CPP.rglob("*")):
        if path.suffix in (".cpp", ".hpp") and str(path.relative_to(CPP)) not in CPP_ALLOWED:
            found += cpp_violations(path.read_text(), str(path.relative_to(ROOT)))
    assert not found, "\n".join(found)


def test_the_checks_find_what_they_are_for():
    bad = """
offset = comm.exscan(len(q)) or 0
top = self._comm.allreduce(x, op=MPI.MAX)
local = comm.Split_type(MPI.COMM_TYPE_SHARED)
dup = user_comm.Dup()
"""
    assert len(python_violations(bad)) == 4
    fine = """
total = np.add.reduce(x)
y = functools.reduce(f, xs)
comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
parts = comm.allgather(x)
"""
    assert python_violations(fine) == []
    assert len(cpp_violations("  check_mpi(MPI_Comm_dup(parent, &c), \"x\");\n  MPI_Comm_split_type(a, b, 0, i, &n);")) == 2
    assert cpp_violations("// MPI_Comm_split (colour = smallest rank)\nint x = MPI_Comm_size(c, &n);") == []
