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
                   n_rounds=len(rs), cutoff=first.get("chosen_cutoff") or first.get("cutoff"))
        if variant.startswith("lammps"):
            row.update(total_s=_med(rs, "total_s"), real_s=_med(rs, "pair_s"), recip_s=_med(rs, "kspace_s"),
                       neigh_s=_med(rs, "neigh_s"), comm_s=_med(rs, "comm_s"), mesh=first.get("mesh"),
                       alpha=first.get("G"), order=first.get("order"), estimated=first.get("est_rel"),
                       mem_mb=first.get("mem_mb"), mem_kind="LAMMPS 'per MPI rank memory' (max)",
                       neigh_builds=first.get("neigh_builds"))
        elif variant.startswith("openmm"):
            row.update(total_s=_med(rs, "total_s"), real_s=_med(rs, "real_s"), recip_s=_med(rs, "recip_s"),
                       mesh=first["mesh"], alpha=first["alpha_per_A"], order=5, mem_mb=first["maxrss_mb"],
                       mem_kind="peak RSS of the worker")
        elif variant.startswith("gromacs"):
            # force_s / pme_s: the cycle-accounting "Force" (pair kernel) and "PME mesh" rows per frame
            row.update(total_s=_med(rs, "total_s"), real_s=_med(rs, "force_s"), recip_s=_med(rs, "pme_s"),
                       neigh_s=_med(rs, "neigh_s"), mesh=first.get("mesh"), alpha=first.get("alpha_per_A"),
                       order=int(setting.split(":")[2]), loop=first.get("loop"))
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


def at_common_cutoff(code):
    """Whether a variant ran at the common cutoff (``--cutoff``): not an ``@rc`` variant of
    ``--cutoffs``, nor pmewald's ``cutoff="auto"``."""
    return "@rc" not in code and not code.startswith("pmewald-rcauto")


def family(code):
    """The code a variant belongs to, for the best-setting table: ``pmewald`` (every fixed-cutoff
    variant and comm mode, not ``pmewald-ik@lammps``), ``pmewald-rcauto``, ``lammps``, ``openmm``
    or ``gromacs`` (every layout); None for what the table leaves out."""
    base = code.split("@rc")[0]
    if base.startswith("pmewald-rcauto"):
        return "pmewald-rcauto"
    if "@lammps" in code:
        return None
    for name in ("pmewald", "lammps", "openmm", "gromacs"):
        if base.startswith(name):
            return name
    return None


def within_reach(points, target):
    """Whether ``target`` lies within a factor REACH of the errors a code was measured at
    (``points``: (error, time)); beyond that no time is extrapolated for it."""
    errs = [e for e, _ in points if e]
    return bool(errs) and min(errs) / REACH <= target <= max(errs) * REACH


def best_at(curves, target):
    """The fastest of several codes' (or settings') time-versus-error curves at ``target``:
    ``(time, variant, extrapolated)``; a curve's interpolated time counts when ``target`` lies
    within its measured errors, an extrapolated one (at most a factor REACH beyond them) only
    when no curve brackets ``target``. ``(None, None, None)`` when none reaches it."""
    inside, outside = [], []
    for v, pts in curves.items():
        if not within_reach(pts, target):
            continue
        t, ex = interp_time(pts, target)
        if t is not None:
            (outside if ex else inside).append((t, v))
    pick = min(inside or outside, default=None)
    return (pick[0], pick[1], not inside) if pick else (None, None, None)


def _cutoffs_at(rows, target):
    """The cutoff(s) of the two measured points a code's time at ``target`` comes from (the
    bracketing pair, else the two nearest): one value for a fixed cutoff, and what
    ``cutoff="auto"`` chose at those settings for ``pmewald-rcauto``; a float, or a sorted list
    when they differ."""
    pts = sorted((r["error"], r.get("cutoff")) for r in rows if r.get("error"))
    lo = [c for e, c in pts if e <= target][-1:] or [c for _, c in pts[:2]]
    hi = [c for e, c in pts if e >= target][:1] or [c for _, c in pts[-2:]]
    cs = sorted({c for c in lo + hi if isinstance(c, (int, float))})
    return cs[0] if len(cs) == 1 else (cs or None)


def best_ratios(rows, systems, ranks):
    """Each code at its best setting (the fastest over every cutoff, setting, layout and comm
    mode it ran at, at the same measured error), pmewald's best and its ``cutoff="auto"``
    against each peer's best: the ``kind="best"`` entries."""
    out = []
    for s in systems:
        for P in ranks:
            sub = [r for r in rows if r["system"] == s["name"] and r["ranks"] == P and r.get("error")]
            fams = {}
            for r in sub:
                f = family(r["code"])
                if f:
                    fams.setdefault(f, {}).setdefault(r["code"], []).append((r["error"], r["total_s"]))
            for tgt in TARGETS:
                best = {}
                for f, curves in fams.items():
                    t, v, ex = best_at(curves, tgt)
                    if t is not None:
                        best[f] = dict(time_s=t, variant=v, cutoff=_cutoffs_at([r for r in sub if r["code"] == v], tgt),
                                       extrapolated=ex)
                for mine in ("pmewald", "pmewald-rcauto"):
                    if mine not in best:
                        continue
                    entry = dict(kind="best", system=s["name"], ranks=P, target_error=tgt, pmewald=mine,
                                 pmewald_best=best[mine], peers={})
                    for peer in ("lammps", "openmm", "gromacs"):
                        if peer in best:
                            entry["peers"][peer] = dict(best[peer], ratio=best[mine]["time_s"] / best[peer]["time_s"])
                    out.append(entry)
    return out


def ratios(rows, systems, ranks):
    """pmewald's variants against every peer variant at the common cutoff, at the same measured
    error (``TARGETS``), and the reciprocal part at LAMMPS's own parameters."""
    out = []
    for s in systems:
        for P in ranks:
            sub = [r for r in rows if r["system"] == s["name"] and r["ranks"] == P and r.get("error")
                   and at_common_cutoff(r["code"])]
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
                        if errs and not within_reach(curves[peer], tgt):
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
        gmx_loop = ("GROMACS `mdrun -rerun`: a neighbour search on every frame" if a.get("gromacs_loop") == "rerun"
                    else f"GROMACS its own `mdrun` loop of {a.get('gromacs_md_steps')} steps, atoms frozen, the pair "
                         "list kept for 10 steps with a 0.1 nm buffer")
        L += [f"MD-loop mode: {a['md_steps']} steps of a Gaussian random walk ({a['md_sigma']} A per coordinate); "
              "times are the mean per step (pmewald and OpenMM: one object/Context for all steps; LAMMPS: its own "
              f"`run` with `fix nve`, its list rebuilt when needed; {gmx_loop}). pmewald skin: " +
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
        if r["code"].startswith("pmewald-rcauto") and isinstance(r.get("cutoff"), (int, float)):
            mesh += f" rc {r['cutoff']:.3g}"                   # the cutoff it chose
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
    if res.get("best"):
        L += _best_markdown(res)
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


def _best_markdown(res):
    """The best-setting table (:func:`best_ratios`)."""
    a = res["meta"].get("args", {})
    cutoffs = sorted({float(c) for c in [a.get("cutoff", 10.0)] + list(a.get("cutoffs") or [])})
    L = ["### Each code at its best setting, at matched measured error", "",
         "Cutoffs run: " + ", ".join(f"{c:g}" for c in cutoffs) + " A. Each code's time is its fastest at that "
         "error over every cutoff, setting, thread layout and comm mode it ran (the variant and cutoff named); "
         "`pmewald-rcauto` is `cutoff=(\"auto\", lower bound)`, the cutoff chosen by timing at the first calls "
         "(its rc is the one chosen).", "",
         "| system | ranks | error | pmewald | pmewald ms (variant, rc) | vs LAMMPS best | vs OpenMM best | "
         "vs GROMACS best |", "|---|---|---|---|---|---|---|---|"]

    def rc_of(b):
        c = b.get("cutoff")
        if isinstance(c, (int, float)):
            return f"rc {c:.3g}"
        return "rc " + "/".join(f"{v:.3g}" for v in c) if c else ""

    def cell(b):
        if not b:
            return ""
        rc = rc_of(b)
        return (f"{b['ratio']:.2f} ({b['time_s'] * 1e3:.1f} ms, {b['variant']}, {rc}"
                f"{', extrap.' if b['extrapolated'] else ''})")
    for e in res["best"]:
        b = e["pmewald_best"]
        rc = rc_of(b)
        L.append(f"| {e['system']} | {e['ranks']} | {e['target_error']:.0e} | {e['pmewald']} | "
                 f"{b['time_s'] * 1e3:.1f} ({b['variant']}, {rc}{', extrap.' if b['extrapolated'] else ''}) | "
                 f"{cell(e['peers'].get('lammps'))} | {cell(e['peers'].get('openmm'))} | "
                 f"{cell(e['peers'].get('gromacs'))} |")
    L += ["", "Ratio = pmewald time / the peer's best time at the same measured error.", ""]
    return L


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
