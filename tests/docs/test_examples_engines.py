"""The engine examples run (short settings): an OpenMM Simulation with PMEForce and LAMMPS's
peptide with pmewald (1 and 2 ranks), and the charge fit with the JAX interface converging."""

import io
import os

import pytest

from example_scripts import load


@pytest.mark.mpi(ranks=[1])  # 2 ranks: tests/interfaces/test_openmm_force.py
def test_openmm_pmeforce(comm):
    pytest.importorskip("openmm")
    out = load("openmm_pmeforce").main(["--quick"], comm=comm, out=io.StringIO())
    assert out["ranks"] == comm.Get_size() and out["atoms"] == 985
    if comm.Get_rank() == 0:  # the driver integrates; 20 steps of 2 fs
        assert out["max_deviation_kj_mol_atom"] < 0.01 and out["ns_per_day"] > 0
        assert out["parameters"]["differentiation"] == "ad"


@pytest.mark.mpi(ranks=[1, 2])
@pytest.mark.parametrize("mode", ["kspace", "full"])
def test_lammps_peptide(comm, mode):
    if mode == "full" and comm.Get_size() > 1:
        pytest.skip("full mode on 2 ranks: tests/interfaces/test_lammps.py")
    pytest.importorskip("lammps")
    if not os.path.exists("/usr/share/lammps/examples/peptide/data.peptide"):
        pytest.skip("Debian's lammps-examples is not installed")
    out = load("lammps_peptide").main(["--quick", "--mode", mode], comm=comm)
    assert out["ranks"] == comm.Get_size() and out["steps"] == 20
    assert out["max_deviation_kcal_mol"] < 1.0  # 2,004 atoms, 40 fs of NVE with SHAKE


def test_autograd_fit_charges():
    pytest.importorskip("jax")
    out = load("autograd_fit_charges").main(["--quick"])
    assert out["final_loss"] < 1e-4 * out["initial_loss"]
    assert out["charge_error"] < 2e-3
