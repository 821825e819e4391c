"""The study's systems, platforms and SMPI settings, the parameters chosen per system, and the sweep plan."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ..._mpi import COMM_MODES

PLATFORMS = {
    # name: (platform file, hosts in it)
    "fat_tree": ("scale/platforms/fat_tree_1024.xml", 1024),
    "dragonfly": ("scale/platforms/dragonfly_2048.xml", 2048),
}
MODES = COMM_MODES

# SMPI settings of every simulation, with the reason for each (docs/scaling.md repeats them).
SMPI_CONFIG = [
    ("smpi/host-speed", "1Gf",
     "the platforms' host speed: one second of this machine's CPU time is one simulated second"),
    ("smpi/send-is-detached-thresh", "0",
     "sends complete at delivery: SimGrid 3.32 keeps eager (detached) sends in one global list "
     "whose every removal scans it, which made 64 ranks take 3x and 128 ranks 20x longer"),
    ("smpi/coll-selector", "mpich",
     "MPICH's choice of collective algorithms (recursive doubling, Bruck, ring by size), as Cray "
     "MPICH makes on Slingshot machines; SMPI's default ones post O(P) messages per rank"),
    ("smpi/bw-factor", "0:1", "the platform's bandwidths are end-to-end values (no SMPI correction)"),
    ("smpi/lat-factor", "0:1", "the platform's latencies are end-to-end values (no SMPI correction)"),
    ("smpi/wtime", "0", "MPI_Wtime injects no simulated time (the solver's timers call it often)"),
    ("smpi/display-timing", "yes", "SimGrid reports its own wall time and the application's"),
]

# ---------------------------------------------------------------------------- systems


@dataclass(frozen=True)
class System:
    """One test system of the driver (scale/driver/systems.hpp) and its parameters."""
    name: str
    kind: str           # rocksalt | water
    cells: int          # unit cells (rock salt) or lattice sites (water) per axis
    vacuum: float = 0.0

    @property
    def atoms(self) -> int:
        kept = max(1, round(self.cells * (1.0 - self.vacuum)))
        return (8 if self.kind == "rocksalt" else 3) * self.cells * self.cells * kept

    @property
    def box(self) -> float:
        return self.cells * (5.64 if self.kind == "rocksalt" else (1.0 / 0.0334) ** (1.0 / 3.0))


def water(atoms_wanted: int, name: str | None = None) -> System:
    cells = max(2, round((atoms_wanted / 3.0) ** (1.0 / 3.0)))
    s = System(name or "", "water", cells)
    return System(name or f"water{s.atoms}", "water", cells)


# ~100k and ~1M atoms (32^3 and 70^3 molecules); the weak series at 1,024 ranks is the 1M system.
STRONG = [System("water98k", "water", 32), System("water1.03M", "water", 70)]
WEAK_ATOMS_PER_RANK = 1000


# Correctness at scale: a rock-salt crystal whose upper half is vacuum (ranks without atoms),
# 8,192 ions in a 90 A box, on a 32^3 mesh: one FFT pencil per rank at 1,024 ranks, bricks 2
# points thick along z there (halo partners beyond the neighbours), fixed parameters. Cheap to
# compute, so the simulation's cost is its MPI calls. 16 cells, not 8: with 8 (45 A) the 9 A
# cutoff spans 3-4 domains per axis at 1,024 ranks, every rank exchanges ghost atoms with
# hundreds of partners, and SimGrid's flow solver (lmm, ~45% of the simulation's time) grows
# ~6x per doubling of P: 256 ranks took 56 s of CPU per mode with 8 cells, 22 s with 16.
CORRECTNESS = System("rocksalt16-vacuum", "rocksalt", 16, vacuum=0.5)
CORRECTNESS_PARAMS = {"mesh": 32, "alpha": 0.35, "order": 4, "differentiation": "ad", "cutoff": 9.0}


def weak_system(P: int) -> System:
    return water(WEAK_ATOMS_PER_RANK * P)


# Parameters: pmewald's own choice (pmewald.PME, relative tolerance TOLERANCE, cutoff CUTOFF)
# on a sample of the same material, its mesh spacing carried to the large box.
CUTOFF = 9.0
TOLERANCE = 1e-4


def choose_parameters(kind: str, box: float, cache: dict) -> dict:
    key = f"{kind}/{CUTOFF}/{TOLERANCE}"
    if key not in cache:
        import pmewald
        from pmewald import systems
        if kind == "water":
            sample = systems.water_box(target_atoms=6000, seed=1)
        else:
            sample = systems.displace(systems.rock_salt((8, 8, 8)), 0.1, seed=1)
        pme = pmewald.PME(sample.box, cutoff=CUTOFF, tolerance=TOLERANCE)
        pme.compute(sample.positions, sample.charges, ids=sample.ids,
                    exclusions=sample.exclusions if len(sample.exclusions) else None)
        p = pme.parameters
        spacing = float(max(sample.box[d, d] / p["mesh"][d] for d in range(3)))
        cache[key] = dict(alpha=float(p["alpha"]), order=int(p["order"]), differentiation=p["differentiation"],
                          spacing=spacing, sample_atoms=int(sample.n_atoms))
    from pmewald import _core
    c = cache[key]
    K = int(_core.tuning.fft_friendly(math.ceil(box / c["spacing"])))
    return dict(mesh=K, alpha=c["alpha"], order=c["order"], differentiation=c["differentiation"], cutoff=CUTOFF)


# ---------------------------------------------------------------------------- sweep


@dataclass
class Plan:
    runs: list = field(default_factory=list)  # (kind, system, platform, P)


def sweep_plan(ranks, platforms, strong=True, weak=True, systems=None, correctness=True) -> Plan:
    plan = Plan()
    if correctness:
        for P in ranks:
            plan.runs.append(("correctness", CORRECTNESS, "fat_tree", P))
    if strong:
        for s in (systems or STRONG):
            for pf in platforms:
                for P in ranks:
                    plan.runs.append(("strong", s, pf, P))
    if weak:
        for P in ranks:
            plan.runs.append(("weak", weak_system(P), "fat_tree", P))
    # Equal runs (the weak 1M point is the strong 1M run) are simulated once.
    seen, unique = set(), []
    for r in plan.runs:
        key = (r[1].kind, r[1].cells, r[1].vacuum, r[2], r[3])
        if key not in seen:
            seen.add(key)
            unique.append(r)
    plan.runs = unique
    return plan


def _tag(system: System) -> str:
    return f"{system.kind}{system.cells}" + (f"v{system.vacuum:g}" if system.vacuum else "")


def result_path(results: Path, system: System, platform: str, P: int) -> Path:
    return results / f"{_tag(system)}_{platform}_P{P}.json"
