"""Components another owner runs on an existing cluster (existingCluster.preinstalled, stack/preinstalled.py):
the stack declares none of their objects (but NFD's NodeFeatureRule of its own), changes nothing else but the
driver versions its fabric test records, and at `up`, before any resource, checks what it relies on of them
against the cluster: a cluster as the stack itself would leave it passes, and each missing piece is one line.
The real engine runs such a stack, with Volcano applied by "another team", in
e2e/tests/test_engine_preinstalled.py."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pulumi
import pytest
import yaml
from conftest import dev_config, rendered

from clusterside import kube_api
from components.platform import gpu_operator, network_operator, volcano, volcano_dra
from core import modes, pins, rdma_drivers
from offline import engine
from offline.mocks import OfflineMocks
from stack import existing_cluster, preinstalled
from stack_config import existing, parse
from stack_config.engine import ConfigError

ALL = list(existing.PREINSTALLABLE)
KEY = "aks-infiniband:existingCluster.preinstalled"


def on_existing(stack: str = "dev", pre: list[str] | None = None, **overrides) -> dict:
    config = dev_config(**overrides) if stack == "dev" else engine.stack_file_config(stack)
    full = {"stackPart": "kubernetes", "existingCluster": {"enabled": True, "preinstalled": pre or []}}
    return {**config, **{f"aks-infiniband:{k}": v for k, v in full.items()}}


@pytest.fixture
def checked(monkeypatch) -> list:
    """The checks at `up` recorded instead of run (under the mocks the program is not a preview)."""
    calls: list = []
    monkeypatch.setattr(existing_cluster, "check_pool", lambda cfg: None)
    monkeypatch.setattr(preinstalled, "check", lambda cfg: calls.append(cfg.existing_cluster.preinstalled))
    return calls


def _declared(r: engine.Rendering) -> dict[tuple[str, str], engine.Resource]:
    return {(x.type, x.name): x for x in r.resources}


def test_the_stack_declares_none_of_the_objects_of_what_another_owner_runs(checked):
    base = _declared(engine.render("dev", config=on_existing()))
    ours = _declared(engine.render("dev", config=on_existing(pre=ALL)))
    assert checked == [(), tuple(ALL)]
    gone = {name for _, name in set(base) - set(ours)}
    assert gone == {
        "nfd-namespace", "nfd-namespace-ns", "nfd-release",
        "network-operator", "network-operator-namespace", "network-operator-namespace-ns", "network-operator-release",
        "network-operator-policy",  # the singleton nic-cluster-policy: its owner's
        "gpu-operator", "gpu-operator-namespace", "gpu-operator-namespace-ns", "gpu-operator-release",
        "volcano", "volcano-manifest"}, gone
    assert set(ours) <= set(base)
    # The stack's own NodeFeatureRule stays, as it was, but for the release it no longer waits for.
    rule = ("kubernetes:nfd.k8s-sigs.io/v1alpha1:NodeFeatureRule", "nfd-rule")
    assert ours[rule].inputs == base[rule].inputs and ours[rule].urn == base[rule].urn
    assert not any("nfd-release" in d for d in ours[rule].dependencies)
    changed = {k for k, r in ours.items() if r.inputs != base[k].inputs}
    # The fabric test's Job and certify Job, and the certifier's template, record the driver versions they run
    # against: those the stack pins, and no longer the other owner's operators.
    assert changed == {("kubernetes:batch.volcano.sh/v1alpha1:Job", "fabric-test-job"),
                       ("kubernetes:batch/v1:Job", "fabric-check-certify"),
                       ("kubernetes:core/v1:ConfigMap", "certifier-template")}, changed
    recorded = json.dumps(ours[("kubernetes:batch.volcano.sh/v1alpha1:Job", "fabric-test-job")].inputs)
    assert "gpuOperator=" not in recorded and "networkOperator=" not in recorded
    assert "gpuOperator=" in json.dumps(base[("kubernetes:batch.volcano.sh/v1alpha1:Job", "fabric-test-job")].inputs)


def test_the_check_stops_the_program_before_any_resource(monkeypatch):
    monkeypatch.setattr(existing_cluster, "check_pool", lambda cfg: None)

    def refuse(cfg):
        raise pulumi.RunError("the components existingCluster.preinstalled names lack what the stack relies on")
    monkeypatch.setattr(preinstalled, "check", refuse)
    monitor = engine.RecordingMonitor(OfflineMocks())
    with pytest.raises(pulumi.RunError):
        engine.render("dev", config=on_existing(pre=["volcano"]), monitor=monitor)
    assert monitor.registrations == []


def test_a_charts_folder_needs_no_archive_of_what_another_owner_runs(reference, tmp_path):
    for key in ("nodeFeatureDiscovery", "gpuOperator"):  # the dev size's charts but the Network Operator's
        name = f"{pins.chart_name(key)}-{pins.component(key).version}.tgz"
        (tmp_path / name).symlink_to(reference / "charts" / name)
    config = {**on_existing(pre=["networkOperator"]), "aks-infiniband:charts": {"directory": str(tmp_path)}}
    assert parse(config, "dev").charts_directory == str(tmp_path)
    config["aks-infiniband:existingCluster"] = {"enabled": True}
    with pytest.raises(ConfigError, match=r"charts.directory: got .*; expected network-operator-.*\.tgz there"):
        parse(config, "dev")


# --- the check at `up`, against a fake cluster ---------------------------------------------------------------
def reference_crds(reference: Path) -> dict[str, dict]:
    """Each CRD of the reference material (the pinned releases'), by name, as the API server returns it."""
    out = {}
    for path in sorted((reference / "crds").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                out[doc["metadata"]["name"]] = doc
    return out


def left_by_the_stack(reference: Path, stack: str = "dev") -> dict[str, dict]:
    """GET path -> object: a cluster as the stack itself leaves it (the pinned CRDs, its NicClusterPolicy, a
    ClusterPolicy of its GPU Operator release's values, Volcano's default queue and configured scheduler)."""
    objects = {f"{preinstalled.CRDS}/{name}": crd for name, crd in reference_crds(reference).items()}
    r = _declared(rendered(stack))
    policy = r[("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy", "network-operator-policy")].inputs
    objects[f"/apis/mellanox.com/v1alpha1/nicclusterpolicies/{policy['metadata']['name']}"] = policy
    values = r[("kubernetes:helm.sh/v3:Release", "gpu-operator-release")].inputs["values"]
    objects["/apis/nvidia.com/v1/clusterpolicies"] = {"items": [
        {"metadata": {"name": "cluster-policy"}, "spec": values, "status": {"state": "ready"}}]}
    objects["/apis/scheduling.volcano.sh/v1beta1/queues/default"] = {"metadata": {"name": "default"}}
    tag = parse(engine.stack_file_config(stack), stack).versions.volcano
    manifest = (reference / "examples" / f"volcano-development.{tag}.yaml").read_text()
    for obj in yaml.safe_load_all(volcano.configured(manifest, stack != "dev")):
        if obj and obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == volcano_dra.SCHEDULER_CONFIGMAP:
            objects[preinstalled.VOLCANO_SCHEDULER_CONFIGMAP] = obj
        if obj and obj["kind"] == "Deployment" and obj["metadata"]["name"] == volcano_dra.SCHEDULER:
            objects[preinstalled.VOLCANO_SCHEDULER] = obj
    return objects


@pytest.fixture
def cluster(reference) -> dict[str, dict]:
    return left_by_the_stack(reference)


@pytest.mark.parametrize("stack", ["dev", "gb200", "gb300"])
def test_a_cluster_as_the_stack_would_leave_it_lacks_nothing(reference, stack):
    cluster = left_by_the_stack(reference, stack)
    assert preinstalled.problems(parse(on_existing(stack, ALL), stack), cluster.get) == []


def without(cluster: dict, path: str) -> dict:
    return {k: v for k, v in cluster.items() if k != path}


def changed(cluster: dict, path: str, edit) -> dict:
    out = copy.deepcopy(cluster)
    edit(out[path])
    return out


CRD = preinstalled.CRDS
CASES = {
    "no NodeFeatureRule CRD": (lambda c: without(c, f"{CRD}/nodefeaturerules.nfd.k8s-sigs.io"),
                               "got nodeFeatureDiscovery; no CRD nodefeaturerules.nfd.k8s-sigs.io"),
    "no NicClusterPolicy": (lambda c: without(c, "/apis/mellanox.com/v1alpha1/nicclusterpolicies/nic-cluster-policy"),
                            "got networkOperator; no NicClusterPolicy nic-cluster-policy (the only one the Network "
                            "Operator acts on)"),
    "no DOCA driver container": (
        lambda c: changed(c, "/apis/mellanox.com/v1alpha1/nicclusterpolicies/nic-cluster-policy",
                          lambda p: p["spec"].pop("ofedDriver")),
        "got networkOperator; NicClusterPolicy nic-cluster-policy: spec.ofedDriver is unset; ibPool.rdmaDriver doca "
        "relies on the DOCA driver container it runs (rdmaDriver inbox uses the node image's own drivers)"),
    "no ClusterPolicy": (lambda c: {**c, "/apis/nvidia.com/v1/clusterpolicies": {"items": []}},
                         "got gpuOperator; no ClusterPolicy (the GPU Operator's chart makes one with "
                         "clusterPolicy.deployCR)"),
    "no nvidia-peermem": (lambda c: changed(c, "/apis/nvidia.com/v1/clusterpolicies",
                                            lambda p: p["items"][0]["spec"]["driver"].pop("rdma")),
                          "got gpuOperator; ClusterPolicy cluster-policy: spec.driver.rdma.enabled is false (unset), "
                          "not true"),
    "a Volcano Job without networkTopology": (
        lambda c: changed(c, f"{CRD}/jobs.batch.volcano.sh", lambda crd: [
            v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"].pop("networkTopology")
            for v in crd["spec"]["versions"]]),
        "got volcano; CRD jobs.batch.volcano.sh at v1alpha1 has no spec.networkTopology"),
    "a Volcano Job CRD of another version": (
        lambda c: changed(c, f"{CRD}/jobs.batch.volcano.sh", lambda crd: [
            v.update(name="v1beta9") for v in crd["spec"]["versions"]]),
        "got volcano; CRD jobs.batch.volcano.sh serves v1beta9, not v1alpha1"),
    "no default queue": (lambda c: without(c, "/apis/scheduling.volcano.sh/v1beta1/queues/default"),
                         "got volcano; no Queue default (the fabric test's Job runs in it; Volcano's controllers "
                         "make it)"),
}


@pytest.mark.parametrize("case", CASES)
def test_each_missing_piece_is_one_line_naming_the_key_and_the_component(cluster, case):
    cut, line = CASES[case]
    assert preinstalled.problems(parse(on_existing(pre=ALL), "dev"), cut(cluster).get) == [f"{KEY}: {line}"]


def test_the_stack_checks_only_the_components_it_is_told_are_there(cluster):
    """An empty cluster lacks everything, but only the preinstalled component's lack is named."""
    (line,) = preinstalled.problems(parse(on_existing(pre=["nodeFeatureDiscovery"]), "dev"), {}.get)
    assert line == f"{KEY}: got nodeFeatureDiscovery; no CRD nodefeaturerules.nfd.k8s-sigs.io"


def test_nvidias_example_policy_advertises_another_resource_than_the_test_requests(cluster, reference):
    """The Network Operator's own example NicClusterPolicy names its shared resource rdma_shared_device_a."""
    example = yaml.safe_load((reference / "examples" / "example-nicclusterpolicy_cr.v26.7.0-rc.2.yaml").read_text())
    cluster["/apis/mellanox.com/v1alpha1/nicclusterpolicies/nic-cluster-policy"] = example
    assert preinstalled.problems(parse(on_existing(pre=["networkOperator"]), "dev"), cluster.get) == [
        f"{KEY}: got networkOperator; NicClusterPolicy nic-cluster-policy: spec.rdmaSharedDevicePlugin advertises "
        "rdma/rdma_shared_device_a, not rdma/shared_ib (rdmaMode shared: what the fabric test's pods request)"]


def test_a_volcano_without_dra_is_named_where_the_fabric_test_claims_devices(reference):
    cluster = left_by_the_stack(reference, "gb300")
    release = (reference / "examples" / "volcano-development.v1.15.1.yaml").read_text()
    for obj in yaml.safe_load_all(volcano.configured(release, False)):
        if obj and obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == volcano_dra.SCHEDULER_CONFIGMAP:
            cluster[preinstalled.VOLCANO_SCHEDULER_CONFIGMAP] = obj
    cfg = parse(on_existing("gb300", ["volcano"]), "gb300")
    assert preinstalled.problems(cfg, cluster.get) == [
        f"{KEY}: got volcano; volcano-system: ConfigMap volcano-scheduler-configmap: no predicates plugin with "
        "predicate.DynamicResourceAllocationEnable: true (the fabric test claims devices, which Volcano's scheduler "
        "allocates only with DRA on)"]
    # Without the fabric test, nothing the stack declares goes through Volcano's scheduler or queue.
    off = parse({**on_existing("gb300", ["volcano"]), "aks-infiniband:fabricTest": {"enabled": False}}, "gb300")
    assert preinstalled.problems(off, without(cluster, "/apis/scheduling.volcano.sh/v1beta1/queues/default").get) == []


# --- what each component's record says it relies on, read back from what the stack itself sets ---------------
@pytest.mark.parametrize("mode", list(modes.MODES))
@pytest.mark.parametrize("driver", rdma_drivers.names())
def test_the_stacks_own_policy_and_values_satisfy_what_it_checks_of_another_owners(mode, driver):
    record, rd = modes.MODES[mode], rdma_drivers.rdma_driver(driver)
    pin = {k: pins.component(k).version for k in ("networkOperator", "docaDriver", "rdmaSharedDevicePlugin",
                                                   "sriovDevicePlugin")}
    args = network_operator.NetworkOperatorArgs(
        version=pin["networkOperator"], doca_driver_version=pin["docaDriver"],
        rdma_shared_device_plugin_version=pin["rdmaSharedDevicePlugin"],
        sriov_device_plugin_version=pin["sriovDevicePlugin"], rdma_mode=record, rdma_driver=rd)
    assert network_operator.policy_problems(network_operator.nic_cluster_policy_spec(args), record, rd) == []
    assert network_operator.policy_problems({}, record, rd) != [] or (record.device_plugin is None
                                                                      and not rd.installs_doca)
    for dra_gpus in (False, True):
        assert gpu_operator.cluster_policy_problems(gpu_operator.chart_values(dra_gpus, rd), rd, dra_gpus) == []
    if record.device_plugin:
        assert network_operator.advertised(record.device_plugin, dict(record.device_plugin.config)) == {record.resource}


def test_an_entry_without_a_prefix_takes_the_plugins_own():
    shared, sriov = modes.SHARED.device_plugin, modes.SRIOV.device_plugin
    assert network_operator.advertised(shared, {"configList": [{"resourceName": "shared_ib"}]}) == {"rdma/shared_ib"}
    assert network_operator.advertised(sriov, {"resourceList": [{"resourceName": "ib"}]}) == {"intel.com/ib"}
    assert set(network_operator.DEFAULT_PREFIX) == {m.device_plugin.section for m in modes.MODES.values()
                                                    if m.device_plugin}


# --- the check's own reading ---------------------------------------------------------------------------------
class FakeApi:
    def __init__(self, answers: dict):
        self.answers, self.paths = answers, []

    def get(self, path: str):
        self.paths.append(path)
        answer = self.answers.get(path, 404)
        if isinstance(answer, int):
            raise kube_api.ApiError(f"GET {path}: Kubernetes API answered {answer}", answer)
        return answer


def test_the_check_reads_nothing_at_a_preview_or_with_nothing_preinstalled(monkeypatch):
    monkeypatch.setattr(preinstalled.kube_api, "Api", lambda creds: pytest.fail("the cluster was read"))
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: True)
    preinstalled.check(parse(on_existing(pre=ALL), "dev"))
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: False)
    preinstalled.check(parse(on_existing(), "dev"))


def test_at_up_a_404_is_a_missing_object_and_another_answer_stops_with_one_line(monkeypatch, cluster):
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: False)
    monkeypatch.setattr(existing_cluster, "credentials", lambda cfg: None)
    api = FakeApi(without(cluster, "/apis/scheduling.volcano.sh/v1beta1/queues/default"))
    monkeypatch.setattr(preinstalled.kube_api, "Api", lambda creds: api)
    cfg = parse(on_existing(pre=ALL), "dev")
    with pytest.raises(pulumi.RunError) as caught:
        preinstalled.check(cfg)
    assert str(caught.value).splitlines()[1:] == [f"  {KEY}: got volcano; no Queue default (the fabric test's Job "
                                                  "runs in it; Volcano's controllers make it)"]
    api.answers = {**cluster, "/apis/nvidia.com/v1/clusterpolicies": 403}
    with pytest.raises(pulumi.RunError) as caught:
        preinstalled.check(cfg)
    assert str(caught.value) == ("existingCluster.preinstalled: cannot read what the stack relies on: GET "
                                 "/apis/nvidia.com/v1/clusterpolicies: Kubernetes API answered 403 (nothing was "
                                 "changed)")
    api.answers = cluster
    preinstalled.check(cfg)  # everything there: no error
