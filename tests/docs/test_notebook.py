"""notebooks/energy_validation.ipynb runs top to bottom, in a kernel of this venv's Python,
and is committed without outputs."""

from __future__ import annotations

import os
import sys
import time

import pytest

# exclusive (docs/testing.md): the notebook launches mpirun.
pytestmark = pytest.mark.exclusive

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOK = os.path.join(ROOT, "notebooks", "energy_validation.ipynb")


def _kernel_env():
    """This process's environment without what a running MPI put there (the kernel starts
    its own MPI, and the notebook launches mpirun), plus Open MPI's container settings."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith(("PMIX_", "OMPI_COMM_WORLD", "OMPI_MCA_ess", "OMPI_MCA_orte", "OMPI_MCA_pmix"))
                   or k in ("OMPI_FILE_LOCATION", "PMEWALD_MPI_WORKER", "PMEWALD_MPI_NODEIDS",
                            "PMEWALD_MPI_REPORT"))}
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"   # figures as outputs
    return env


def test_notebook_is_committed_without_outputs():
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, "strip the notebook's outputs"


def test_notebook_runs_top_to_bottom():
    import nbclient
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    # prove which interpreter the kernel ran: the venv's (ipykernel installs the python3 spec)
    nb.cells.append(nbformat.v4.new_code_cell("import sys; print(sys.executable)"))
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=120,
                                     resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}})
    t0 = time.perf_counter()
    client.execute(env=_kernel_env())       # raises CellExecutionError, with the traceback, on any error
    seconds = time.perf_counter() - t0
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert os.path.realpath(text.strip().splitlines()[-1]) == os.path.realpath(sys.executable)
    images = sum(1 for c in nb.cells if c.cell_type == "code" for o in c.outputs
                 if "image/png" in o.get("data", {}))
    assert images == 2, "expected the convergence plots and the timing bar chart"
    assert "rock_salt" in text and "estimate / measured" in text
    print(f"notebook: {seconds:.1f} s; " + text.strip().splitlines()[-3] + "; " + text.strip().splitlines()[-2])
    assert seconds < 90, f"the notebook took {seconds:.0f} s (about 11 s on an idle 2-core machine)"
