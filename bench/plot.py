#!/usr/bin/python3
"""Plots busbw and time against message size from hoop-bench --json reports.

    bench/plot.py -o FIGURE.png INPUT [INPUT ...]

An INPUT is one of
  - a --json report of hoop-bench, peer_mpi_allreduce, peer_gloo_allreduce or tcp_bound,
    labelled by its file name, or LABEL=REPORT.json to name the line (a label given to several
    reports is one line: the median of them at every size);
  - the manifest.tsv of bench/run_peers.sh (or bench/transports.sh), or the --out folder that
    holds it: one line per peer, the median of its repetitions.
With several rank counts in the inputs, each (label, ranks) is its own line unless --ranks picks
one. The figure has two panels sharing the log-scaled size axis: bus bandwidth (GB/s, as
nccl-tests defines it) and time (us, log-scaled). Debian's python3-matplotlib draws it;
scripts/install-deps installs it.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
from reports import ReportError, Runs, load_report, read_manifest  # noqa: E402


def size_label(n):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g}{unit}"
    return f"{n:g}"


def gather(inputs, variant, dtype, op):
    """Reads every INPUT into one Runs; a report's repetition number counts per label."""
    runs = Runs()
    seen = {}
    for item in inputs:
        path = item
        label = None
        if "=" in item and not os.path.exists(item):
            label, path = item.split("=", 1)
        if os.path.isdir(path):
            path = os.path.join(path, "manifest.tsv")
        if path.endswith(".tsv"):
            if label is not None:
                raise ReportError(f"{item}: a manifest's lines are labelled by run_peers.sh, "
                                  "not by LABEL=")
            for peer, ranks, rep, json_path in read_manifest(path):
                runs.add(peer, ranks, rep, load_report(json_path), variant, dtype, op)
            continue
        report = load_report(path)
        if label is None:
            label = os.path.splitext(os.path.basename(path))[0]
        ranks = int(report.get("nranks", 0))
        seen[(label, ranks)] = seen.get((label, ranks), 0) + 1
        runs.add(label, ranks, seen[(label, ranks)], report, variant, dtype, op)
    return runs


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+", metavar="INPUT")
    parser.add_argument("-o", "--output", required=True,
                        help="the figure to write (.png, .svg, .pdf)")
    parser.add_argument("--title", help="the figure's title (default: collective and ranks)")
    parser.add_argument("--ranks", type=int, help="plot only runs with this many ranks")
    parser.add_argument("--variant", choices=["out_of_place", "in_place"], default="out_of_place")
    parser.add_argument("-d", "--dtype", default="f32", help="datatype rows to plot (default f32)")
    parser.add_argument("--op", default="sum",
                        help="reduction rows to plot (default sum; ignored by collectives "
                             "that do not reduce)")
    args = parser.parse_args()

    try:
        runs = gather(args.inputs, args.variant, args.dtype, args.op)
    except ReportError as e:
        print(f"plot.py: {e}", file=sys.stderr)
        return 2
    series = []
    counts = [r for r in runs.rank_counts() if args.ranks is None or r == args.ranks]
    for ranks in counts:
        for label in runs.present(ranks):
            points = runs.medians(ranks, label)
            if not points:
                continue
            name = "TCP bound" if label == "tcp_bound" else label
            if len(counts) > 1:
                name += f", {ranks} ranks"
            series.append((name, ranks, label, points))
    if not series:
        print(f"plot.py: no {args.dtype} rows to plot in {' '.join(args.inputs)}"
              + (f" with {args.ranks} ranks" if args.ranks else ""), file=sys.stderr)
        return 2

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        print("plot.py: needs matplotlib for this interpreter (Debian: apt-get install "
              "python3-matplotlib; scripts/install-deps installs it)", file=sys.stderr)
        return 2

    figure, (bw_axis, time_axis) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, _ranks, _label, points in series:
        sizes = [p[0] for p in points]
        style = {"linestyle": "--", "color": "grey"} if name.startswith("TCP bound") else {}
        bw_axis.plot(sizes, [p[2] for p in points], marker="o", markersize=3, label=name, **style)
        time_axis.plot(sizes, [p[1] for p in points], marker="o", markersize=3, label=name, **style)
    for axis in (bw_axis, time_axis):
        axis.set_xscale("log", base=2)
        axis.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: size_label(v)))
        axis.set_xlabel("message size (bytes)")
        axis.grid(True, which="major", alpha=0.3)
    bw_axis.set_ylabel("bus bandwidth (GB/s)")
    time_axis.set_ylabel("time (us)")
    time_axis.set_yscale("log")
    bw_axis.legend(fontsize="small")
    what = ", ".join(runs.collectives) or "benchmark"
    ranks_text = ", ".join(str(r) for r in counts)
    reduces = any(c in ("allreduce", "reduce", "reduce_scatter") for c in runs.collectives)
    data_type = f"{args.dtype} {args.op}" if reduces else args.dtype
    figure.suptitle(args.title or f"{what}, {ranks_text} ranks, {data_type}, "
                    f"{args.variant.replace('_', '-')} (median of repetitions)")
    figure.tight_layout()
    try:
        figure.savefig(args.output, dpi=100)
    except (OSError, ValueError) as e:
        print(f"plot.py: cannot write {args.output}: {e}", file=sys.stderr)
        return 2

    for name, ranks, label, points in series:
        reps = len(runs.repetitions(ranks, label))
        print(f"plot.py: {name}: {len(points)} sizes, {size_label(points[0][0])}.."
              f"{size_label(points[-1][0])}, {reps} repetitions")
    print(f"plot.py: wrote {args.output}")
    return runs.exit_status("plot.py", " (plotted anyway)")


if __name__ == "__main__":
    sys.exit(main())
