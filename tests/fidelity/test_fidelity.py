"""Fidelity of the Kubernetes layer: what the program declares, checked against the upstream facts
in ../shared/reference (skipped, with the reason, where that folder is absent).

(a) every custom resource passes its CRD's openAPIV3Schema (strictly: an undeclared field is an
    error), and the RDMA device plugin's `config` string passes the plugin's schema;
(b) every Helm value key path exists in the pinned chart's values.yaml, NFD's values also pass the
    chart's values schema, and the checker is shown to fail on invented and removed keys;
(c) core objects pass the Kubernetes schema of the cluster's version (kubernetes-validate).

Rendered in both rdmaModes, for an A100 size, an H100 size (the dev stack) and a CPU-only HB size.

Every upstream file is named from the pin table (pins.COMPONENTS), never by a version literal, so a
bump checks the new release's files or fails for want of them. Network Operator: the pin is the
final v26.7.0, whose package is not obtainable here; the files read and the chart rendered are
those of the closest packaged release, 26.7.0-rc.2 (`pins.component("networkOperator").packaged`).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import dev_config, rendered

import stack_config
from components.platform import volcano as volcano_component
from core import pins
from offline import engine, objects
from tests import chart_value_checks as cv
from tests import schema_checks as sc

NIC_CLUSTER_POLICY = "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy"
NODE_FEATURE_RULE = "kubernetes:nfd.k8s-sigs.io/v1alpha1:NodeFeatureRule"
RELEASE = "kubernetes:helm.sh/v3:Release"
NOT_OBJECTS = ("kubernetes:helm.sh/v3:Release", "kubernetes:yaml/v2:ConfigFile", "kubernetes:yaml/v2:ConfigGroup")

# The RDMA shared device plugin's config schema is published with the operator's webhook; the
# reference holds it at v26.4.1, unchanged at v26.7.0-rc.2 (reference/README.md, schemas/).
RDMA_PLUGIN_SCHEMA = "rdma_shared_device_plugin.schema.v26.4.1.json"


def reference_tag(key: str) -> str:
    """`v<version>` of the upstream files the checks read for a pinned component."""
    return "v" + pins.component(key).reference_version.removeprefix("v")


SIZES = {"a100": "Standard_ND96asr_v4", "h100": "Standard_ND96isr_H100_v5", "hb": "Standard_HB176rs_v4",
         "gb200": "Standard_ND128isr_NDR_GB200_v6", "gb300": "Standard_ND128isr_GB300_v6"}
# every size in both device-plugin modes; the DRA mode (DRANET, the NVIDIA DRA driver) where it applies
STACKS = [(size, mode) for size in ("a100", "h100", "hb") for mode in ("shared", "sriov")] + [
    ("h100", "dra"), ("gb200", "sriov"), ("gb300", "dra"),
    # the node image's own RDMA drivers (ibPool.rdmaDriver inbox): no DOCA, GPUDirect over DMA-BUF
    ("h100", "shared", "inbox"), ("hb", "shared", "inbox")]


# Shapes that an example stack has (the same size and mode; only its location and tags differ) are that
# stack, rendered whole for other tests too. Every other shape is the Kubernetes half of dev in that size
# and mode, which declares every Kubernetes object the whole stack declares, input by input
# (tests/stack/test_stack_parts.py).
EXAMPLES = {("h100", "shared"): "dev", ("hb", "shared"): "hb", ("gb200", "sriov"): "gb200", ("gb300", "dra"): "gb300"}


def shape(size: str, mode: str, driver: str | None = None) -> engine.Rendering:
    if driver:
        return rendered("dev", dev_config(rdmaMode=mode, ibPool={"vmSize": SIZES[size], "rdmaDriver": driver}),
                        part="kubernetes")
    if (size, mode) in EXAMPLES:
        config = engine.stack_file_config(EXAMPLES[(size, mode)])
        assert config[f"{engine.PROJECT}:ibPool"]["vmSize"] == SIZES[size]
        assert config[f"{engine.PROJECT}:rdmaMode"] == mode
        return rendered(EXAMPLES[(size, mode)])
    config = dev_config(rdmaMode=mode, ibPool={"vmSize": SIZES[size]})
    return rendered("dev", config, part="kubernetes")


@pytest.fixture(scope="module", params=STACKS, ids=["-".join(p) for p in STACKS])
def stack(request) -> engine.Rendering:
    return shape(*request.param)


@pytest.fixture(scope="module")
def crds(reference: Path) -> dict[tuple[str, str], sc.Crd]:
    return sc.load_crds(reference)


def kubernetes_objects(rendering: engine.Rendering) -> list[engine.Resource]:
    """Every Kubernetes object the program declares itself (not Helm releases or manifests)."""
    return [
        r for r in rendering.resources
        if r.custom and r.type.startswith("kubernetes:") and r.type not in NOT_OBJECTS
        and "apiVersion" in r.inputs and "kind" in r.inputs
    ]


def is_core(obj: dict[str, Any]) -> bool:
    """Whether Kubernetes itself serves this kind (kubernetes-validate has its schema)."""
    return sc.has_kubernetes_schema(obj["apiVersion"], obj["kind"])


# --- (a) custom resources --------------------------------------------------------------------


def test_every_custom_resource_passes_its_crd(stack, crds):
    custom = [r for r in kubernetes_objects(stack) if not is_core(r.inputs)]
    types = {r.type for r in custom}
    assert {NIC_CLUSTER_POLICY, NODE_FEATURE_RULE} <= types, f"the layer's CRs are missing: {sorted(types)}"
    for r in custom:
        assert sc.custom_resource_errors(r.inputs, crds) == [], f"{r.type} {r.name}"


def test_the_crd_check_catches_what_the_api_server_would_prune_or_reject(dev, crds):
    policy = copy.deepcopy(dev.one(NIC_CLUSTER_POLICY).inputs)
    policy["spec"]["ofedDriver"]["imageTag"] = "doca3.4.1"  # not a field: pruned silently
    policy["spec"]["tolerations"][0]["tolerationSeconds"] = "forever"  # wrong type: rejected
    del policy["spec"]["ofedDriver"]["image"]  # required
    problems = "\n".join(sc.custom_resource_errors(policy, crds))
    assert "'imageTag' was unexpected" in problems
    assert "$.spec.tolerations[0].tolerationSeconds" in problems
    assert "'image' is a required property" in problems

    rule = copy.deepcopy(dev.one(NODE_FEATURE_RULE).inputs)
    rule["spec"]["rules"][0]["matchFeature"] = rule["spec"]["rules"][0].pop("matchFeatures")
    assert any("'matchFeature' was unexpected" in p for p in sc.custom_resource_errors(rule, crds))


def test_the_crd_check_accepts_the_upstream_example_policy(reference, crds):
    """Not over-strict: NVIDIA's own example NicClusterPolicy for the pinned release passes."""
    tag = reference_tag("networkOperator")
    for name in (f"example-nicclusterpolicy_cr.{tag}.yaml", f"example-nicclusterpolicy_cr-ipoib.{tag}.yaml"):
        example = yaml.safe_load((reference / "examples" / name).read_text())
        assert sc.custom_resource_errors(example, crds) == [], name


def test_the_crds_read_are_those_of_the_rendered_network_operator_package(crds):
    """The final is pinned, its closest package is what is checked: the NicClusterPolicy CRD comes
    from the rc.2 files, not from the older release's file that the folder also holds."""
    record = pins.component("networkOperator")
    assert record.packaged and record.packaged != record.version and "-rc." in record.packaged
    assert "-rc." not in record.version  # the pin itself is a final release
    nicclusterpolicy = crds[("mellanox.com/v1alpha1", "NicClusterPolicy")]
    assert nicclusterpolicy.source == f"mellanox.com_nicclusterpolicies.{reference_tag('networkOperator')}.yaml"


def test_crd_rules_that_cannot_be_checked_here_are_transition_rules_only(dev, crds):
    """CEL rules are dropped by the conversion; for the CRDs we use they only guard later updates."""
    for r in kubernetes_objects(dev):
        crd = crds.get((r.inputs["apiVersion"], r.inputs["kind"]))
        if crd:
            for path, rule in sc.cel_rules(crd.schema):
                assert rule == "self == oldSelf", f"{crd.kind} {path}: CEL rule {rule!r} is not checked offline"


def test_rdma_shared_device_plugin_config_passes_the_plugin_schema(reference):
    schema = json.loads((reference / "schemas" / RDMA_PLUGIN_SCHEMA).read_text())
    for size in SIZES:
        spec = shape(size, "shared").one(NIC_CLUSTER_POLICY).inputs["spec"]
        config = json.loads(spec["rdmaSharedDevicePlugin"]["config"])
        assert sc.json_schema_errors(config, schema) == []
    # and the schema is a real check: a config without rdmaHcaMax, or with a typo'd selector, fails
    broken = copy.deepcopy(config)
    del broken["configList"][0]["rdmaHcaMax"]
    broken["configList"][0]["selectors"]["linkType"] = ["infiniband"]
    problems = "\n".join(sc.json_schema_errors(broken, schema))
    assert "'rdmaHcaMax' is a required property" in problems and "'linkType' was unexpected" in problems


def test_sriov_device_plugin_config_uses_only_keys_of_azures_working_config(reference, render_kubernetes):
    """No schema is published for the SR-IOV plugin's config; Azure's overlay is a config known to
    work on these VMs, so every key we set must appear in it."""
    overlay = yaml.safe_load(
        (reference / "azure-aks-rdma-infiniband/configs/nicclusterpolicy/sriov-device-plugin/sriov.yaml").read_text()
    )
    azure = json.loads(overlay["spec"]["sriovDevicePlugin"]["config"])["resourceList"][0]
    spec = render_kubernetes(rdmaMode="sriov").one(NIC_CLUSTER_POLICY).inputs["spec"]
    ours = json.loads(spec["sriovDevicePlugin"]["config"])
    assert set(ours) == {"resourceList"}
    for entry in ours["resourceList"]:
        assert set(cv.key_paths(entry)) <= set(cv.key_paths(azure)), cv.key_paths(entry)


# --- (b) Helm values -------------------------------------------------------------------------


def test_every_helm_value_key_exists_in_the_pinned_chart(stack, reference):
    releases = stack.of_type(RELEASE)
    assert {r.inputs["chart"] for r in releases} >= {"node-feature-discovery", "network-operator"}
    for r in releases:
        # an OCI chart's `chart` is its full reference (oci://.../<name>): the values are the name's
        chart = cv.chart_values(reference, objects.helm_chart(r), r.inputs["version"])
        assert cv.helm_key_errors(r.inputs.get("values") or {}, chart) == [], r.name


def test_nfd_values_pass_the_charts_values_schema(dev, reference):
    nfd = reference_tag("nodeFeatureDiscovery")
    schema = json.loads((reference / "schemas" / f"node-feature-discovery.values.schema.{nfd}.json").read_text())
    values = sc.as_api(dev.one(RELEASE, "nfd-release").inputs["values"])
    assert sc.json_schema_errors(values, schema) == []
    # the schema checks the toleration's shape (it is Kubernetes' Toleration)
    broken = copy.deepcopy(values)
    broken["worker"]["tolerations"][0]["tolerationSeconds"] = "forever"
    assert sc.json_schema_errors(broken, schema)


def test_key_checker_fails_on_an_invented_key(reference):
    gpu = cv.chart_values(reference, "gpu-operator", stack_config.DEFAULT_VERSIONS["gpuOperator"])
    assert cv.helm_key_errors({"driver": {"rdma": {"useHostMofed": False}}}, gpu) == []
    problems = cv.helm_key_errors({"driver": {"rdma": {"useHostMofedd": False}}}, gpu)
    assert len(problems) == 1 and problems[0].startswith("driver.rdma.useHostMofedd: no such key")
    nfd = cv.chart_values(reference, "node-feature-discovery", stack_config.DEFAULT_VERSIONS["nodeFeatureDiscovery"])
    # inside the free-form worker.config, checked against the chart's documented block
    problems = cv.helm_key_errors({"worker": {"config": {"sources": {"pci": {"deviceClassWhitelst": ["0207"]}}}}}, nfd)
    assert len(problems) == 1 and "deviceClassWhitelst" in problems[0]


def test_key_checker_fails_on_removed_keys(reference):
    gpu = cv.chart_values(reference, "gpu-operator", stack_config.DEFAULT_VERSIONS["gpuOperator"])
    assert cv.helm_key_errors({"operator": {"defaultRuntime": "containerd"}}, gpu)  # removed in 25.3
    legacy = cv.chart_values(reference, "network-operator", "24.7.1-legacy")
    current = cv.chart_values(reference, "network-operator", stack_config.DEFAULT_VERSIONS["networkOperator"])
    for removed in ({"ofedDriver": {"deploy": True}}, {"deployCR": True}, {"rdmaSharedDevicePlugin": {"deploy": True}}):
        assert cv.helm_key_errors(removed, legacy) == [], f"{removed} was a real key in 24.7.1"
        assert cv.helm_key_errors(removed, current), f"{removed} must be rejected for the pinned release"


def test_key_checker_fails_on_a_value_of_the_wrong_kind(reference):
    gpu = cv.chart_values(reference, "gpu-operator", stack_config.DEFAULT_VERSIONS["gpuOperator"])
    assert cv.helm_key_errors({"nfd": {"enabled": "false"}}, gpu)  # a truthy string in a template
    assert cv.helm_key_errors({"daemonsets": {"tolerations": {"key": "x"}}}, gpu)


def test_network_operator_sets_no_keys_of_its_disabled_nfd_subchart(stack):
    values = stack.one(RELEASE, "network-operator-release").inputs["values"]
    assert values["nfd"]["enabled"] is False
    assert "node-feature-discovery" not in values, "dead configuration: the subchart is disabled"


def test_tolerations_in_helm_values_are_valid_kubernetes_tolerations(dev):
    """List items are not key-checked against values.yaml; check them as what they become."""
    for r in dev.of_type(RELEASE):
        for path in cv.key_paths(r.inputs["values"]):
            if not path.endswith("tolerations"):
                continue
            value: Any = r.inputs["values"]
            for part in path.split("."):
                value = value[part]
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"},
                   "spec": {"containers": [{"name": "c", "image": "i"}], "tolerations": value}}
            assert sc.kubernetes_errors(pod) == [], f"{r.name} {path}"


# --- (c) core objects -------------------------------------------------------------------------


def test_schema_version_is_the_clusters_minor():
    """kubernetes-validate 1.37.0 ships 1.32-1.37, so the default minor is checked at that minor itself."""
    assert sc.schema_version_for(stack_config.DEFAULT_KUBERNETES_VERSION).startswith(
        stack_config.DEFAULT_KUBERNETES_VERSION + ".")


def test_core_objects_pass_the_kubernetes_schema_of_the_clusters_version(stack):
    version = stack_config.DEFAULT_KUBERNETES_VERSION
    core = [r for r in kubernetes_objects(stack) if is_core(r.inputs)]
    assert {r.inputs["kind"] for r in core} >= {"Namespace"}
    for r in core:
        assert sc.kubernetes_errors(r.inputs, version) == [], f"{r.type} {r.name}"


def test_the_pinned_volcano_manifest_uses_apis_the_cluster_serves(reference, dev):
    """The manifest applied is the reference's copy of the pinned tag, checked against the pinned
    sha256, and its content is what the stack applies; each of its objects passes the cluster
    version's schema (CRDs, webhooks, Deployments, RBAC)."""
    tag = pins.component("volcano").version
    text = volcano_component.checked_manifest(tag, cache=reference / "examples")
    applied = dev.one("kubernetes:yaml/v2:ConfigGroup", "volcano-manifest").inputs["yaml"]
    assert applied == volcano_component.configured(text, False)  # the copy, its two ConfigMaps configured
    docs = [d for d in sc.load_yaml_all(text) if d]
    assert {d["kind"] for d in docs} >= {"Namespace", "CustomResourceDefinition", "Deployment"}
    assert {d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"} >= {volcano_component.NAMESPACE}
    for d in docs:
        assert sc.kubernetes_errors(d, stack_config.DEFAULT_KUBERNETES_VERSION) == [], f"{d['kind']} {d['metadata']}"
