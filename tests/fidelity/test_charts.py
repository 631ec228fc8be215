"""The pinned charts as Helm renders them with the stack's values (offline/charts.py; `make synth` writes
them to build/charts/). The values-key checks (test_fidelity.py) see what is handed to Helm; these see
what the cluster would receive: every object valid, and the properties the stack relies on true there.

Helm runs once per session (the `dev_charts` fixture, conftest.py); without the pinned Helm or the
chart archives these tests skip, saying why.
"""

from __future__ import annotations

import copy
import dataclasses
import stat
from pathlib import Path

import pytest
import yaml

import stack_config
from components.platform import gpu_operator
from core import fabric
from offline import charts
from tests import schema_checks as sc

RELEASES = {"node-feature-discovery", "network-operator", "gpu-operator"}
CLUSTER_POLICY = ("nvidia.com/v1", "ClusterPolicy")


def rerender(dev, dev_charts, helm: Path, release: str, values: dict,
             kube: str | None = None) -> charts.RenderedRelease:
    """One release rendered again with other values (for the checks that must be able to fail), by the
    session's pinned Helm (the `helm` fixture: found and its version checked once)."""
    rel = dataclasses.replace(dev_charts[release].release, values=values)
    return charts.render(rel, helm=helm, charts_dir=charts.charts_dir(),
                         kube=kube or charts.kube_version(dev), apis=charts.api_versions(dev))


def cluster_policy(dev_charts) -> dict:
    (policy,) = dev_charts["gpu-operator"].of_kind(CLUSTER_POLICY[1], CLUSTER_POLICY[0])
    return policy


# --- every object is valid -----------------------------------------------------------------------
def test_every_release_of_the_stack_is_rendered(dev, dev_charts):
    assert set(dev_charts) == {r.name for r in charts.releases(dev)} == RELEASES
    for name, rendered in dev_charts.items():
        assert rendered.objects, name
        assert all(o["metadata"].get("name") for o in rendered.objects), name


def test_core_objects_pass_the_kubernetes_schema_of_the_clusters_version(dev, dev_charts):
    version = charts.kube_version(dev)
    assert version == stack_config.DEFAULT_KUBERNETES_VERSION
    checked: set[str] = set()
    for name, rendered in dev_charts.items():
        for obj in rendered.objects:
            if sc.has_kubernetes_schema(obj["apiVersion"], obj["kind"], version):
                assert sc.kubernetes_errors(obj, version) == [], f"{name}: {obj['kind']} {obj['metadata']['name']}"
                checked.add(obj["kind"])
    assert {"Deployment", "DaemonSet", "ClusterRole", "ServiceAccount", "Job", "ConfigMap"} <= checked


def test_custom_resources_pass_the_crds_their_own_chart_ships(dev_charts):
    checked = []
    for name, rendered in dev_charts.items():
        crds = sc.crds_from(rendered.crds, f"{name} chart crds/")
        for obj in rendered.objects:
            if sc.has_kubernetes_schema(obj["apiVersion"], obj["kind"]):
                continue
            key = (obj["apiVersion"], obj["kind"])
            assert key in crds, f"{name} renders {key}, which its chart installs no CRD for"
            assert sc.custom_resource_errors(obj, crds) == [], f"{name}: {key}"
            checked.append(key)
    assert CLUSTER_POLICY in checked


def test_the_crd_check_catches_a_broken_cluster_policy(dev_charts):
    crds = sc.crds_from(dev_charts["gpu-operator"].crds, "gpu-operator")
    policy = copy.deepcopy(cluster_policy(dev_charts))
    policy["spec"]["toolkit"]["environment"] = policy["spec"]["toolkit"].pop("env")
    policy["spec"]["driver"]["rdma"]["enabled"] = "true"
    problems = "\n".join(sc.custom_resource_errors(policy, crds))
    assert "'environment' was unexpected" in problems and "$.spec.driver.rdma.enabled" in problems


def test_the_cluster_version_reaches_helm(dev, dev_charts, helm):
    """The network-operator chart requires Kubernetes >= 1.21: rendering for 1.20 must fail."""
    with pytest.raises(RuntimeError, match="kubeVersion|incompatible"):
        rerender(dev, dev_charts, helm, "network-operator", dev_charts["network-operator"].release.values, kube="1.20")


# --- the properties the stack relies on ----------------------------------------------------------
def test_the_nfd_worker_runs_on_the_ib_pool(dev_charts):
    (worker,) = dev_charts["node-feature-discovery"].of_kind("DaemonSet")
    pod = worker["spec"]["template"]["spec"]
    assert fabric.toleration() in pod["tolerations"]
    assert "nodeSelector" not in pod or set(pod["nodeSelector"]) <= {"kubernetes.io/os"}


def test_the_cluster_policy_carries_the_toolkit_fix(dev_charts):
    toolkit = cluster_policy(dev_charts)["spec"]["toolkit"]
    env = {e["name"]: e["value"] for e in toolkit["env"]}
    assert env["RUNTIME_CONFIG_SOURCE"] == "file"
    assert env["ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED"] == "false"
    assert "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS" not in env
    # The comment in components/platform/gpu_operator.py cites toolkit v1.20.0's default; a chart that ships
    # another toolkit must have the fix re-checked against it.
    assert toolkit["enabled"] is True and toolkit["version"] == "v1.20.0"


def test_the_cluster_policy_tolerates_the_ib_pool_next_to_the_gpu_taint(dev_charts):
    tolerations = cluster_policy(dev_charts)["spec"]["daemonsets"]["tolerations"]
    assert fabric.toleration() in tolerations
    assert gpu_operator.CHART_DEFAULT_TOLERATION in tolerations


def test_the_cluster_policy_enables_gpudirect_rdma_on_the_network_operators_driver(dev_charts):
    driver = cluster_policy(dev_charts)["spec"]["driver"]
    assert driver["enabled"] is True
    assert driver["rdma"] == {"enabled": True, "useHostMofed": False}


def test_an_inbox_pools_cluster_policy_has_open_modules_and_no_peermem_and_passes_its_crd(dev, dev_charts, helm):
    """rdmaDriver inbox: the values the stack hands the pinned chart (gpu_operator.DRIVER_GDR) become the
    ClusterPolicy's spec.driver.kernelModuleType open and rdma.enabled false, valid against its CRD."""
    from core import rdma_drivers

    values = gpu_operator.chart_values(rdma_driver=rdma_drivers.INBOX)
    rendered = rerender(dev, dev_charts, helm, "gpu-operator", values)
    (policy,) = rendered.of_kind(CLUSTER_POLICY[1], CLUSTER_POLICY[0])
    driver = policy["spec"]["driver"]
    assert driver["kernelModuleType"] == "open" and driver["rdma"]["enabled"] is False
    assert cluster_policy(dev_charts)["spec"]["driver"]["kernelModuleType"] == "auto"  # the chart's, on doca
    assert sc.custom_resource_errors(policy, sc.crds_from(rendered.crds, "gpu-operator")) == []


def test_the_cluster_policy_upgrades_one_node_at_a_time_past_the_test_pods(dev_charts):
    policy = cluster_policy(dev_charts)["spec"]["driver"]["upgradePolicy"]
    assert policy["autoUpgrade"] is True and policy["maxParallelUpgrades"] == 1
    assert policy["podDeletion"]["deleteEmptyDir"] is True  # the workers' /dev/shm
    assert policy["drain"]["enable"] is False


def test_sandbox_operands_are_off_and_the_validator_keeps_its_workload_check(dev_charts):
    spec = cluster_policy(dev_charts)["spec"]
    assert spec["sandboxWorkloads"]["enabled"] is False
    assert spec["ccManager"]["enabled"] is False
    assert spec["kataSandboxDevicePlugin"]["enabled"] is False
    assert spec["validator"]["plugin"] == {"env": []}  # WITH_WORKLOAD left at its default (true)


def test_neither_operator_renders_its_nfd_subchart(dev_charts):
    for name in ("gpu-operator", "network-operator"):
        rendered = dev_charts[name]
        assert f"# Source: {rendered.release.chart}/charts/node-feature-discovery/" not in rendered.text, name
        assert not [c for c in rendered.crds if c["spec"]["group"] == "nfd.k8s-sigs.io"], name
    assert any(c["spec"]["group"] == "nfd.k8s-sigs.io" for c in dev_charts["node-feature-discovery"].crds)


def test_a_string_false_would_deploy_a_second_nfd(dev, dev_charts, helm):
    """Why the render matters: Helm only warns about a non-boolean subchart condition and keeps the
    subchart, so `nfd.enabled: "false"` deploys the gpu-operator's own NFD next to ours."""
    values = copy.deepcopy(dev_charts["gpu-operator"].release.values)
    values["nfd"]["enabled"] = "false"
    rendered = rerender(dev, dev_charts, helm, "gpu-operator", values)
    assert "# Source: gpu-operator/charts/node-feature-discovery/" in rendered.text
    assert any(c["spec"]["group"] == "nfd.k8s-sigs.io" for c in rendered.crds)


def test_the_network_operator_renders_no_node_feature_rule(dev, dev_charts, helm):
    assert dev_charts["network-operator"].of_kind("NodeFeatureRule") == []
    values = copy.deepcopy(dev_charts["network-operator"].release.values)
    values["nfd"]["deployNodeFeatureRules"] = True  # the chart's default: rules for Ethernet NICs too
    assert rerender(dev, dev_charts, helm, "network-operator", values).of_kind("NodeFeatureRule")


# --- the files and the Helm binary ---------------------------------------------------------------
def test_each_release_is_written_with_a_header_and_without_crds(dev, dev_charts):
    files = charts.files(list(dev_charts.values()), charts.kube_version(dev))
    assert set(files) == {f"charts/{name}.yaml" for name in RELEASES}
    text = files["charts/gpu-operator.yaml"].decode()
    header = [line for line in text.splitlines() if line.startswith("# ") and "Source:" not in line]
    assert f"gpu-operator {stack_config.DEFAULT_VERSIONS['gpuOperator']}" in header[0]
    assert f"Helm {charts.HELM_VERSION}" in header[2]
    assert "clusterpolicies.nvidia.com (v1)" in header[3]
    objects = [d for d in yaml.safe_load_all(text) if d]
    assert len(objects) == len(dev_charts["gpu-operator"].objects)
    assert "CustomResourceDefinition" not in {o["kind"] for o in objects}


def test_a_missing_or_other_helm_is_refused_with_the_reason(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("HELM", str(tmp_path / "helm"))
    with pytest.raises(charts.Unavailable, match="make helm"):
        charts.find_helm()
    fake = tmp_path / "helm"
    fake.write_text("#!/bin/sh\necho v3.18.4\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(charts.Unavailable, match=f"pinned to {charts.HELM_VERSION}"):
        charts.find_helm()


def test_pull_fetches_each_release_chart_at_its_pinned_version_once(dev, tmp_path: Path):
    """What CI runs to fill AKS_IB_CHARTS (offline.yml); here with a stand-in for `helm pull`."""
    log = tmp_path / "calls.txt"
    fake = tmp_path / "helm"
    fake.write_text('#!/bin/sh\n'  # helm pull CHART --repo R --version V --destination D
                    f'echo "$@" >> {log}\n'
                    'touch "$8/$2-$6.tgz"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    out = tmp_path / "charts"
    gpu = out / f"gpu-operator-{stack_config.DEFAULT_VERSIONS['gpuOperator']}.tgz"
    gpu.parent.mkdir()
    gpu.write_bytes(b"already here")
    paths = charts.pull(dev, out, helm=fake)
    assert sorted(p.name for p in paths) == sorted(r.archive_name for r in charts.releases(dev))
    calls = log.read_text().splitlines()
    assert sorted(calls) == [
        f"pull network-operator --repo https://helm.ngc.nvidia.com/nvidia --version "
        f"{stack_config.DEFAULT_VERSIONS['networkOperator']} --destination {out}",
        f"pull node-feature-discovery --repo https://kubernetes-sigs.github.io/node-feature-discovery/charts "
        f"--version {stack_config.DEFAULT_VERSIONS['nodeFeatureDiscovery']} --destination {out}",
    ]
