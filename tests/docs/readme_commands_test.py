#!/usr/bin/python3
"""Runs the README's shell commands, so that the README cannot drift from what works.

Every line of a ```sh block in README.md is a command (a line ending in a backslash goes on on
the next). Each one either runs here, from the repository root with `build/` meaning this
build's directory, and must exit 0 (and, for some, print what the README promises), or matches
one of the SKIPS below, which say why it cannot run inside the suite. A SKIPS entry that no
longer matches any command is an error too, so the list cannot go stale. Blocks fenced with a
bare ``` are output, usage lines or commands for other machines (ssh hosts, Kubernetes) and
are not run. Every relative link of the project's Markdown files must name a file inside the
repository, and none of them may name a development machine's directories.

Usage: readme_commands_test.py SOURCE_DIR BUILD_DIR
"""
import os
import re
import subprocess
import sys
import time

# (pattern, why it is not run here)
SKIPS = [
    (r"^scripts/run\b", "its install and build steps are the suite's own; the job it then "
                        "starts (its `exec` line) runs here instead"),
    (r"^scripts/test\b", "runs this suite itself"),
    (r"^scripts/build\b", "the build this suite runs in"),
    (r"^scripts/install-deps\b", "installs packages: done before the suite starts"),
    (r"^scripts/install-frameworks\b", "installs the frameworks environment and builds: done "
                                       "before the suite starts (scripts/test)"),
    (r"^cmake ", "the build this suite runs in"),
    (r"^ctest ", "runs this suite itself"),
    (r"pip install", "pip builds hoop a second time, several minutes of the suite's budget"),
    (r"^venv/bin/", "needs the virtual environment the pip line makes"),
    (r"--minutes 5", "runs for five minutes"),
    (r"^bench/study\.sh\b", "the whole study: about 40 minutes of training on the netns bed; "
                           "strategy_run_test runs each strategy, hoop_plan.* the planner"),
    (r"--plot docs/img/", "a full sweep of minutes that redraws the committed figures; the "
                          "hoop_bench_plot test runs run_peers.sh --plot on a short sweep"),
]

# What some commands must print, beyond exiting 0 (pattern in the command, pattern in stdout).
EXPECT = [
    (r"train_fashion_mnist", r"throughput_n .* samples/s"),
    (r"torch_fashion_mnist\.py", r"test accuracy \d+\.\d+ %"),
    (r"torchdist_fashion_mnist\.py", r"test accuracy \d+\.\d+ %"),
    (r"jax_fashion_mnist\.py", r"test accuracy \d+\.\d+ %"),
    (r"keras_fashion_mnist\.py", r"test accuracy \d+\.\d+ %"),
    (r"hoop-bench --transport mpi", r"# Out of bounds values : 0 OK"),
    (r"allreduce_c", r"."),
    (r"collective_fuzz --seed", r"0 failures on any rank"),
]

TIMEOUT_S = 300


def commands(readme):
    """(line number, command) for every command of the ```sh blocks."""
    out, in_sh, pending, start = [], False, "", 0
    with open(readme) as f:
        for number, line in enumerate(f, 1):
            fence = line.strip()
            if fence.startswith("```"):
                in_sh = not in_sh and fence == "```sh"
                continue
            if not in_sh:
                continue
            text = line.rstrip("\n")
            if not pending:
                start = number
            if text.endswith("\\"):
                pending += text[:-1] + " "
                continue
            text = pending + text
            pending = ""
            if text.strip() and not text.strip().startswith("#"):
                out.append((start, text.strip()))
    return out


def job_of_script(source, script):
    """The command a script such as scripts/run ends with (`exec ...`), without "$@"."""
    with open(os.path.join(source, script)) as f:
        for line in f:
            if line.startswith("exec "):
                return line[len("exec "):].replace('"$@"', "").strip()
    return None


def with_build_dir(command, build_dir):
    """`build/...` (a path at the start of a word) names this build's directory."""
    return re.sub(r"(^|[\s=])build/", lambda m: m.group(1) + build_dir.rstrip("/") + "/", command)


def markdown_files(source):
    """The project's Markdown files (not in hidden or build directories)."""
    for folder, dirs, files in os.walk(source):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
        for name in files:
            if name.endswith(".md"):
                yield os.path.join(folder, name)


def broken_links(source):
    """Relative links of the project's Markdown files that name no file inside the repository
    (a link outside it is broken in every clone)."""
    out = []
    link = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
    root = os.path.realpath(source)
    for path in markdown_files(source):
        folder = os.path.dirname(path)
        with open(path) as f:
            text = f.read()
        for target in link.findall(text):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            file_part = target.split("#", 1)[0]
            resolved = os.path.realpath(os.path.join(folder, file_part))
            rel = os.path.relpath(path, source)
            if not resolved.startswith(root + os.sep) and resolved != root:
                out.append(f"{rel}: the link ({target}) leaves the repository")
            elif not os.path.exists(resolved):
                out.append(f"{rel}: the link ({target}) names no file")
    return out


def machine_paths(source, build):
    """Absolute paths of a development machine in the project's Markdown files: this checkout's
    and build's directories, and home or work directories of any machine (a report written on
    one machine names its own; committed docs name directories by role, e.g. <build>)."""
    out = []
    mine = [p for p in {os.path.realpath(source), os.path.realpath(build)} if p != "/"]
    generic = re.compile(r"(?:^|[^\w.~<])(/(?:home|root|work|Users)/[\w.-]+)")
    for path in markdown_files(source):
        rel = os.path.relpath(path, source)
        with open(path) as f:
            for number, line in enumerate(f, 1):
                hits = [p for p in mine if p in line] + generic.findall(line)
                if hits:
                    out.append(f"{rel}:{number}: names a machine path ({hits[0]})")
    return out


def main():
    source, build = sys.argv[1], sys.argv[2]
    found = commands(os.path.join(source, "README.md"))
    if not found:
        print("FAIL: no ```sh block in README.md")
        return 1
    failures, used, ran = [], set(), 0
    for number, command in found:
        skip = next(((p, why) for p, why in SKIPS if re.search(p, command)), None)
        if skip:
            used.add(skip[0])
            print(f"skip  README.md:{number}: {command}\n      ({skip[1]})")
            if not command.startswith("scripts/run"):
                continue
            job = job_of_script(source, "scripts/run")
            if job is None:
                failures.append("scripts/run has no `exec` line: its job cannot be found")
                continue
            command = job
        run = with_build_dir(command, build)
        began = time.monotonic()
        try:
            r = subprocess.run(["bash", "-c", run], cwd=source, capture_output=True, text=True,
                               timeout=TIMEOUT_S, env=dict(os.environ, HOOP_TIMEOUT_SECONDS="120"))
        except subprocess.TimeoutExpired:
            failures.append(f"README.md:{number}: {command}: still running after {TIMEOUT_S} s")
            continue
        ran += 1
        took = time.monotonic() - began
        print(f"ran   README.md:{number}: {command} (exit {r.returncode}, {took:.1f} s)")
        if r.returncode != 0:
            failures.append(f"README.md:{number}: {command}: exit {r.returncode}\n"
                            f"--- stdout (end)\n{r.stdout[-3000:]}\n--- stderr (end)\n"
                            f"{r.stderr[-3000:]}")
            continue
        for in_command, in_output in EXPECT:
            if re.search(in_command, command) and not re.search(in_output, r.stdout):
                failures.append(f"README.md:{number}: {command}: its output lacks "
                                f"/{in_output}/\n--- stdout (end)\n{r.stdout[-3000:]}")
    # What a user finds in build/bin is a tool the README names: test helpers live elsewhere.
    with open(os.path.join(source, "README.md")) as f:
        readme = f.read()
    bin_dir = os.path.join(build, "bin")
    for name in sorted(os.listdir(bin_dir)) if os.path.isdir(bin_dir) else []:
        if not re.search(r"\b" + re.escape(name) + r"\b", readme):
            failures.append(f"{bin_dir}/{name} is in build/bin but the README never names it")
    failures += broken_links(source)
    failures += machine_paths(source, build)
    for pattern, why in SKIPS:
        if pattern not in used:
            failures.append(f"the skip rule /{pattern}/ ({why}) matches no README command: "
                            "remove it")
    for f in failures:
        print("FAIL:", f)
    print(f"readme commands: {ran} ran, {len(used)} skip rules used, "
          f"{'FAILED' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
