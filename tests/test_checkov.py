"""checkov on the offline render: every finding is fixed in the program or listed in .checkov.yaml
with its reason, and no listed exception is stale.

What is scanned: the Kubernetes objects of the dev and hb renders (`offline.synth`, as `make synth` writes
them to build/manifests), except that a Volcano Job is replaced by one Pod per task, built from the
task's pod template. checkov reads any `kind: Job` as a batch/v1 Job (spec.template), which a Volcano
Job does not have, so it would check nothing real there; the pods are what the scheduler creates.

The vendors' charts as the stack renders them (build/charts/, offline/charts.py) are scanned as well,
against their own list of accepted findings, .checkov-charts.yaml: checkov skips a check everywhere or
nowhere, and what the charts may do the fabric test's pods may not.

checkov lives in its own virtualenv (.venv-scan, `make scan-venv`; see requirements-scan.txt).
"""

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

from offline import engine, synth

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / ".checkov.yaml"
CHARTS_CONFIG = ROOT / ".checkov-charts.yaml"
# Checks that must stay fixed everywhere: never excepted in either file.
NEVER_EXCEPTED = {"CKV_K8S_16": "privileged", "CKV_K8S_17": "hostPID", "CKV_K8S_18": "hostIPC",
                  "CKV_K8S_19": "hostNetwork", "CKV_K8S_39": "SYS_ADMIN"}
VOLCANO_JOB_API = "batch.volcano.sh/"


def checkov_binary() -> str:
    for candidate in (os.environ.get("CHECKOV"), ROOT / ".venv-scan" / "bin" / "checkov", shutil.which("checkov")):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    message = "checkov not installed: run `make scan-venv` (or set CHECKOV=/path/to/checkov)"
    if os.environ.get("CI"):
        pytest.fail(message + " - CI must run the security scan")
    pytest.skip(message)


def pods_of_volcano_job(job: dict[str, Any]) -> list[dict[str, Any]]:
    meta = job["metadata"]
    pods = []
    for task in job["spec"]["tasks"]:
        template = task["template"]
        pods.append({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**(template.get("metadata") or {}), "name": f"{meta['name']}-{task['name']}",
                         "namespace": meta.get("namespace", "default")},
            "spec": template["spec"],
        })
    return pods


@pytest.fixture(scope="module")
def scan_dir(tmp_path_factory, dev) -> Path:
    """The manifests of the dev stack (GPU: the NCCL job) and of the hb stack (CPU-only: the MPI
    point-to-point job with its OSU build initContainer), each file prefixed with its stack."""
    out = tmp_path_factory.mktemp("checkov") / "manifests"
    out.mkdir()
    jobs = 0
    for stack, rendering in (("dev", dev), ("hb", engine.render("hb"))):
        files = synth.synthesize(rendering, images=False)
        manifests = {name: content for name, content in files.items() if name.startswith("manifests/")}
        assert manifests, f"the offline render of {stack} has no manifests"
        for name, content in manifests.items():
            doc = yaml.safe_load(content)
            if doc.get("apiVersion", "").startswith(VOLCANO_JOB_API) and doc.get("kind") == "Job":
                jobs += 1
                for pod in pods_of_volcano_job(doc):
                    pod_file = out / f"{stack}.pod.{pod['metadata']['name']}.yaml"
                    pod_file.write_text(yaml.safe_dump(pod, sort_keys=True))
            else:
                data = content if isinstance(content, bytes) else content.encode()
                (out / f"{stack}.{Path(name).name}").write_bytes(data)
    assert jobs >= 2, "a Volcano Job is missing from the renders: its pods would go unscanned"
    return out


def run_checkov(directory: Path, *extra: str) -> dict[str, Any]:
    done = subprocess.run(
        [checkov_binary(), "-d", str(directory), "--framework", "kubernetes", "-o", "json", "--compact",
         "--skip-download", *extra],
        # not from the project directory: checkov would pick up .checkov.yaml there by itself
        capture_output=True, text=True, timeout=600, cwd=directory.parent,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"},
    )
    assert done.returncode in (0, 1), f"checkov failed to run ({done.returncode}): {done.stderr[-2000:]}"
    report = json.loads(done.stdout)
    if isinstance(report, list):  # one report per framework
        report = next(r for r in report if r.get("check_type") == "kubernetes")
    return report


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
def unfiltered(scan_dir) -> dict[str, Any]:
    return run_checkov(scan_dir)


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


def test_the_config_file_runs_clean(scan_dir):
    """What a user runs: checkov with .checkov.yaml on the render reports nothing."""
    report = run_checkov(scan_dir, "--config-file", str(CONFIG))
    assert report["summary"]["failed"] == 0, sorted(findings(report))
    assert report["summary"]["passed"] > 0


def test_privileged_and_host_access_are_not_excepted():
    """The exceptions never cover privileged pods or host namespaces: those must stay fixed (a chart
    that starts rendering a privileged pod must be looked at, not waved through)."""
    for config in (CONFIG, CHARTS_CONFIG):
        assert not set(NEVER_EXCEPTED) & set(accepted(config)), config.name


# --- the vendors' charts, as the stack renders them --------------------------------------------------
@pytest.fixture(scope="module")
def charts_report(tmp_path_factory, dev_charts) -> dict[str, Any]:
    """One checkov run over the dev stack's rendered charts (what build/charts/ holds)."""
    out = tmp_path_factory.mktemp("checkov-charts") / "charts"
    out.mkdir()
    for name, rendered in dev_charts.items():
        (out / f"{name}.yaml").write_text(rendered.text)
    return run_checkov(out)


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
