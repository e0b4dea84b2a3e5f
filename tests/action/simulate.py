#!/usr/bin/env python3
"""Runs kiln's GitHub Action (action.yml) as a runner would, without GitHub.

    simulate.py KILN_BIN

Reads action.yml, and for each scenario sets up what a runner gives a
composite action's steps -- GITHUB_WORKSPACE (a copy of examples/twin),
GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, GITHUB_PATH, GITHUB_ENV,
GITHUB_EVENT_PATH (a push event), GITHUB_ACTION_PATH (this checkout),
RUNNER_TEMP, RUNNER_TOOL_CACHE, RUNNER_OS/ARCH -- then runs every step of
`runs.steps` in order: `${{ ... }}` expressions of the forms the action
uses are evaluated (inputs, steps.<id>.outputs, github.*, runner.*, `==`
comparisons), `if:` decides whether a step runs, `env:` and
`working-directory:` apply, `shell: bash` runs as GitHub runs it (`bash
--noprofile --norc -eo pipefail FILE`), and GITHUB_OUTPUT/GITHUB_PATH/GITHUB_ENV
are read back after each step. A `uses:` step (actions/cache) cannot run
here: it is reported and skipped, and the tool cache is filled beforehand
with KILN_BIN, as a cache hit would leave it. The action's outputs are
evaluated from `outputs.*.value`.

Scenarios (the dev environment must be up: scripts/dev-env up):
  1. the twin built and pushed: a summary row per target, metadata with a
     digest per pushed target, the report and summary paths exist;
  2. the same again: every target skipped, the same digests;
  3. a failing target (pytorch-test): the step fails, an ::error annotation
     names the workspace's Dockerfile and line, the other targets still build,
     and the run's JUnit XML parses with a <failure> at that line;
  4. lint: true on a workspace with a finding: an annotation at its line.
Exits non-zero on the first failed check.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print(f"ok: {msg}")


def parse_commands_file(path):
    """name=value and name<<EOF ... EOF lines, as the runner reads them."""
    out = {}
    if not path.exists():
        return out
    lines = path.read_text().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, eof = line.split("<<", 1)
            j = lines.index(eof, i + 1)
            out[name] = "\n".join(lines[i + 1:j])
            i = j + 1
            continue
        if "=" in line:
            name, value = line.split("=", 1)
            out[name] = value
        i += 1
    path.write_text("")
    return out


class Runner:
    def __init__(self, action, workspace, temp, inputs, env):
        self.action = action
        self.workspace = workspace
        self.temp = temp
        self.inputs = {
            k: str(v.get("default", "")) for k, v in action.get("inputs", {}).items()
        }
        for k, v in inputs.items():
            if k not in self.inputs:
                fail(f"input {k} is not declared in action.yml")
            self.inputs[k] = v
        self.steps = {}
        self.env = dict(env)
        self.path = []
        self.files = {}
        for name in ["GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_PATH", "GITHUB_ENV"]:
            p = temp / f"{name.lower()}.txt"
            p.write_text("")
            self.files[name] = p
        event = temp / "event.json"
        event.write_text(json.dumps({"ref": "refs/heads/main", "after": "0" * 40}))
        self.env.update({
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_WORKSPACE": str(workspace),
            "GITHUB_ACTION_PATH": str(REPO),
            "GITHUB_EVENT_NAME": "push",
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_REPOSITORY": "example/twin",
            "GITHUB_SHA": "0" * 40,
            "RUNNER_TEMP": str(temp),
            "RUNNER_TOOL_CACHE": str(temp / "toolcache"),
            "RUNNER_OS": "Linux",
            "RUNNER_ARCH": "X64",
        })
        self.env.update({k: str(v) for k, v in self.files.items()})
        self.stdout = ""

    def value(self, expr):
        expr = expr.strip()
        m = re.fullmatch(r"(.+?)\s*==\s*(.+)", expr)
        if m:
            return str(self.value(m.group(1)) == self.value(m.group(2))).lower()
        if expr.startswith("'") and expr.endswith("'"):
            return expr[1:-1]
        parts = expr.split(".")
        if parts[0] == "inputs":
            return self.inputs[".".join(parts[1:])]
        if parts[0] == "steps" and parts[2] == "outputs":
            return self.steps.get(parts[1], {}).get(parts[3], "")
        if parts[0] == "github":
            return {
                "action_path": str(REPO),
                "action_repository": "",
                "action_ref": "",
                "workspace": str(self.workspace),
            }[parts[1]]
        if parts[0] == "runner":
            return {"temp": str(self.temp), "os": "Linux", "arch": "X64"}[parts[1]]
        fail(f"action.yml uses an expression the simulator does not know: {expr}")

    def expand(self, text):
        return EXPR.sub(lambda m: self.value(m.group(1)), str(text))

    def run(self):
        """Runs every step; returns the exit code of the first failing one (0)."""
        for step in self.action["runs"]["steps"]:
            sid = step.get("id", "")
            cond = step.get("if")
            if cond is not None:
                c = EXPR.sub(lambda m: m.group(1), str(cond))
                if self.value(c) != "true":
                    print(f"-- step {sid}: skipped (if: {cond})")
                    continue
            if "uses" in step:
                print(f"-- step {sid}: uses {step['uses']} cannot run here; skipped")
                continue
            check(step.get("shell") == "bash", f"step {sid} runs in bash")
            script = self.temp / f"step-{sid}.sh"
            script.write_text(self.expand(step["run"]))
            env = dict(self.env)
            env.update({k: self.expand(v) for k, v in step.get("env", {}).items()})
            env["PATH"] = os.pathsep.join(self.path + [os.environ["PATH"]])
            cwd = self.workspace / self.expand(step.get("working-directory", "."))
            p = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                cwd=cwd, env=env, capture_output=True, text=True,
            )
            sys.stderr.write(p.stderr[-4000:])
            self.stdout += p.stdout
            self.steps[sid] = parse_commands_file(self.files["GITHUB_OUTPUT"])
            for line in parse_lines(self.files["GITHUB_PATH"]):
                self.path.insert(0, line)
            self.env.update(parse_commands_file(self.files["GITHUB_ENV"]))
            print(f"-- step {sid}: exit {p.returncode}")
            if p.returncode != 0:
                return p.returncode
        return 0

    def outputs(self):
        return {k: self.expand(v["value"]) for k, v in self.action["outputs"].items()}

    def summary(self):
        return self.files["GITHUB_STEP_SUMMARY"].read_text()


def parse_lines(path):
    lines = [l for l in path.read_text().split("\n") if l.strip()]
    path.write_text("")
    return lines


def twin(temp):
    ws = temp / "workspace"
    shutil.copytree(REPO / "examples" / "twin", ws / "twin", symlinks=True)
    return ws


def main():
    if len(sys.argv) != 2:
        fail("usage: simulate.py KILN_BIN")
    kiln_bin = Path(sys.argv[1]).resolve()
    action = yaml.safe_load((REPO / "action.yml").read_text())
    env_lines = subprocess.run(
        [str(REPO / "scripts" / "dev-env"), "env"], capture_output=True, text=True
    )
    if env_lines.returncode != 0:
        fail("the dev environment is not up (scripts/dev-env up)")
    dev = dict(l.split("=", 1) for l in env_lines.stdout.split() if "=" in l)
    base_env = {
        k: v for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "RUNNER_", "INPUT_"))
    }
    base_env.update(dev)
    base_env["PIP_TOKEN"] = "demo"
    reg = dev["KILN_REGISTRY"]
    temp = Path(tempfile.mkdtemp(prefix="kiln-action-"))
    try:
        ws = twin(temp)
        # The tool cache as a cache hit of actions/cache leaves it.
        key_runner = Runner(action, ws, temp, {}, base_env)

        def fill_cache(r):
            p = subprocess.run(
                [str(REPO / "scripts/action/kiln-action"), "source-key"],
                env={**r.env, "PATH": os.environ["PATH"]}, capture_output=True, text=True,
            )
            check(p.returncode == 0, f"source-key: {p.stderr}")
            key_dir = Path(parse_commands_file(r.files["GITHUB_OUTPUT"])["dir"])
            (key_dir / "bin").mkdir(parents=True, exist_ok=True)
            shutil.copy2(kiln_bin, key_dir / "bin" / "kiln")

        fill_cache(key_runner)
        ns = f"kiln-action-{os.getpid()}"
        inputs = {
            "workdir": "twin",
            "targets": "default, pytorch-run",
            "push": "true",
            "args": f"--var\nREGISTRY={reg}\n--var\nREGISTRY_NAME={ns}",
        }
        # 1. Built and pushed.
        r = Runner(action, ws, temp, inputs, base_env)
        code = r.run()
        check(code == 0, f"the twin builds through the action (exit {code})")
        out = r.outputs()
        check(out["version"].startswith("kiln "), f"output version: {out['version']}")
        summary = json.loads(Path(out["summary"]).read_text())
        names = [t["name"] for t in summary["targets"]]
        check(len(names) >= 10, f"the summary names the twin's targets ({len(names)})")
        table = r.summary()
        for n in names:
            check(f"| {n} |" in table or f"| `{n}` |" in table, f"the step summary has a row for {n}")
        meta = json.loads(out["metadata"])
        pushed = [t for t in summary["targets"] if t.get("digest")]
        check(pushed, "some targets were pushed")
        for t in pushed:
            check(
                meta[t["name"]]["containerimage.digest"] == t["digest"],
                f"metadata names {t['name']}'s pushed digest",
            )
        check(Path(out["report"]).is_file(), f"the report exists: {out['report']}")
        check("::group::" in r.stdout and "::endgroup::" in r.stdout, "logs are grouped")
        first = {t["name"]: t.get("digest") for t in summary["targets"]}

        # 2. The same again: skipped.
        r = Runner(action, ws, temp, inputs, base_env)
        code = r.run()
        check(code == 0, f"the rerun succeeds (exit {code})")
        summary = json.loads(Path(r.outputs()["summary"]).read_text())
        states = {t["name"]: t["status"] for t in summary["targets"]}
        check(set(states.values()) == {"skipped"}, f"the rerun skips every target: {states}")
        again = {t["name"]: t.get("digest") for t in summary["targets"]}
        check(again == first, "the rerun names the same digests")
        meta = json.loads(r.outputs()["metadata"])
        check(
            all(meta[n]["kiln.status"] == "skipped" for n in states),
            "the metadata says skipped",
        )

        # 3. A failing target: annotated at its Dockerfile line.
        failing = dict(inputs, targets="pytorch-test\ntorchvision-wheel", push="false")
        r = Runner(action, ws, temp, failing, base_env)
        code = r.run()
        check(code == 1, f"a failed target fails the step (exit {code})")
        errors = [l for l in r.stdout.splitlines() if l.startswith("::error ")]
        check(errors, f"an ::error annotation is written:\n{r.stdout[-2000:]}")
        m = re.match(r"::error file=([^,]+),line=(\d+),title=([^:]+)::", errors[0])
        check(m is not None, f"the annotation has a file and a line: {errors[0]}")
        f, line = m.group(1), int(m.group(2))
        check(f.startswith("twin/") and "Dockerfile" in f, f"the file is the workspace's Dockerfile: {f}")
        text = (ws / f).read_text().split("\n")
        check(0 < line <= len(text), f"line {line} is in {f}")
        check("pytorch-test" in m.group(3), f"the title names the target: {m.group(3)}")
        summary = json.loads(Path(r.outputs()["summary"]).read_text())
        states = {t["name"]: t["status"] for t in summary["targets"]}
        check(states.get("torchvision-wheel") in ("built", "skipped"), f"the rest still builds: {states}")
        # The same run as JUnit XML (GitLab, Jenkins, Buildkite): parsed by
        # an XML parser, the failed target a <failure> with its step and line.
        junit = subprocess.run(
            [str(kiln_bin), "report", summary["run_id"], "--format", "junit"],
            cwd=ws / "twin", env={**base_env}, capture_output=True, text=True,
        )
        check(junit.returncode == 0, f"kiln report --format junit: {junit.stderr}")
        import xml.etree.ElementTree as ET
        root = ET.fromstring(junit.stdout)
        cases = {c.get("name"): c for c in root.iter("testcase")}
        check(set(cases) == set(states), f"a test case per target: {sorted(cases)}")
        failure = cases["pytorch-test"].find("failure")
        check(failure is not None, "the failed target is a <failure>")
        check(
            f"at: docker/Dockerfile.pytorch-test:{line}" in (failure.text or ""),
            f"its body names the Dockerfile line: {failure.text!r}",
        )
        check(cases["torchvision-wheel"].find("failure") is None, "the others are no failures")

        # 4. lint: true annotates a finding at its line.
        lint_ws = temp / "lint"
        (lint_ws / "app").mkdir(parents=True)
        (lint_ws / "app" / "Dockerfile").write_text(
            "FROM kiln/busybox:latest\nARG TOKEN\nRUN echo $TOKEN > /t\n"
        )
        (lint_ws / "app" / "docker-bake.hcl").write_text(
            'target "default" {\n  args = { TOKEN = "secret-value" }\n}\n'
        )
        r = Runner(action, lint_ws, temp, {"workdir": "app", "lint": "true"}, base_env)
        code = r.run()
        found = [l for l in r.stdout.splitlines() if l.startswith(("::error file=", "::warning file="))]
        check(found, f"lint findings are annotated:\n{r.stdout[-2000:]}")
        check(found[0].split("file=")[1].startswith("app/"), f"at a workspace path: {found[0]}")
        check(code in (0, 1), f"lint ends with its own exit code ({code})")
        print("action simulation: all checks passed")
    finally:
        shutil.rmtree(temp, ignore_errors=True)


if __name__ == "__main__":
    main()
