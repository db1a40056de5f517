#!/usr/bin/python3
"""Runs the README's and the user guide's shell commands, so that the docs cannot drift from
what works.

Every line of a ```sh block in README.md and in each page of the user guide (docs/guide/*.md)
is a command (a line ending in a backslash goes on on the next). Each one either runs here, from
the repository root with `build/` meaning this build's directory (the example trainings
stopped early: SHORTER), and must exit 0 (and, for some, print what the docs promise), or
matches one of the SKIPS below, which say why it cannot
run inside the suite. A command that two places show alike runs once. A SKIPS entry that no
longer matches any command of these files is an error too, so the list cannot go stale. Blocks
fenced with a bare ``` are output, usage lines or commands for other machines (ssh hosts,
Kubernetes) and are not run. Every program in build/bin must be named by the README or a guide
page. Every relative link of the project's Markdown files must name a file inside the
repository, and a link's #anchor (into a Markdown file, or '#anchor' within the same file) must
name one of that file's headings, as GitHub makes their anchors; none of the files may name a
development machine's directories.

Usage: readme_commands_test.py SOURCE_DIR BUILD_DIR
"""
import os
import re
import subprocess
import sys
import time
import urllib.parse

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
    (r"examples/(ray|spark)_fashion_mnist\.py", "engines.ray and engines.spark train the same "
                                               "model through the same executors, against "
                                               "the script under hooprun"),
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
    (r"hoop-bench -b 8 ", r"# Out of bounds values : 0 OK"),
    (r"allreduce_c", r"."),
    (r"collective_fuzz --seed", r"0 failures on any rank"),
]

# Trainings the suite runs shorter than the docs show, for its time: the command as shown with
# an option of the example's appended, so it parses, starts and trains the same way and stops
# its epoch early. (pattern in the command, arguments appended)
SHORTER = [
    (r"build/bin/train_fashion_mnist --epochs", "--max-steps 300"),
    (r"examples/(torch|torchdist)_fashion_mnist\.py", "--max-steps 50"),
    (r"examples/(jax|keras)_fashion_mnist\.py", "--limit 6400"),
]

TIMEOUT_S = 300


def doc_files(source):
    """The files whose commands run: README.md, then the user guide's pages (docs/guide/*.md)
    in name order; paths relative to the source directory."""
    guide = os.path.join("docs", "guide")
    folder = os.path.join(source, guide)
    pages = sorted(n for n in os.listdir(folder) if n.endswith(".md")) \
        if os.path.isdir(folder) else []
    return ["README.md"] + [os.path.join(guide, n) for n in pages]


def commands(path):
    """(line number, command) for every command of the ```sh blocks."""
    out, in_sh, pending, start = [], False, "", 0
    with open(path) as f:
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


def slug(heading):
    """The anchor GitHub gives a heading: its text without Markdown (code spans, emphasis, link
    targets, HTML tags), lowercased, every character but letters, digits, '_', '-' and spaces
    dropped, spaces turned into '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path):
    """Every anchor a Markdown file has: one per ATX heading outside fenced code blocks (a
    repeated slug gets -1, -2, ... as on GitHub), and the names of explicit HTML anchors."""
    out, seen, fence = set(), {}, None
    with open(path) as f:
        for line in f:
            stripped = line.strip()
            marker = re.match(r"^(`{3,}|~{3,})", stripped)
            if marker:
                if fence is None:
                    fence = marker.group(1)[0] * len(marker.group(1))
                elif stripped.startswith(fence) and not stripped.strip(fence[0]):
                    fence = None
                continue
            if fence is not None:
                continue
            for name in re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", line):
                out.add(name)
            heading = re.match(r"^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$", line)
            if not heading:
                continue
            base = slug(heading.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(source):
    """Relative links of the project's Markdown files that name no file inside the repository
    (a link outside it is broken in every clone), and links whose #anchor names no heading of
    the Markdown file they point to (or, for '#anchor' alone, of the file they are in)."""
    out = []
    link = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
    root = os.path.realpath(source)
    known = {}
    for path in markdown_files(source):
        folder = os.path.dirname(path)
        with open(path) as f:
            text = f.read()
        rel = os.path.relpath(path, source)
        for target in link.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            resolved = os.path.realpath(os.path.join(folder, file_part)) if file_part \
                else os.path.realpath(path)
            if not resolved.startswith(root + os.sep) and resolved != root:
                out.append(f"{rel}: the link ({target}) leaves the repository")
                continue
            if not os.path.exists(resolved):
                out.append(f"{rel}: the link ({target}) names no file")
                continue
            if not anchor or not resolved.endswith(".md") or not os.path.isfile(resolved):
                continue
            if resolved not in known:
                known[resolved] = anchors(resolved)
            if urllib.parse.unquote(anchor) not in known[resolved]:
                out.append(f"{rel}: the link ({target}) names no heading of "
                           f"{os.path.relpath(resolved, root)}")
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
    files = doc_files(source)
    found = [(name, number, command) for name in files
             for number, command in commands(os.path.join(source, name))]
    if not any(name == "README.md" for name, _, _ in found):
        print("FAIL: no ```sh block in README.md")
        return 1
    failures, used, ran, done = [], set(), 0, {}
    for name, number, command in found:
        where = f"{name}:{number}"
        skip = next(((p, why) for p, why in SKIPS if re.search(p, command)), None)
        if skip:
            used.add(skip[0])
            print(f"skip  {where}: {command}\n      ({skip[1]})")
            if not command.startswith("scripts/run"):
                continue
            job = job_of_script(source, "scripts/run")
            if job is None:
                failures.append("scripts/run has no `exec` line: its job cannot be found")
                continue
            command = job
        if command in done:
            print(f"same  {where}: {command} (ran at {done[command]})")
            continue
        done[command] = where
        run = with_build_dir(command, build)
        shorter = " ".join(extra for pattern, extra in SHORTER if re.search(pattern, command))
        run += " " + shorter if shorter else ""
        began = time.monotonic()
        try:
            r = subprocess.run(["bash", "-c", run], cwd=source, capture_output=True, text=True,
                               timeout=TIMEOUT_S, env=dict(os.environ, HOOP_TIMEOUT_SECONDS="120"))
        except subprocess.TimeoutExpired:
            failures.append(f"{where}: {command}: still running after {TIMEOUT_S} s")
            continue
        ran += 1
        took = time.monotonic() - began
        print(f"ran   {where}: {command}{' + ' + shorter if shorter else ''} "
              f"(exit {r.returncode}, {took:.1f} s)")
        if r.returncode != 0:
            failures.append(f"{where}: {command}: exit {r.returncode}\n"
                            f"--- stdout (end)\n{r.stdout[-3000:]}\n--- stderr (end)\n"
                            f"{r.stderr[-3000:]}")
            continue
        for in_command, in_output in EXPECT:
            if re.search(in_command, command) and not re.search(in_output, r.stdout):
                failures.append(f"{where}: {command}: its output lacks "
                                f"/{in_output}/\n--- stdout (end)\n{r.stdout[-3000:]}")
    # What a user finds in build/bin is a tool the docs name: test helpers live elsewhere.
    docs = ""
    for name in files:
        with open(os.path.join(source, name)) as f:
            docs += f.read() + "\n"
    bin_dir = os.path.join(build, "bin")
    for name in sorted(os.listdir(bin_dir)) if os.path.isdir(bin_dir) else []:
        if not re.search(r"\b" + re.escape(name) + r"\b", docs):
            failures.append(f"{bin_dir}/{name} is in build/bin but neither the README nor a "
                            "guide page names it")
    failures += broken_links(source)
    failures += machine_paths(source, build)
    for pattern, why in SKIPS:
        if pattern not in used:
            failures.append(f"the skip rule /{pattern}/ ({why}) matches no command of the "
                            "README or the guide: remove it")
    for f in failures:
        print("FAIL:", f)
    print(f"doc commands ({len(files)} files): {ran} ran, {len(used)} skip rules used, "
          f"{'FAILED' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
