"""The pair kernels alone against this core's arithmetic limit: ``python benchmarks/pair_kernels.py``.

On synthetic partners, in one process (``pmewald._core._testing.realspace``):

- the atom block kernels (``pair_layout="atoms"``: one atom against 256 gathered partners),
  in ns per pair;
- the cluster kernels (``pair_layout="clusters"``: one i-cluster against 64 full 4 x 4
  blocks), in ns per lane (the mixed one twice: at alpha rc 7 on its erfcx and exp path, and at
  alpha rc 4.9 on its rational Ewald corrections, "mixed/rational"), which is per pair when
  every lane is a pair. In a real list, the lanes per listed pair multiply it (2.23 on 30k water at cutoff 9 + skin 1 Å,
  docs/realspace.md);
- this core's measured FMA throughput on the kernels' widest float vectors, to put the ns in
  cycles of arithmetic. GROMACS's published figure for its Ewald kernel is 3.8 cycles per
  pair (single precision, AVX2+FMA; Páll & Hess 2013).

Each kernel is timed ``--repeats`` times, alternating, and the best time is kept. Not a test:
the numbers depend on the machine and its load (say ``uptime`` next to them).
"""

from __future__ import annotations

import argparse

from pmewald import _core


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000, help="rows of 64 blocks per timing")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    rs = _core._testing.realspace
    best = {}
    rate, lanes = 0.0, 0
    for _ in range(args.repeats):
        r, lanes = rs.fma_rate(0.3)
        rate = max(rate, r)
        for precision in ("double", "mixed"):
            atom, cluster, short = rs.kernel_timings(precision, args.reps)
            rows = [(("atoms", precision), atom), (("clusters", precision), cluster)]
            if precision == "mixed":  # alpha rc <= 5: the rational Ewald corrections, not erfcx and exp
                rows.append((("clusters", "mixed/rational"), short))
            for k, v in rows:
                best[k] = min(best.get(k, v), v)
    print(f"instruction set: {rs.pair_kernel_isa()}")
    print(f"FMA throughput: {rate / 1e9:.2f} G {lanes}-lane float FMAs/s "
          f"({2 * lanes * rate / 1e9:.1f} GFLOP/s single precision)")
    print(f"{'layout':>9} {'precision':>14} {'ns':>7} {'per':>5} {'FMA slots':>10}")
    for (layout, precision), ns in sorted(best.items()):
        per = "pair" if layout == "atoms" else "lane"
        print(f"{layout:>9} {precision:>14} {ns:>7.2f} {per:>5} {ns * 1e-9 * rate:>10.2f}")


if __name__ == "__main__":
    main()
