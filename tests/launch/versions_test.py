#!/usr/bin/python3
"""Every executable in build/bin answers --version with "NAME (hoop) VERSION", one VERSION for
all of them (the library's, hoop::version()), and hooprun -v prints that VERSION alone, as
horovodrun -v does.

Usage: versions_test.py BIN_DIR
"""
import os
import re
import subprocess
import sys


def main():
    bin_dir = sys.argv[1]
    seen, failures = {}, []
    for name in sorted(os.listdir(bin_dir)):
        path = os.path.join(bin_dir, name)
        if not os.access(path, os.X_OK) or os.path.isdir(path):
            continue
        r = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
        m = re.fullmatch(rf"{re.escape(name)} \(hoop\) (\S+)\n", r.stdout)
        if r.returncode != 0 or not m:
            failures.append(f"{name} --version: exit {r.returncode}, printed {r.stdout!r} "
                            f"{r.stderr[-300:]!r}")
            continue
        seen[name] = m.group(1)
    if len(set(seen.values())) > 1:
        failures.append(f"the executables disagree on the version: {seen}")
    short = subprocess.run([os.path.join(bin_dir, "hooprun"), "-v"], capture_output=True,
                           text=True, timeout=30)
    if seen.get("hooprun") and short.stdout != f"{seen['hooprun']}\n":
        failures.append(f"hooprun -v printed {short.stdout!r}")
    for f in failures:
        print("FAIL:", f)
    print(f"versions: {len(seen)} executables, {sorted(set(seen.values()))}",
          "FAILED" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
