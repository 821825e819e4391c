"""The communication model (:mod:`.comm_model`) against the simulations: its calibration on one run per
mode, its validation rows, and its predictions past the simulated rank counts."""

from __future__ import annotations

import json
from pathlib import Path

from .simulate import run_of
from .study import MODES, System

# ---------------------------------------------------------------------------- model


def allreduces_per_step(results: list) -> float:
    """The solver's MPI_Allreduce calls per compute call, as the driver counted them."""
    for res in results:
        for run in res["runs"]:
            c = run["mpi"]["calls"].get("Allreduce")
            if c:
                return float(c["mean"])
    return 0.0


_CENSUS_CACHE: dict = {}


def cached_census(P, mesh, order, differentiation, box, cutoff, atoms):
    """comm_model.census, computed once per argument set (the report asks for each several times)."""
    from . import comm_model
    mesh = (mesh,) * 3 if isinstance(mesh, int) else tuple(mesh)
    key = (P, mesh, order, differentiation, float(box), float(cutoff), int(atoms))
    if key not in _CENSUS_CACHE:
        _CENSUS_CACHE[key] = comm_model.census(P, mesh, order, differentiation, [box] * 3, cutoff, atoms)
    return _CENSUS_CACHE[key]


def census_of(res: dict):
    p = res["parameters"]
    return cached_census(res["ranks"], p["mesh"], p["order"], p["differentiation"], res["system"]["box"],
                         p["cutoff"], res["system"]["atoms"])


def calibration(res: dict, mode: str) -> dict:
    """Computation of one simulated run, split by how it scales (comm_model.step_time):
    remap packing, halo packing, ghost-atom handling, the real space (per pair row: owned
    and ghost atoms), and the rest (per owned atom)."""
    from . import comm_model
    run = run_of(res, mode)
    ph = {k: v["max"] for k, v in run["phases"].items()}
    total = run["compute_s"]["max"]
    remap = ph.get("fft_pack_unpack", 0.0)
    halo = max(0.0, ph.get("ghost", 0.0) - ph.get("ghost_comm_wait", 0.0))
    ghosts = ph.get("ghost_atoms", 0.0)
    pairs = min(ph.get("real_space", 0.0), max(0.0, total - remap - halo - ghosts))
    rest = max(0.0, total - remap - halo - ghosts - pairs)
    return {"ranks": res["ranks"], "atoms": res["system"]["atoms"],
            "compute": {"atoms": rest, "pairs": pairs, "ghost_atoms": ghosts, "remap": remap, "halo": halo},
            "work": comm_model.work(census_of(res))}


def model_row(res: dict, calib_res: dict, mode: str, allreduces: float) -> dict:
    from . import comm_model
    net = comm_model.NETWORKS[res["simulation"]["platform"]]
    m = comm_model.step_time(census_of(res), net, mode, calibration(calib_res, mode), allreduces)
    run = run_of(res, mode)
    return {"ranks": res["ranks"], "mode": mode, "simulated": run["step_s"], "model": m["total"],
            "model_comm": m["comm"], "simulated_mpi": run["mpi"]["seconds"]["max"],
            "ratio": m["total"] / run["step_s"]}


def validation_rows(results: dict, allreduces: float) -> list:
    """Model communication time against the communication-only simulations, per rank count and mode."""
    from . import comm_model
    rows = []
    for (kind, s, pf, P), res in sorted(results.items(), key=lambda kv: kv[0][3]):
        if not res.get("simulation", {}).get("comm_only"):
            continue
        cen = census_of(res)
        for m in MODES:
            run = run_of(res, m)
            t = comm_model.comm_time(cen, comm_model.NETWORKS[pf], m, allreduces)["total"]
            rows.append({"ranks": P, "mode": m, "platform": pf, "simulated": run["step_s"], "model": t,
                         "ratio": t / run["step_s"] if run["step_s"] > 0 else float("nan")})
    return rows


def predictions(system: System, params: dict, platform: str, ranks, calib_res: dict, allreduces: float) -> list:
    """Messages, bytes and modelled time per compute call at rank counts beyond the simulations."""
    from . import comm_model
    net = comm_model.NETWORKS[platform]
    rows = []
    # Rows are kept in PREDICTION_CACHE (a JSON file in the results folder) under everything
    # they depend on: at 65,536 ranks one row takes minutes.
    cache = json.loads(PREDICTION_CACHE.read_text()) if PREDICTION_CACHE and PREDICTION_CACHE.exists() else {}
    for P in ranks:
        key = json.dumps([system.name, system.cells, params, platform, P, calib_res["ranks"],
                          [run_of(calib_res, m)["phases"].get("real_space") for m in MODES], allreduces,
                          comm_model.MODEL_VERSION])
        if key in cache:
            rows.append(cache[key])
            continue
        cen = cached_census(P, params["mesh"], params["order"], params["differentiation"], system.box,
                            params["cutoff"], system.atoms)
        tr = comm_model.traffic(cen)
        msgs = sum(v["messages"] for v in tr.values())
        byts = sum(v["bytes"] for v in tr.values())
        row = {"ranks": P, "messages_max": float(msgs.max()), "messages_mean": float(msgs.mean()),
               "bytes_max": float(byts.max()), "bytes_mean": float(byts.mean())}
        for mode in MODES:
            st = comm_model.step_time(cen, net, mode, calibration(calib_res, mode), allreduces)
            row[mode] = st["total"]
            row[mode + "_comm"] = st["comm"]
        rows.append(row)
        if PREDICTION_CACHE:
            cache[key] = row
            PREDICTION_CACHE.write_text(json.dumps(cache))
    return rows


PREDICTION_CACHE: Path | None = None  # set by main()
