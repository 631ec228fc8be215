"""The real Pulumi engine (e2e/engine.py: the CLI, its Python language host, the Kubernetes provider, built
by e2e/tools/build.sh) runs this program's Kubernetes layer against the real control plane, as a stack on
a cluster that already exists (e2e/stacks/Pulumi.e2e-dev.yaml: cluster-up's, charts from the reference
material's archives): preview, up, a preview that must find no change, a refresh that must find no drift,
a one-key change whose diff is exactly what that key drives, and a destroy that leaves nothing behind.

Stand-ins, where the cluster here has no program that would act: kwok plays each node's kubelet (pods are
Running and Ready at once, a Job's pods Succeeded: e2e/cluster.py), so a Deployment the Helm releases or
Volcano's manifest create becomes available without any container running. No operator reconciles the
NicClusterPolicy or the NodeFeatureRule; the stack does not wait on their status. The day-0 fabric test
(fabricTest.enabled) is off in this stack: its Volcano Job needs Volcano's controllers to make its pods
(docs/real-control-plane.md, "The Pulumi engine")."""

from __future__ import annotations

import json

import pytest
import yaml

from e2e import lifecycle
from e2e.lifecycle import DESTROY_SECONDS, UP_SECONDS
from offline import engine as offline

STACK = "e2e-dev"


@pytest.fixture(scope="module")
def dev(planes):
    # No Volcano from the harness: the stack's own `pulumi up` applies its manifest (an object applied by
    # cluster-up first would be the harness's in the engine's create, no-change preview and destroy), and these
    # stacks run no fabric test (their files say why), so no Volcano process is needed either.
    plane, _, _ = planes.fresh("dev", with_volcano=False)  # the dev stack's pools: the cluster "another team" made
    stack = lifecycle.Stack(STACK, planes.bin)
    before = lifecycle.listed(plane)
    stack.start()
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
    previewed = {type_and_name(s["urn"]) for s in stack.preview_steps() if s["op"] == "create"}
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


def test_up_installs_the_kubernetes_layer(dev):
    stack, plane, _ = dev
    stack.run("up", "--yes", "--skip-preview", timeout=UP_SECONDS)
    outputs = json.loads(stack.run("stack", "output", "--json").stdout)
    assert outputs["fabricVerdict"] == "not run: fabricTest.enabled is false"
    releases = json.loads(plane.kubectl("get", "secrets", "-A", "-l", "owner=helm", "-o", "json").stdout)["items"]
    assert {r["metadata"]["labels"]["name"] for r in releases} >= {"node-feature-discovery", "network-operator",
                                                                   "gpu-operator"}
    assert plane.kubectl("get", "nicclusterpolicies.mellanox.com", "nic-cluster-policy").returncode == 0
    assert plane.kubectl("get", "deployments", "-n", "volcano-system").stdout.count("volcano-") >= 3


def test_a_second_preview_finds_no_change(dev):
    dev[0].run("preview", "--expect-no-changes", "--diff")


def test_refresh_finds_no_drift(dev):
    stack = dev[0]
    stack.run("refresh", "--yes", "--expect-no-changes", "--skip-preview")
    stack.run("preview", "--expect-no-changes", "--diff")


def test_a_one_key_change_previews_exactly_its_diff(dev):
    """rdmaMode drives, in this stack, one object: the NicClusterPolicy's device plugin section (shared RDMA
    device plugin -> SR-IOV device plugin: components/platform/network_operator.py). Its preview updates that
    object in place and nothing else; the key set back, the preview finds no change again."""
    stack = dev[0]
    stack.run("config", "set", "aks-infiniband:rdmaMode", "sriov")
    try:
        steps = stack.preview_steps()
    finally:
        stack.run("config", "set", "aks-infiniband:rdmaMode", "shared")
    changed = {(s["op"], s["urn"].rsplit("::", 1)[1]) for s in steps if s["op"] not in ("same", "read")}
    assert changed == {("update", "network-operator-policy")}, changed
    stack.run("preview", "--expect-no-changes")


def test_up_names_a_pool_that_disagrees_with_the_config_at_once(dev):
    """The existing cluster's IB pool has 2 nodes; a stack that says 3 stops at `up` with the key's one line,
    before any resource, and changes nothing (stack/existing_cluster.py)."""
    stack = dev[0]
    stack.run("config", "set", "--path", "aks-infiniband:ibPool.nodeCount", "3")
    try:
        done = stack.run("up", "--yes", "--skip-preview", timeout=UP_SECONDS, check=False)
    finally:
        stack.run("config", "set", "--path", "aks-infiniband:ibPool.nodeCount", "2")
    assert done.returncode != 0
    assert "aks-infiniband:ibPool.nodeCount: got 3; pool ibpool has 2 nodes" in done.stdout + done.stderr
    stack.run("preview", "--expect-no-changes")


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
