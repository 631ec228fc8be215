"""The GitHub workflows: linted by actionlint (rhysd/actionlint v1.7.7 compiled to WASM, pinned in
tools/package-lock.json, installed by `make tools` and run with node), plus the properties each workflow
exists for. Starting node and compiling the WASM is most of a lint's cost, so the workflows and the
broken snippets are linted in one node process, each in its own file, and each test reads its file's
findings."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.paths import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
TOOLS = ROOT / "tools"


WORKFLOW_FILES = [".github/workflows/destroy.yml", ".github/workflows/offline.yml", ".github/workflows/preview.yml"]
# Workflows actionlint must refuse, each with the one kind of finding it has.
BROKEN = {
    "expression": "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                  "      - run: echo ${{ github.nope }}\n",
    "action": "on: pull_request\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
              "      - uses: actions/setup-python@v5\n        with:\n          pythn-version: '3.11'\n",
    "permissions": "on: push\npermissions:\n  id-tokens: write\njobs:\n  a:\n    runs-on: ubuntu-latest\n"
                   "    steps:\n      - run: true\n",
}


def actionlint_missing(root: Path) -> str | None:
    """Why actionlint is not installed under `root`/tools (None: it is), with npm's own error when
    `make tools` could not reach the registry (the Makefile keeps it in .cache/npm-ci-error.txt)."""
    if (root / "tools" / "node_modules" / "@tktco" / "node-actionlint").is_dir():
        return None
    error = root / ".cache" / "npm-ci-error.txt"
    lines = [line for line in (error.read_text().splitlines() if error.is_file() else []) if line.strip()]
    if lines:
        return f"actionlint not installed: `make tools` ran npm ci and it failed ({lines[0].strip()[:200]})"
    return "actionlint not installed: run `make tools` (npm ci of tools/package-lock.json)"


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> dict[str, list[dict[str, Any]]]:
    """actionlint's findings by file, from one node process: the workflows (by their path in the
    repository) and the BROKEN snippets (by kind), each snippet in a file of its own."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not found: actionlint runs as WASM under node (install Node.js >= 20 to lint the workflows)")
    message = actionlint_missing(ROOT)
    if message:
        if os.environ.get("CI"):
            pytest.fail(message + " - CI must lint the workflows")
        pytest.skip(message)
    snippets = tmp_path_factory.mktemp("broken-workflows")
    broken = {kind: snippets / f"broken-{kind}.yml" for kind in BROKEN}
    for kind, path in broken.items():
        path.write_text(BROKEN[kind])
    files = sorted(str(p.relative_to(ROOT)) for p in WORKFLOWS.glob("*.y*ml"))
    assert files == WORKFLOW_FILES
    # --liftoff-only: V8 compiles actionlint's 9 MB of WASM with its baseline compiler only, without
    # optimising it again in the background: ~2 s of CPU less, and six files lint as fast either way.
    done = subprocess.run([node, "--liftoff-only", str(TOOLS / "actionlint.cjs"), *files, *map(str, broken.values())],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    by_file: dict[str, list[dict[str, Any]]] = {name: [] for name in [*files, *BROKEN]}
    names = {str(path): kind for kind, path in broken.items()}
    for problem in json.loads(done.stdout):
        by_file[names.get(problem["file"], problem["file"])].append(problem)
    return by_file


def _load(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((WORKFLOWS / name).read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as true
    return doc


def _steps(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for job in doc["jobs"].values() for s in job.get("steps", [])]


def _uses(doc: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in _steps(doc) if str(s.get("uses", "")).split("@")[0] == action]


def test_workflows_lint_clean(findings: dict[str, list[dict[str, Any]]]) -> None:
    problems = [p for name in WORKFLOW_FILES for p in findings[name]]
    assert not problems, "\n".join(f"{p['file']}:{p['line']}:{p['column']}: {p['message']} [{p['kind']}]"
                                   for p in problems)


@pytest.mark.parametrize("kind", BROKEN)
def test_the_linter_catches_a_broken_workflow(findings: dict[str, list[dict[str, Any]]], kind: str) -> None:
    problems = findings[kind]
    assert [p["kind"] for p in problems] == [kind], problems


def test_preview_comments_on_pull_requests_with_oidc_login_only_when_credentials_exist() -> None:
    doc = _load("preview.yml")
    assert "pull_request" in doc["on"]
    assert doc["permissions"] == {"id-token": "write", "contents": "read", "pull-requests": "write"}
    (pulumi,) = _uses(doc, "pulumi/actions")
    assert pulumi["uses"].split("@")[1].startswith("v"), "pin the action's major version"
    assert pulumi["with"]["command"] == "preview" and pulumi["with"]["comment-on-pr"] is True
    # the policy pack, its requirements installed where PulumiPolicy.yaml's virtualenv points, first
    assert pulumi["with"]["policyPacks"] == "policy"
    steps = _steps(doc)
    install = next(i for i, s in enumerate(steps) if "-r policy/requirements.txt" in s.get("run", ""))
    assert "policy/venv" in steps[install]["run"] and install < steps.index(pulumi)
    # pulumi/actions comments only when the preview succeeds: a failure (a mandatory violation)
    # gets its output commented by the steps after it
    after = steps[steps.index(pulumi) + 1:]
    on_failure = [s for s in after if s.get("if") == f"failure() && steps.{pulumi['id']}.outcome == 'failure'"]
    assert any("--policy-pack policy" in s.get("run", "") for s in on_failure)
    assert any(str(s.get("uses", "")).startswith("actions/github-script@") for s in on_failure)
    (login,) = _uses(doc, "azure/login")
    assert set(login["with"]) == {"client-id", "tenant-id", "subscription-id"}, "OIDC, not a client secret"
    preview_job = next(j for j in doc["jobs"].values()
                       if any("pulumi/actions" in str(s.get("uses")) for s in j.get("steps", [])))
    assert "credentials.outputs.available == 'true'" in preview_job["if"]


def test_offline_render_is_credential_free_and_comments_only_when_allowed() -> None:
    doc = _load("offline.yml")
    text = (WORKFLOWS / "offline.yml").read_text()
    assert "secrets." not in text and "azure/login" not in text
    runs = [s.get("run", "") for s in _steps(doc)]
    assert "make test" in runs and "make synth" in runs
    # the reference material and the pinned charts are fetched before the tests and the render (the job's only
    # downloads); the reference first: pull-charts renders the stack, which applies Volcano's manifest from it
    pull = next(i for i, r in enumerate(runs) if "offline pull-charts" in r and "AKS_IB_CHARTS" in r)
    assert "make helm" in runs[pull] and pull < runs.index("make test") < runs.index("make synth")
    assert -1 < runs[pull].find("-m offline.reference fetch --out .cache/reference") < runs[pull].find("pull-charts")
    # the policy verdict on the render reaches the summary and the comment, then fails the job
    steps = _steps(doc)
    (policy,) = [s for s in steps if "policy" in s.get("run", "") and "make" in s.get("run", "")]
    assert policy["continue-on-error"] is True and "GITHUB_STEP_SUMMARY" in policy["run"]
    assert any("cat policy.md" in r for r in runs)
    (fail,) = [s for s in steps if s.get("if") == f"steps.{policy['id']}.outcome == 'failure'"]
    assert steps.index(fail) == len(steps) - 1 and "exit 1" in fail["run"]
    (upload,) = _uses(doc, "actions/upload-artifact")
    assert upload["with"]["path"] == "build/"
    (comment,) = _uses(doc, "actions/github-script")
    assert "github.event.pull_request.head.repo.full_name == github.repository" in comment["if"]
    assert any("GITHUB_STEP_SUMMARY" in r for r in runs), "the diff must reach forks too, via the job summary"


def test_destroy_is_manual_and_needs_the_stack_name_twice() -> None:
    doc = _load("destroy.yml")
    assert list(doc["on"]) == ["workflow_dispatch"]
    assert set(doc["on"]["workflow_dispatch"]["inputs"]) == {"stack", "confirm"}
    steps = _steps(doc)
    guard = next(i for i, s in enumerate(steps) if '"$STACK" != "$CONFIRM"' in s.get("run", ""))
    (destroy,) = _uses(doc, "pulumi/actions")
    assert destroy["with"]["command"] == "destroy"
    assert guard < steps.index(destroy), "the confirmation must be checked before anything runs"
    # Run the guard's script as the runner would: it must stop on a mismatch and pass on a match.
    script = steps[guard]["run"]
    for stack, confirm, code in (("dev", "dve", 1), ("dev", "", 1), ("", "", 1), ("dev", "dev", 0)):
        done = subprocess.run(["bash", "-c", script], env={"STACK": stack, "CONFIRM": confirm, "PATH": "/usr/bin:/bin"},
                              capture_output=True, text=True)
        assert done.returncode == code, (stack, confirm, done.stdout)


def test_a_job_that_runs_make_after_setup_python_makes_its_venvs_with_that_python() -> None:
    """The Makefile makes its venvs from /usr/bin/python3 where it can (the runner has one): a job that sets up
    a Python and then runs make hands that one over as PYTHON, or its pinned python-version would not count."""
    checked = 0
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for name, job in (_load(path.name).get("jobs") or {}).items():
            steps = job.get("steps") or []
            sets_up = any(str(s.get("uses", "")).startswith("actions/setup-python") for s in steps)
            runs_make = any(re.search(r"(^|\s)make(\s|$)", str(s.get("run", ""))) for s in steps)
            if sets_up and runs_make:
                checked += 1
                assert (job.get("env") or {}).get("PYTHON") == "python", f"{path.name} {name}: no env PYTHON: python"
    assert checked, "no job runs make after setup-python: this check checks nothing"
