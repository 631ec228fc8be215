"""checkov on the offline render: every finding is fixed in the program or listed in .checkov.yaml
with its reason, and no listed exception is stale.

What is scanned: the Kubernetes objects of the dev and hb renders, a Volcano Job as one Pod per task
(offline/scan.py, the same input `make scan` gives checkov by hand).

The vendors' charts as the stack renders them (build/charts/, offline/charts.py) are scanned as well,
against their own list of accepted findings, .checkov-charts.yaml: checkov skips a check everywhere or
nowhere, and what the charts may do the fabric test's pods may not.

checkov lives in its own virtualenv (.venv-scan, `make scan-venv`; see requirements-scan.txt). Its start-up
is most of its cost, so the three scans run in one checkov process (tools/checkov_runs.py: one fork per
scan, each exactly the command line a user runs).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from offline import scan
from tests.paths import ROOT

CONFIG = ROOT / ".checkov.yaml"
CHARTS_CONFIG = ROOT / ".checkov-charts.yaml"
# Checks that must stay fixed everywhere: never excepted in either file.
NEVER_EXCEPTED = {"CKV_K8S_16": "privileged", "CKV_K8S_17": "hostPID", "CKV_K8S_18": "hostIPC",
                  "CKV_K8S_19": "hostNetwork", "CKV_K8S_39": "SYS_ADMIN"}


def checkov_binary() -> str:
    for candidate in (os.environ.get("CHECKOV"), ROOT / ".venv-scan" / "bin" / "checkov", shutil.which("checkov")):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    message = "checkov not installed: run `make scan-venv` (or set CHECKOV=/path/to/checkov)"
    if os.environ.get("CI"):
        pytest.fail(message + " - CI must run the security scan")
    pytest.skip(message)


def checkov_python() -> list[str]:
    """The interpreter that runs checkov (its script's #! line): it runs tools/checkov_runs.py."""
    script = checkov_binary()
    first_line = Path(script).read_bytes()[:1024].split(b"\n", 1)[0].decode(errors="replace")
    if not first_line.startswith("#!"):
        pytest.fail(f"{script} is not a Python script (no #! line): set CHECKOV to the checkov a pip install made")
    return shlex.split(first_line[2:])


CHECKOV_ARGS = ["--framework", "kubernetes", "-o", "json", "--compact", "--skip-download"]


@pytest.fixture(scope="module")
def reports(request, tmp_path_factory, dev, hb) -> dict[str, dict[str, Any] | str]:
    """checkov's report of each scan, by name, from one process: "manifests" (the render, nothing
    skipped), "manifests with .checkov.yaml" (what a user runs) and "charts" (the dev stack's
    rendered charts, what build/charts/ holds; instead the reason when they cannot be rendered here).
    checkov runs in the scans' parent directory, not the project's: it would pick up .checkov.yaml
    there by itself."""
    root = tmp_path_factory.mktemp("checkov")
    jobs = scan.write_manifests(root / "manifests", {"dev": dev, "hb": hb})
    assert jobs >= 2, "a Volcano Job is missing from the renders: its pods would go unscanned"
    runs = {"manifests": ["-d", "manifests", *CHECKOV_ARGS],
            "manifests with .checkov.yaml": ["-d", "manifests", "--config-file", str(CONFIG), *CHECKOV_ARGS]}
    charts_unavailable = None
    try:
        dev_charts = request.getfixturevalue("dev_charts")
    except pytest.skip.Exception as skipped:
        charts_unavailable = skipped.msg
    else:
        (root / "charts").mkdir()
        for name, rendered in dev_charts.items():
            (root / "charts" / f"{name}.yaml").write_text(rendered.text)
        runs["charts"] = ["-d", "charts", *CHECKOV_ARGS]
    python = checkov_python()
    done = subprocess.run(
        [*python, str(ROOT / "tools" / "checkov_runs.py")], input=json.dumps(runs),
        capture_output=True, text=True, timeout=600, cwd=root,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"},
    )
    assert done.returncode == 0, f"tools/checkov_runs.py failed ({done.returncode}): {done.stderr[-2000:]}"
    results = {name: report(name, result) for name, result in json.loads(done.stdout).items()}
    if charts_unavailable is not None:
        results["charts"] = charts_unavailable
    return results


def report(name: str, run: dict[str, Any]) -> dict[str, Any]:
    assert run["returncode"] in (0, 1), f"checkov ({name}) failed to run ({run['returncode']}): {run['stderr'][-2000:]}"
    parsed = json.loads(run["stdout"])
    if isinstance(parsed, list):  # one report per framework
        parsed = next(r for r in parsed if r.get("check_type") == "kubernetes")
    return parsed


def findings(report: dict[str, Any]) -> set[tuple[str, str]]:
    return {(f["check_id"], f["resource"]) for f in report["results"].get("failed_checks", [])}


def accepted(config: Path = CONFIG) -> dict[str, str]:
    """A checkov config's skip-check list, each check id with the reason on its line."""
    ids = yaml.safe_load(config.read_text())["skip-check"]
    reasons = dict(re.findall(r"^\s*-\s*(CKV2?_[A-Z0-9_]+)\s*#\s*(.+)$", config.read_text(), re.M))
    missing = [i for i in ids if len(reasons.get(i, "")) < 20]
    assert not missing, f"{config.name}: give each skipped check a reason on its line: {missing}"
    return {i: reasons[i] for i in ids}


@pytest.fixture(scope="module")
def unfiltered(reports) -> dict[str, Any]:
    return reports["manifests"]


def test_the_scan_covers_the_job_pods(unfiltered):
    results = unfiltered["results"]
    resources = {f["resource"] for f in results.get("failed_checks", []) + results.get("passed_checks", [])}
    pods = [r for r in resources if r.startswith("Pod.")]
    assert len(pods) >= 2, f"expected the launcher and worker pods among {sorted(resources)}"
    assert unfiltered["summary"]["parsing_errors"] == 0


def test_every_finding_is_fixed_or_accepted_with_a_reason(unfiltered):
    reasons = accepted()
    open_findings = sorted(f"{check} on {resource}" for check, resource in findings(unfiltered)
                           if check not in reasons)
    assert open_findings == [], "fix these in the program or accept them in .checkov.yaml with a reason"


def test_no_stale_exceptions(unfiltered):
    failing = {check for check, _ in findings(unfiltered)}
    stale = sorted(set(accepted()) - failing)
    assert stale == [], f"these checks pass now: remove them from .checkov.yaml: {stale}"


def test_the_config_file_runs_clean(reports):
    """What a user runs: checkov with .checkov.yaml on the render reports nothing."""
    report = reports["manifests with .checkov.yaml"]
    assert report["summary"]["failed"] == 0, sorted(findings(report))
    assert report["summary"]["passed"] > 0


def test_the_one_privileged_pod_of_our_own_is_named_and_each_of_its_skips_is_used(unfiltered):
    """The topology labeler's SHARP step is privileged (components/platform/topology_labeler.py says why): its
    findings are skipped on that one object by annotation, each with its reason, and none is stale."""
    from components.platform import topology_labeler
    resource = "DaemonSet.fabric-topology.fabric-topology-labeler"
    skipped = {s["check_id"] for s in unfiltered["results"].get("skipped_checks", []) if s["resource"] == resource}
    assert skipped == set(topology_labeler.PRIVILEGED_SHARP_STEP)
    others = {s["resource"] for s in unfiltered["results"].get("skipped_checks", [])} - {resource}
    assert not others, f"only the labeler may skip checks on itself: {sorted(others)}"


def test_privileged_and_host_access_are_not_excepted():
    """The exceptions never cover privileged pods or host namespaces: those must stay fixed (a chart
    that starts rendering a privileged pod must be looked at, not waved through)."""
    for config in (CONFIG, CHARTS_CONFIG):
        assert not set(NEVER_EXCEPTED) & set(accepted(config)), config.name


# --- the vendors' charts, as the stack renders them --------------------------------------------------
@pytest.fixture(scope="module")
def charts_report(reports) -> dict[str, Any]:
    """checkov's report on the dev stack's rendered charts (what build/charts/ holds)."""
    if isinstance(reports["charts"], str):
        pytest.skip(reports["charts"])
    return reports["charts"]


def test_the_chart_scan_covers_the_vendors_workloads(charts_report):
    results = charts_report["results"]
    resources = {f["resource"] for f in results.get("failed_checks", []) + results.get("passed_checks", [])}
    for workload in ("DaemonSet.node-feature-discovery.node-feature-discovery-worker",
                     "Deployment.gpu-operator.gpu-operator", "Deployment.network-operator.network-operator"):
        assert workload in resources
    assert charts_report["summary"]["parsing_errors"] == 0


def test_every_chart_finding_is_accepted_with_a_reason(charts_report):
    reasons = accepted(CHARTS_CONFIG)
    open_findings = sorted(f"{check} on {resource}" for check, resource in findings(charts_report)
                           if check not in reasons)
    assert open_findings == [], "a chart bump brought these: accept them in .checkov-charts.yaml with a reason"


def test_no_stale_chart_exceptions(charts_report):
    stale = sorted(set(accepted(CHARTS_CONFIG)) - {check for check, _ in findings(charts_report)})
    assert stale == [], f"these checks pass now: remove them from .checkov-charts.yaml: {stale}"
