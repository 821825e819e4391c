"""The ASE and OpenMM examples run (short settings), the ASE MD one under MPI too."""

import pytest

from example_scripts import load


@pytest.mark.mpi(ranks=[1, 2])
def test_ase_md_rocksalt(comm):
    pytest.importorskip("ase")
    out = load("ase_md_rocksalt").main(["--quick"], comm=comm)
    assert out["ranks"] == comm.Get_size() and out["steps"] == 20
    assert out["max_deviation_eV_per_atom"] < 1e-4


@pytest.mark.mpi(ranks=[1, 2])
def test_openmm_compare(comm):
    pytest.importorskip("openmm")
    r = load("openmm_compare").main(["--quick"], comm=comm)
    assert r.relative_energy_difference < 1e-6 and r.relative_rms_force_difference < 1e-5


def test_openmm_md():
    pytest.importorskip("openmm")
    out = load("openmm_md").main(["--quick"])
    assert out["steps"] == 20 and abs(out["max_deviation_kj_mol_per_atom"]) < 0.05
