"""The side-by-side benchmark's command line parses, its report's arithmetic, and the files it
writes for the peers (the benchmark itself is not run here)."""

import os
import subprocess
import sys

import numpy as np
import pytest

from pmewald.bench.peers import report as peers_report


def test_bench_peers_help():
    p = subprocess.run([sys.executable, "-m", "pmewald.bench", "peers", "--help"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert "--tolerances" in p.stdout and "--ranks" in p.stdout


def test_interp_time_log_log():
    t, ex = peers_report.interp_time([(1e-4, 1.0), (1e-6, 100.0)], 1e-5)
    assert abs(t - 10.0) < 1e-9 and ex is False
    t, ex = peers_report.interp_time([(1e-4, 1.0), (1e-5, 10.0)], 1e-6)
    assert abs(t - 100.0) < 1e-6 and ex is True


def test_ratios_do_not_extrapolate_far_beyond_a_peers_measured_errors():
    rows = [dict(system="s", ranks=1, code="pmewald-auto", error=e, total_s=t, setting=0.0)
            for e, t in ((2e-4, 1.0), (2e-5, 2.0), (5e-6, 3.0))]
    rows += [dict(system="s", ranks=1, code="gromacs", error=e, total_s=t, setting="x") for e, t in ((3e-4, 1.0),
                                                                                                   (4.4e-5, 2.0),
                                                                                                   (4.3e-5, 3.0))]
    out = peers_report.ratios(rows, [dict(name="s")], [1])
    at = {e["target_error"]: e["peers"]["gromacs"] for e in out}
    assert at[1e-4]["ratio"] > 0 and not at[1e-4].get("not_reached")
    assert at[1e-5]["not_reached"] and at[1e-5]["best_error"] == 4.3e-5


def test_families_and_the_common_cutoff():
    fam = peers_report.family
    assert fam("pmewald-auto") == fam("pmewald-ik-collective@rc8") == fam("pmewald-auto-uncorr") == "pmewald"
    assert fam("pmewald-rcauto") == fam("pmewald-rcauto-nonblocking") == "pmewald-rcauto"
    assert fam("pmewald-ik@lammps") is None
    assert fam("lammps-ik-p7@rc9") == fam("lammps-ad") == "lammps"
    assert fam("gromacs-tmpi@rc8") == fam("gromacs-omp") == "gromacs" and fam("openmm@rc12") == "openmm"
    common = peers_report.at_common_cutoff
    assert common("openmm") and common("pmewald-ik@lammps") and common("gromacs-tmpi")
    assert not common("openmm@rc8") and not common("pmewald-rcauto") and not common("pmewald-rcauto-pt2pt")


def test_best_setting_is_the_fastest_bracketing_curve():
    """A code's best at an error is its fastest curve among those measured around that error;
    a curve only extrapolated counts when none brackets it, and nothing beyond REACH."""
    curves = {"gromacs": [(1e-3, 1.0), (1e-5, 4.0)],          # 2.0 at 1e-4
              "gromacs@rc8": [(1e-3, 1.5), (1e-5, 6.0)],      # 3.0 at 1e-4: slower
              "gromacs@rc9": [(2e-4, 0.5), (1.5e-4, 0.6)]}    # only extrapolated to 1e-4: ignored
    t, v, ex = peers_report.best_at(curves, 1e-4)
    assert v == "gromacs" and abs(t - 2.0) < 1e-9 and ex is False
    t, v, ex = peers_report.best_at({"a": [(2e-4, 0.5), (1.5e-4, 0.6)]}, 1e-4)
    assert v == "a" and ex is True
    assert peers_report.best_at({"a": [(1e-3, 0.5), (8e-4, 0.6)]}, 1e-4) == (None, None, None)
    rows = [dict(system="s", ranks=1, code=c, error=e, total_s=t, setting=0.0, cutoff=rc)
            for c, rc, pts in (("pmewald-auto", 10.0, ((2e-4, 1.0), (2e-6, 3.0))),
                               ("pmewald-auto@rc8", 8.0, ((2e-4, 0.8), (2e-6, 4.0))),
                               ("openmm", 10.0, ((2e-4, 2.0), (2e-6, 8.0))),
                               ("openmm@rc8", 8.0, ((2e-4, 1.6), (2e-6, 16.0))))
            for e, t in pts]
    out = {e["target_error"]: e for e in peers_report.best_ratios(rows, [dict(name="s")], [1])}
    b = out[1e-4]
    assert b["pmewald"] == "pmewald" and b["pmewald_best"]["variant"] == "pmewald-auto@rc8"
    assert b["pmewald_best"]["cutoff"] == 8.0
    assert b["peers"]["openmm"]["variant"] == "openmm@rc8"
    assert abs(b["peers"]["openmm"]["ratio"] - b["pmewald_best"]["time_s"] / b["peers"]["openmm"]["time_s"]) < 1e-12
    assert out[1e-5]["pmewald_best"]["variant"] == "pmewald-auto" and out[1e-5]["peers"]["openmm"]["variant"] == "openmm"


def test_best_names_the_cutoffs_of_the_points_it_comes_from():
    """pmewald-rcauto chooses its cutoff per setting: the table names those of the two points
    its time at the error is interpolated from."""
    rows = [dict(system="s", ranks=1, code="pmewald-rcauto", error=e, total_s=t, setting=tol, cutoff=rc)
            for e, t, tol, rc in ((2e-4, 1.0, 3e-4, 7.1), (6e-5, 1.5, 1e-4, 7.1), (2e-5, 2.0, 3e-5, 7.8),
                                  (7e-6, 2.5, 1e-5, 8.6))]
    out = {e["target_error"]: e["pmewald_best"] for e in peers_report.best_ratios(rows, [dict(name="s")], [1])}
    assert out[1e-4]["cutoff"] == 7.1
    assert out[1e-5]["cutoff"] == [7.8, 8.6]


PEPTIDE = "/usr/share/lammps/examples/peptide/data.peptide"


@pytest.mark.skipif(not os.path.exists(PEPTIDE), reason="Debian's lammps-examples is not installed")
def test_peptide_bonds_survive_replicate_and_the_lammps_data_file(tmp_path):
    """The peptide carries its bonds (System.bonds) through replicate into the LAMMPS data file
    the peers benchmark writes, so LAMMPS's special_bonds 0 0 0 excludes exactly pmewald's pairs:
    read back, the file gives the same charges, positions (modulo the box) and exclusions. The
    exclusions cannot tell LAMMPS the bonds by distance (a bond graph from the pairs under 1.55 A
    is not the peptide's), and bonds that disagree with the exclusions are refused."""
    from pmewald import systems
    from pmewald.bench.peers.lammps import bonds_of, write_lammps_data
    from pmewald.bench.peers.sweep import make_system

    one = systems.read_lammps_data(PEPTIDE)
    assert one.n_atoms == 2004 and len(one.bonds) == 1365
    s = make_system("peptide", 2 * 2 * 2 * 2004)
    assert s.n_atoms == 8 * 2004 and len(s.bonds) == 8 * 1365 and len(s.exclusions) == 8 * len(one.exclusions)
    np.testing.assert_array_equal(s.bonds[1365:2730], one.bonds + 2004)
    assert len(bonds_of(s)) == len(s.bonds)
    path = tmp_path / "peptide.data"
    write_lammps_data(s, "peptide", path)
    back = systems.read_lammps_data(str(path))
    np.testing.assert_array_equal(back.charges, s.charges)
    key = lambda ex: set(map(tuple, np.sort(ex, axis=1).tolist()))  # noqa: E731
    assert key(back.exclusions) == key(s.exclusions)
    L = np.diag(s.box)
    d = back.positions - s.positions
    np.testing.assert_allclose(d - L * np.round(d / L), 0.0, atol=1e-9)
    no_bonds = systems.System(s.box, s.positions, s.charges, s.ids, s.exclusions, "no bonds")
    with pytest.raises(ValueError, match="bond graph"):
        bonds_of(no_bonds)
    wrong = systems.System(s.box, s.positions, s.charges, s.ids, s.exclusions, "wrong", bonds=s.bonds[1:])
    with pytest.raises(ValueError, match="bond graph"):
        bonds_of(wrong)
