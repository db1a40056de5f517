#!/usr/bin/env python3
"""Median table of repeated nccl-tests runs, for bench/run_peers.sh.

Reads a manifest (TSV: label, ranks, repetition, part, JSON path) of --json reports written by
hoop's bench/common report (peer_mpi_allreduce, peer_gloo_allreduce, hoop-bench) or by
tcp_bound, and prints one Markdown table per rank count: per size, the median time and busbw of
every peer over its repetitions, and with --ratio A/B the ratio of A's median time to B's.
Standard library only.
"""

import argparse
import collections
import json
import statistics
import sys


def human_bytes(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def read_manifest(path):
    runs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            label, ranks, rep, _part, json_path = line.split("\t")
            runs.append((label, int(ranks), int(rep), json_path))
    return runs


def samples(report, variant):
    """Yields (size, time_us, busbw_gbps, wrong) for every row of one JSON report."""
    if report.get("program") == "tcp_bound":
        for row in report["rows"]:
            bidir = row["bidirectional"]
            yield row["size"], bidir["time_us"], bidir["gbps_per_direction"], 0
        return
    for row in report["rows"]:
        m = row[variant]
        if m is None:  # a variant the collective does not have (sendrecv in place)
            continue
        yield row["size"], m["time_us"], m["busbw_gbps"], m["wrong"] or 0


def median_time(reps):
    times = [t for t, _ in reps.values()]
    return statistics.median(times) if times else None


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

    # (ranks, label) -> size -> rep -> (time, busbw); also wrong counts and descriptions.
    data = collections.defaultdict(lambda: collections.defaultdict(dict))
    wrong = collections.Counter()
    described = {}
    labels = []
    collectives = []
    for label, ranks, rep, path in read_manifest(args.manifest):
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
        if label not in labels:
            labels.append(label)
        collective = report.get("collective")
        if collective and collective not in collectives:
            collectives.append(collective)
        described.setdefault(label, report.get("implementation", "loopback TCP, 2 processes"))
        for size, time_us, busbw, bad in samples(report, args.variant):
            data[(ranks, label)][size][rep] = (time_us, busbw)
            wrong[(ranks, label)] += bad

    variant = args.variant.replace("_", "-")
    for ranks in sorted({r for r, _ in data}):
        present = [label for label in labels if (ranks, label) in data]
        sizes = sorted({s for label in present for s in data[(ranks, label)]})
        what = ", ".join(collectives + ["f32 (sum where it reduces)"])
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
                reps = data[(ranks, label)].get(size, {})
                time = median_time(reps)
                bws = [b for _, b in reps.values()]
                cells.append(f"{time:.1f}" if time is not None else "-")
                cells.append(f"{statistics.median(bws):.3f}" if bws else "-")
            for a, b in shown:
                ta = median_time(data[(ranks, a)].get(size, {}))
                tb = median_time(data[(ranks, b)].get(size, {}))
                cells.append(f"{ta / tb:.2f}" if ta is not None and tb else "-")
            print("| " + " | ".join(cells) + " |")
        print()
        for label in present:
            reps = {rep for by_rep in data[(ranks, label)].values() for rep in by_rep}
            status = "" if wrong[(ranks, label)] == 0 else f", {wrong[(ranks, label)]} WRONG"
            print(f"- {label}: {described[label]}; {len(reps)} repetitions{status}")

    bad = {key: count for key, count in wrong.items() if count}
    if bad:
        print(f"\nsummarize_peers.py: wrong results in {sorted(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
