"""The fabric test image pre-pull DaemonSet: on every IB node, tolerating the pool's taint, holding
the very image the job runs, unprivileged, and waiting for nothing but the cluster."""

from __future__ import annotations

from typing import Any

import pytest

import stack_config
from components.fabric import image_prepull
from core import fabric
from tests.chart_value_checks import chart_values
from tests.schema_checks import as_api, core_errors

DAEMONSET = "kubernetes:apps/v1:DaemonSet"
POOL = "azure-native:containerservice:AgentPool"
JOB = "kubernetes:batch.volcano.sh/v1alpha1:Job"
PREPULL = "fabric-test-prepull-daemonset"


def daemonset(stack) -> dict[str, Any]:
    return as_api(stack.one(DAEMONSET, PREPULL).inputs)


def pod(stack) -> dict[str, Any]:
    return daemonset(stack)["spec"]["template"]["spec"]


def tolerates(tolerations: list[dict], taint: str) -> bool:
    key_value, effect = taint.rsplit(":", 1)
    key, value = key_value.split("=", 1)
    return any(t.get("key") == key and t.get("effect") == effect
               and (t.get("operator") == "Exists" or t.get("value") == value) for t in tolerations)


@pytest.mark.parametrize("which", ["dev", "hb"])
def test_it_lands_on_every_ib_node_and_nowhere_else(request, which):
    stack = request.getfixturevalue(which)
    spec, pool = pod(stack), stack.one(POOL).inputs
    assert all(tolerates(spec["tolerations"], taint) for taint in pool["nodeTaints"])
    assert spec["nodeSelector"] == fabric.pool_node_selector()
    assert spec["nodeSelector"].items() <= pool["nodeLabels"].items()


@pytest.mark.parametrize("which", ["dev", "hb"])
def test_it_pulls_exactly_the_image_the_job_runs(request, which):
    stack = request.getfixturevalue(which)
    (pull,) = pod(stack)["initContainers"]
    job_images = {c["image"] for t in as_api(stack.one(JOB).inputs)["spec"]["tasks"]
                  for c in t["template"]["spec"]["containers"]}
    assert {pull["image"]} == job_images
    assert pull["command"] == ["true"] and pull["imagePullPolicy"] == "IfNotPresent"
    # the CUDA image sets NVIDIA_VISIBLE_DEVICES=all; void: no GPU injected even under an NVIDIA default runtime
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in pull["env"]
    (hold,) = pod(stack)["containers"]
    assert hold["image"] == image_prepull.PAUSE_IMAGE and "@sha256:" in hold["image"]


def test_a_configured_image_is_the_one_pulled(render_kubernetes):
    stack = render_kubernetes(fabricTest={"image": "example.io/nccl:1.2.3"})  # test_fabric_check's IMAGE
    assert pod(stack)["initContainers"][0]["image"] == "example.io/nccl:1.2.3"


def test_it_is_small_unprivileged_and_asks_for_no_gpu_or_rdma(dev):
    spec = pod(dev)
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["automountServiceAccountToken"] is False
    assert not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("volumes")
    for c in spec["initContainers"] + spec["containers"]:
        sc = c["securityContext"]
        assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
        assert sc["readOnlyRootFilesystem"] is True and sc["capabilities"] == {"drop": ["ALL"]}
        asked = set(c["resources"]["requests"]) | set(c["resources"]["limits"])
        assert asked == {"cpu", "memory"}, c["name"]  # no nvidia.com/gpu, no rdma/*
        assert c["resources"]["limits"]["memory"].endswith("Mi")


def test_it_waits_for_nothing_but_the_cluster(dev):
    ds = dev.one(DAEMONSET, PREPULL)
    provider = dev.one("pulumi:providers:kubernetes")
    assert ds.provider.startswith(provider.urn + "::")
    for r in dev.resources:
        if r.urn != ds.urn and dev.depends_on(ds, r):
            assert r.type == "kubernetes:core/v1:Namespace" and r.inputs["metadata"]["name"] == (
                image_prepull.NAMESPACE), f"the pre-pull waits for {r.type} {r.name}"
    for other in (dev.one(POOL), dev.one("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy"), dev.one(JOB)):
        assert not dev.depends_on(ds, other)
    # nobody waits for it either, Pulumi included
    assert not any(dev.depends_on(r, ds) for r in dev.resources)
    assert daemonset(dev)["metadata"]["annotations"] == {image_prepull.SKIP_AWAIT: "true"}


def test_its_namespace_is_restricted_and_closed(dev):
    ns = as_api(dev.one("kubernetes:core/v1:Namespace", "fabric-test-prepull-namespace-ns").inputs)
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    policy = as_api(dev.one("kubernetes:networking.k8s.io/v1:NetworkPolicy").inputs)
    assert policy["spec"]["podSelector"]["matchLabels"] == daemonset(dev)["spec"]["selector"]["matchLabels"]
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert "ingress" not in policy["spec"] and "egress" not in policy["spec"]


def test_its_objects_pass_the_kubernetes_schema(dev):
    for type_, name in ((DAEMONSET, PREPULL), ("kubernetes:networking.k8s.io/v1:NetworkPolicy", None)):
        assert core_errors(dev.one(type_, name).inputs) == [], type_


def test_no_test_no_prepull(render):
    assert PREPULL not in {r.name for r in render(fabricTest={"enabled": False}).of_type(DAEMONSET)}


def test_args_refuse_an_empty_image():
    with pytest.raises(ValueError, match="image: got ''"):
        image_prepull.ImagePrepullArgs(image="")


def test_it_runs_under_runc_on_gpu_nodes(dev, reference):
    """Why the pre-pull runs without the NVIDIA runtime while the GPU driver installs: the pod names no
    runtime class, and with CDI on (the pinned chart's default, not overridden) the GPU Operator does
    not make the NVIDIA runtime containerd's default (it sets NVIDIA_RUNTIME_SET_AS_DEFAULT=false)."""
    assert "runtimeClassName" not in pod(dev)
    values = dev.one("kubernetes:helm.sh/v3:Release", "gpu-operator-release").inputs["values"]
    defaults = chart_values(reference, "gpu-operator", stack_config.DEFAULT_VERSIONS["gpuOperator"]).defaults
    assert defaults["cdi"]["enabled"] is True and values.get("cdi", {}).get("enabled", True) is True
