"""The real Pulumi engine (e2e/engine.py: the CLI, its Python language host, the Kubernetes provider, built
by e2e/tools/build.sh) runs this program's Kubernetes layer against the real control plane, as a stack on
a cluster that already exists (e2e/stacks/Pulumi.e2e-dev.yaml: cluster-up's, charts from the reference
material's archives): preview, up, a preview that must find no change, a refresh that must find no drift,
a one-key change whose diff is exactly what that key drives, and a destroy that leaves nothing behind.

The `up` is day 0 with the fabric test: Volcano's own programs run the stack's Volcano Job, the stack's certify
Job judges it, and the stack's outputs must say what `verify report` says of the same REAL recorded log.

Stand-ins, where the cluster here has no program that would act: kwok plays each node's kubelet (pods are
Running and Ready at once, a Job's pods Succeeded: e2e/cluster.py), so a Deployment the Helm releases create
becomes available without any container running. No operator reconciles the NicClusterPolicy or the
NodeFeatureRule; the stack does not wait on their status. For day 0 (e2e/engine_day0.py): Volcano's programs
stand in for its Deployments' pods, kwok serves the launcher's recorded log, and the harness runs the certify
pod's own command as its ServiceAccount, then reports the pod ended with its exit code."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from e2e import apply, engine_day0, fabric_run, lifecycle
from e2e.cluster import ROOT
from e2e.lifecycle import DESTROY_SECONDS, UP_SECONDS
from offline import engine as offline

STACK = "e2e-dev"
# The flags of the certify pod's command that say how a log is judged: `verify report` takes the same.
REPORT_FLAGS = ("--kind", "--sku", "--nodes", "--threshold-gbps", "--threshold-gbits", "--rdma-driver")


@pytest.fixture(scope="module")
def dev(planes, tmp_path_factory):
    # No Volcano manifest from the harness: the stack's own `pulumi up` applies it (an object applied by
    # cluster-up first would be the harness's in the engine's create, no-change preview and destroy); Volcano's
    # programs start once it has (engine_day0), kwok holding its Deployments' pods until then.
    plane, _, _ = planes.fresh("dev", with_volcano=False,  # the dev stack's pools: the cluster "another team" made
                               stages=[ROOT / "e2e" / "kwok-stage-engine-day0.yaml"])
    stack = lifecycle.Stack(STACK, planes.bin)
    before = lifecycle.listed(plane)
    stack.start()
    stack.workdir = tmp_path_factory.mktemp("e2e-dev")
    yield stack, plane, before
    # Whatever a failed test left is destroyed, so that the next run starts clean (not asserted here).
    stack.run("destroy", "--yes", "--skip-preview", timeout=DESTROY_SECONDS, check=False)
    print(f"[engine] {STACK} step times (s): {json.dumps(stack.times)}")


def type_and_name(urn: str) -> tuple[str, str]:
    """A URN's resource type and name (its parents' types, before the last `$`, are how the engine spells the
    chain; the offline render's mocks spell it otherwise)."""
    qualified, _, name = urn.rpartition("::")
    return qualified.rpartition("$")[2].rpartition("::")[2], name


def test_preview_lists_the_objects_of_the_offline_render(dev):
    stack, _, _ = dev
    # a `.get` resource (the day-0 result's ConfigMap) is a read, every other one a create
    previewed = {type_and_name(s["urn"]) for s in stack.preview_steps() if s["op"] in ("create", "read")}
    rendering = offline.render(STACK, config=stack.config)  # the same program under mocks, same stack name
    rendered = {type_and_name(r.urn) for r in rendering.resources}
    assert len(previewed) > 20, previewed
    assert rendered - previewed == set(), "rendered offline, not in the preview"
    # The provider expands Volcano's ConfigGroup into one resource per object of the manifest, at preview;
    # the mocks do not. Those, and the stack itself, are all the preview has beyond the render.
    manifest = {(manifest_type(o), f"volcano-manifest:{manifest_name(o)}") for o in volcano_objects(stack)}
    assert {t for t in previewed - rendered if t[0] != "pulumi:pulumi:Stack"} == manifest


def volcano_objects(stack) -> list[dict]:
    """The objects of Volcano's manifest as the stack applies it (components/platform/volcano.py)."""
    from unittest import mock

    from components.platform import volcano
    from e2e import engine
    from stack_config import parse

    cfg = parse(stack.config, STACK)
    where = {k: v for k, v in engine.environment(stack.bin).items() if k in (volcano.CACHE_ENV, volcano.NO_FETCH_ENV)}
    with mock.patch.dict("os.environ", where):
        text = volcano.configured(volcano.checked_manifest(cfg.versions.volcano), False)
    return [o for o in yaml.safe_load_all(text) if o]


def manifest_type(obj: dict) -> str:
    group, _, version = obj["apiVersion"].rpartition("/")
    return f"kubernetes:{group or 'core'}/{version}:{obj['kind']}"


def manifest_name(obj: dict) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def fabric_job(stack) -> dict:
    """The fabric test's Volcano Job as the stack renders it offline (the same config)."""
    _, single = apply.stack_objects(offline.render(STACK, config=stack.config))
    return next(o for o in single if o["kind"] == "Job" and o["apiVersion"].startswith("batch.volcano.sh"))


def up_with_day0(stack, plane, manifest: list[dict] | None) -> tuple[dict, engine_day0.Day0, dict]:
    """`pulumi up` with day 0's stand-ins beside it (Volcano started from `manifest`; None: already running) and
    the recorded log served for the stack's Job: (that Job, the stand-ins, the stack's outputs)."""
    job = fabric_job(stack)
    day0 = engine_day0.Day0(plane, manifest or [], job, fabric_run.recorded_log(job["metadata"]["name"]),
                            stack.workdir, UP_SECONDS, start_volcano=manifest is not None)
    day0.start()
    up = stack.run("up", "--yes", "--skip-preview", timeout=UP_SECONDS, check=False)
    day0.join()
    assert up.returncode == 0, f"pulumi up exited {up.returncode}:\n{up.stdout[-6000:]}\n{up.stderr[-4000:]}"
    assert day0.code == 0, day0.stderr[-4000:]
    return job, day0, json.loads(stack.run("stack", "output", "--json").stdout)


def test_up_installs_the_kubernetes_layer_and_its_day0_verdict_is_verify_reports(dev):
    stack, plane, _ = dev
    _, day0, outputs = up_with_day0(stack, plane, volcano_objects(stack))
    # what `verify report` says of the same log, judged for the same size and node count as the certify pod
    judged = [a for i, a in enumerate(day0.args) if a in REPORT_FLAGS or (i and day0.args[i - 1] in REPORT_FLAGS)]
    report = json.loads(subprocess.run([sys.executable, "-m", "verify", "report", *judged, "--json", "-"],
                                       input=day0.log, cwd=ROOT, capture_output=True, text=True).stdout)
    assert outputs["fabricVerdict"] == report["verdict"] == "FAIL", (outputs, report["reasons"])
    assert outputs["allReduceBusBwAtMaxSizeGbps"] == report["busbw_at_max_size_gbps"]
    assert outputs["allReduceMaxBusBwGbps"] == report["max_busbw_gbps"]
    assert outputs["fabricTransport"] == report["transport"]["summary"] == "TCP sockets, not RDMA (NET/Socket x8)"
    assert outputs["fabricSuspects"] == report["suspects"] == []
    releases = json.loads(plane.kubectl("get", "secrets", "-A", "-l", "owner=helm", "-o", "json").stdout)["items"]
    assert {r["metadata"]["labels"]["name"] for r in releases} >= {"node-feature-discovery", "network-operator",
                                                                   "gpu-operator"}
    assert plane.kubectl("get", "nicclusterpolicies.mellanox.com", "nic-cluster-policy").returncode == 0
    assert plane.kubectl("get", "deployments", "-n", "volcano-system").stdout.count("volcano-") >= 3


def test_a_second_preview_finds_no_change(dev):
    dev[0].run("preview", "--expect-no-changes", "--diff")


def test_refresh_finds_no_drift(dev):
    """No drift. The one resource a refresh reports updated is the day-0 result's ConfigMap, read with `.get`:
    its state is given the inputs a read never had (pulumi/pulumi#16401, open), not a change of the cluster.
    Once refreshed, a second refresh finds nothing, and neither does a preview."""
    stack = dev[0]
    done = stack.run("refresh", "--yes", "--skip-preview")
    updated = [line.split() for line in done.stdout.splitlines() if " updated (" in line]
    assert [(u[1], u[2]) for u in updated] in ([], [("kubernetes:core/v1:ConfigMap", "fabric-check-result")]), updated
    stack.run("refresh", "--yes", "--expect-no-changes", "--skip-preview")
    stack.run("preview", "--expect-no-changes", "--diff")


def test_up_names_a_pool_that_disagrees_with_the_config_at_once(dev):
    """The existing cluster's IB pool has 2 nodes; a stack that says 3 stops at `up` with the key's one line,
    before any resource, and changes nothing (stack/existing_cluster.py)."""
    stack = dev[0]
    with stack.config_set("aks-infiniband:ibPool.nodeCount", "3"):
        done = stack.run("up", "--yes", "--skip-preview", timeout=UP_SECONDS, check=False)
    assert done.returncode != 0
    assert "aks-infiniband:ibPool.nodeCount: got 3; pool ibpool has 2 nodes" in done.stdout + done.stderr
    stack.run("preview", "--expect-no-changes")


def changed(steps: list[dict]) -> set[tuple[str, str]]:
    """(op, resource name) of a preview's updates and replacements."""
    found = {(s["op"], s["urn"].rsplit("::", 1)[1]) for s in steps if s["op"] in ("update", "replace")}
    print(f"[engine] the preview's changes: {sorted(found)}")
    return found


# What a changed fabric test replaces, each because its content is the test's: its Volcano Job (Volcano allows no
# spec update), the certify Job named after it, and the certifier's re-test template (the Job's spec; the
# provider replaces a ConfigMap whose data changes). Each Job under a new name (components/fabric/mpi_job.py
# hashed_name): under its old one the preview failed, Volcano's webhook refusing the provider's dry-run apply.
RETEST = {("replace", "fabric-test-job"), ("replace", "fabric-check-certify"), ("replace", "certifier-template")}


def test_a_one_key_change_previews_exactly_its_diff(dev):
    """rdmaMode drives, in this stack, the NicClusterPolicy's device plugin section (shared RDMA device plugin
    -> SR-IOV device plugin: components/platform/network_operator.py), updated in place, and the RDMA resource
    the fabric test's pods ask for (RETEST). Nothing else; the key set back, the preview finds no change."""
    stack = dev[0]
    with stack.config_set("aks-infiniband:rdmaMode", "sriov"):
        assert changed(stack.preview_steps()) == {("update", "network-operator-policy"), *RETEST}
    stack.run("preview", "--expect-no-changes")


def test_a_changed_fabric_test_runs_again_and_is_judged_again(dev):
    """A longer timeout (fabricTest.timeoutMinutes, the pods' deadline) through `up`: RETEST, and the recurring
    run's deadline, which is its re-test's (clusterside/certify_recurring.py run_minutes), updated in place. The
    old Jobs deleted, the new Volcano Job run by Volcano and judged by the new certify Job, whose verdict the
    outputs say, naming it."""
    stack, plane, _ = dev
    before = json.loads(stack.run("stack", "output", "--json").stdout)["fabricTestJob"]
    with stack.config_set("aks-infiniband:fabricTest.timeoutMinutes", "45"):
        assert changed(stack.preview_steps()) == {*RETEST, ("update", "certifier-recurring")}
        job, day0, outputs = up_with_day0(stack, plane, None)  # Volcano runs since the first up
    new = f"{job['metadata']['namespace']}/{job['metadata']['name']}"
    assert outputs["fabricTestJob"] == new != before
    assert outputs["fabricVerdict"] == "FAIL", outputs  # the same recorded log (NCCL over sockets)
    jobs = json.loads(plane.kubectl("get", "jobs.batch.volcano.sh", "-n", "fabric-test", "-o", "json").stdout)
    assert [j["metadata"]["name"] for j in jobs["items"]] == [job["metadata"]["name"]]
    certify = json.loads(plane.kubectl("get", "jobs.batch", "-n", "fabric-certifier", "-o", "json").stdout)
    assert [j["metadata"]["name"] for j in certify["items"]] == [day0.certify_job], "the old certify Job is gone"


def test_destroy_leaves_nothing_behind(dev):
    stack, plane, before = dev
    stack.run("destroy", "--yes", "--skip-preview", timeout=DESTROY_SECONDS)
    others, crds = lifecycle.left_after_destroy(plane, before)
    assert others == set(), f"left after destroy: {sorted(others)}"
    print(f"[engine] CRDs Helm kept: {sorted(crds)}")
    state = json.loads(stack.run("stack", "export").stdout)
    kept = [r["urn"] for r in state["deployment"].get("resources") or []
            if not r["type"].startswith(("pulumi:pulumi:Stack", "pulumi:providers:"))]
    assert kept == []
