"""Grace Blackwell as Azure runs it (Pulumi.gb300.yaml, Pulumi.gb200.yaml) and `rdmaMode: dra` on H100:
the NVIDIA DRA driver, DRANET, the claim templates and the ComputeDomain, each checked against its
upstream schema (resource.k8s.io/v1 of the cluster's version, the ComputeDomain CRD, the charts'
values), the workers' claims and NCCL environment, and the two results of a GB size."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import dev_config, rendered

import stack_config
from components.fabric import certifier as certifier_mod
from components.fabric import fabric_claims, nccl_settings
from components.fabric.fabric_claims import groups
from components.fabric.nccl_topology import layout
from components.platform import dra_driver, dranet
from core import catalog, dra, fabric, pins
from offline import engine
from tests import schema_checks as sc

JOB = "kubernetes:batch.volcano.sh/v1alpha1:Job"
CERTIFY_JOB = "kubernetes:batch/v1:Job"
RCT = "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"
COMPUTE_DOMAIN = "kubernetes:resource.nvidia.com/v1beta1:ComputeDomain"
DEVICE_CLASS = "kubernetes:resource.k8s.io/v1:DeviceClass"
RELEASE = "kubernetes:helm.sh/v3:Release"
POOL = "azure-native:containerservice:AgentPool"
GB300, GB200 = "Standard_ND128isr_GB300_v6", "Standard_ND128isr_NDR_GB200_v6"
K8S = stack_config.DEFAULT_KUBERNETES_VERSION
DRA_DRIVER, DRANET = pins.component("draDriver").version, pins.component("dranet").version  # the reference's files


def gb300() -> engine.Rendering:
    return rendered("gb300")


def gb200() -> engine.Rendering:
    return rendered("gb200")


def h100_dra() -> engine.Rendering:
    return rendered("dev", dev_config(rdmaMode="dra"))


def obj(resource: engine.Resource) -> dict[str, Any]:
    fields = ("apiVersion", "kind", "metadata", "spec")
    return sc.as_api({k: resource.inputs[k] for k in fields if k in resource.inputs})


def jobs(stack: engine.Rendering) -> dict[str, dict[str, Any]]:
    """The Volcano Jobs by the name their pods are labelled with (each Job's own adds its spec's hash)."""
    return {r.inputs["metadata"]["labels"]["app.kubernetes.io/name"]: sc.as_api(r.inputs) for r in stack.of_type(JOB)}


def task(job: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in job["spec"]["tasks"] if t["name"] == name)


def certify_argv(stack: engine.Rendering, name: str) -> list[str]:
    """`python -m verify` arguments of a certify Job's one container (after `python3 -S -m verify`)."""
    (container,) = stack.one(CERTIFY_JOB, name).inputs["spec"]["template"]["spec"]["containers"]
    return container["command"][4:]


def _option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def worker(job: dict[str, Any]) -> dict[str, Any]:
    return task(job, "mpiworker")["template"]["spec"]


def launcher_env(job: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in task(job, "mpimaster")["template"]["spec"]["containers"][0]["env"]}


def release(stack: engine.Rendering, chart: str) -> engine.Resource:
    (found,) = [r for r in stack.of_type(RELEASE) if r.inputs["chart"].rsplit("/", 1)[-1] == chart]
    return found


# --- the stacks render, with what Azure's GB guide asks for -------------------------------------
@pytest.mark.parametrize("stack, size", [(gb300, GB300), (gb200, GB200)], ids=["gb300", "gb200"])
def test_gb_stacks_render_as_azure_runs_grace_blackwell(stack, size):
    r = stack()
    assert r.outputs["vmSize"] == size
    pool = r.one(POOL).inputs
    # `Ubuntu`: 24.04 on Kubernetes 1.35 (the stack's version); the 2025-09-01 API has no Ubuntu2404
    assert pool["osSKU"] == "Ubuntu" and pool["gpuProfile"] == {"driver": "None"}
    assert tuple(int(x) for x in pool["orchestratorVersion"].split(".")[:2]) >= dra.UBUNTU_2404_KUBERNETES
    # not a pool label: the driver manager rewrites it, which AKS refuses for one; the labeler sets it
    assert fabric.DRA_KUBELET_PLUGIN_LABEL not in pool["nodeLabels"]
    labeler = r.one("kubernetes:apps/v1:DaemonSet", "topology-daemonset").inputs["spec"]["template"]["spec"]
    (label_step,) = [c for c in labeler["initContainers"] if c["name"] == "label"]
    extra = next(e["value"] for e in label_step["env"] if e["name"] == "TOPOLOGY_EXTRA_LABELS")
    assert json.loads(extra) == {fabric.DRA_KUBELET_PLUGIN_LABEL: "true"}
    # ... and held by the admission loop like every all-reduce pool: its DRA pods tolerate that (below)
    assert pool["nodeTaints"] == [fabric.IB_TAINT]
    # AKSInfinibandSupport: checked to be unregistered, never registered
    (step,) = [s for s in r.of_type("command:local:Command") if s.name.startswith("ib-feature-")]
    assert step.name == "ib-feature-check-unregistered"
    values = release(r, "gpu-operator").inputs["values"]
    assert values["devicePlugin"] == {"enabled": False}
    assert {"name": "NODE_LABEL_FOR_GPU_POD_EVICTION", "value": fabric.DRA_KUBELET_PLUGIN_LABEL} in (
        values["driver"]["manager"]["env"])
    dra_values = release(r, "dra-driver-nvidia-gpu").inputs
    assert dra_values["namespace"] == dra_driver.NAMESPACE != "default"
    assert dra_values["values"]["gpuResourcesEnabledOverride"] is True
    assert dra_values["values"]["nvidiaDriverRoot"] == "/run/nvidia/driver"
    assert dra_values["values"]["resources"]["computeDomains"] == {"enabled": True}


@pytest.mark.parametrize("stack", [gb300, gb200], ids=["gb300", "gb200"])
def test_gb_workers_claim_their_gpus_and_the_verdict_run_is_ib_only(stack):
    r = stack()
    verdict_job = jobs(r)["nccl-allreduce"]
    spec = worker(verdict_job)
    resources = spec["containers"][0]["resources"]
    assert fabric.GPU_RESOURCE not in (resources.get("limits") or {})  # no device plugin: a claim
    assert {c["name"] for c in resources["claims"]} == {fabric_claims.DEVICES_CLAIM}
    assert spec["resourceClaims"] == [{"name": fabric_claims.DEVICES_CLAIM,
                                       "resourceClaimTemplateName": fabric_claims.DEVICES_TEMPLATE}]
    env = launcher_env(verdict_job)
    # Azure's Grace Blackwell variables (graceblackwell.conf), with MNNVL and NVLS off
    assert {k: env[k] for k in ("NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_C2C", "NCCL_IB_SL", "NCCL_DMABUF_ENABLE",
                                "NCCL_MNNVL_ENABLE", "NCCL_NVLS_ENABLE")} == {
        "NCCL_NET_GDR_LEVEL": "PHB", "NCCL_NET_GDR_C2C": "1", "NCCL_IB_SL": "1", "NCCL_DMABUF_ENABLE": "1",
        "NCCL_MNNVL_ENABLE": "0", "NCCL_NVLS_ENABLE": "0"}
    # relaxed ordering as Azure's GB300 values leave it (unset), and the RDMA plugin loaded (no `none`)
    assert "NCCL_IB_PCI_RELAXED_ORDERING" not in env and "NCCL_NET_PLUGIN" not in env
    # the verdict run may span racks; in rdmaMode dra (the gb300 stack) it is held to one placement group
    together = {t["topologyKey"] for t in (spec["affinity"].get("podAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", [])}
    assert together == ({fabric.PLACEMENT_GROUP_LABEL} if stack is gb300 else set())


def test_gb_rack_run_claims_the_compute_domain_and_is_reported_apart():
    r = gb300()
    rack_job = jobs(r)["nccl-allreduce-rack"]
    spec = worker(rack_job)
    assert {c["name"] for c in spec["resourceClaims"]} == {fabric_claims.DEVICES_CLAIM, fabric_claims.CHANNEL_CLAIM}
    (channel,) = [c for c in spec["resourceClaims"] if c["name"] == fabric_claims.CHANNEL_CLAIM]
    (domain,) = r.of_type(COMPUTE_DOMAIN)
    assert domain.inputs["spec"]["channel"]["resourceClaimTemplate"]["name"] == channel["resourceClaimTemplateName"]
    assert domain.inputs["metadata"]["namespace"] == rack_job["metadata"]["namespace"]
    together = spec["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    # one NVLink clique (and, rdmaMode dra, one placement group), every worker of this job
    assert {t["topologyKey"] for t in together} == {fabric.GPU_CLIQUE_LABEL, fabric.PLACEMENT_GROUP_LABEL}
    assert all(t["labelSelector"]["matchLabels"].items() <= task(rack_job, "mpiworker")["template"]["metadata"][
        "labels"].items() for t in together)
    env = launcher_env(rack_job)
    assert (env["NCCL_MNNVL_ENABLE"], env["NCCL_NVLS_ENABLE"], env["DOCTOR"]) == ("1", "1", "never")
    # it runs after the verdict's certify Job (both take every GPU) ...
    verdict, rack = r.one(CERTIFY_JOB, "fabric-check-certify"), r.one(CERTIFY_JOB, "fabric-check-rack-certify")
    (rack_cr,) = [j for j in r.of_type(JOB) if j.inputs["metadata"]["name"] == rack_job["metadata"]["name"]]
    assert verdict.urn in rack_cr.dependencies
    # ... is judged in the cluster by the rack figure (--rack), into its own ConfigMap, changing no node ...
    ib_args, rack_args = certify_argv(r, "fabric-check-certify"), certify_argv(r, "fabric-check-rack-certify")
    assert "--rack" in rack_args and "--rack" not in ib_args
    assert _option(rack_args, "--mode") == "off" and _option(ib_args, "--mode") == "taint"
    assert _option(rack_args, "--job") == rack_job["metadata"]["name"]
    assert _option(rack_args, "--namespace") == rack_job["metadata"]["namespace"] != "fabric-test"
    assert _option(rack_args, "--result-configmap") == certifier_mod.RACK_RESULT_CONFIGMAP
    assert _option(ib_args, "--result-configmap") == certifier_mod.RESULT_CONFIGMAP
    assert "--history-configmap" not in rack_args and "--fail-on-low-bandwidth" not in rack_args
    # ... with read access to the rack run's namespace only (its job and the launcher's log, no create)
    (role,) = [x for x in r.of_type("kubernetes:rbac.authorization.k8s.io/v1:Role")
               if x.inputs["metadata"]["namespace"] == rack_job["metadata"]["namespace"]]
    assert r.depends_on(rack, role)
    assert all(set(rule["verbs"]) <= {"get", "list"} for rule in role.inputs["rules"])
    assert r.one("kubernetes:core/v1:ConfigMap", "certifier-rack-result").inputs["metadata"]["name"] == (
        certifier_mod.RACK_RESULT_CONFIGMAP)
    # ... and exported beside the verdict, never as it
    assert {"fabricVerdict", "rackFabricVerdict", "rackAllReduceBusBwAtMaxSizeGbps"} <= set(r.outputs)
    assert not r.of_type(COMPUTE_DOMAIN)[0].inputs["metadata"]["namespace"] == "fabric-test"


def test_stacks_without_a_rack_run_have_no_rack_result_or_role():
    dev = rendered("dev")
    assert not [c for c in dev.of_type("kubernetes:core/v1:ConfigMap") if c.name == "certifier-rack-result"]
    assert "--rack" not in certify_argv(dev, "fabric-check-certify")


def test_no_rack_run_where_the_pool_is_bigger_than_a_rack_or_has_no_mnnvl():
    big = rendered("gb300", {**engine.stack_file_config("gb300"),
                             "aks-infiniband:ibPool": {"vmSize": GB300, "nodeCount": 19}},
                   part="kubernetes")  # the jobs, the ComputeDomain and the rack outputs are that half's
    assert set(jobs(big)) == {"nccl-allreduce"} and not big.of_type(COMPUTE_DOMAIN)
    assert "rackFabricVerdict" not in big.outputs
    assert set(jobs(rendered("dev"))) == {"nccl-allreduce"}


# --- rdmaMode dra on H100 ------------------------------------------------------------------------
def test_h100_dra_claims_pair_each_gpu_with_its_hca_held_to_one_placement_group():
    r = h100_dra()
    (template,) = r.of_type(RCT)
    devices = sc.as_api(template.inputs["spec"])["spec"]["devices"]
    requests = {q["name"]: q["exactly"] for q in devices["requests"]}
    pairs = [p for n in layout("ndv5").numas for s in n.switches for p in s.pairs]
    assert len(requests) == 2 * len(pairs) == 16
    for i, p in enumerate(pairs):  # the topology file's pairs: GPU and HCA behind one PCIe switch
        gpu, nic = requests[f"gpu-{i}"], requests[f"nic-{i}"]
        assert (gpu["deviceClassName"], nic["deviceClassName"]) == (dra.GPU_DEVICE_CLASS, dra.NIC_DEVICE_CLASS)
        assert gpu["selectors"][0]["cel"]["expression"] == f'{dra.GPU_PCI_ATTRIBUTE} in ["{p.gpu_busid}"]'
        assert nic["selectors"][0]["cel"]["expression"] == f'{dra.NIC_PCI_ATTRIBUTE} in ["{p.hca_busid}"]'
    (constraint,) = devices["constraints"]
    assert constraint == {"requests": [f"nic-{i}" for i in range(8)], "matchAttribute": dra.PLACEMENT_GROUP_ATTRIBUTE}
    # a claim's constraint holds its own HCAs; across workers, the topology labeler's placement-group label
    (together,) = worker(jobs(r)["nccl-allreduce"])["affinity"]["podAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]
    assert together["topologyKey"] == fabric.PLACEMENT_GROUP_LABEL


def test_h100_dra_workers_request_no_rdma_or_gpu_count_and_dranet_is_installed():
    r = h100_dra()
    spec = worker(jobs(r)["nccl-allreduce"])
    text = json.dumps(spec)
    assert "rdma/shared_ib" not in text and "rdma/ib" not in text and fabric.GPU_RESOURCE + '"' not in text
    (device_class,) = r.of_type(DEVICE_CLASS)
    assert device_class.inputs["metadata"]["name"] == dra.NIC_DEVICE_CLASS
    assert sc.as_api(device_class.inputs["spec"]) == {
        "selectors": [{"cel": {"expression": 'device.driver == "dra.net"'}}]}
    assert release(r, "dranet").inputs["values"]["args"]["moveIBInterfaces"] is False
    # the NicClusterPolicy keeps the DOCA driver (still needed: docs/dra.md) and deploys no device plugin
    (policy,) = r.of_type("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy")
    assert "ofedDriver" in policy.inputs["spec"] and not any(k.endswith("DevicePlugin") for k in policy.inputs["spec"])
    # ComputeDomains are for multi-node NVLink only
    assert release(r, "dra-driver-nvidia-gpu").inputs["values"]["resources"]["computeDomains"] == {"enabled": False}
    assert not r.of_type(COMPUTE_DOMAIN)


# --- every new object against its upstream schema ------------------------------------------------
@pytest.mark.parametrize("stack", [gb300, gb200, h100_dra], ids=["gb300", "gb200", "h100-dra"])
def test_dra_objects_pass_the_kubernetes_schema_of_the_stack_and_fail_before_1_34(stack):
    r = stack()
    objects = [obj(x) for x in (*r.of_type(RCT), *r.of_type(DEVICE_CLASS))]
    assert objects
    for o in objects:
        for version in ("1.34", K8S):
            assert sc.kubernetes_errors(o, version) == [], (o["kind"], version)
        assert not sc.has_kubernetes_schema(o["apiVersion"], o["kind"], "1.33")  # v1 is not served there
    broken = json.loads(json.dumps(objects[0]))
    broken["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = "two"
    assert sc.kubernetes_errors(broken, K8S)


def test_the_compute_domain_passes_its_crd_and_a_misspelt_field_is_caught(reference):
    crd = reference / "crds" / f"resource.nvidia.com_computedomains.v{DRA_DRIVER}.yaml"
    domain = obj(gb300().one(COMPUTE_DOMAIN))
    assert sc.crd_errors(domain, crd) == []
    broken = json.loads(json.dumps(domain))
    broken["spec"]["channel"]["resourceClaimTemplates"] = broken["spec"]["channel"].pop("resourceClaimTemplate")
    assert sc.crd_errors(broken, crd)


def test_dranet_values_pass_the_charts_values_schema(reference):
    import jsonschema

    schema = json.loads((reference / "schemas" / f"dranet.values.schema.v{DRANET}.json").read_text())
    jsonschema.validate(sc.as_api(dranet.chart_values()), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"args": {"moveIbInterfaces": False}}, schema)


def test_the_dra_drivers_chart_renders_our_values(helm, reference):
    from offline import charts

    archives = charts.charts_dir()
    if not (archives / f"dra-driver-nvidia-gpu-{DRA_DRIVER}.tgz").is_file():
        pytest.skip(f"no dra-driver-nvidia-gpu-{DRA_DRIVER}.tgz in {archives}")
    # the two DRA releases only (render_all's own steps; the operators' charts: test_charts.py)
    stack = gb300()
    kube, apis = charts.kube_version(stack), charts.api_versions(stack)
    dra_releases = [r for r in charts.releases(stack) if r.name in ("dra-driver-nvidia-gpu", "dranet")]
    out = {r.name: charts.render(r, helm=helm, charts_dir=archives, kube=kube, apis=apis) for r in dra_releases}
    assert set(out) == {"dra-driver-nvidia-gpu", "dranet"}
    driver = out["dra-driver-nvidia-gpu"]
    classes = {d["metadata"]["name"]: d["apiVersion"] for d in driver.of_kind("DeviceClass")}
    assert classes.get(dra.GPU_DEVICE_CLASS) == dra.API_VERSION
    (plugin,) = [d for d in driver.of_kind("DaemonSet")]
    pod = plugin["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {fabric.DRA_KUBELET_PLUGIN_LABEL: "true"}
    # an uncertified (or quarantined) node still gets its drivers: the pool taint and the certifier's
    assert all(t in pod["tolerations"] for t in fabric.fabric_tolerations())
    assert {c["metadata"]["name"] for c in driver.crds} >= {"computedomains.resource.nvidia.com"}
    (ds,) = out["dranet"].of_kind("DaemonSet")
    assert ds["spec"]["template"]["spec"]["nodeSelector"] == fabric.pool_node_selector()
    assert all(t in ds["spec"]["template"]["spec"]["tolerations"] for t in fabric.fabric_tolerations())


# --- the pairing, checked against live GB300 ResourceSlices --------------------------------------
def _slices(reference: Path, name: str) -> list[dict[str, Any]]:
    text = (reference / "examples" / "dranet-aks" / "examples" / "azure_aks_examples" / "gb300" / name).read_text()
    docs = [d for d in sc.load_yaml_all(text) if d]
    items = [i for d in docs for i in (d.get("items") or [d])]
    return [dev for s in items for dev in s["spec"]["devices"]]


def test_gb300_groups_match_the_live_slices_and_gpu_and_nic_share_no_attribute(reference):
    """Why the pairing is by PCI address and not a `matchAttribute` constraint: on Azure's GB300 the GPU
    and NIC devices publish no attribute in common (each has its own PCI domain; the NIC carries the NUMA
    node, the GPU does not), so such a constraint could never be met."""
    gpus, nics = _slices(reference, "resourceslice-gpu.yaml"), _slices(reference, "resourceslice-dranet.yaml")
    assert not set().union(*(d["attributes"] for d in gpus)) & set().union(*(d["attributes"] for d in nics))
    gpu_ids = {d["attributes"]["resource.kubernetes.io/pciBusID"]["string"] for d in gpus}
    numa = {d["attributes"]["dra.net/pciAddress"]["string"]: d["attributes"]["dra.net/numaNode"]["int"] for d in nics}
    found = groups(catalog.lookup(GB300))
    assert {g for group in found for g in group.gpus} == gpu_ids
    assert {h for group in found for h in group.hcas} == set(numa)
    assert [{numa[h] for h in group.hcas} for group in found] == [{0}, {1}]  # each group on one NUMA node


def test_claims_refuse_a_size_without_a_published_layout():
    with pytest.raises(ValueError, match="no published GPU/HCA layout"):
        fabric_claims.devices_claim(catalog.lookup(GB200), nics=True)
    assert groups(catalog.lookup(GB200)) is None


def test_the_rack_settings_only_change_mnnvl_and_nvls():
    sku = catalog.lookup(GB300)
    ib = nccl_settings.nccl_env(sku, topology_file=True, sharp=False)
    rack = nccl_settings.nccl_env(sku, topology_file=True, sharp=False, rack=True)
    assert {k for k in ib if ib[k] != rack.get(k)} == {"NCCL_MNNVL_ENABLE", "NCCL_NVLS_ENABLE"}
    with pytest.raises(ValueError, match="no multi-node NVLink"):
        nccl_settings.nccl_env(catalog.lookup("Standard_ND96isr_H100_v5"), topology_file=True, sharp=False, rack=True)


def test_the_doca_build_stays_on_the_dra_paths_critical_path():
    """With the default rdmaDriver doca (GB300 has no other: docs/dra.md) the DRA path keeps the DOCA driver and
    its build stays what the first result waits for; the DRA driver and DRANET install in parallel with the
    operators."""
    from offline import synth

    for stack in (gb300(), h100_dra()):
        tl = synth.build_timeline(stack)
        assert any(s.endswith("/doca-driver-ready") for s in tl.critical_path), tl.critical_path
        assert not any("dra-driver" in s or "dranet" in s for s in tl.critical_path), tl.critical_path


# --- the rack result is judged by its own figure (verify collect --rack), against a fake API server ---
def _collect(log: str, monkeypatch, capsys, *extra: str) -> tuple[int, dict[str, Any], str]:
    from tests.unit.clusterside.test_verify_collect import JOB as VJOB
    from tests.unit.clusterside.test_verify_collect import NS, FakeKube
    from verify import __main__ as cli

    with FakeKube(["Completed"], log) as kube:
        monkeypatch.setenv("KUBECONFIG_CONTENT", kube.kubeconfig())
        code = cli.main(["collect", "--namespace", NS, "--job", VJOB, "--sku", GB300, "--nodes", "2",
                         "--poll-seconds", "0.05", "--json", *extra])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if captured.out.strip() else {}), captured.err


def test_the_rack_run_is_judged_by_the_rack_figure_and_the_ib_run_by_the_ib_one(monkeypatch, capsys):
    from tests.nccl_logs import launcher_log, worker_hosts

    # 500 GB/s at the largest size: well above the IB-only line (180), below the rack's (800)
    log = launcher_log(worker_hosts(2), 4, busbw_gbps=500.0, hcas=4)
    code, ib, _ = _collect(log, monkeypatch, capsys)
    assert code == 0 and ib["verdict"] == "PASS" and ib["threshold_gbps"] == 180.0
    code, rack, _ = _collect(log, monkeypatch, capsys, "--rack")
    assert code == 0 and rack["verdict"] == "FAIL" and rack["threshold_gbps"] == 800.0
    assert any("below the threshold 800" in r for r in rack["reasons"])


def test_rack_is_refused_for_a_size_without_multi_node_nvlink(monkeypatch, capsys):
    from tests.unit.clusterside.test_verify_collect import JOB as VJOB
    from tests.unit.clusterside.test_verify_collect import NS
    from verify import __main__ as cli

    code = cli.main(["collect", "--namespace", NS, "--job", VJOB, "--sku", "Standard_ND96isr_H100_v5",
                     "--nodes", "2", "--rack", "--json"])
    err = capsys.readouterr().err  # before any request: as the other flags that do not apply
    assert code == 2 and "--rack applies to the NCCL all-reduce of a multi-node-NVLink size" in err


# --- Volcano allocates the claims: DRA on in its scheduler (components/platform/volcano_dra.py) ------------------
def _volcano(reference: Path) -> list[dict[str, Any]]:
    text = (reference / "examples" / "volcano-development.v1.15.1.yaml").read_text()
    return [d for d in sc.load_yaml_all(text) if d]


def test_volcanos_scheduler_gets_dra_on_and_keeps_everything_else(reference):
    import yaml

    from components.platform import volcano_dra, volcano_topology

    before = _volcano(reference)
    after = volcano_dra.configure(volcano_topology.configure(before))  # composes with the topology rewrite
    (cm,) = [o for o in after if o["kind"] == "ConfigMap" and o["metadata"]["name"] == volcano_dra.SCHEDULER_CONFIGMAP]
    conf = yaml.safe_load(cm["data"][volcano_dra.SCHEDULER_KEY])
    (predicates,) = [p for t in conf["tiers"] for p in t["plugins"] if p["name"] == "predicates"]
    assert predicates["arguments"] == {volcano_dra.PREDICATE_ARGUMENT: True}
    assert "network-topology-aware" in [p["name"] for p in conf["tiers"][-1]["plugins"]]
    (deploy,) = [o for o in after if o["kind"] == "Deployment" and o["metadata"]["name"] == volcano_dra.SCHEDULER]
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert args.count(volcano_dra.FEATURE_GATE) == 1 and args[-1] == "2>&1"  # before the manifest's redirect
    assert sc.kubernetes_errors(deploy, K8S) == []
    changed = {(o["kind"], o["metadata"]["name"]) for o, b in zip(after, volcano_topology.configure(before),
                                                                   strict=True) if o != b}
    assert changed == {("ConfigMap", volcano_dra.SCHEDULER_CONFIGMAP), ("Deployment", volcano_dra.SCHEDULER)}
    again = volcano_dra.configure(after)  # idempotent
    assert again == after
    with pytest.raises(ValueError, match="lacks the scheduler"):
        volcano_dra.configure([o for o in before if o["kind"] != "Deployment"])


def test_gb300_in_rdma_mode_dra_runs_without_data_direct_as_dranets_aks_example(reference):
    """DRANET's AKS GB300 MPIJob passes NCCL_IB_DATA_DIRECT=0 to every rank: mirrored (only there) until a
    run with it on is measured."""
    example = (reference / "examples" / "dranet-aks" / "examples" / "azure_aks_examples" / "gb300" / "mpi-job.yaml")
    assert "-x NCCL_IB_DATA_DIRECT=0" in example.read_text()

    def env(stack) -> dict[str, str]:
        job = stack.one("kubernetes:batch.volcano.sh/v1alpha1:Job", "fabric-test-job").inputs
        (launcher,) = [t for t in job["spec"]["tasks"] if t["name"] == "mpimaster"]
        return {e["name"]: e.get("value") for e in launcher["template"]["spec"]["containers"][0]["env"]}

    assert env(gb300())["NCCL_IB_DATA_DIRECT"] == "0"
    assert "NCCL_IB_DATA_DIRECT" not in env(h100_dra()) and "NCCL_IB_DATA_DIRECT" not in env(gb200())
