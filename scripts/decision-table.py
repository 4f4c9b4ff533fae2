#!/usr/bin/env python3
"""Writes a decision table (config/decision_table.hpp) from the pooled CSV of
scripts/bench-mpi.sh: for each measured communicator shape, collective and
size, copse serves the call where it was at least as fast as the MPI library
by median (tuned/copse >= --threshold, 0.95 by default: within the noise of
a shared machine copse counts as no slower), and the library serves it elsewhere.

Shapes: a one-node configuration npP covers communicators of P ranks up to
the next measured P (the smallest from 2 ranks, the largest without bound); a
configuration on virtual nodes (npP-vnK) covers every communicator of two or
more nodes likewise by ranks. Sizes: a measured size decides the band up to
the geometric mean with the next measured size. Adjacent bands that decide
alike are one row. Barrier has no bytes: its rows decide by the median of its
ratios over sizes. MPI_Reduce_scatter (unequal counts) is not measured by the
benchmark; its rows repeat reduce_scatter_block's, whose bytes measure
(the whole input per process) is the same. A call no row matches (a
collective or shape not measured) goes to the library: default = "mpi"; a
collective measured at no shape gets a row saying so, which defers it.

usage: decision-table.py CSV [--threshold 0.95] [--out FILE] [--command TEXT]
"""
import argparse
import csv
import math
import re
import statistics
import sys
from collections import defaultdict

COLLECTIVES = ["allreduce", "reduce", "bcast", "barrier", "allgather", "reduce_scatter_block", "scatter", "gather",
               "alltoall"]


def human(n):
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


def shapes(configs):
    """config name -> (min_ranks, max_ranks or None, min_nodes, max_nodes or None)."""
    one_node, multi = [], []
    for name in configs:
        m = re.fullmatch(r"np(\d+)(?:-vn(\d+))?", name)
        if not m:
            sys.exit(f"decision-table.py: cannot read the configuration name '{name}' (npP or npP-vnK)")
        (multi if m.group(2) else one_node).append((int(m.group(1)), name))
    out = {}
    for group, nodes in ((one_node, (1, 1)), (multi, (2, None))):
        group.sort()
        for i, (p, name) in enumerate(group):
            lo = 2 if i == 0 else p
            hi = group[i + 1][0] - 1 if i + 1 < len(group) else None
            out[name] = (lo, hi, *nodes)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--threshold", type=float, default=0.95)
    ap.add_argument("--out", default="-")
    ap.add_argument("--command", default="")
    a = ap.parse_args()

    ratio = defaultdict(dict)  # (config, collective) -> {bytes: tuned/copse by median}
    with open(a.csv) as f:
        for row in csv.DictReader(f):
            if row["label"] != "copse" or row["root"] not in ("", "0"):
                continue
            if row["verified"] != "true":
                sys.exit(f"decision-table.py: {row['config']} {row['collective']} {row['bytes']} B was not verified")
            over = next((v for k, v in row.items() if k.endswith("_over_median")), "")
            if over:
                ratio[(row["config"], row["collective"])][int(row["bytes"])] = float(over)
    if not ratio:
        sys.exit(f"decision-table.py: no copse rows with ratios in {a.csv}")
    configs = sorted({c for c, _ in ratio})
    covers = shapes(configs)

    lines = ["# copse's decision table (config/decision_table.hpp), measured by scripts/tune-table.sh",
             f"# {a.command}" if a.command else "# (from " + a.csv + ")",
             f"# copse serves a call where tuned/copse by median >= {a.threshold} at the nearest measured",
             "# shape and size; the MPI library serves the rest. Each row's note gives the ratios it stands for.",
             'default = "mpi"', ""]
    for config in configs:
        lo_r, hi_r, lo_n, hi_n = covers[config]
        for collective in COLLECTIVES:
            measured = ratio.get((config, collective))
            if not measured:
                continue
            sizes = sorted(measured)
            if collective == "barrier":
                bands = [(0, None, statistics.median(measured.values()), [statistics.median(measured.values())])]
            else:
                bands = []
                for i, s in enumerate(sizes):
                    lo = 0 if i == 0 else int(math.isqrt(sizes[i - 1] * s)) + 1
                    hi = int(math.isqrt(s * sizes[i + 1])) if i + 1 < len(sizes) else None
                    bands.append((lo, hi, measured[s], [measured[s]]))
            merged = []
            for lo, hi, r, rs in bands:
                use = "copse" if r >= a.threshold else "mpi"
                if merged and merged[-1][3] == use:
                    merged[-1] = (merged[-1][0], hi, merged[-1][2] + rs, use)
                else:
                    merged.append((lo, hi, list(rs), use))
            for name in ([collective, "reduce_scatter"] if collective == "reduce_scatter_block" else [collective]):
                for lo, hi, rs, use in merged:
                    lines.append("[[row]]")
                    lines.append(f'collective = "{name}"')
                    if lo:
                        lines.append(f'min_bytes = "{human(lo)}"' if lo % 1024 == 0 else f"min_bytes = {lo}")
                    if hi is not None:
                        lines.append(f'max_bytes = "{human(hi)}"' if hi % 1024 == 0 else f"max_bytes = {hi}")
                    lines.append(f"min_ranks = {lo_r}")
                    if hi_r is not None:
                        lines.append(f"max_ranks = {hi_r}")
                    lines.append(f"min_nodes = {lo_n}")
                    if hi_n is not None:
                        lines.append(f"max_nodes = {hi_n}")
                    lines.append(f'use = "{use}"')
                    mirror = " (reduce_scatter_block's)" if name != collective else ""
                    shown = ", ".join(f"{r:.2f}" for r in rs)
                    lines.append(f'note = "{config}: tuned/copse {shown} by median{mirror}"')
                    lines.append("")
    measured_any = {c for _, c in ratio}
    for collective in COLLECTIVES:
        if collective not in measured_any:
            lines += ["[[row]]", f'collective = "{collective}"', 'use = "mpi"',
                      'note = "not measured: the MPI library serves it (COPSE_MPI_TABLE=none: copse)"', ""]
    text = "\n".join(lines)
    if a.out == "-":
        sys.stdout.write(text)
    else:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
