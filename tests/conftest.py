"""pytest harness for pmewald: serial tests run as usual; MPI tests really run under mpirun.

Mark a test with ``@pytest.mark.mpi(ranks=[1, 2, 3, 4])`` and it becomes one
test item per rank count (``test_x[mpi2]``, ...). Use the ``comm`` fixture for
the communicator (``MPI.COMM_WORLD`` of the run).

How it runs: the ``mpi1`` items run in this process. For each rank count N > 1,
the first item needing N launches ONE ``mpirun -n N python -m pytest`` (a
batch) over every selected item of that rank count; every rank runs them all in
the same order and writes a result line per test. Each of our items then
reports what its ranks reported: it passes only if every rank passed, and a
failure shows the failing rank's traceback. A test that runs longer than its
timeout (``@pytest.mark.timeout(s)``, default 120 s) dumps every rank's stack
and aborts the batch; that test fails with the dump and the tests after it
fail as "not run". A batch that exceeds its total time limit is killed.
Oversubscription is allowed, so 3 and 4 ranks run on a 2-core machine.
"""

from __future__ import annotations

import faulthandler
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

# FFTW plans by estimate in the suite unless the caller says otherwise
# (PMEWALD_FFTW_PLANNER=measure tests the default's plans): measuring plans costs a
# fifth of the suite's time, and a measured plan changes the last bits from run to run.
# The tests about measured plans ask for them (tests/fft planner="measure"; the thread
# tests' FFTW planning in two threads at once; tests/pme/test_reproducibility).
os.environ.setdefault("PMEWALD_FFTW_PLANNER", "estimate")

# The environment before anything initialised MPI in this process: children
# launched with mpirun must not inherit a singleton's OMPI_/PMIX_ variables.
_CLEAN_ENV = {k: v for k, v in os.environ.items()}

WORKER = os.environ.get("PMEWALD_MPI_WORKER") == "1"
DEFAULT_RANKS = (1, 2, 3, 4)
DEFAULT_TIMEOUT = 120.0
BATCH_LIMIT = 1800.0


def _mpi_env() -> dict:
    env = {k: v for k, v in _CLEAN_ENV.items()
           if not (k.startswith("PMIX_") or k.startswith("OMPI_COMM_WORLD") or k.startswith("OMPI_MCA_ess")
                   or k.startswith("OMPI_MCA_orte") or k.startswith("OMPI_MCA_pmix") or k in ("OMPI_FILE_LOCATION",))}
    if os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _ranks_of(item) -> int | None:
    cs = getattr(item, "callspec", None)
    if cs is None:
        return None
    return cs.params.get("mpi_ranks")


def _timeout_of(item) -> float:
    m = item.get_closest_marker("timeout")
    return float(m.args[0]) if m and m.args else DEFAULT_TIMEOUT


def pytest_generate_tests(metafunc):
    m = metafunc.definition.get_closest_marker("mpi")
    if m is None:
        return
    ranks = tuple(m.kwargs.get("ranks", m.args[0] if m.args else DEFAULT_RANKS))
    if "mpi_ranks" not in metafunc.fixturenames:
        metafunc.fixturenames.append("mpi_ranks")
    # Items of more than one rank carry the mark ``mpi_batch`` (scripts/dev.sh test runs them
    # in its first phase, with nothing else on the machine: docs/testing.md).
    params = [pytest.param(n, marks=pytest.mark.mpi_batch) if n > 1 else n for n in ranks]
    metafunc.parametrize("mpi_ranks", params, ids=[f"mpi{n}" for n in ranks])


@pytest.fixture
def comm():
    """The communicator of an MPI test: MPI.COMM_WORLD of its run."""
    from mpi4py import MPI

    return MPI.COMM_WORLD


# --------------------------------------------------------------------------
# Worker side: inside mpirun, run only this rank count's requested items and
# write one JSON line per test and per rank.
# --------------------------------------------------------------------------

if WORKER:

    def _rank_size():
        from mpi4py import MPI

        return MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()

    def pytest_collection_modifyitems(session, config, items):
        _, size = _rank_size()
        with open(os.environ["PMEWALD_MPI_NODEIDS"]) as f:
            wanted = [line.strip() for line in f if line.strip()]
        keep_set = set(wanted)
        keep = [it for it in items if it.nodeid in keep_set and _ranks_of(it) == size]
        order = {nid: i for i, nid in enumerate(wanted)}
        keep.sort(key=lambda it: order[it.nodeid])
        deselected = [it for it in items if it not in keep]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
        items[:] = keep

    class _Reporter:
        def __init__(self):
            rank, _ = _rank_size()
            self.rank = rank
            self.path = os.path.join(os.environ["PMEWALD_MPI_REPORT"], f"rank{rank}.jsonl")
            self.current = {}
            # The stack dump of a timed-out test goes to a file of its own: pytest
            # captures fd 2 while a test runs, so a dump to stderr would be lost.
            self.stacks = open(os.path.join(os.environ["PMEWALD_MPI_REPORT"], f"rank{rank}.stack"), "w")

        def write(self, rec):
            with open(self.path, "a") as f:
                f.write(json.dumps(rec) + "\n")

    _reporter = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        global _reporter
        if _reporter is None:
            _reporter = _Reporter()
        _reporter.write({"nodeid": item.nodeid, "event": "start", "t": time.time()})
        _reporter.current = {"outcome": "passed", "longrepr": ""}
        faulthandler.dump_traceback_later(_timeout_of(item), exit=True, file=_reporter.stacks)
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()
        rec = {"nodeid": item.nodeid, "event": "done", "t": time.time()}
        rec.update(_reporter.current)
        _reporter.write(rec)

    def pytest_runtest_logreport(report):
        if _reporter is None:
            return
        cur = _reporter.current
        if report.failed:
            cur["outcome"] = "failed"
            cur["longrepr"] += f"[{report.when}] {report.longreprtext}\n"
        elif report.skipped and cur["outcome"] == "passed":
            cur["outcome"] = "skipped"
            lr = report.longrepr
            cur["longrepr"] = lr[2] if isinstance(lr, tuple) else str(lr)


# --------------------------------------------------------------------------
# Launcher side: ordinary pytest process.
# --------------------------------------------------------------------------

class _Batches:
    def __init__(self):
        self.results: dict[int, dict] = {}

    def run(self, session, nranks: int) -> dict:
        if nranks in self.results:
            return self.results[nranks]
        items = [it for it in session.items if _ranks_of(it) == nranks]
        tmp = tempfile.mkdtemp(prefix=f"pmewald-mpi{nranks}-")
        nodeids = os.path.join(tmp, "nodeids.txt")
        with open(nodeids, "w") as f:
            f.write("\n".join(it.nodeid for it in items) + "\n")
        files = sorted({it.nodeid.split("::")[0] for it in items})
        env = _mpi_env()
        env.update(PMEWALD_MPI_WORKER="1", PMEWALD_MPI_NODEIDS=nodeids, PMEWALD_MPI_REPORT=tmp)
        mpirun = shutil.which("mpirun") or "mpirun"
        cmd = [mpirun, "-n", str(nranks), sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "--rootdir", str(session.config.rootpath), "-o", "addopts=", *files]
        limit = min(BATCH_LIMIT, sum(_timeout_of(it) for it in items) + 60.0)
        t0 = time.time()
        proc = subprocess.Popen(cmd, cwd=str(session.config.rootpath), env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=limit)
            killed = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            killed = True
        per_rank = []
        for r in range(nranks):
            recs = {}
            started = []
            t_start = {}
            path = os.path.join(tmp, f"rank{r}.jsonl")
            if os.path.exists(path):
                with open(path) as f:
                    for line in f:
                        rec = json.loads(line)
                        if rec["event"] == "start":
                            started.append(rec["nodeid"])
                            t_start[rec["nodeid"]] = rec["t"]
                        else:
                            recs[rec["nodeid"]] = rec
                            if r == 0 and "t" in rec and rec["nodeid"] in t_start:
                                BATCH_ITEM_SECONDS[rec["nodeid"]] = rec["t"] - t_start[rec["nodeid"]]
            per_rank.append((recs, started))
        stacks = []
        for r in range(nranks):
            path = os.path.join(tmp, f"rank{r}.stack")
            if os.path.exists(path) and os.path.getsize(path):
                with open(path) as f:  # innermost frames first; pytest's own frames cut
                    stacks.append(f"--- rank {r} ---\n" + "".join(f.readlines()[:24]))
        shutil.rmtree(tmp, ignore_errors=True)
        res = {"per_rank": per_rank, "output": out or "", "rc": proc.returncode, "killed": killed,
               "stacks": "\n".join(stacks),
               "cmd": " ".join(shlex.quote(c) for c in cmd), "seconds": time.time() - t0}
        self.results[nranks] = res
        return res


_batches = _Batches()
# Seconds each item of an MPI batch took on rank 0 (the batch's whole time is booked to its
# first item in pytest's durations): printed at the end with the slowest items.
BATCH_ITEM_SECONDS: dict[str, float] = {}


def pytest_terminal_summary(terminalreporter):
    if WORKER or not BATCH_ITEM_SECONDS:
        return
    n = int(os.environ.get("PMEWALD_SLOWEST", "15"))  # docs/testing.md
    slow = sorted(BATCH_ITEM_SECONDS.items(), key=lambda kv: -kv[1])[:n]
    terminalreporter.write_sep("=", f"slowest {n} items inside the MPI batches (rank 0)")
    for nodeid, sec in slow:
        terminalreporter.write_line(f"{sec:8.2f}s {nodeid}")


def _tail(text: str, n: int = 80) -> str:
    lines = text.splitlines()
    return "\n".join(lines[-n:])


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    if WORKER:
        return None
    nranks = _ranks_of(pyfuncitem)
    if nranks is None or nranks == 1:
        return None
    res = _batches.run(pyfuncitem.session, nranks)
    nid = pyfuncitem.nodeid
    failures, skips, missing = [], [], []
    for r, (recs, started) in enumerate(res["per_rank"]):
        rec = recs.get(nid)
        if rec is None:
            missing.append((r, nid in started))
        elif rec["outcome"] == "failed":
            failures.append((r, rec["longrepr"]))
        elif rec["outcome"] == "skipped":
            skips.append((r, rec["longrepr"]))
    if failures:
        ranks = ", ".join(str(r) for r, _ in failures)
        pytest.fail(f"failed on rank(s) {ranks} of {nranks}; rank {failures[0][0]} reported:\n"
                    f"{failures[0][1]}", pytrace=False)
    if missing:
        hung = any(was_started for _, was_started in missing)
        why = ("it was running when the MPI run died or timed out (per-test limit "
               f"{_timeout_of(pyfuncitem):.0f} s)" if hung else "an earlier test aborted the MPI run")
        pytest.fail(f"no result from rank(s) {', '.join(str(r) for r, _ in missing)} of {nranks}: {why}. "
                    f"mpirun exit code {res['rc']}{' (killed after the batch limit)' if res['killed'] else ''}.\n"
                    f"command: {res['cmd']}\n--- output (tail) ---\n{_tail(res['output'])}"
                    + (f"\n--- stacks of the ranks at the timeout ---\n{res['stacks']}" if res["stacks"] else ""),
                    pytrace=False)
    if skips and len(skips) == nranks:
        pytest.skip(skips[0][1])
    return True
