"""Properties of the Kubernetes layer (rows 4-7): what each piece must do on a real cluster, read
from the offline render of the real program."""

from __future__ import annotations

import json

import pytest
from conftest import dev_kubernetes_half

import stack_config
from components.namespace import POD_SECURITY_ENFORCE_LABEL, NamespaceArgs
from components.platform.network_operator import NetworkOperatorArgs
from components.platform.volcano import VolcanoArgs, checked_manifest, manifest_url
from core import catalog, fabric, modes
from offline import engine

NIC_CLUSTER_POLICY = "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy"
NODE_FEATURE_RULE = "kubernetes:nfd.k8s-sigs.io/v1alpha1:NodeFeatureRule"
RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"
CONFIG_GROUP = "kubernetes:yaml/v2:ConfigGroup"
AGENT_POOL = "azure-native:containerservice:AgentPool"
LAYER = {
    "aks-infiniband:kubernetes:NodeFeatureDiscovery": "nfd",
    "aks-infiniband:kubernetes:NetworkOperator": "network-operator",
    "aks-infiniband:kubernetes:GpuOperator": "gpu-operator",
    "aks-infiniband:kubernetes:Volcano": "volcano",
}
A100, H100, HB = "Standard_ND96asr_v4", "Standard_ND96isr_H100_v5", "Standard_HB176rs_v4"


def kubernetes_half(hb, size: str, mode: str = "shared") -> engine.Rendering:
    """The Kubernetes objects of dev in `size` and `mode`: the hb stack (dev on HB176rs_v4 but for its tags,
    rendered whole for other tests) for HB shared, else dev's Kubernetes half (conftest.dev_kubernetes_half),
    which declares what the whole declares (tests/stack/test_stack_parts.py)."""
    return hb if (size, mode) == (HB, "shared") else dev_kubernetes_half(rdmaMode=mode, ibPool={"vmSize": size})


def layer_resources(rendering: engine.Rendering) -> list[engine.Resource]:
    """Every resource inside the four components of the layer (at any depth)."""
    roots = {r.urn for r in rendering.resources if r.type in LAYER}
    inside: list[engine.Resource] = []
    changed = True
    while changed:
        changed = False
        for r in rendering.resources:
            if r.urn not in roots and r.parent in roots:
                roots.add(r.urn)
                inside.append(r)
                changed = True
    return [r for r in rendering.resources if r.type in LAYER] + inside


def policy_spec(rendering: engine.Rendering) -> dict:
    return rendering.one(NIC_CLUSTER_POLICY).inputs["spec"]


def advertised_resources(spec: dict) -> set[str]:
    """The `<prefix>/<name>` resources the device plugin of a NicClusterPolicy spec advertises."""
    out = set()
    for plugin, items in (("rdmaSharedDevicePlugin", "configList"), ("sriovDevicePlugin", "resourceList")):
        if plugin in spec:
            for entry in json.loads(spec[plugin]["config"])[items]:
                out.add(f"{entry.get('resourcePrefix', 'rdma')}/{entry['resourceName']}")
    return out


def tolerates(tolerations: list[dict], taint: str) -> bool:
    """Kubernetes' rule: does any toleration match the taint `key=value:Effect`?"""
    key_value, effect = taint.rsplit(":", 1)
    key, _, value = key_value.partition("=")
    for t in tolerations:
        if t.get("effect") not in (None, "", effect):
            continue
        if t.get("operator") == "Exists" and t.get("key") in (None, "", key):
            return True
        if t.get("operator", "Equal") == "Equal" and t.get("key") == key and t.get("value", "") == value:
            return True
    return False


# --- RDMA mode and the resource the job requests ---------------------------------------------


# every mode on every size it is allowed on (dra: GPU sizes; refused on HB, tests/unit/stack_config/test_config.py)
@pytest.mark.parametrize("mode, size", [(m.name, size) for size in (A100, H100, HB) for m in modes.MODES.values()
                                        if not (m.dra and not catalog.lookup(size).has_gpus)])
def test_policy_advertises_exactly_the_resource_the_job_requests(hb, mode, size):
    record, sku = modes.rdma_mode(mode), catalog.lookup(size)
    spec = policy_spec(kubernetes_half(hb, size, mode))
    request = record.request(sku)  # None: the HCAs come as DRA claims, and no plugin advertises any
    assert advertised_resources(spec) == ({request.resource} if request else set())


def test_switching_rdma_mode_switches_plugin_and_resource(render_kubernetes, dev):
    shared, sriov = policy_spec(dev), policy_spec(render_kubernetes(rdmaMode="sriov"))
    assert "rdmaSharedDevicePlugin" in shared and "sriovDevicePlugin" not in shared
    assert "sriovDevicePlugin" in sriov and "rdmaSharedDevicePlugin" not in sriov
    assert advertised_resources(shared) != advertised_resources(sriov)


def test_shared_plugin_selects_every_mellanox_infiniband_device(dev):
    entry = json.loads(policy_spec(dev)["rdmaSharedDevicePlugin"]["config"])["configList"][0]
    assert entry["selectors"] == {"vendors": [fabric.MELLANOX_PCI_VENDOR], "linkTypes": ["infiniband"]}
    assert entry["rdmaHcaMax"] >= 1


def test_sriov_plugin_mounts_rdma_devices_and_spans_every_hca(render_kubernetes):
    """One VF per HCA, none filtered out: the job's SR-IOV request (the catalog's HCA count) is
    exactly what one node advertises."""
    spec = policy_spec(render_kubernetes(rdmaMode="sriov"))
    entry = json.loads(spec["sriovDevicePlugin"]["config"])["resourceList"][0]
    assert entry["selectors"] == {"vendors": [fabric.MELLANOX_PCI_VENDOR], "linkTypes": ["infiniband"], "isRdma": True}
    for sku in catalog.SKUS.values():
        assert modes.rdma_mode("sriov").request(sku).count == sku.ib_hcas_per_vm
    assert modes.rdma_mode("sriov").request(catalog.lookup(A100)).count == 8
    assert modes.rdma_mode("sriov").request(catalog.lookup(HB)).count == 1


def test_rdma_mode_is_checked_at_construction():
    v = stack_config.DEFAULT_VERSIONS
    good = {"version": v["networkOperator"], "doca_driver_version": v["docaDriver"],
            "rdma_shared_device_plugin_version": v["rdmaSharedDevicePlugin"],
            "sriov_device_plugin_version": v["sriovDevicePlugin"]}
    with pytest.raises(ValueError, match="rdma_mode: got 'ipoib'"):
        NetworkOperatorArgs(**good, rdma_mode="ipoib")


@pytest.mark.parametrize("field, value", [
    ("version", "26.4"), ("doca_driver_version", "doca3.4.1-26.04-1.1.0.0-1-ubuntu24.04-amd64"),
    ("rdma_shared_device_plugin_version", "latest"), ("sriov_device_plugin_version", ""),
])
def test_network_operator_pins_are_checked_at_construction_with_the_configs_predicates(field, value):
    v = stack_config.DEFAULT_VERSIONS
    good = {"version": v["networkOperator"], "doca_driver_version": v["docaDriver"],
            "rdma_shared_device_plugin_version": v["rdmaSharedDevicePlugin"],
            "sriov_device_plugin_version": v["sriovDevicePlugin"]}
    with pytest.raises(ValueError, match=f"{field}: got {value!r}"):
        NetworkOperatorArgs(**{**good, field: value}, rdma_mode=modes.SHARED)


# --- NicClusterPolicy ------------------------------------------------------------------------


def test_policy_is_the_one_the_operator_reconciles_and_lands_on_ib_nodes_only(dev):
    policy = dev.one(NIC_CLUSTER_POLICY)
    assert policy.inputs["metadata"]["name"] == "nic-cluster-policy"
    assert "namespace" not in policy.inputs["metadata"]  # cluster-scoped
    terms = policy.inputs["spec"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": fabric.MELLANOX_NIC_LABEL, "operator": "In", "values": ["true"]}]}]


def test_policy_pins_the_driver_and_plugin_images(render_kubernetes, dev):
    v = stack_config.DEFAULT_VERSIONS
    for stack, plugin, version in ((dev, "rdmaSharedDevicePlugin", v["rdmaSharedDevicePlugin"]),
                                   (render_kubernetes(rdmaMode="sriov"), "sriovDevicePlugin", v["sriovDevicePlugin"])):
        spec = policy_spec(stack)
        assert spec["ofedDriver"]["version"] == v["docaDriver"]
        assert spec[plugin]["version"] == version
        for part in (spec["ofedDriver"], spec[plugin]):
            assert part["repository"] == "nvcr.io/nvidia/mellanox" and part["version"].lower() != "latest"


def test_policy_depends_on_the_operator_release_so_destroy_removes_it_first(dev):
    policy = dev.one(NIC_CLUSTER_POLICY)
    release = dev.one(RELEASE, "network-operator-release")
    assert release.urn in policy.dependencies


# --- the IB pool taint -------------------------------------------------------------------------


def daemonset_tolerations(rendering: engine.Rendering) -> dict[str, list[dict]]:
    """Where each component that owns DaemonSets sets their tolerations."""
    out = {
        "nfd worker": rendering.one(RELEASE, "nfd-release").inputs["values"]["worker"]["tolerations"],
        "network operator (NicClusterPolicy)": policy_spec(rendering)["tolerations"],
    }
    gpu = [r for r in rendering.of_type(RELEASE) if r.inputs["chart"] == "gpu-operator"]
    if gpu:
        out["gpu operator"] = gpu[0].inputs["values"]["daemonsets"]["tolerations"]
    for ds in rendering.of_type("kubernetes:apps/v1:DaemonSet"):  # our own: the image pre-pull, the labeler
        out[f"DaemonSet {ds.name}"] = ds.inputs["spec"]["template"]["spec"]["tolerations"]
    return out


@pytest.mark.parametrize("size", [H100, HB])
def test_every_daemonset_owner_tolerates_the_taint_the_pool_carries(dev, hb, size):
    rendering = dev if size == H100 else hb  # whole: the pool's taints; the hb stack is dev on HB176rs_v4
    assert rendering.outputs["vmSize"] == size
    pool_taints = rendering.one(AGENT_POOL).inputs["nodeTaints"]
    assert pool_taints == [fabric.IB_TAINT]
    # and the certifier's hold and quarantine, which the operators' pods must tolerate as well
    pool_taints = [*pool_taints, fabric.HOLD_TAINT,
                   f"{fabric.FABRIC_TAINT_KEY}={fabric.QUARANTINED}:{fabric.FABRIC_TAINT_EFFECT}"]
    owners = daemonset_tolerations(rendering)
    assert len(owners) == (5 if catalog.lookup(size).has_gpus else 4)
    for owner, tolerations in owners.items():
        assert any(t["key"] == fabric.IB_TAINT_KEY for t in tolerations), owner
        assert all(tolerates(tolerations, taint) for taint in pool_taints), owner


def test_the_toleration_check_is_not_vacuous():
    assert not tolerates([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], fabric.IB_TAINT)
    assert not tolerates([{**fabric.toleration(), "value": "false"}], fabric.IB_TAINT)
    assert tolerates([fabric.toleration()], fabric.IB_TAINT)
    assert not tolerates([fabric.toleration()], fabric.HOLD_TAINT)
    assert not tolerates([fabric.toleration(), fabric.fabric_toleration()], fabric.HOLD_TAINT)
    assert tolerates(fabric.fabric_tolerations(), fabric.HOLD_TAINT)


def test_volcano_owns_no_daemonset(reference):
    """Volcano's pods run on the system pool; nothing of it needs the IB pool toleration."""
    from tests import schema_checks as sc

    text = checked_manifest(stack_config.DEFAULT_VERSIONS["volcano"], cache=reference / "examples")
    docs = [d for d in sc.load_yaml_all(text) if d]
    assert "DaemonSet" not in {d["kind"] for d in docs}


# --- Node Feature Discovery --------------------------------------------------------------------


def test_nfd_labels_gpus_and_infiniband_hcas_but_not_ethernet_vfs(dev):
    pci = dev.one(RELEASE, "nfd-release").inputs["values"]["worker"]["config"]["sources"]["pci"]
    assert pci["deviceLabelFields"] == ["vendor"]  # -> pci-10de.present, pci-15b3.present
    assert {"0207", "0302"} <= set(pci["deviceClassWhitelist"])
    # every AKS node with accelerated networking has a Mellanox Ethernet VF (class 0200): labelling
    # it would put the DOCA driver on the system pool
    assert not any("0200".startswith(c) for c in pci["deviceClassWhitelist"])
    assert fabric.NVIDIA_GPU_LABEL.endswith(f"pci-{fabric.NVIDIA_PCI_VENDOR}.present")
    assert fabric.MELLANOX_NIC_LABEL.endswith(f"pci-{fabric.MELLANOX_PCI_VENDOR}.present")


def test_node_feature_rule_labels_mellanox_infiniband_nodes(dev):
    rule = dev.one(NODE_FEATURE_RULE)
    (only,) = rule.inputs["spec"]["rules"]
    assert only["labels"] == {fabric.MELLANOX_NIC_LABEL: "true"}
    (match,) = only["matchFeatures"]
    assert match["feature"] == "pci.device"
    assert match["matchExpressions"]["vendor"] == {"op": "In", "value": [fabric.MELLANOX_PCI_VENDOR]}
    assert match["matchExpressions"]["class"] == {"op": "In", "value": ["0207"]}
    assert dev.one(RELEASE, "nfd-release").urn in rule.dependencies  # its CRD comes from the chart


# --- operators' own settings -------------------------------------------------------------------


def test_network_operator_chart_leaves_nfd_and_its_rules_to_our_release(dev):
    values = dev.one(RELEASE, "network-operator-release").inputs["values"]
    assert values["nfd"] == {"enabled": False, "deployNodeFeatureRules": False}


def test_gpu_operator_gpudirect_rdma_with_the_network_operators_driver(dev):
    values = dev.one(RELEASE, "gpu-operator-release").inputs["values"]
    assert values["nfd"]["enabled"] is False
    assert values["driver"]["rdma"] == {"enabled": True, "useHostMofed": False}
    assert "defaultRuntime" not in values.get("operator", {})  # removed from the chart in 25.3


@pytest.mark.parametrize("size", [HB, "Standard_HB120rs_v3", "Standard_HX176rs"])
def test_cpu_only_sizes_get_no_gpu_operator(hb, size):
    rendering = kubernetes_half(hb, size)
    assert not catalog.lookup(size).has_gpus
    assert not rendering.of_type("aks-infiniband:kubernetes:GpuOperator")
    assert all(r.inputs["chart"] != "gpu-operator" for r in rendering.of_type(RELEASE))
    assert {r.inputs["metadata"]["name"] for r in rendering.of_type("kubernetes:core/v1:Namespace")}.isdisjoint(
        {"gpu-operator"})


def test_gpu_sizes_get_the_gpu_operator(hb):
    for size in (A100, H100):
        stack = kubernetes_half(hb, size)
        assert [r.inputs["chart"] for r in stack.of_type(RELEASE)].count("gpu-operator") == 1


# --- versions ----------------------------------------------------------------------------------


def test_every_chart_and_manifest_is_pinned_to_the_configured_version(dev):
    v = stack_config.DEFAULT_VERSIONS
    expected = {
        "node-feature-discovery": v["nodeFeatureDiscovery"],
        "network-operator": v["networkOperator"],
        "gpu-operator": v["gpuOperator"],
    }
    releases = {r.inputs["chart"]: r for r in dev.of_type(RELEASE)}
    assert set(releases) == set(expected)
    for chart, version in expected.items():
        assert releases[chart].inputs["version"] == version
        assert releases[chart].inputs["repositoryOpts"]["repo"].startswith("https://")
        assert releases[chart].inputs["name"] == chart  # a stable release name, not a random suffix
    # Volcano: the checked content of its release manifest, nothing read from a URL at deploy time
    (manifest,) = dev.of_type(CONFIG_GROUP)
    assert set(manifest.inputs) == {"yaml"} and "kind: CustomResourceDefinition" in manifest.inputs["yaml"]
    assert dev.of_type(CONFIG_FILE) == []


# With test_certifier.py's schedule, which touches neither the release nor the untested versions: one render.
OVERRIDES = {"versions": {"networkOperator": "26.4.0"}, "allowUntestedVersions": True, "certifier": {"schedule": "off"}}


def test_a_version_override_reaches_the_release(render_kubernetes):
    """Outside the compatibility matrix only with the override, and then the outputs say so."""
    rendering = render_kubernetes(**OVERRIDES)
    assert rendering.one(RELEASE, "network-operator-release").inputs["version"] == "26.4.0"
    assert rendering.outputs["untestedVersions"] == {"versions.networkOperator": "26.4.0"}


@pytest.mark.parametrize("tag", ["master", "latest", "main", ""])
def test_volcano_from_a_branch_is_refused(tag, render):
    with pytest.raises(stack_config.ConfigError, match="aks-infiniband:versions.volcano"):
        stack_config.parse({**engine.as_cli_config(engine.stack_file_config("dev")),
                            "aks-infiniband:versions": json.dumps({"volcano": tag})}, "dev")
    with pytest.raises(ValueError, match="release tag"):
        VolcanoArgs(tag, manifest="")
    with pytest.raises(Exception, match="versions.volcano"):
        render(versions={"volcano": tag})


def test_volcano_manifest_url_is_a_release_tag_on_github():
    tag = stack_config.DEFAULT_VERSIONS["volcano"]
    assert manifest_url(tag).startswith(f"https://raw.githubusercontent.com/volcano-sh/volcano/{tag}/")
    with pytest.raises(ValueError):
        manifest_url("1.14.0-rc.1/../master")


# --- dependencies ------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [H100, HB])
def test_nothing_in_the_layer_waits_for_the_node_pool(dev, hb, size):
    rendering = dev if size == H100 else hb  # whole: the edges to the pool; the hb stack is dev on HB176rs_v4
    assert rendering.outputs["vmSize"] == size
    pool = rendering.one(AGENT_POOL)
    feature_waits = [r for r in rendering.of_type("command:local:Command") if r.name == "ib-feature-register"]
    assert feature_waits
    layer = layer_resources(rendering)
    assert len(layer) >= 12
    for r in layer:
        assert not rendering.depends_on(r, pool), f"{r.type} {r.name} waits for the node pool"
        for wait in feature_waits:
            assert not rendering.depends_on(r, wait), f"{r.type} {r.name} waits for {wait.name}"


def test_the_dependency_check_is_not_vacuous(dev):
    """The pool does wait for the feature registration: depends_on sees such edges."""
    pool = dev.one(AGENT_POOL)
    assert dev.depends_on(pool, dev.one("command:local:Command", "ib-feature-register"))


def test_every_kubernetes_resource_uses_the_clusters_provider(dev):
    provider = dev.one("pulumi:providers:kubernetes")
    for r in layer_resources(dev):
        if r.custom:
            assert r.provider.startswith(provider.urn + "::"), f"{r.type} {r.name}: {r.provider}"


def test_releases_depend_only_on_their_namespace(dev):
    for r in dev.of_type(RELEASE):
        deps = [dev.by_urn(u) for u in r.dependencies]
        assert [d.type for d in deps] == ["kubernetes:core/v1:Namespace"], r.name


# --- namespaces --------------------------------------------------------------------------------


def test_operator_namespaces_are_privileged_and_named(dev):
    namespaces = {r.inputs["metadata"]["name"]: r.inputs["metadata"]["labels"]
                  for r in dev.of_type("kubernetes:core/v1:Namespace")}
    for name in ("node-feature-discovery", "network-operator", "gpu-operator"):
        assert namespaces[name][POD_SECURITY_ENFORCE_LABEL] == "privileged", name
    releases = {r.inputs["chart"]: r.inputs["namespace"] for r in dev.of_type(RELEASE)}
    assert releases == {c: c for c in ("node-feature-discovery", "network-operator", "gpu-operator")}


def test_namespace_helper_defaults_to_restricted_and_checks_levels():
    assert NamespaceArgs("x").pod_security == "restricted"
    with pytest.raises(ValueError, match="pod_security: got 'root'"):
        NamespaceArgs("x", pod_security="root")
    with pytest.raises(ValueError, match="warn: got 'none'"):
        NamespaceArgs("x", pod_security="privileged", warn="none")
