"""The tables and plots of ``python -m pmewald.bench peers`` (:mod:`pmewald.bench.peers`):
each code's rounds summarised into one row per setting, times interpolated to the same
measured force error (``TARGETS``), the markdown report and the time-versus-error plots.
"""

from __future__ import annotations

import math
import statistics

PME_PHASES = ["spread", "ghost", "fft", "solve", "gather", "real_space", "ghost_atoms", "exclusions",
              "migrate", "reduce"]
TARGETS = (1e-4, 1e-5)
REACH = 2.0   # ratios extrapolate a peer's time at most this factor beyond its measured errors


def interp_time(points, target):
    """points: list of (error, time). log-log linear interpolation at `target` error.
    Returns (time, extrapolated: bool) or (None, None)."""
    pts = sorted((e, t) for e, t in points if e and t and e > 0 and t > 0)
    if len(pts) < 2:
        if len(pts) == 1 and math.isclose(pts[0][0], target, rel_tol=0.1):
            return pts[0][1], False
        return None, None
    le = [math.log(e) for e, _ in pts]
    lt = [math.log(t) for _, t in pts]
    x = math.log(target)
    extra = not (le[0] <= x <= le[-1])
    if x <= le[0]:
        i = 0
    elif x >= le[-1]:
        i = len(pts) - 2
    else:
        i = max(k for k in range(len(pts) - 1) if le[k] <= x)
    if le[i + 1] == le[i]:
        return math.exp(0.5 * (lt[i] + lt[i + 1])), extra
    s = (lt[i + 1] - lt[i]) / (le[i + 1] - le[i])
    return math.exp(lt[i] + s * (x - le[i])), extra


def _med(rs, key):
    v = [r[key] for r in rs if r.get(key) is not None]
    return statistics.median(v) if v else None


def _setting_key(setting):
    """Sort key of a setting: numbers (tolerances, accuracies) descending; GROMACS's
    ``rtol:spacing:order`` labels by their numbers, coarsest first."""
    if isinstance(setting, str):
        return tuple(-float(v) for v in setting.split(":"))
    return (-setting,)


def fmt_setting(setting):
    return setting if isinstance(setting, str) else f"{setting:g}"


def summarise(raw):
    rows = []
    for (sysname, P, variant, setting), e in sorted(raw.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2],
                                                                                 _setting_key(kv[0][3]))):
        rs = e["rounds"]
        first = rs[0]
        row = dict(system=sysname, ranks=P, code=variant, setting=setting, error=first.get("error"),
                   n_rounds=len(rs))
        if variant.startswith("lammps"):
            row.update(total_s=_med(rs, "total_s"), real_s=_med(rs, "pair_s"), recip_s=_med(rs, "kspace_s"),
                       neigh_s=_med(rs, "neigh_s"), comm_s=_med(rs, "comm_s"), mesh=first.get("mesh"),
                       alpha=first.get("G"), order=first.get("order"), estimated=first.get("est_rel"),
                       mem_mb=first.get("mem_mb"), mem_kind="LAMMPS 'per MPI rank memory' (max)",
                       neigh_builds=first.get("neigh_builds"))
        elif variant == "openmm":
            row.update(total_s=_med(rs, "total_s"), real_s=_med(rs, "real_s"), recip_s=_med(rs, "recip_s"),
                       mesh=first["mesh"], alpha=first["alpha_per_A"], order=5, mem_mb=first["maxrss_mb"],
                       mem_kind="peak RSS of the worker")
        elif variant.startswith("gromacs"):
            # force_s / pme_s: the cycle-accounting "Force" (pair kernel) and "PME mesh" rows per frame
            row.update(total_s=_med(rs, "total_s"), real_s=_med(rs, "force_s"), recip_s=_med(rs, "pme_s"),
                       neigh_s=_med(rs, "neigh_s"), mesh=first.get("mesh"), alpha=first.get("alpha_per_A"),
                       order=int(setting.split(":")[2]))
        elif "step_mean_s" in first:   # pmewald in the MD-loop mode
            row.update(total_s=_med(rs, "wall_s"), step_median_s=_med(rs, "step_median_s"), mesh=first["mesh"],
                       alpha=first["alpha"], order=first["order"], differentiation=first.get("differentiation"),
                       estimated=first["estimated_error"], skin_passed=first.get("skin_passed"),
                       pme_accepts_skin=first.get("pme_accepts_skin"), timer_counts=first.get("timer_counts"))
        else:
            row.update(total_s=_med(rs, "wall_s"), real_s=_med(rs, "real_s"), recip_s=_med(rs, "recip_s"),
                       cpp_s=_med(rs, "cpp_phases_s"), raw_cpp_call_s=_med(rs, "raw_cpp_call_s"),
                       wall_mean_s=_med(rs, "wall_mean_s"), steps=first.get("steps"),
                       mesh=first["mesh"], alpha=first["alpha"], order=first["order"],
                       differentiation=first.get("differentiation") or first.get("diff"),
                       estimated=first["estimated_error"], mem_mb=first["maxrss_mb"],
                       mem_kind="peak RSS per rank (max over ranks)", fft_pair_s=_med(rs, "fft_pair_s"),
                       phases={k: statistics.median(r["phases"][k] for r in rs) for k in PME_PHASES},
                       comm_detail={k: statistics.median(r["comm_detail"][k] for r in rs)
                                    for k in first["comm_detail"]})
            if row.get("fft_pair_s"):
                # ad: 1 forward + 1 backward (one pair); ik: 1 forward + 3 backward (two pairs)
                n_pairs = 1.0 if row["differentiation"] == "ad" else 2.0
                row["fft_limit_s"] = n_pairs * row["fft_pair_s"]
                row["recip_over_fft_limit"] = row["recip_s"] / row["fft_limit_s"]
        rows.append(row)
    return rows


def ratios(rows, systems, ranks):
    out = []
    for s in systems:
        for P in ranks:
            sub = [r for r in rows if r["system"] == s["name"] and r["ranks"] == P and r.get("error")]
            variants = sorted({r["code"] for r in sub})
            curves = {v: [(r["error"], r["total_s"]) for r in sub if r["code"] == v] for v in variants}
            for tgt in TARGETS:
                at = {v: interp_time(curves[v], tgt) for v in variants}
                for v in variants:
                    if not v.startswith("pmewald-") or "@lammps" in v:
                        continue
                    t, ex = at[v]
                    if t is None:
                        continue
                    entry = dict(system=s["name"], ranks=P, target_error=tgt, pmewald=v, pmewald_s=t,
                                 pmewald_extrapolated=ex, peers={})
                    for peer in variants:
                        if peer.startswith("pmewald"):
                            continue
                        tp, exp_ = at[peer]
                        errs = [e for e, _ in curves[peer] if e]
                        if errs and not min(errs) / REACH <= tgt <= max(errs) * REACH:
                            # More than a factor REACH outside what the code was measured at (GROMACS's
                            # mixed precision stops at 4e-5 on the crystal): no extrapolated time.
                            entry["peers"][peer] = dict(time_s=None, not_reached=True, best_error=min(errs))
                        elif tp:
                            entry["peers"][peer] = dict(time_s=tp, extrapolated=exp_, ratio=t / tp)
                    out.append(entry)
            # Reciprocal part with LAMMPS's own parameters (diff ik): pmewald recip / LAMMPS Kspace.
            for r in sub:
                if r["code"].startswith("pmewald-ik@lammps") and r.get("recip_s"):
                    lam = [x for x in sub if x["code"] == "lammps-ik" and x["setting"] == r["setting"]]
                    if lam:
                        out.append(dict(system=s["name"], ranks=P, kind="recip@lammps-params", pmewald=r["code"],
                                        lammps_acc=r["setting"], mesh=r["mesh"], pmewald_recip_s=r["recip_s"],
                                        lammps_kspace_s=lam[0]["recip_s"],
                                        ratio=r["recip_s"] / lam[0]["recip_s"]))
    return out


def _fmt_ms(x):
    return "" if x is None else f"{x * 1e3:.2f}"


def cpu_model():
    """The CPU's model name and whether it has AVX-512 (/proc/cpuinfo; pmewald's pair kernel
    runs 8 lanes with it, 4 without), for the report: results depend on the machine."""
    name, avx512 = "unknown", False
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name") and name == "unknown":
                name = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                avx512 = " avx512f " in f" {line.split(':', 1)[1].strip()} "
                break
    except OSError:
        pass
    return f"{name}, {'AVX-512' if avx512 else 'no AVX-512'}"


def markdown(res):
    m = res["meta"]
    L = [f"Run {m['started']} on {m['host']} ({m['cpus']} CPUs, {m.get('cpu_model', 'CPU not recorded')}); "
         f"load at start: `{m['uptime_start']}`; at end: `{m['uptime_end']}`.", ""]
    a = m.get("args", {})
    if a.get("mode") == "md":
        L += [f"MD-loop mode: {a['md_steps']} steps of a Gaussian random walk ({a['md_sigma']} A per coordinate); "
              "times are the mean per step (pmewald and OpenMM: one object/Context for all steps; LAMMPS: its own "
              "`run` with `fix nve`, its list rebuilt when needed; GROMACS `mdrun -rerun`: a neighbour search on "
              "every frame). pmewald skin: " +
              ", ".join(sorted({f"accepted={r.get('pme_accepts_skin')} passed={r.get('skin_passed')}"
                                for r in res["rows"] if "pme_accepts_skin" in r})), ""]
    if m.get("failures"):
        L += ["Runs that failed (left out of the tables):", ""]
        L += [f"- {f['run']}: `{f['error']}`" for f in m["failures"]]
        L.append("")
    if res["validation"]:
        L += ["Reference check (pmewald at the reference settings vs `pmewald.reference.ewald`):", ""]
        for v in res["validation"]:
            L.append(f"- {v['system']} ({v['n']} atoms, mesh {v['mesh']}, rc {v['cutoff']:.2f}): relative RMS "
                     f"force error {v['rel_force_error_vs_ewald']:.1e}")
        L.append("")
    L += ["Reference per system: " + "; ".join(
        f"{s['name']}: mesh {'x'.join(map(str, s['reference']['mesh']))}, order 8, rc {s['reference']['cutoff']:.1f}"
        for s in res["systems"]), ""]
    L += ["### All runs", "",
          "| system | ranks | code | setting | mesh | measured error | total ms | real ms | recip ms | "
          "FFT-only ms | recip/FFT | mem MB |", "|" + "---|" * 12]
    for r in res["rows"]:
        mesh = "x".join(map(str, r["mesh"])) if r.get("mesh") else ""
        if r["code"].startswith("pmewald") and r.get("differentiation"):
            mesh += f" {r['differentiation']} p{r['order']}"   # what pmewald chose or was given
        st = fmt_setting(r["setting"])
        L.append(f"| {r['system']} | {r['ranks']} | {r['code']} | {st} | {mesh} | "
                 f"{r['error']:.2e} | {_fmt_ms(r['total_s'])} | {_fmt_ms(r.get('real_s'))} | {_fmt_ms(r.get('recip_s'))} | "
                 f"{_fmt_ms(r.get('fft_limit_s'))} | "
                 f"{'' if r.get('recip_over_fft_limit') is None else format(r['recip_over_fft_limit'], '.1f')} | "
                 f"{'' if r.get('mem_mb') is None else format(r['mem_mb'], '.0f')} |")
    L += ["", "setting: the nominal tolerance (pmewald, OpenMM `ewaldErrorTolerance`) or PPPM accuracy (LAMMPS); "
          "for `pmewald-ik@lammps` the LAMMPS accuracy whose G, grid and order were used. pmewald's mesh cell "
          "also names the differentiation and order used (`pmewald-auto`: the automatic choice). total = LAMMPS Pair + "
          "Kspace; OpenMM getState(forces); pmewald wall time of `compute()` (slowest rank). FFT-only: FFTW's "
          "serial real-to-complex 3-D r2c+c2r pair on pmewald's mesh (x2 for ik: 1 forward + 3 backward), 1 rank "
          "only. mem: LAMMPS's "
          "own per-rank estimate; OpenMM and pmewald: peak RSS of the worker process (cumulative over the "
          "settings run before it in that process).", ""]
    L += ["### Ratios at matched measured error (total time per step)", "",
          "| system | ranks | error | pmewald variant | pmewald ms | vs LAMMPS ik | vs LAMMPS ad | vs OpenMM | "
          "vs GROMACS (best layout) |", "|---|---|---|---|---|---|---|---|---|"]
    for e in res["ratios"]:
        if "target_error" not in e:
            continue

        def cell(peer):
            p = e["peers"].get(peer)
            if not p:
                return ""
            if p.get("not_reached"):
                return f"not reached (best {p['best_error']:.1e})"
            return f"{p['ratio']:.2f} ({p['time_s'] * 1e3:.1f} ms{', extrap.' if p['extrapolated'] else ''})"
        gmx = [v for v in e["peers"] if v.startswith("gromacs")]
        best = min(gmx, key=lambda v: e["peers"][v]["time_s"] or math.inf) if gmx else None
        L.append(f"| {e['system']} | {e['ranks']} | {e['target_error']:.0e} | {e['pmewald']} | "
                 f"{e['pmewald_s'] * 1e3:.1f}{' (extrap.)' if e['pmewald_extrapolated'] else ''} | "
                 f"{cell('lammps-ik')} | {cell('lammps-ad')} | {cell('openmm')} | "
                 f"{cell(best) + ' ' + best if best else ''} |")
    L += ["", "Ratio = pmewald time / peer time, both interpolated (log-log) at the same measured relative RMS "
          "force error; 'extrap.' marks a value outside the code's measured range.", ""]
    L += ["### Reciprocal part with LAMMPS's own G, grid and order (`diff ik`)", "",
          "| system | ranks | pmewald variant | LAMMPS accuracy | mesh | pmewald recip ms | LAMMPS Kspace ms | ratio |",
          "|---|---|---|---|---|---|---|---|"]
    for e in res["ratios"]:
        if e.get("kind") == "recip@lammps-params":
            L.append(f"| {e['system']} | {e['ranks']} | {e['pmewald']} | {e['lammps_acc']:g} | "
                     f"{'x'.join(map(str, e['mesh']))} | {e['pmewald_recip_s'] * 1e3:.2f} | "
                     f"{e['lammps_kspace_s'] * 1e3:.2f} | {e['ratio']:.2f} |")
    L += ["", "### pmewald per phase (ms per call, slowest rank)", "",
          "| system | ranks | variant | setting | " + " | ".join(PME_PHASES) + " | C++ sum | bare C++ call | "
          "compute() mean | Python overhead |", "|" + "---|" * (len(PME_PHASES) + 8)]
    for r in res["rows"]:
        if r["code"].startswith("pmewald") and r.get("phases"):
            over = r["wall_mean_s"] - r["cpp_s"]   # both means over the same calls
            L.append(f"| {r['system']} | {r['ranks']} | {r['code']} | {r['setting']:g} | " +
                     " | ".join(_fmt_ms(r["phases"][k]) for k in PME_PHASES) +
                     f" | {_fmt_ms(r['cpp_s'])} | {_fmt_ms(r['raw_cpp_call_s'])} | {_fmt_ms(r['wall_mean_s'])} | "
                     f"{_fmt_ms(over)} ({100 * over / r['cpp_s']:.0f}%) |")
    return "\n".join(L) + "\n"


def plots(rows, systems, ranks, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    files = []
    for s in systems:
        for P in ranks:
            sub = [r for r in rows if r["system"] == s["name"] and r["ranks"] == P and r.get("error")]
            if not sub:
                continue
            fig, ax = plt.subplots(figsize=(6.4, 4.6))
            for v in sorted({r["code"] for r in sub}):
                pts = sorted((r["error"], r["total_s"] * 1e3) for r in sub if r["code"] == v)
                style = "o-" if v.startswith("pmewald") else "s--"
                ax.loglog([p[0] for p in pts], [p[1] for p in pts], style, label=v)
            for t in TARGETS:
                ax.axvline(t, color="grey", lw=0.5)
            ax.set_xlabel("measured relative RMS force error")
            ax.set_ylabel("time per force evaluation (ms)")
            ax.set_title(f"{s['name']} ({s['n']} atoms), {P} rank(s)")
            ax.grid(True, which="both", lw=0.3)
            ax.legend(fontsize=7)
            fn = out / f"{s['name']}_{P}rank.png"
            fig.tight_layout()
            fig.savefig(fn, dpi=110)
            plt.close(fig)
            files.append(fn.name)
    return files
