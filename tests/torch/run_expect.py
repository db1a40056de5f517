"""Runs a command (typically hooprun ...) and checks its exit status and output, for tests
whose success is a particular failure, such as a rank being killed.

    run_expect.py [--rc N | --rc nonzero] [--expect TEXT]... [--count TEXT:N]...
                  [--reject TEXT]... [--reject-errors] [--timeout S] [--repeat N]
                  -- command args...

--expect: TEXT appears in stdout+stderr; --count: it appears on exactly N lines; --reject:
it appears nowhere; --reject-errors: no rank logs an error line ("[hoop R] E ..."; CMake cannot
pass the bracket to --reject); --repeat: the command runs N times, each run checked. Exits 0 when every
condition holds in every run, else 1 after printing the failing run's output.
"""

import argparse
import re
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rc", default="0", help="expected exit status, or 'nonzero'")
    parser.add_argument("--expect", action="append", default=[])
    parser.add_argument("--count", action="append", default=[], help="TEXT:N")
    parser.add_argument("--reject", action="append", default=[])
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--reject-errors", action="store_true")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    for run in range(args.repeat):
        status = check_run(command, args)
        if status != 0:
            if args.repeat > 1:
                print(f"run_expect: run {run + 1} of {args.repeat} failed")
            return status
    return 0


def check_run(command, args):
    """Runs `command` once and checks it; 0 when every condition holds."""
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=args.timeout)
        output, rc = done.stdout.decode(errors="replace"), done.returncode
    except subprocess.TimeoutExpired as e:
        output, rc = (e.stdout or b"").decode(errors="replace"), None

    failures = []
    if rc is None:
        failures.append(f"timed out after {args.timeout} s")
    elif args.rc == "nonzero":
        if rc == 0:
            failures.append("exit status 0, expected nonzero")
    elif rc != int(args.rc):
        failures.append(f"exit status {rc}, expected {args.rc}")
    lines = output.splitlines()
    for text in args.expect:
        if text not in output:
            failures.append(f"missing {text!r}")
    for spec in args.count:
        text, _, n = spec.rpartition(":")
        found = sum(1 for line in lines if text in line)
        if found != int(n):
            failures.append(f"{text!r} on {found} lines, expected {n}")
    for text in args.reject:
        if text in output:
            failures.append(f"unexpected {text!r}")
    if args.reject_errors:
        errors = [line for line in lines if re.search(r"\[hoop \d+\] E ", line)]
        if errors:
            failures.append(f"error lines: {errors}")

    if failures:
        sys.stdout.write(output)
        print("run_expect: FAILED: " + "; ".join(failures))
        return 1
    print(f"run_expect: OK (exit status {rc})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
