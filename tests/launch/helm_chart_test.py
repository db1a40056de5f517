#!/usr/bin/python3
"""Renders examples/kubernetes (the Helm chart) and checks the Kubernetes objects it makes.

helm is not a Debian package, so the chart keeps to a small subset of Helm's Go templates that
this file renders itself (and refuses anything else, so the chart cannot drift out of it):
  {{ .Values.a.b }}  {{ .Release.Name }}  {{ .Chart.Name }}  {{ "text" }}  {{ . }} (in range)
  ... | quote        randAlphaNum N
  {{- if EXPR }} ... {{- else }} ... {{- end }}      {{- range .Values.list }} ... {{- end }}
with "{{-" / "-}}" trimming whitespace as in Go. When helm is on PATH, `helm template` renders
the chart too and must give the same objects.

Usage: helm_chart_test.py CHART_DIR
"""
import copy
import random
import re
import shutil
import string
import subprocess
import sys

import yaml

ACTION = re.compile(r"\{\{(-?)\s*(.*?)\s*(-?)\}\}", re.S)


class TemplateError(Exception):
    pass


def tokenize(text):
    """Literal strings and (action) tuples, with Go's whitespace trimming applied."""
    out, pos = [], 0
    for m in ACTION.finditer(text):
        literal = text[pos:m.start()]
        if m.group(1):
            literal = literal.rstrip()
        out.append(literal)
        out.append(("action", m.group(2)))
        pos = m.end()
        if m.group(3):
            rest = text[pos:]
            pos += len(rest) - len(rest.lstrip())
    out.append(text[pos:])
    return out


def parse(tokens, i=0, until=("",)):
    """A list of nodes up to one of the `until` keywords; returns (nodes, index, keyword)."""
    nodes = []
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if isinstance(tok, str):
            nodes.append(("text", tok))
            continue
        action = tok[1]
        word = action.split(" ", 1)[0]
        if word in ("end", "else"):
            if word not in until:
                raise TemplateError(f"unexpected {{{{ {action} }}}}")
            return nodes, i, word
        if word in ("if", "range"):
            body, i, stop = parse(tokens, i, ("end", "else") if word == "if" else ("end",))
            other = []
            if stop == "else":
                other, i, _ = parse(tokens, i, ("end",))
            nodes.append((word, action[len(word):].strip(), body, other))
            continue
        nodes.append(("expr", action))
    if until != ("",):
        raise TemplateError(f"missing {{{{ end }}}} (expected one of {until})")
    return nodes, i, ""


def value_of(term, ctx, dot):
    if term == ".":
        return dot
    if term.startswith('"') and term.endswith('"'):
        return term[1:-1]
    if re.fullmatch(r"randAlphaNum \d+", term):
        n = int(term.split()[1])
        return "".join(random.choice(string.ascii_letters + string.digits) for _ in range(n))
    if re.fullmatch(r"\.(Values|Release|Chart)(\.[A-Za-z_][A-Za-z0-9_]*)+", term):
        v = ctx
        for part in term[1:].split("."):
            if not isinstance(v, dict) or part not in v:
                raise TemplateError(f"{term}: no such value")
            v = v[part]
        return v
    raise TemplateError(f"'{term}' is outside the chart's template subset")


def evaluate(expr, ctx, dot):
    parts = [p.strip() for p in expr.split("|")]
    v = value_of(parts[0], ctx, dot)
    for f in parts[1:]:
        if f != "quote":
            raise TemplateError(f"function '{f}' is outside the chart's template subset")
        v = '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'
    return v


def render_nodes(nodes, ctx, dot):
    out = []
    for node in nodes:
        kind = node[0]
        if kind == "text":
            out.append(node[1])
        elif kind == "expr":
            out.append(str(evaluate(node[1], ctx, dot)))
        elif kind == "if":
            branch = node[2] if evaluate(node[1], ctx, dot) else node[3]
            out.append(render_nodes(branch, ctx, dot))
        elif kind == "range":
            for item in evaluate(node[1], ctx, dot) or []:
                out.append(render_nodes(node[2], ctx, item))
    return "".join(out)


def render(text, ctx):
    nodes, _, _ = parse(tokenize(text))
    return render_nodes(nodes, ctx, ctx)


def merged(base, override):
    out = copy.deepcopy(base)
    for k, v in override.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def render_chart(chart, release, overrides):
    with open(f"{chart}/Chart.yaml") as f:
        meta = yaml.safe_load(f)
    with open(f"{chart}/values.yaml") as f:
        values = merged(yaml.safe_load(f), overrides)
    ctx = {"Values": values, "Release": {"Name": release}, "Chart": {"Name": meta["name"]}}
    docs = []
    for name in ("service.yaml", "secret.yaml", "job.yaml"):
        with open(f"{chart}/templates/{name}") as f:
            text = render(f.read(), ctx)
        docs += [d for d in yaml.safe_load_all(text) if d]
    return docs, values, text


failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def check_objects(docs, values, release, job_text, given_secret):
    by_kind = {d["kind"]: d for d in docs}
    check(sorted(by_kind) == ["Job", "Secret", "Service"], f"kinds: {sorted(by_kind)}")
    svc, secret, job = by_kind["Service"], by_kind["Secret"], by_kind["Job"]
    workers = values["workers"]
    check(svc["spec"]["clusterIP"] == "None", "the Service is not headless")
    spec = job["spec"]
    check(spec["completionMode"] == "Indexed", "completionMode is not Indexed")
    check(spec["completions"] == workers, f"completions {spec['completions']} != {workers}")
    check(spec["parallelism"] == workers, f"parallelism {spec['parallelism']} != {workers}")
    pod = spec["template"]["spec"]
    check(pod["subdomain"] == svc["metadata"]["name"], "subdomain is not the Service's name")
    labels = spec["template"]["metadata"]["labels"]
    check(all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()),
          "the Service does not select the Job's pods")
    c = pod["containers"][0]
    check(c["image"] == values["image"], "image")
    check(c["command"] == [values["command"]], "command")
    check(c["args"] == [str(a) for a in values["args"]], f"args {c['args']}")
    env = {e["name"]: e for e in c["env"]}
    check(env["HOOP_SIZE"].get("value") == str(workers), "HOOP_SIZE")
    pattern = env["HOOP_HOST_PATTERN"].get("value", "")
    check(pattern == f"{release}-{{index}}.{svc['metadata']['name']}",
          f"HOOP_HOST_PATTERN {pattern!r}: pods are <job>-<index>.<subdomain>")
    check(env["HOOP_RENDEZVOUS_PORT"].get("value") == str(values["rendezvousPort"]), "port")
    ref = env["HOOP_SECRET"].get("valueFrom", {}).get("secretKeyRef", {})
    check("value" not in env["HOOP_SECRET"], "HOOP_SECRET has a value inline in the Job")
    check(ref.get("name") == secret["metadata"]["name"] and ref.get("key") in
          secret.get("stringData", {}), "HOOP_SECRET does not reference the Secret's key")
    value = secret["stringData"][ref.get("key", "secret")]
    check(len(value) >= 32, "the job secret is shorter than 32 characters")
    if given_secret:
        check(value == given_secret, "values.jobSecret is not the Secret's value")
    check(value not in job_text, "the secret's value appears in the Job")
    check(c["resources"] == values["resources"], "resources")


def without_random(docs):
    docs = copy.deepcopy(docs)
    for d in docs:
        if d["kind"] == "Secret":
            d["stringData"] = {k: "<random>" for k in d["stringData"]}
        d.get("metadata", {}).get("labels", {}).pop("helm.sh/chart", None)
    return sorted(docs, key=lambda d: d["kind"])


def main():
    chart = sys.argv[1]
    cases = [
        ("fmnist", {}, None),
        ("big", {"workers": 3, "jobSecret": "s" * 40, "args": ["--epochs", "2", "--lr", "0.05"],
                 "image": "registry.example/hoop:1"}, "s" * 40),
    ]
    for release, overrides, given in cases:
        docs, values, job_text = render_chart(chart, release, overrides)
        check_objects(docs, values, release, job_text, given)
        if shutil.which("helm") and not given:
            out = subprocess.run(["helm", "template", release, chart], check=True,
                                 capture_output=True, text=True).stdout
            theirs = [d for d in yaml.safe_load_all(out) if d]
            check(without_random(theirs) == without_random(docs),
                  "helm template renders other objects than the subset renderer")
    # The renderer refuses what it does not implement, so the chart cannot leave the subset.
    for bad in ("{{ include \"x\" . }}", "{{ .Values.workers | toYaml }}", "{{ if .Values.x }}"):
        try:
            render(bad, {"Values": {"workers": 1, "x": 1}})
            failures.append(f"the renderer accepted {bad}")
        except TemplateError:
            pass
    for f in failures:
        print("FAIL", f)
    print("helm chart: ok" if not failures else f"helm chart: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
