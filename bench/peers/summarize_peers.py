#!/usr/bin/env python3
"""Median table of repeated nccl-tests runs, for bench/run_peers.sh.

Reads a manifest (TSV: label, ranks, repetition, part, JSON path) of --json reports written by
hoop's bench/common report (peer_mpi_allreduce, peer_gloo_allreduce, hoop-bench) or by
tcp_bound, and prints one Markdown table per rank count: per size, the median time and busbw of
every peer over its repetitions, and with --ratio A/B the ratio of A's median time to B's.
Standard library only.
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reports import ReportError, runs_from_manifest  # noqa: E402


def human_bytes(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("manifest")
    parser.add_argument("--variant", choices=["out_of_place", "in_place"], default="out_of_place")
    parser.add_argument("--ratio", action="append", default=[], metavar="A/B",
                        help="add a column: label A's median time / label B's (repeatable)")
    args = parser.parse_args()
    ratios = [tuple(r.split("/", 1)) for r in args.ratio]
    if any(len(r) != 2 for r in ratios):
        parser.error("--ratio takes LABEL/LABEL")

    try:
        runs = runs_from_manifest(args.manifest, args.variant)
    except ReportError as e:
        print(f"summarize_peers.py: {e}", file=sys.stderr)
        return 2

    variant = args.variant.replace("_", "-")
    for ranks in runs.rank_counts():
        present = runs.present(ranks)
        sizes = sorted({s for label in present for s in runs.data[(ranks, label)]})
        what = ", ".join(runs.collectives + ["f32 (sum where it reduces)"])
        print(f"\n### {ranks} ranks, {what}, {variant}: median time (us) and busbw (GB/s)\n")
        head = ["size"]
        for label in present:
            name = "TCP bound" if label == "tcp_bound" else label
            head += [f"{name} us", f"{name} GB/s"]
        shown = [(a, b) for a, b in ratios if a in present and b in present]
        head += [f"{a}/{b}" for a, b in shown]
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join(["---:"] * len(head)) + "|")
        for size in sizes:
            cells = [human_bytes(size)]
            for label in present:
                reps = runs.data[(ranks, label)].get(size, {})
                time = runs.median_time(ranks, label, size)
                bws = [b for _, b in reps.values()]
                cells.append(f"{time:.1f}" if time is not None else "-")
                cells.append(f"{statistics.median(bws):.3f}" if bws else "-")
            for a, b in shown:
                ta = runs.median_time(ranks, a, size)
                tb = runs.median_time(ranks, b, size)
                cells.append(f"{ta / tb:.2f}" if ta is not None and tb else "-")
            print("| " + " | ".join(cells) + " |")
        print()
        for label in present:
            reps = runs.repetitions(ranks, label)
            count = runs.wrong[(ranks, label)]
            status = "" if count == 0 else f", {count} WRONG"
            print(f"- {label}: {runs.described[label]}; {len(reps)} repetitions{status}")

    return runs.exit_status("summarize_peers.py")


if __name__ == "__main__":
    sys.exit(main())
