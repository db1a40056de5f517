#!/usr/bin/python3
"""The seed study's table, figures and planner check from bench/study.sh's runs.

    bench/study_report.py [--plan build/bin/hoop-plan] OUT

Reads OUT/runs.tsv (one line per run: rate, rep, batch, workers, strategy, samples/s, test
accuracy %, step ms, compute ms, waiting ms, mean staleness) and OUT/bed.tsv (each bed's
measured message latency), and writes into OUT:
  report.md       the table (medians over repetitions): throughput_n, speedup_n = throughput_n
                  / throughput_1 (one worker with allreduce, which communicates nothing, at the
                  same batch and link), efficiency = speedup_n / workers, test accuracy; then
                  hoop-plan's step time for every run against the measured one, and hoop-plan's
                  predictions for the seed's setting (25 single-core workers, 1 Gbit/s);
  throughput.png  samples/s against workers, one line per strategy and batch, a panel per link;
  speedup.png     speedup_n against workers, the same way.
hoop-plan gets each run's own measured compute per step, so the check is of its communication
model. Debian's python3-matplotlib draws the figures.
"""

import argparse
import csv
import io
import os
import statistics
import subprocess
import sys

STRATEGIES = ["allreduce", "ps", "ps-async", "kvstore"]
# The seed's reported scaling efficiency at batch 64 and 25 workers (Jäger and Igel, 2018).
SEED = {"ps": "about 32 % (TensorFlow's central PS)", "kvstore": "about 69 % (MXNet's KVStore)"}


def gbps(rate):
    for unit, scale in (("gbit", 1.0), ("mbit", 1e-3), ("kbit", 1e-6)):
        if rate.endswith(unit):
            return float(rate[: -len(unit)]) * scale
    raise ValueError(f"rate {rate!r}: expected e.g. 1gbit")


def load(out):
    runs = {}
    with open(os.path.join(out, "runs.tsv")) as f:
        for line in f:
            rate, _, batch, n, strategy, tput, acc, step, compute, waiting, stale = line.split("\t")
            runs.setdefault((rate, int(batch), int(n), strategy), []).append(
                dict(tput=float(tput), acc=float(acc), step=float(step), compute=float(compute),
                     waiting=float(waiting), stale=None if stale.strip() == "-" else float(stale)))
    latency = {}
    with open(os.path.join(out, "bed.tsv")) as f:
        for line in f:
            rate, _, value = line.split()
            latency.setdefault(rate, []).append(float(value))
    return runs, {r: statistics.median(v) for r, v in latency.items()}


def median(rows, key):
    values = [r[key] for r in rows if r[key] is not None]
    return statistics.median(values) if values else None


def plan(binary, args):
    text = subprocess.run([binary, "--model", "lenet5", "--csv"] + args, check=True,
                          capture_output=True, text=True).stdout
    return list(csv.DictReader(io.StringIO(text)))


def planned_row(rows, strategy):
    name = "allreduce auto" if strategy == "allreduce" else strategy
    return next(r for r in rows if r["strategy"] == name)


def figures(out, rates, table):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    colors = dict(zip(STRATEGIES, ["tab:blue", "tab:red", "tab:orange", "tab:green"]))
    for metric, label, name in (("tput", "samples/s (all workers)", "throughput.png"),
                                ("speedup", "speedup_n over one worker", "speedup.png")):
        fig, axes = plt.subplots(1, len(rates), figsize=(6 * len(rates), 4.5), squeeze=False)
        for ax, rate in zip(axes[0], rates):
            for (r, batch, strategy), points in sorted(table.items()):
                if r != rate:
                    continue
                xs = sorted(points)
                ax.plot(xs, [points[x][metric] for x in xs], marker="o", color=colors[strategy],
                        linestyle="-" if batch == min(b for _, b, _ in table) else "--",
                        label=f"{strategy}, batch {batch}")
            if metric == "speedup":
                top = max(x for pts in table.values() for x in pts)
                ax.plot([1, top], [1, top], color="grey", linewidth=0.8, label="ideal")
            ax.set_title(f"LeNet-5, Fashion-MNIST, links {rate}")
            ax.set_xticks(sorted({x for pts in table.values() for x in pts}))
            ax.set_xlabel("workers")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
        axes[0][-1].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out, name), dpi=110)
        plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                   "bin", "hoop-plan"))
    ap.add_argument("out")
    a = ap.parse_args()
    runs, latency = load(a.out)
    rates = sorted({k[0] for k in runs}, key=gbps)
    lines = ["| link | batch | strategy | workers | throughput_n | speedup_n | efficiency | "
             "test accuracy | step ms | staleness | runs |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    table = {}
    checks = ["| link | batch | strategy | workers | measured step ms | of which compute | "
              "hoop-plan step ms | plan / measured |",
              "|---|---:|---|---:|---:|---:|---:|---:|"]
    for rate in rates:
        for batch in sorted({k[1] for k in runs if k[0] == rate}):
            base = runs.get((rate, batch, 1, "allreduce"))
            tput_1 = median(base, "tput") if base else None
            for strategy in STRATEGIES:
                for n in sorted({k[2] for k in runs if k[:2] == (rate, batch)}):
                    rows = runs.get((rate, batch, n, strategy))
                    if not rows:
                        continue
                    tput = median(rows, "tput")
                    speedup = tput / tput_1 if tput_1 else float("nan")
                    stale = median(rows, "stale")
                    table.setdefault((rate, batch, strategy), {})[n] = dict(tput=tput,
                                                                            speedup=speedup)
                    lines.append(
                        f"| {rate} | {batch} | {strategy} | {n} | {tput:.0f} | {speedup:.2f} | "
                        f"{100 * speedup / n:.0f} % | {median(rows, 'acc'):.2f} % | "
                        f"{median(rows, 'step'):.2f} | {'-' if stale is None else f'{stale:.2f}'}"
                        f" | {len(rows)} |")
                    step, compute = median(rows, "step"), median(rows, "compute")
                    predicted = float(planned_row(plan(a.plan, [
                        "--batch-size", str(batch), "--workers", str(n), "--compute-ms",
                        f"{compute}", "--update-ms", "0", "--latency-us", f"{latency[rate]}",
                        "--bandwidth-gbps", f"{gbps(rate)}"]), strategy)["step_ms"])
                    ratio = predicted / step
                    flag = "" if abs(ratio - 1) <= 0.2 else " **off by more than 20 %**"
                    checks.append(f"| {rate} | {batch} | {strategy} | {n} | {step:.2f} | "
                                  f"{compute:.2f} | {predicted:.2f} | {ratio:.2f}{flag} |")
    seed = ["| batch | strategy | hoop-plan step ms | samples/s | efficiency | the seed reports |",
            "|---:|---|---:|---:|---:|---|"]
    slow = min(rates, key=gbps)
    seed_rows = []
    for batch in sorted({k[1] for k in runs if k[0] == slow}):
        alone = runs.get((slow, batch, 1, "allreduce"))
        if alone:  # its compute includes the update: it runs where the gradients are
            seed_rows += plan(a.plan, ["--batch-size", str(batch), "--workers", "25",
                                       "--compute-ms", f"{median(alone, 'compute')}",
                                       "--update-ms", "0", "--latency-us", f"{latency[slow]}",
                                       "--bandwidth-gbps", f"{gbps(slow)}"])
    for row in seed_rows:
        if row["strategy"].startswith("allreduce") and row["strategy"] not in ("allreduce auto",
                                                                                "allreduce ring"):
            continue
        reported = SEED.get(row["strategy"], "") if row["batch"] == "64" else ""
        seed.append(f"| {row['batch']} | {row['strategy']} | {float(row['step_ms']):.2f} | "
                    f"{float(row['samples_per_s']):.0f} | {100 * float(row['efficiency']):.0f} % "
                    f"| {reported} |")
    bed = ", ".join(f"{r}: {latency[r]:.1f} us" for r in rates)
    report = ["## Measured", "", *lines, "", "## hoop-plan against the measured step times", "",
              f"Bed latency (hoop-bench 8-byte sendrecv across two hosts): {bed}.", "", *checks,
              "", f"## hoop-plan for the seed's setting: 25 single-core workers, {slow} links", "",
              "(compute per step: one worker's, measured in the study above at the same batch)",
              "", *seed,
              ""]
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write("\n".join(report))
    figures(a.out, rates, table)
    print("\n".join(report))


if __name__ == "__main__":
    sys.exit(main())
