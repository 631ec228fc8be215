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
import time
from pathlib import Path

import pytest
import yaml

from e2e import cluster, engine
from offline import engine as offline

STACK = "e2e-dev"
STACK_FILE = engine.STACKS / f"Pulumi.{STACK}.yaml"
# Bounds of each step (seconds): measured figures are in docs/real-control-plane.md; these are generous.
UP_SECONDS, PREVIEW_SECONDS, DESTROY_SECONDS = 900, 300, 600
# What the server or its controllers write by themselves, not the stack: left out of "what is left".
NOT_THE_STACKS = {"events", "events.events.k8s.io", "leases.coordination.k8s.io", "endpoints",
                  "endpointslices.discovery.k8s.io", "serviceaccounts", "configmaps", "secrets",
                  "controllerrevisions.apps", "replicasets.apps", "pods", "jobs.batch"}
TIMES: dict[str, float] = {}


def pulumi(planes, *args: str, timeout: float = PREVIEW_SECONDS, check: bool = True):
    start = time.monotonic()
    done = engine.run([*args, "--stack", STACK], planes.bin, capture=True, timeout=timeout)
    TIMES[" ".join(args[:2])] = time.monotonic() - start
    print(f"[engine] pulumi {' '.join(args)}: exit {done.returncode} in {TIMES[' '.join(args[:2])]:.0f}s")
    if check:
        assert done.returncode == 0, f"pulumi {' '.join(args)} exited {done.returncode}:\n{done.stdout[-6000:]}" \
                                     f"\n{done.stderr[-4000:]}"
    return done


def stack_config() -> dict:
    return yaml.safe_load(STACK_FILE.read_text())["config"]


def listed(plane) -> set[tuple[str, str, str]]:
    """(resource, namespace, name) of every object of every listable resource but those NOT_THE_STACKS."""
    kinds = plane.kubectl("api-resources", "--verbs=list", "-o", "name").stdout.split()
    out = set()
    for kind in kinds:
        if kind in NOT_THE_STACKS:
            continue
        got = json.loads(plane.kubectl("get", kind, "-A", "-o", "json").stdout)
        for item in got.get("items", []):
            meta = item["metadata"]
            out.add((kind, meta.get("namespace", ""), meta["name"]))
    return out


@pytest.fixture(scope="module")
def lifecycle(planes):
    plane, _, _ = planes.fresh("dev")  # the dev stack's pools: the cluster "another team" made
    engine.reset(STACK)
    before = listed(plane)
    pulumi(planes, "stack", "init", "--secrets-provider", "passphrase")
    yield plane, before
    # Whatever a failed test left: destroyed, so the next run starts clean (its result is not asserted here).
    engine.run(["destroy", "--yes", "--stack", STACK], planes.bin, capture=True, timeout=DESTROY_SECONDS)
    print(f"[engine] step times (s): {json.dumps({k: round(v) for k, v in TIMES.items()})}")


def test_preview_lists_the_objects_of_the_offline_render(planes, lifecycle):
    done = pulumi(planes, "preview", "--json")
    steps = json.loads(done.stdout)["steps"]
    previewed = {s["urn"] for s in steps if s["op"] == "create"}
    rendering = offline.render(STACK, config=stack_config())  # the same program under mocks, same stack name
    rendered = {r.urn for r in rendering.resources}
    assert previewed, "the preview creates nothing"
    assert rendered - previewed == set(), "rendered offline, not in the preview"
    assert {u for u in previewed - rendered if "pulumi:pulumi:Stack" not in u} == set(), \
        "in the preview, not rendered offline"


def test_up_installs_the_kubernetes_layer(planes, lifecycle):
    plane, _ = lifecycle
    pulumi(planes, "up", "--yes", "--skip-preview", timeout=UP_SECONDS)
    outputs = json.loads(pulumi(planes, "stack", "output", "--json").stdout)
    assert outputs["fabricVerdict"] == "not run: fabricTest.enabled is false"
    releases = json.loads(plane.kubectl("get", "secrets", "-A", "-l", "owner=helm", "-o", "json").stdout)["items"]
    assert {r["metadata"]["labels"]["name"] for r in releases} >= {"node-feature-discovery", "network-operator",
                                                                   "gpu-operator"}
    assert plane.kubectl("get", "nicclusterpolicies.mellanox.com", "nic-cluster-policy").returncode == 0
    assert plane.kubectl("get", "deployments", "-n", "volcano-system").stdout.count("volcano-") >= 3


def test_a_second_preview_finds_no_change(planes, lifecycle):
    pulumi(planes, "preview", "--expect-no-changes", "--diff")


def test_refresh_finds_no_drift(planes, lifecycle):
    pulumi(planes, "refresh", "--yes", "--expect-no-changes", "--skip-preview")
    pulumi(planes, "preview", "--expect-no-changes", "--diff")


def test_a_one_key_change_previews_exactly_its_diff(planes, lifecycle):
    """rdmaMode drives, in this stack, one object: the NicClusterPolicy's device plugin section (shared RDMA
    device plugin -> SR-IOV device plugin: components/platform/network_operator.py). Its preview updates that
    object in place and nothing else; the key set back, the preview finds no change again."""
    pulumi(planes, "config", "set", "aks-infiniband:rdmaMode", "sriov")
    try:
        steps = json.loads(pulumi(planes, "preview", "--json").stdout)["steps"]
    finally:
        pulumi(planes, "config", "set", "aks-infiniband:rdmaMode", "shared")
    changed = {(s["op"], s["urn"].rsplit("::", 1)[1]) for s in steps if s["op"] not in ("same", "read")}
    assert changed == {("update", "network-operator-policy")}, changed
    pulumi(planes, "preview", "--expect-no-changes")


def test_destroy_leaves_nothing_behind(planes, lifecycle):
    plane, before = lifecycle
    pulumi(planes, "destroy", "--yes", "--skip-preview", timeout=DESTROY_SECONDS)
    left = listed(plane) - before
    # Helm keeps the CRDs of a chart's crds/ folder (docs/teardown.md lists them and how to remove them).
    crds = {n for kind, _, n in left if kind == "customresourcedefinitions.apiextensions.k8s.io"}
    others = {x for x in left if x[0] != "customresourcedefinitions.apiextensions.k8s.io"}
    assert others == set(), f"left after destroy: {sorted(others)}"
    print(f"[engine] CRDs left by Helm: {sorted(crds)}")
    stuck = [x for x in listed(plane) if x[0] == "namespaces" and x[2] not in {n for _, _, n in before}]
    assert stuck == []
    assert Path(engine.BACKEND).is_dir()
    state = json.loads(pulumi(planes, "stack", "export").stdout)
    assert [r["urn"] for r in state["deployment"].get("resources") or [] if "pulumi:pulumi:Stack" not in r["urn"]
            and "pulumi:providers" not in r["urn"]] == []
    assert cluster.NETNS
