"""Validation and timing of pmewald inside the engines (issue 29): ``python benchmarks/engines.py PART``.

Parts (each writes its results into ``--json``, default docs/benchmarks/engines.json, under its
name, and prints them):

openmm-nve
    A TIP3P water box (~3k atoms) and alanine dipeptide in TIP3P (2,605 atoms), amber14,
    HBonds, rigid water, 0.9 nm cutoff, 2 fs: the electrostatic forces' relative RMS error of
    pmewald's PMEForce (tolerance --tolerance) and of OpenMM's PME at several
    ewaldErrorTolerance values, against OpenMM's PME at 1e-7; then 1,000 steps of NVE on the
    Reference platform (double precision) with pmewald and with OpenMM's PME at the tolerance
    whose error matches pmewald's (and at OpenMM's default 5e-4): total-energy drift (linear fit)
    and fluctuation; ns/day on the CPU platform of both, pmewald on 1 and 2 ranks; the first 100
    steps on 2 ranks against 1 rank.
openmm-overhead
    The solvated dipeptide in a 6.7 nm box (29,377 atoms), CPU platform: ms per step of OpenMM's
    PME, of LJ alone (the electrostatics taken out), of LJ with a PythonForce that reads the
    positions and returns zeros, and of PMEForce, with the time inside its callback and inside
    PME.compute; four Simulations stepped in turn, round after round, medians. The PythonForce's
    overhead: (null PythonForce - LJ) + (callback - PME.compute), against the PMEForce step.
    OpenMM with 1 and with 2 threads.
lammps
    in.peptide (2,004 atoms): pmewald's forces (kspace and full mode, tolerance 1e-5 and 5e-4)
    against LAMMPS's pppm at 1e-6 on 1, 2 and 4 ranks; 1,000 steps of NVE (2 fs, SHAKE) of pppm
    at 1e-4 and of pmewald at the tolerance matching its measured error: drift, ms per step.
    Every LAMMPS with pppm runs in a process of its own (LAMMPS's FFTW cleanup invalidates every
    FFTW plan in its process; pmewald.interfaces.lammps).
autograd
    A ~30k-atom water box: seconds of PME.compute, of compute(potentials=True), and of the JAX
    and (if installed) PyTorch energy with backward in positions and cell, and in positions,
    charges and cell (rounds interleaved, medians, the ratios to compute).
fit
    examples/autograd_fit_charges.py at its default settings.

Not a test: the numbers depend on the machine and its load (the JSON records ``uptime``).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
HERE = pathlib.Path(__file__).resolve()
PYTHON = sys.executable


def _child_env():
    """The environment for a child mpirun or process: no MPI singleton variables of this one."""
    env = {k: v for k, v in os.environ.items() if not (k.startswith("OMPI_") or k.startswith("PMIX_"))}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    return env


def _child(args, ranks=1, timeout=3600):
    """Run this script with `args` (on `ranks` MPI ranks) and return the JSON it prints last."""
    cmd = [PYTHON, str(HERE)] + args
    if ranks > 1:
        cmd = ["mpirun", "-n", str(ranks)] + cmd
    out = subprocess.run(cmd, env=_child_env(), capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _rms(a, b):
    return float(np.sqrt(((a - b) ** 2).sum() / (b ** 2).sum()))


# ----------------------------------------------------------------------------- OpenMM


def _openmm_system(name):
    """(topology, system, positions nm): 'water' (TIP3P, 3.1 nm box) or 'peptide' (3.0 nm)."""
    import openmm
    from openmm import app, unit

    from pmewald.systems.openmm import solvated_peptide

    if name == "peptide":
        return solvated_peptide(box=3.0, cutoff=0.9)
    ff = app.ForceField("amber14-all.xml", "amber14/tip3p.xml")
    m = app.Modeller(app.Topology(), [])
    m.addSolvent(ff, model="tip3p", boxSize=openmm.Vec3(3.1, 3.1, 3.1) * unit.nanometer)
    system = ff.createSystem(m.topology, nonbondedMethod=app.PME, nonbondedCutoff=0.9 * unit.nanometer,
                             constraints=app.HBonds, rigidWater=True)
    return m.topology, system, np.array(m.positions.value_in_unit(unit.nanometer))


def _with_tolerance(system, delta):
    import openmm

    s = openmm.XmlSerializer.clone(system)
    next(f for f in s.getForces() if isinstance(f, openmm.NonbondedForce)).setEwaldErrorTolerance(delta)
    return s


def _forces(system, pos, platform="Reference"):
    import openmm
    from openmm import unit

    ctx = openmm.Context(system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName(platform))
    ctx.setPositions(pos)
    f = ctx.getState(getForces=True).getForces(asNumpy=True).value_in_unit(unit.kilojoule_per_mole / unit.nanometer)
    del ctx
    return np.asarray(f)


def _nve(topology, system, pos, steps, platform="Reference", every=10, dt=2.0):
    """Total energies every `every` steps of velocity Verlet (kJ/mol) and the seconds per step."""
    import openmm
    from openmm import app, unit

    integ = openmm.VerletIntegrator(dt * unit.femtoseconds)
    integ.setConstraintTolerance(1e-8)
    props = {"Threads": "2"} if platform == "CPU" else {}
    sim = app.Simulation(topology, system, integ, openmm.Platform.getPlatformByName(platform), props)
    sim.context.setPositions(pos)
    sim.context.setVelocitiesToTemperature(300 * unit.kelvin, 1)
    energies, t0 = [], time.perf_counter()
    for _ in range(steps // every):
        sim.step(every)
        st = sim.context.getState(getEnergy=True)
        energies.append((st.getPotentialEnergy() + st.getKineticEnergy()).value_in_unit(unit.kilojoule_per_mole))
    return np.array(energies), (time.perf_counter() - t0) / steps


def _drift(energies, every=10, dt=2.0, atoms=1):
    t_ns = np.arange(1, len(energies) + 1) * every * dt * 1e-6
    slope = float(np.polyfit(t_ns, energies, 1)[0])
    return {"drift_kj_mol_ns": slope, "drift_kj_mol_ns_per_atom": slope / atoms,
            "std_kj_mol": float(np.std(energies)), "max_deviation_kj_mol": float(np.abs(energies - energies[0]).max())}


def openmm_nve(args):
    import openmm

    from pmewald.interfaces.openmm_force import PMEForce, take_over_electrostatics

    out = {}
    for name in ("water", "peptide"):
        topology, system, pos = _openmm_system(name)
        n = system.getNumParticles()
        lj = openmm.XmlSerializer.clone(system)
        take_over_electrostatics(lj)
        f_lj = _forces(lj, pos)
        f_ref = _forces(_with_tolerance(system, 1e-7), pos) - f_lj
        errors = {d: _rms(_forces(_with_tolerance(system, d), pos) - f_lj, f_ref)
                  for d in (5e-4, 2e-4, 1e-4, 5e-5, 2e-5, 1e-5)}
        mine = openmm.XmlSerializer.clone(system)
        pme = PMEForce(mine, tolerance=args.tolerance)
        e_p = _rms(_forces(mine, pos) - f_lj, f_ref)
        matched = min(errors, key=lambda d: abs(np.log(errors[d] / e_p)))
        r = {"atoms": n, "pmewald_tolerance": args.tolerance, "pmewald_force_error": e_p,
             "openmm_force_error": {str(d): e for d, e in errors.items()}, "openmm_matched_tolerance": matched,
             "pmewald_parameters": {k: pme.parameters[k] for k in ("alpha", "mesh", "order", "differentiation")}}
        print(name, r, flush=True)
        e_pm, _ = _nve(topology, mine, pos, args.steps)
        r["pmewald_nve"] = _drift(e_pm, atoms=n)
        for label, d in (("openmm_matched_nve", matched), ("openmm_default_nve", 5e-4)):
            e_om, _ = _nve(topology, _with_tolerance(system, d), pos, args.steps)
            r[label] = _drift(e_om, atoms=n)
        r["drift_ratio_pmewald_to_openmm_matched"] = abs(r["pmewald_nve"]["drift_kj_mol_ns"]) / max(
            abs(r["openmm_matched_nve"]["drift_kj_mol_ns"]), 1e-300)
        print(name, "NVE", {k: r[k] for k in r if "nve" in k or "ratio" in k}, flush=True)
        speed = {}
        _, s = _nve(topology, _with_tolerance(system, matched), pos, args.speed_steps, platform="CPU")
        speed["openmm_pme_cpu"] = 2.0e-6 / s * 86400
        cpu = openmm.XmlSerializer.clone(system)
        PMEForce(cpu, tolerance=args.tolerance)
        _, s = _nve(topology, cpu, pos, args.speed_steps, platform="CPU")
        speed["pmewald_cpu_1rank"] = 2.0e-6 / s * 86400
        speed["pmewald_cpu_2ranks"] = _child(["openmm-speed", "--system", name, "--tolerance", str(args.tolerance),
                                              "--speed-steps", str(args.speed_steps)], ranks=2)["ns_per_day"]
        r["ns_per_day"] = speed
        r["two_ranks_vs_one_100_steps"] = _child(["openmm-ranks", "--system", name, "--tolerance",
                                                  str(args.tolerance)], ranks=2)
        print(name, "speed", speed, "ranks", r["two_ranks_vs_one_100_steps"], flush=True)
        out[name] = r
    return out


def openmm_speed(args):
    """Child (mpirun -n 2): ns/day of PMEForce on the CPU platform, rank 0 driving."""
    from mpi4py import MPI

    from pmewald.interfaces.openmm_force import PMEForce

    topology, system, pos = _openmm_system(args.system)
    with PMEForce(system, tolerance=args.tolerance) as pme:
        if pme.is_driver:
            _, s = _nve(topology, system, pos, args.speed_steps, platform="CPU")
            result = {"ns_per_day": 2.0e-6 / s * 86400}
        else:
            pme.serve()
            result = None
    return MPI.COMM_WORLD.bcast(result, root=0)


def openmm_ranks(args):
    """Child (mpirun -n 2): 100 steps (Reference platform) with a two-rank PMEForce and, on
    rank 0, with a one-rank one: the largest position difference."""
    import openmm
    from mpi4py import MPI
    from openmm import app, unit

    from pmewald.interfaces.openmm_force import PMEForce

    comm = MPI.COMM_WORLD
    topology, system0, pos = _openmm_system(args.system)
    finals = []
    for c in (comm, MPI.COMM_SELF):
        if c == MPI.COMM_SELF and comm.Get_rank() != 0:
            continue
        system = openmm.XmlSerializer.clone(system0)
        with PMEForce(system, tolerance=args.tolerance, comm=c) as pme:
            if not pme.is_driver:
                pme.serve()
                continue
            sim = app.Simulation(topology, system, openmm.VerletIntegrator(0.002),
                                 openmm.Platform.getPlatformByName("Reference"))
            sim.context.setPositions(pos)
            sim.context.setVelocitiesToTemperature(300 * unit.kelvin, 1)
            sim.step(100)
            finals.append(sim.context.getState(getPositions=True).getPositions(asNumpy=True).value_in_unit(
                unit.nanometer))
    diff = float(np.abs(finals[0] - finals[1]).max()) if comm.Get_rank() == 0 else None
    return {"max_position_difference_nm": comm.bcast(diff, root=0)}


def openmm_overhead(args):
    """ms per step of four Simulations of the 29k-atom system, made once and stepped in turn,
    round after round (--rounds, --speed-steps each), medians: the machine's state is shared."""
    import openmm
    from openmm import app

    from pmewald.interfaces.openmm_force import PMEForce, take_over_electrostatics, openmm_python_force
    from pmewald.systems.openmm import solvated_peptide

    topology, system, pos = solvated_peptide(box=6.7, cutoff=0.9)
    out = {"atoms": system.getNumParticles(), "tolerance": args.tolerance}
    for threads in (1, 2):
        lj = openmm.XmlSerializer.clone(system)
        take_over_electrostatics(lj)
        null = openmm.XmlSerializer.clone(lj)
        zeros = np.zeros((len(pos), 3))

        def zero(state):
            state.getPositions(asNumpy=True)  # what a force reads: the positions as NumPy
            return 0.0, zeros

        openmm_python_force(zero, null, "zeros")
        mine = openmm.XmlSerializer.clone(system)
        pme = PMEForce(mine, tolerance=args.tolerance)
        sims = {}
        for name, s in (("openmm_pme", openmm.XmlSerializer.clone(system)), ("lj_only", lj),
                        ("lj_plus_null_pythonforce", null), ("pmewald", mine)):
            sim = app.Simulation(topology, s, openmm.VerletIntegrator(0.002), openmm.Platform.getPlatformByName("CPU"),
                                 {"Threads": str(threads)})
            sim.context.setPositions(pos)
            sim.context.setVelocitiesToTemperature(300, 1)
            sim.step(5)
            sims[name] = sim
        times = {k: [] for k in sims}
        compute, callback = [], []
        for _ in range(args.rounds):
            for name, sim in sims.items():
                pme.seconds = pme.pme_seconds = 0.0
                pme.calls = 0
                t0 = time.perf_counter()
                sim.step(args.speed_steps)
                times[name].append((time.perf_counter() - t0) / args.speed_steps * 1e3)
                if name == "pmewald":
                    compute.append(pme.pme_seconds / pme.calls * 1e3)
                    callback.append(pme.seconds / pme.calls * 1e3)
        r = {f"{k}_ms": statistics.median(v) for k, v in times.items()}
        r["pme_compute_ms"], r["callback_ms"] = statistics.median(compute), statistics.median(callback)
        r["python_in_callback_ms"] = r["callback_ms"] - r["pme_compute_ms"]
        r["pythonforce_mechanism_ms"] = r["lj_plus_null_pythonforce_ms"] - r["lj_only_ms"]
        r["overhead_ms"] = r["pythonforce_mechanism_ms"] + r["python_in_callback_ms"]
        r["overhead_fraction"] = r["overhead_ms"] / r["pmewald_ms"]
        r["step_minus_lj_minus_compute_ms"] = r["pmewald_ms"] - r["lj_only_ms"] - r["pme_compute_ms"]
        r["rounds"] = {k: v for k, v in times.items()}
        r["parameters"] = {k: pme.parameters[k] for k in ("alpha", "mesh", "order", "differentiation")}
        out[f"threads{threads}"] = r
        print(threads, {k: v for k, v in r.items() if k != "rounds"}, flush=True)
    return out


# ----------------------------------------------------------------------------- LAMMPS

PEPTIDE = """
units real
atom_style full
pair_style {pair}
bond_style harmonic
angle_style charmm
dihedral_style charmm
improper_style harmonic
{kspace}
read_data /usr/share/lammps/examples/peptide/data.peptide
neighbor 2.0 bin
neigh_modify delay 5
timestep 2.0
velocity all create 275.0 4928459 mom yes rot yes dist gaussian
thermo_style custom step temp pe etotal press
thermo_modify norm no
"""
PAIRS = {"pppm": "lj/charmm/coul/long 8.0 10.0 10.0", "kspace": "lj/charmm/coul/long 8.0 10.0 10.0",
         "full": "lj/charmm/coul/charmm 8.0 10.0 0.05 0.1"}


def lammps_run(args):
    """Child (any rank count): one LAMMPS with pppm (--style pppm) or pmewald (kspace, full);
    the forces at step 0 (--forces-out, by tag) and the energies of --steps NVE steps."""
    from mpi4py import MPI

    from pmewald.interfaces.lammps import attach, open_lammps

    comm = MPI.COMM_WORLD
    lmp = open_lammps(["-log", "none", "-screen", "none", "-nocite"])
    kspace = f"kspace_style pppm {args.accuracy}" if args.style == "pppm" else ""
    lmp.commands_string(PEPTIDE.format(pair=PAIRS[args.style], kspace=kspace))
    if args.nocharge:
        lmp.commands_string("set group all charge 0.0\nkspace_modify gewald 0.3")
    fix = None
    if args.style != "pppm":
        fix = attach(lmp, mode=args.style, cutoff=10.0, tolerance=args.tolerance, special_coul=(0.0, 0.0, 0.0))
    lmp.command("run 0 post no")
    f = np.array(lmp.gather_atoms("f", 1, 3)).reshape(-1, 3)
    if args.forces_out and comm.Get_rank() == 0:
        np.save(args.forces_out, f)
    out = {"ranks": comm.Get_size(), "style": args.style, "pe": lmp.get_thermo("pe")}
    if args.steps:
        lmp.command("fix 1 all nve")
        lmp.command("fix 2 all shake 0.0001 10 100 b 4 6 8 10 12 14 18 a 31")
        energies, every = [], 10
        lmp.command("run 0 post no")
        t0 = MPI.Wtime()
        for k in range(args.steps // every):
            lmp.command(f"run {every} pre {'no' if k else 'yes'} post no")
            energies.append(lmp.get_thermo("etotal"))
        out["ms_per_step"] = (MPI.Wtime() - t0) / args.steps * 1e3
        t_ps = np.arange(1, len(energies) + 1) * every * 2e-3
        e = np.array(energies)
        out.update(drift_kcal_mol_ps=float(np.polyfit(t_ps, e, 1)[0]), std_kcal_mol=float(e.std()),
                   max_deviation_kcal_mol=float(np.abs(e - e[0]).max()))
    if fix is not None:
        fix.check()
        out["parameters"] = {k: fix.parameters[k] for k in ("alpha", "mesh", "order")}
    lmp.close()
    return out


def lammps(args):
    tmp = ROOT / "build" / "engines-bench"
    tmp.mkdir(parents=True, exist_ok=True)

    def forces(extra, ranks=1):
        path = tmp / f"f{abs(hash(tuple(extra + [str(ranks)])))}.npy"
        r = _child(["lammps-run", "--forces-out", str(path)] + extra, ranks=ranks)
        return np.load(path), r

    f_ref, _ = forces(["--style", "pppm", "--accuracy", "1e-6"])
    f_other, _ = forces(["--style", "pppm", "--accuracy", "1e-6", "--nocharge"])
    elec = f_ref - f_other

    def error(f):
        return _rms(f - f_other, elec)

    out = {"reference": "pppm 1e-6", "pppm_1e-4_force_error": error(forces(["--style", "pppm", "--accuracy",
                                                                             "1e-4"])[0])}
    for mode in ("kspace", "full"):
        for tol in (1e-5, 1e-4, 5e-4, 1e-3):
            for ranks in (1, 2, 4):
                f, r = forces(["--style", mode, "--tolerance", str(tol)], ranks=ranks)
                out[f"{mode}_{tol:g}_{ranks}ranks"] = {"force_error": error(f), "parameters": r["parameters"]}
                print(mode, tol, ranks, out[f"{mode}_{tol:g}_{ranks}ranks"], flush=True)
    e_pppm = out["pppm_1e-4_force_error"]
    matched = min((1e-5, 1e-4, 5e-4, 1e-3), key=lambda t: abs(np.log(out[f"kspace_{t:g}_1ranks"]["force_error"] / e_pppm)))
    out["matched_tolerance"] = matched
    for ranks in (1, 2, 4):
        runs = {"pppm_1e-4": _child(["lammps-run", "--style", "pppm", "--accuracy", "1e-4", "--steps",
                                     str(args.steps)], ranks=ranks)}
        for mode in ("kspace", "full"):
            runs[f"{mode}_{matched:g}"] = _child(["lammps-run", "--style", mode, "--tolerance", str(matched),
                                                  "--steps", str(args.steps)], ranks=ranks)
        out[f"nve_{ranks}ranks"] = runs
        print(ranks, "NVE", runs, flush=True)
    return out


# ----------------------------------------------------------------------------- autograd


def _autograd_kinds(w, kw, fixed, pme):
    """name -> a call: compute, compute(potentials=True), the core and the JAX and PyTorch
    energies with backward (positions and cell; positions, charges and cell)."""
    from pmewald.interfaces.autograd import DifferentiableEnergy

    kinds = {"compute": lambda: pme.compute(w.positions, w.charges, exclusions=w.exclusions),
             "compute_potentials": lambda: pme.compute(w.positions, w.charges, exclusions=w.exclusions,
                                                       potentials=True)}
    plain = DifferentiableEnergy(9.0, **fixed, **kw)
    kinds["core_pos_cell"] = lambda: plain.evaluate(w.positions, w.charges, w.box, exclusions=w.exclusions,
                                                    potentials=False).vjp(1.0)
    kinds["core_pos_q_cell"] = lambda: plain.evaluate(w.positions, w.charges, w.box, exclusions=w.exclusions).vjp(1.0)
    try:
        import jax

        from pmewald.interfaces.jax import PMEEnergy as JaxEnergy

        jax.config.update("jax_enable_x64", True)
        jpos, jcell = jax.numpy.asarray(w.positions), jax.numpy.asarray(w.box)
        for label, q_grad in (("jax_pos_cell", False), ("jax_pos_q_cell", True)):
            je = JaxEnergy(9.0, charge_gradient=q_grad, **fixed, **kw)
            argnums = (0, 1, 2) if q_grad else (0, 2)
            g = jax.jit(jax.grad(lambda a, b, c, e=je: e(a, b, c, exclusions=w.exclusions), argnums=argnums))
            kinds[label] = (lambda g=g: jax.block_until_ready(g(jpos, w.charges, jcell)))
    except ImportError:
        pass
    try:
        import torch

        from pmewald.interfaces.torch import PMEEnergy as TorchEnergy

        pos = torch.tensor(w.positions, requires_grad=True)
        cell = torch.tensor(w.box, requires_grad=True)
        for label, q_grad in (("torch_pos_cell", False), ("torch_pos_q_cell", True)):
            te = TorchEnergy(9.0, **fixed, **kw)
            q = torch.tensor(w.charges, requires_grad=q_grad)

            def torch_call(te=te, q=q):
                pos.grad = cell.grad = None
                te(pos, q, cell, exclusions=w.exclusions).backward()

            kinds[label] = torch_call
    except ImportError:
        pass
    return kinds


def autograd(args):
    """Seconds of compute, compute(potentials=True) and the autograd energy + backward (JAX and,
    if installed, PyTorch) on a water box, rounds interleaved after warm-up (medians); with
    skin 0 (every call searches its pairs: independent configurations, as in training) and with
    the pair list kept (skin auto, as in MD; a potentials call searches afresh)."""
    from mpi4py import MPI

    from pmewald import PME, systems, units

    w = systems.water_box(target_atoms=args.atoms)
    out = {"atoms": w.n_atoms}
    for skin in (0.0, "auto"):
        kw = dict(tolerance=1e-5, comm=MPI.COMM_SELF, coulomb_constant=units.KCAL_MOL_ANGSTROM, skin=skin)
        pme = PME(w.box, 9.0, differentiation="ad", **kw)
        pme.compute(w.positions, w.charges, exclusions=w.exclusions)
        p = pme.parameters
        fixed = dict(alpha=p["alpha"], mesh=p["mesh"], order=p["order"])
        kinds = _autograd_kinds(w, kw, fixed, pme)
        for fn in kinds.values():  # warm-up: plans, pair lists, jit
            fn()
            fn()
        times = {k: [] for k in kinds}
        for _ in range(args.rounds):
            for k, fn in kinds.items():
                t0 = time.perf_counter()
                fn()
                times[k].append(time.perf_counter() - t0)
        med = {k: statistics.median(v) for k, v in times.items()}
        out[f"skin_{skin}"] = {"parameters": fixed, "median_seconds": med,
                               "ratio_to_compute": {k: v / med["compute"] for k, v in med.items()},
                               "ratio_to_compute_potentials": {k: v / med["compute_potentials"] for k, v in med.items()}}
        print(skin, out[f"skin_{skin}"], flush=True)
    return out


def fit(args):
    sys.path.insert(0, str(ROOT / "examples"))
    import autograd_fit_charges

    return autograd_fit_charges.main([])


# ----------------------------------------------------------------------------- driver

PARTS = {"openmm-nve": openmm_nve, "openmm-overhead": openmm_overhead, "lammps": lammps, "autograd": autograd,
         "fit": fit}
CHILDREN = {"openmm-speed": openmm_speed, "openmm-ranks": openmm_ranks, "lammps-run": lammps_run}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=sorted(PARTS) + sorted(CHILDREN))
    ap.add_argument("--json", default=str(ROOT / "docs" / "benchmarks" / "engines.json"))
    ap.add_argument("--tolerance", type=float, default=None, help="pmewald's (default: openmm 1e-4, lammps 1e-5)")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--speed-steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--atoms", type=int, default=30000)
    ap.add_argument("--system", default="water")
    ap.add_argument("--style", default="pppm")
    ap.add_argument("--accuracy", type=float, default=1e-4)
    ap.add_argument("--forces-out", default=None)
    ap.add_argument("--nocharge", action="store_true")
    args = ap.parse_args(argv)
    if args.tolerance is None:
        args.tolerance = 1e-5 if args.part.startswith("lammps") else 1e-4
    if args.part in CHILDREN:
        result = CHILDREN[args.part](args)
        from mpi4py import MPI

        if MPI.COMM_WORLD.Get_rank() == 0:
            print(json.dumps(result))
        return
    t0 = time.time()
    result = PARTS[args.part](args)
    result["_run"] = {"seconds": time.time() - t0, "uptime": subprocess.run(["uptime"], capture_output=True,
                                                                           text=True).stdout.strip(),
                      "argv": sys.argv[1:]}
    path = pathlib.Path(args.json)
    data = json.loads(path.read_text()) if path.exists() else {}
    data[args.part] = result
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=float) + "\n")
    print(json.dumps(result, indent=1, default=float))


if __name__ == "__main__":
    main()
