#!/usr/bin/python3
"""The image's build context (the repository root) leaves out what git ignores.

examples/kubernetes/Dockerfile copies the repository root into the image: without a
.dockerignore a local build/ (hundreds of MB) would go along. Docker matches each path of the
context against the .dockerignore patterns (Go's filepath.Match per path component, `**` for any
number of components); this test walks the repository with that rule and checks that every path
.gitignore covers is excluded, and that the sources the image builds from are not.

Usage: dockerignore_test.py REPO_ROOT
"""
import fnmatch
import os
import subprocess
import sys


def patterns(root):
    out = []
    path = os.path.join(root, ".dockerignore")
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                out.append(line.strip("/"))
    return out


def match(pattern, path):
    """Docker's rule: the pattern matches the path or one of its parent folders."""
    p = pattern.split("/")
    parts = path.split("/")

    def rec(i, j):
        if i == len(p):
            return True  # a folder that matches excludes what it holds
        if p[i] == "**":
            return any(rec(i + 1, k) for k in range(j, len(parts) + 1))
        return j < len(parts) and fnmatch.fnmatchcase(parts[j], p[i]) and rec(i + 1, j + 1)

    return rec(0, 0)


def excluded(pats, path):
    return any(match(p, path) for p in pats)


def main():
    root = sys.argv[1]
    pats = patterns(root)
    failures = []
    # A build tree, a wheel folder and bytecode, made where a user's would be.
    probes = ["build/bin/hooprun", "build-asan/lib/libhoop.so", ".whl/hoop.whl",
              "adapters/torch/python/hoop/__pycache__/torch.cpython-311.pyc", ".git/HEAD"]
    for path in probes:
        if not excluded(pats, path):
            failures.append(f"{path} would be copied into the image")
    # git's own view: whatever it ignores here must stay out of the image too.
    ignored = subprocess.run(
        ["git", "-C", root, "ls-files", "--others", "--ignored", "--exclude-standard",
         "--directory"], capture_output=True, text=True)
    if ignored.returncode == 0:
        for path in ignored.stdout.split():
            if not excluded(pats, path.rstrip("/")):
                failures.append(f"{path} (ignored by git) would be copied into the image")
    # What the Dockerfile builds from must go in.
    for path in ["CMakeLists.txt", "scripts/install-deps", "src/runtime/runtime.cc",
                 "examples/kubernetes/Dockerfile", "include/hoop/hoop.h"]:
        if excluded(pats, path):
            failures.append(f"{path} is needed by the image but excluded")
    for f in failures:
        print("FAIL:", f)
    print("dockerignore:", "FAILED" if failures else "ok", f"({len(pats)} patterns)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
