"""A Kubernetes stack on a cluster that already exists (existingCluster, stack/existing_cluster.py) declares
what the split's Kubernetes half declares, object for object, on a provider of the configured kubeconfig and
context, and reads no Azure stack; charts.directory points every Helm release at its local archive and
changes nothing else; at `up`, the pool's nodes are checked against ibPool (pool_problems), and the check
runs before any resource. The real engine runs such a stack in e2e/tests/test_engine_lifecycle.py."""

from __future__ import annotations

import json

import pulumi
import pytest
from conftest import dev_config, rendered

from core import pins
from offline import engine
from offline.mocks import OfflineMocks
from stack import charts, existing_cluster
from stack_config import parse
from tests.paths import ROOT

K8S_PROVIDER = "pulumi:providers:kubernetes"
STACK_REFERENCE = "pulumi:pulumi:StackReference"
RELEASE = "kubernetes:helm.sh/v3:Release"
CHARTS = ROOT.parent / "shared" / "reference" / "charts"
KUBECONFIG = {"apiVersion": "v1", "kind": "Config", "current-context": "a",
              "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
              "users": [{"name": "u", "user": {"token": "offline-not-a-credential"}}],
              "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}},
                           {"name": "team-b", "context": {"cluster": "c", "user": "u"}}]}


def existing(**fields) -> dict:
    return dev_config(stackPart="kubernetes", existingCluster={"enabled": True, **fields})


@pytest.fixture
def checked(monkeypatch) -> list:
    """check_pool recorded instead of run (under the mocks the program is not a preview: it would read nodes)."""
    calls: list = []
    monkeypatch.setattr(existing_cluster, "check_pool", lambda cfg: calls.append(cfg.ib_pool.name))
    return calls


def _declared(r: engine.Rendering) -> dict[tuple[str, str], engine.Resource]:
    return {(x.type, x.name): x for x in r.resources}


def test_an_existing_cluster_stack_declares_the_kubernetes_half_on_its_own_provider(tmp_path, checked):
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(KUBECONFIG))
    monitor = engine.RecordingMonitor(OfflineMocks())
    ours = _declared(engine.render("dev", config=existing(kubeconfig=str(path), context="team-b"), monitor=monitor))
    half = _declared(rendered("dev", part="kubernetes"))

    assert checked == ["ibpool"]
    assert set(ours) == set(half) - {(STACK_REFERENCE, "azure-stack")}
    differ = {key for key, resource in ours.items() if key[0] != K8S_PROVIDER and resource.inputs != half[key].inputs}
    # Only the topology labeler: on AKS's agentpool label, and it gives the pool's nodes the stack's pool label,
    # which its admission policy (issue 52 item 6) then lets it write.
    daemonset = ("kubernetes:apps/v1:DaemonSet", "topology-daemonset")
    policy = ("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy", "topology-nodes-policy")
    assert differ == {daemonset, policy}, differ
    messages = {name: " ".join(v["message"] for v in r[policy].inputs["spec"]["validations"])
                for name, r in (("ours", ours), ("half", half))}
    assert "aks-infiniband.io/pool-role" in messages["ours"] and "pool-role" not in messages["half"], messages
    spec = ours[daemonset].inputs["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"kubernetes.azure.com/agentpool": "ibpool"}
    containers = spec["containers"] + spec.get("initContainers", [])
    env = {e["name"]: e.get("value") for c in containers for e in c.get("env", [])}
    assert json.loads(env["TOPOLOGY_EXTRA_LABELS"]) == {"aks-infiniband.io/pool-role": "infiniband"}
    provider = ours[(K8S_PROVIDER, "cluster-k8s")]
    assert provider.inputs["kubeconfig"] == str(path) and provider.inputs["context"] == "team-b"


def test_without_kubeconfig_the_provider_reads_kubeconfig_as_kubectl_does(checked):
    provider = _declared(engine.render("dev", config=existing()))[(K8S_PROVIDER, "cluster-k8s")]
    assert "kubeconfig" not in provider.inputs and "context" not in provider.inputs


def test_an_inline_kubeconfig_is_a_secret_input(checked):
    text = json.dumps(KUBECONFIG, indent=1)
    provider = _declared(engine.render("dev", config=existing(kubeconfig=text)))[(K8S_PROVIDER, "cluster-k8s")]
    assert "kubeconfig" in provider.secret_inputs


@pytest.mark.skipif(not CHARTS.is_dir(), reason=f"no packaged charts at {CHARTS}")
def test_charts_directory_points_every_release_at_its_archive_and_changes_nothing_else():
    # The reference material packages network-operator 26.7.0-rc.2, not the pinned 26.7.0 (its README).
    rc = {"versions": {"networkOperator": pins.component("networkOperator").reference_version},
          "allowUntestedVersions": True}
    local = _declared(rendered("dev", dev_config(charts={"directory": "../shared/reference/charts"}, **rc)))
    remote = _declared(rendered("dev", dev_config(**rc)))
    releases = {k: r for k, r in local.items() if k[0] == RELEASE}
    assert len(releases) >= 3
    for key, release in releases.items():
        chart, version = release.inputs["chart"], release.inputs["version"]
        assert chart.startswith("../shared/reference/charts/") and chart.endswith(f"-{version}.tgz"), chart
        assert (ROOT / chart).is_file() and "repositoryOpts" not in release.inputs
        trimmed = {k: v for k, v in remote[key].inputs.items() if k not in ("chart", "repositoryOpts")}
        assert {k: v for k, v in release.inputs.items() if k != "chart"} == trimmed
    assert {k: r.inputs for k, r in local.items() if k[0] != RELEASE} == \
        {k: r.inputs for k, r in remote.items() if k[0] != RELEASE}


def node(name: str, size: str = "Standard_ND96isr_H100_v5") -> dict:
    return {"metadata": {"name": name, "labels": {existing_cluster.INSTANCE_TYPE_LABEL: size}}}


CFG = parse(dev_config(stackPart="kubernetes", existingCluster={"enabled": True}), "dev")


def test_a_pool_as_configured_has_no_problem():
    assert existing_cluster.pool_problems(CFG, [node("aks-ibpool-0"), node("aks-ibpool-1")]) == []


def test_a_pool_of_another_size_or_count_is_named_by_key():
    assert existing_cluster.pool_problems(CFG, []) == [
        "aks-infiniband:ibPool.name: got 'ibpool'; the cluster has no node with kubernetes.azure.com/agentpool=ibpool "
        "(the name of an existing agent pool of InfiniBand VMs is expected)"]
    (size,) = existing_cluster.pool_problems(CFG, [node("n0", "Standard_ND96asr_v4"), node("n1")])
    assert size.startswith("aks-infiniband:ibPool.vmSize: got 'Standard_ND96isr_H100_v5'")
    assert "Standard_ND96asr_v4: n0" in size
    (count,) = existing_cluster.pool_problems(CFG, [node("n0"), node("n1"), node("n2")])
    assert count == "aks-infiniband:ibPool.nodeCount: got 2; pool ibpool has 3 nodes"


def test_the_pool_check_stops_the_program_before_any_resource(monkeypatch):
    """At `up` the check runs before the first resource; its refusal is one RunError, nothing registered."""
    def refuse(cfg):
        raise pulumi.RunError("the existing cluster's IB pool disagrees with the configuration")
    monkeypatch.setattr(existing_cluster, "check_pool", refuse)
    monitor = engine.RecordingMonitor(OfflineMocks())
    with pytest.raises(pulumi.RunError):
        engine.render("dev", config=existing(), monitor=monitor)
    assert monitor.registrations == []


def test_the_charts_the_configuration_checks_are_the_ones_the_components_install():
    assert {k: c.name for k, c in charts.CHARTS.items()} == {k: pins.chart_name(k) for k in charts.CHARTS}

