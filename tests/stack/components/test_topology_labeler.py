"""The labeler's DaemonSet as the stack renders it (components/platform/topology_labeler.py: on every IB node before it
is certified, privileged only for the SHARP step, the shipped script, RBAC, each object against the Kubernetes
schema, the steps an arm64 size can run) and the fabric test job's network topology; the labeler's own logic is
tests/unit/labeler/test_topology.py's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from components.platform import topology_labeler
from core import fabric, pins
from labeler import topology
from tests.schema_checks import as_api, core_errors, crd_errors, pinned_name

DAEMONSET = "kubernetes:apps/v1:DaemonSet"
LABELER = "topology-daemonset"
POOL = "azure-native:containerservice:AgentPool"
JOB = "kubernetes:batch.volcano.sh/v1alpha1:Job"
NAMES = fabric.topology_names()


def labeler_pod(dev) -> dict[str, Any]:
    return as_api(dev.one(DAEMONSET, LABELER).inputs)["spec"]["template"]["spec"]


def test_the_labeler_runs_on_every_ib_node_before_it_is_certified(dev):
    spec = labeler_pod(dev)
    assert spec["nodeSelector"] == fabric.pool_node_selector()
    for taint in dev.one(POOL).inputs["nodeTaints"]:
        key, effect = taint.split("=")[0], taint.rsplit(":", 1)[1]
        assert any(t["key"] == key and t["effect"] == effect for t in spec["tolerations"]), taint
    assert {"key": fabric.FABRIC_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]


def test_only_the_sharp_step_is_privileged_and_it_holds_no_api_token(dev):
    spec = labeler_pod(dev)
    sharp, label = spec["initContainers"]
    assert sharp["securityContext"] == {"privileged": True} and "env" not in sharp
    assert spec["automountServiceAccountToken"] is False
    assert not any("serviceaccount" in m["mountPath"] for m in sharp["volumeMounts"])
    assert any(m["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount" for m in label["volumeMounts"])
    for unprivileged in (label, spec["containers"][0]):
        ctx = unprivileged["securityContext"]
        assert ctx["runAsNonRoot"] and not ctx["privileged"] and ctx["capabilities"] == {"drop": ["ALL"]}


def test_the_labeler_runs_the_shipped_script_with_the_label_names_from_one_place(dev):
    spec = labeler_pod(dev)
    sharp, init = spec["initContainers"]
    assert (sharp["command"], init["command"]) == (["python3", "/opt/aks-infiniband/topology.py", "sharp"],
                                                   ["python3", "/opt/aks-infiniband/topology.py", "node"])
    env = {e["name"]: e.get("value") for e in init["env"]}
    assert {k.removeprefix("TOPOLOGY_").lower(): v for k, v in env.items()
            if k.startswith("TOPOLOGY_") and k != "TOPOLOGY_EXTRA_LABELS"} == NAMES
    assert env["TOPOLOGY_EXTRA_LABELS"] == "{}", "no DRA on the dev stack: nothing beyond the topology"
    script = dev.one("kubernetes:core/v1:ConfigMap", "topology-script").inputs["data"]["topology.py"]
    assert script == Path(topology.__file__).read_text()
    template = as_api(dev.one(DAEMONSET, LABELER).inputs)["spec"]["template"]["metadata"]
    assert template["annotations"][topology_labeler.SCRIPT_HASH_ANNOTATION] == topology_labeler.script_sha256()


def test_the_labeler_may_patch_nodes_and_nothing_else(dev):
    """Least privilege: its one request is a node PATCH (the fake API server above answers nothing else,
    and test_the_two_steps_label_the_node_with_every_fact passes against it), so it may not even get one."""
    (rule,) = dev.one("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", "topology-role").inputs["rules"]
    assert rule == {"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]}


def test_an_admission_policy_bounds_the_labelers_node_writes_to_its_labels(dev):
    """RBAC's `patch` on nodes would let the labeler change any taint (lift the certifier's hold) or label: a
    ValidatingAdmissionPolicy matched on its account lets it change only its labels and its annotation (the
    real API server refuses the rest: e2e/tests/test_certifier.py)."""
    policy = dev.one("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy", "topology-nodes-policy")
    spec = policy.inputs["spec"]
    (cond,) = spec["matchConditions"]
    assert cond["expression"] == (f"request.userInfo.username == 'system:serviceaccount:"
                                  f"{topology_labeler.NAMESPACE}:{topology_labeler.NAME}'")
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["nodes"] and rule["operations"] == ["UPDATE"]
    text = " ".join(v["expression"] for v in spec["validations"])
    labels = [n for k, n in NAMES.items() if k != "hca_guids"]
    assert all(f'"{n}"' in text for n in [*labels, fabric.HCA_GUIDS_ANNOTATION]), text
    assert "spec.taints" in text and "unschedulable" in text
    binding = dev.one("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
                      "topology-nodes-policy-binding").inputs["spec"]
    assert binding["validationActions"] == ["Deny"] and binding["policyName"] == policy.inputs["metadata"]["name"]


def test_every_labeler_object_passes_the_kubernetes_schema(dev):
    for r in dev.resources:
        if r.name.startswith("topology-") and r.type.startswith("kubernetes:"):
            assert core_errors(r.inputs) == [], r.name


def test_the_fabric_test_job_declares_its_network_topology(dev, reference):
    job = as_api(dev.one(JOB).inputs)
    topology = job["spec"]["networkTopology"]
    assert topology["mode"] == "soft"
    # Volcano overwrites a soft job's highestTierAllowed with the cluster's top tier (v1.15.1
    # session.go convertSoftToHardTopology): declaring one would claim a bound that is never applied
    assert "highestTierAllowed" not in topology and "highestTierName" not in topology
    assert crd_errors({**job, "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job"},
                      reference / "crds" / pinned_name("batch.volcano.sh_jobs", "volcano")) == []


def test_on_arm64_grace_blackwell_the_labeler_runs_only_steps_whose_images_have_arm64():
    """Azure's node-health image (the SHARP step's) is amd64 only; GB200/GB300 nodes are arm64: there the
    SHARP step is left out and the labelling step runs in the multi-arch Python image."""
    from conftest import rendered

    for stack, arch in (("dev", "amd64"), ("gb300", "arm64"), ("gb200", "arm64")):
        spec = labeler_pod(rendered(stack))
        steps = {c["name"]: c["image"] for c in spec["initContainers"]}
        images = [*steps.values(), *(c["image"] for c in spec["containers"])]
        by_image = {c.version: c for c in pins.COMPONENTS}
        for image in images:
            assert arch in by_image[image].platforms, (stack, image)
        assert ("sharp" in steps) == (arch == "amd64"), stack
        assert steps["label"] == pins.component("pythonImage").version
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["hyperv"]["hostPath"]["type"] == "DirectoryOrCreate", "an absent KVP file stops nothing"
        assert ("dev-infiniband" in volumes) == (arch == "amd64")
