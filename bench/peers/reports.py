"""Reading nccl-tests-style --json reports, shared by summarize_peers.py and bench/plot.py.

A report comes from hoop's bench/common report (hoop-bench, peer_mpi_allreduce,
peer_gloo_allreduce) or from tcp_bound. A run_peers.sh manifest (TSV: label, ranks, repetition,
part, JSON path) names many of them; repetitions of one label are summarized by their median.
Standard library only.
"""

import collections
import json
import statistics
import sys


class ReportError(Exception):
    """A report or manifest that cannot be read; the message names the file and the cause."""


def load_report(path):
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except OSError as e:
        raise ReportError(f"cannot read {path}: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise ReportError(f"{path} is not JSON ({e.msg} at line {e.lineno})") from e
    if not isinstance(report, dict) or not isinstance(report.get("rows"), list):
        raise ReportError(f"{path} is not a benchmark report (it has no \"rows\" list)")
    return report


def read_manifest(path):
    """Returns [(label, ranks, repetition, json_path)] from a run_peers.sh manifest."""
    runs = []
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ReportError(f"cannot read {path}: {e.strerror}") from e
    for number, line in enumerate(lines, 1):
        if not line:
            continue
        fields = line.split("\t")
        if len(fields) != 5:
            raise ReportError(
                f"{path}:{number}: expected 5 tab-separated fields, got {len(fields)}")
        label, ranks, rep, _part, json_path = fields
        try:
            runs.append((label, int(ranks), int(rep), json_path))
        except ValueError as e:
            raise ReportError(f"{path}:{number}: ranks and repetition must be numbers") from e
    return runs


def samples(report, variant, dtype=None, op=None):
    """Yields (size, time_us, busbw_gbps, wrong) for every row of one report.

    dtype and op, where given, keep the rows of that datatype and reduction (rows of a
    collective that does not reduce have op "none" and stay).
    """
    try:
        if report.get("program") == "tcp_bound":
            for row in report["rows"]:
                bidir = row["bidirectional"]
                yield row["size"], bidir["time_us"], bidir["gbps_per_direction"], 0
            return
        for row in report["rows"]:
            if dtype is not None and row.get("type") != dtype:
                continue
            if op is not None and row.get("redop") not in (op, "none"):
                continue
            m = row[variant]
            if m is None:  # a variant the collective does not have (sendrecv in place)
                continue
            yield row["size"], m["time_us"], m["busbw_gbps"], m["wrong"] or 0
    except (KeyError, TypeError) as e:
        program = report.get("program", "benchmark")
        raise ReportError(f"a row of a {program} report lacks {e}") from e


class Runs:
    """Measurements of labelled runs: (ranks, label) -> size -> repetition -> (time, busbw)."""

    def __init__(self):
        self.data = collections.defaultdict(lambda: collections.defaultdict(dict))
        self.wrong = collections.Counter()
        self.described = {}
        self.labels = []
        self.collectives = []

    def add(self, label, ranks, rep, report, variant, dtype=None, op=None):
        if label not in self.labels:
            self.labels.append(label)
        collective = report.get("collective")
        if collective and collective not in self.collectives:
            self.collectives.append(collective)
        self.described.setdefault(label, report.get("implementation", "loopback TCP, 2 processes"))
        for size, time_us, busbw, bad in samples(report, variant, dtype, op):
            self.data[(ranks, label)][size][rep] = (time_us, busbw)
            self.wrong[(ranks, label)] += bad

    def rank_counts(self):
        return sorted({r for r, _ in self.data})

    def present(self, ranks):
        return [label for label in self.labels if (ranks, label) in self.data]

    def repetitions(self, ranks, label):
        return {rep for by_rep in self.data[(ranks, label)].values() for rep in by_rep}

    def medians(self, ranks, label):
        """Returns [(size, median time us, median busbw GB/s)] in size order."""
        out = []
        for size, reps in sorted(self.data[(ranks, label)].items()):
            if reps:
                out.append((size, statistics.median(t for t, _ in reps.values()),
                            statistics.median(b for _, b in reps.values())))
        return out

    def wrong_runs(self):
        """The (ranks, label) pairs whose reports counted wrong results, sorted."""
        return sorted(key for key, count in self.wrong.items() if count)

    def exit_status(self, program, note=""):
        """1 (after saying which runs) when any report counted wrong results, else 0."""
        if not self.wrong_runs():
            return 0
        print(f"{program}: wrong results in {self.wrong_runs()}{note}", file=sys.stderr)
        return 1

    def median_time(self, ranks, label, size):
        reps = self.data[(ranks, label)].get(size, {})
        return statistics.median(t for t, _ in reps.values()) if reps else None


def runs_from_manifest(path, variant, dtype=None, op=None):
    runs = Runs()
    for label, ranks, rep, json_path in read_manifest(path):
        runs.add(label, ranks, rep, load_report(json_path), variant, dtype, op)
    return runs
