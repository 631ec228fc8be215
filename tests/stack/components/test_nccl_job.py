"""Row 8: the NCCL all-reduce Volcano Job, its namespace and ConfigMaps. The launcher script it runs, run for real:
tests/stack/components/test_nccl_launcher.py."""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import dev_config, dev_kubernetes_half, rendered

import stack_config
from components.fabric import mpi_job, nccl_job, nccl_settings
from components.fabric.nccl_topology import render_xml
from core import catalog, defaults, fabric, modes
from offline import engine
from tests.paths import ROOT
from tests.schema_checks import as_api, core_errors, crd_errors, pinned_name
from tests.stack.components.test_fabric_check import FLAGS, SHARP, SHORT

JOB = "kubernetes:batch.volcano.sh/v1alpha1:Job"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"
NAMESPACE = "kubernetes:core/v1:Namespace"
POOL = "azure-native:containerservice:AgentPool"
POLICY = "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy"
RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigGroup"  # Volcano's checked manifest
LAUNCHER = ROOT / "scripts" / "nccl-launcher.sh"
A100, H100 = "Standard_ND96asr_v4", "Standard_ND96isr_H100_v5"
# The job, its ConfigMaps and its namespace are the Kubernetes half's (tests/stack/test_stack_parts.py): a test
# of a configuration renders that half (dev_kubernetes_half()), with the same dicts as test_fabric_check.py where both
# read one (one render per session); several keys at once where each test asserts its own key's effect.
IMAGE_ARGS = {"image": "example.io/nccl:1.2.3", "allReduceArgs": "-b 1G -e 8G -f 2 -g 1",
              "timeoutMinutes": 20, "doctor": "auto", "doctorMinutes": 10}


# --- helpers ------------------------------------------------------------------------------------
def job(stack) -> dict[str, Any]:
    return as_api(stack.one(JOB).inputs)


def task(stack, name: str) -> dict[str, Any]:
    return next(t for t in job(stack)["spec"]["tasks"] if t["name"] == name)


def pod(stack, name: str) -> dict[str, Any]:
    return task(stack, name)["template"]["spec"]


def container(stack, name: str) -> dict[str, Any]:
    (c,) = pod(stack, name)["containers"]
    return c


def env(stack) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container(stack, "mpimaster")["env"]}


# --- the job's shape ----------------------------------------------------------------------------
@pytest.mark.parametrize("vm_size", [A100, H100])
def test_workers_ask_for_every_gpu_of_the_sku(vm_size):
    stack = dev_kubernetes_half(ibPool={"vmSize": vm_size})
    gpus = catalog.lookup(vm_size).gpus_per_vm
    res = container(stack, "mpiworker")["resources"]
    assert res["limits"][fabric.GPU_RESOURCE] == str(gpus)
    assert res["requests"][fabric.GPU_RESOURCE] == str(gpus)
    assert env(stack)["GPUS_PER_NODE"] == str(gpus)
    # the launcher holds no GPU: all of a node's GPUs go to its worker
    assert fabric.GPU_RESOURCE not in (container(stack, "mpimaster").get("resources") or {}).get("limits", {})


@pytest.mark.parametrize("mode", modes.names())
@pytest.mark.parametrize("vm_size", [A100, H100])
def test_workers_ask_for_the_rdma_resource_of_the_mode(mode, vm_size):
    stack = dev_kubernetes_half(rdmaMode=mode, ibPool={"vmSize": vm_size})
    sku, record = catalog.lookup(vm_size), modes.rdma_mode(mode)
    resources = container(stack, "mpiworker")["resources"]
    limits = resources.get("limits") or {}
    rdma = {k: v for k, v in limits.items() if k.startswith(f"{fabric.RDMA_RESOURCE_PREFIX}/")}
    assert rdma == record.limits(sku)
    assert {"shared": {"rdma/shared_ib": "1"}, "sriov": {"rdma/ib": "8"}, "dra": {}}[mode] == rdma
    # dra: no device-plugin count at all, GPUs included; the worker holds its DRA claim instead
    assert (fabric.GPU_RESOURCE in limits) == (not record.dra)
    assert bool(resources.get("claims")) == record.dra


@pytest.mark.parametrize("nodes", [2, 4])
def test_gang_of_launcher_and_one_worker_per_node(nodes):
    stack = dev_kubernetes_half(ibPool={"nodeCount": nodes})
    spec = job(stack)["spec"]
    assert spec["schedulerName"] == "volcano"
    assert spec["minAvailable"] == nodes + 1
    assert task(stack, "mpiworker")["replicas"] == nodes
    assert task(stack, "mpimaster")["replicas"] == 1
    assert env(stack)["NODES"] == str(nodes)
    assert spec["plugins"] == {"ssh": [], "svc": []}


def test_job_ends_with_the_launcher_and_fails_cleanly(dev):
    spec = job(dev)["spec"]
    assert task(dev, "mpimaster")["policies"] == [{"event": "TaskCompleted", "action": "CompleteJob"}]
    failing = {p["event"]: p["action"] for p in spec["policies"]}
    assert failing == {"PodFailed": "TerminateJob", "PodEvicted": "TerminateJob"}
    for name in ("mpimaster", "mpiworker"):
        assert pod(dev, name)["restartPolicy"] == "Never"
    assert spec["ttlSecondsAfterFinished"] > 0


@pytest.mark.parametrize("fabric_test, minutes, doctor, doctor_minutes, deadline", [
    (IMAGE_ARGS, 20, "auto", 10, 30), (FLAGS, 120, "always", 15, 135), (SHORT, 10, "never", 10, 10)],
    ids=["auto", "always", "never"])
def test_every_pod_has_the_configured_deadline_plus_the_doctors_budget(fabric_test, minutes, doctor,
                                                                        doctor_minutes, deadline):
    assert (fabric_test["timeoutMinutes"], fabric_test["doctor"], fabric_test["doctorMinutes"]) == (
        minutes, doctor, doctor_minutes)
    stack = dev_kubernetes_half(fabricTest=fabric_test)
    for name in ("mpimaster", "mpiworker"):
        assert pod(stack, name)["activeDeadlineSeconds"] == deadline * 60


def test_workers_lock_memory_without_privilege(dev):
    sc = container(dev, "mpiworker")["securityContext"]
    assert sc["capabilities"]["add"] == ["IPC_LOCK"]
    assert sc["privileged"] is False
    for name in ("mpimaster", "mpiworker"):
        assert not pod(dev, name).get("hostNetwork")
        assert container(dev, name)["securityContext"].get("privileged") is False


def zero_values(node: Any, path: str = "") -> list[str]:
    """Where `node` holds a false or an empty string: what a Go type's omitempty drops on re-serialization."""
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in zero_values(v, f"{path}.{k}")]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in zero_values(v, f"{path}[{i}]")]
    return [path] if node is False or node == "" else []


# Fields of the pod template whose false Kubernetes keeps: pointers in its Go types (k8s.io/api core/v1).
POINTER_BOOLS = ("automountServiceAccountToken", "enableServiceLinks", "privileged", "allowPrivilegeEscalation",
                 "readOnlyRootFilesystem", "runAsNonRoot", "readOnly")


def test_the_tasks_survive_volcanos_webhook_re_writing_them(dev):
    """Volcano's mutating webhook replaces /spec/tasks with its own Go encoding (omitempty): a false or ""
    the stack writes is gone from the stored Job, and every later preview replaces it (found by the engine
    tier's no-change preview: `hostNetwork: false`, env values ""). Only pointer fields keep a false."""
    dropped = [p for t in job(dev)["spec"]["tasks"] for p in zero_values(t["template"], t["name"])
               if not p.rsplit(".", 1)[-1].startswith(POINTER_BOOLS)]
    assert dropped == []


def test_pods_are_hardened_beyond_not_privileged(dev):
    for name in ("mpimaster", "mpiworker"):
        sc = container(dev, name)["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"]["drop"] == ["NET_RAW"]
        assert pod(dev, name)["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "add" not in container(dev, "mpimaster")["securityContext"]["capabilities"]  # the launcher pins nothing


def test_all_pods_tolerate_the_pool_taint_and_select_the_pool(dev):
    for name in ("mpimaster", "mpiworker"):
        spec = pod(dev, name)
        assert fabric.toleration() in spec["tolerations"]
        assert any(t["key"] == fabric.IB_TAINT_KEY for t in spec["tolerations"])
        assert spec["nodeSelector"] == fabric.pool_node_selector()


def test_one_worker_per_node(dev):
    template = task(dev, "mpiworker")["template"]
    (term,) = template["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    selector = term["labelSelector"]["matchLabels"]
    assert selector.items() <= template["metadata"]["labels"].items(), "the workers must repel each other"
    launcher_labels = task(dev, "mpimaster")["template"]["metadata"]["labels"]
    assert not selector.items() <= launcher_labels.items(), "the launcher may share a node with a worker"


def test_dev_shm_is_memory(dev):
    spec = pod(dev, "mpiworker")
    mount = next(m for m in container(dev, "mpiworker")["volumeMounts"] if m["mountPath"] == "/dev/shm")
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    assert volume["emptyDir"]["medium"] == "Memory"


@pytest.mark.parametrize("vm_size, topo", [(A100, "ndv4"), (H100, "ndv5"), ("Standard_ND96isr_H200_v5", "ndv5")])
def test_topology_of_the_sku_is_mounted_where_nccl_looks(vm_size, topo):
    stack = dev_kubernetes_half(ibPool={"vmSize": vm_size})
    assert catalog.lookup(vm_size).nccl_topology == topo
    cm = as_api(stack.one(CONFIGMAP, "fabric-test-topology").inputs)
    assert cm["data"] == {"topo.xml": render_xml(topo)}
    # NCCL_TOPO_FILE names a file that the worker's mount of that ConfigMap provides
    path = Path(env(stack)["NCCL_TOPO_FILE"])
    spec = pod(stack, "mpiworker")
    mount = next(m for m in container(stack, "mpiworker")["volumeMounts"] if m["mountPath"] == str(path.parent))
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == cm["metadata"]["name"]
    assert {"key": path.name, "path": path.name} in volume["configMap"]["items"]
    assert cm["metadata"]["namespace"] == job(stack)["metadata"]["namespace"]


def test_nccl_environment(dev):
    e = env(dev)
    assert e["NCCL_IB_DISABLE"] == "0"
    assert e["NCCL_NET_GDR_LEVEL"] == "SYS"
    assert e["NCCL_IB_PCI_RELAXED_ORDERING"] == "1"
    assert e["NCCL_SOCKET_IFNAME"] == "eth0"
    assert e["UCX_NET_DEVICES"] == "eth0" and e["UCX_TLS"] == "tcp"
    assert e["NCCL_TOPO_FILE"].endswith("/topo.xml")


AZURE_NDV5 = {"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_MIN_NCHANNELS": "32", "NCCL_P2P_NET_CHUNKSIZE": "524288",
              "NCCL_PXN_DISABLE": "1", "NCCL_IGNORE_CPU_AFFINITY": "1"}


def test_the_nd_v5_job_carries_azures_settings_each_with_its_source(dev):
    e = env(dev)
    assert {k: e[k] for k in AZURE_NDV5} == AZURE_NDV5
    sku = catalog.lookup(H100)
    for name, setting in nccl_settings.settings(sku, topology_file=True, sharp=False).items():
        assert setting.value == e[name], name
        assert re.search(r"[\w-]+/[\w.-]+@[0-9a-f]{7}", setting.source) or setting.source == nccl_settings.OURS, name
        assert len(setting.why) > 15, name
    for name in AZURE_NDV5:  # Azure's AKS NCCL test, by its path
        assert "infrastructure_validations/aks/NCCL/helm/nccl-test/values.yaml" in nccl_settings.settings(
            sku, topology_file=True, sharp=False)[name].source
    assert e["MPI_MAP_BIND"] == "--map-by ppr:8:node:pe=12 --bind-to core --report-bindings"


def spec_env(vm_size: str, **kw: Any) -> tuple[dict[str, str], dict[str, Any]]:
    args = nccl_job.NcclJobArgs(sku=catalog.lookup(vm_size), node_count=2, rdma_mode=modes.SHARED, image="x.io/i:1",
                                all_reduce_args="-b 8 -e 8G -f 2 -g 1", timeout_minutes=60, **kw)
    spec = nccl_job.job_spec(args, "launcher", {"topology": "topology"}, "hash")
    master = next(t for t in spec["tasks"] if t["name"] == "mpimaster")["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", "") for e in master["env"]}, spec


def test_a100_gets_azhpc_images_nd_v4_settings_and_no_binding():
    e, _ = spec_env(A100)
    assert e["NCCL_IGNORE_CPU_AFFINITY"] == "1"
    assert not set(AZURE_NDV5) - {"NCCL_IGNORE_CPU_AFFINITY"} & set(e)
    assert e["MPI_MAP_BIND"] == "-npernode 8 --bind-to none"


def test_sharp_switches_collnet_on_and_stops_disabling_the_plugin():
    off, _ = spec_env(H100)
    assert off["NCCL_NET_PLUGIN"] == "none" and "NCCL_COLLNET_ENABLE" not in off
    assert not any(k.startswith("SHARP_") for k in off)
    on, _ = spec_env(H100, sharp=True)
    assert "NCCL_NET_PLUGIN" not in on  # NCCL loads HPC-X's libnccl-net.so, the SHARP plugin
    assert on["NCCL_COLLNET_ENABLE"] == "1" and on["SHARP_COLL_ENABLE_SAT"] == "1"
    assert on["SHARP_SMX_UCX_INTERFACE"] == on["UCX_NET_DEVICES"] == "mlx5_0:1" and on["UCX_TLS"] == "rc"
    assert {k: on[k] for k in AZURE_NDV5} == AZURE_NDV5  # the generation's tuning stays


def test_topology_file_switch_removes_the_file_the_mount_and_the_variable():
    on, spec_on = spec_env(H100)
    off, spec_off = spec_env(H100, topology_file=False)
    assert on["NCCL_TOPO_FILE"] == "/opt/nccl-topology/topo.xml" and "NCCL_TOPO_FILE" not in off

    def volumes(spec):
        worker = next(t for t in spec["tasks"] if t["name"] == "mpiworker")["template"]["spec"]
        return {v["name"] for v in worker["volumes"]}

    assert "nccl-topology" in volumes(spec_on) and "nccl-topology" not in volumes(spec_off)


def test_the_config_switches_reach_the_rendered_job(dev):
    """fabricTest.sharp: true switches CollNet on and no longer disables the SHARP plugin;
    fabricTest.topologyFile: false drops the file (ConfigMap, mount, variable). Defaults: Azure's AKS test."""
    assert env(dev)["NCCL_NET_PLUGIN"] == "none" and "NCCL_COLLNET_ENABLE" not in env(dev)
    assert env(dev)["NCCL_TOPO_FILE"] == "/opt/nccl-topology/topo.xml"
    sharp = env(dev_kubernetes_half(fabricTest=SHARP))
    assert sharp["NCCL_COLLNET_ENABLE"] == "1" and "NCCL_NET_PLUGIN" not in sharp
    no_file = dev_kubernetes_half(fabricTest=SHORT)
    assert SHORT["topologyFile"] is False
    assert "NCCL_TOPO_FILE" not in env(no_file)
    assert not [r for r in no_file.of_type(CONFIGMAP) if r.name == "fabric-test-topology"]
    assert [r for r in dev.of_type(CONFIGMAP) if r.name == "fabric-test-topology"]


def test_the_docs_list_the_nccl_settings_as_generated():
    doc = (LAUNCHER.parent.parent / nccl_settings.DOC).read_text()
    table = doc.split(nccl_settings.TABLE_START, 1)[1].split(nccl_settings.TABLE_END, 1)[0]
    assert table == nccl_settings.markdown_table(), "stale: run `make golden`"


def test_image_and_benchmark_arguments_come_from_config():
    stack = dev_kubernetes_half(fabricTest=IMAGE_ARGS)
    assert IMAGE_ARGS["image"] == "example.io/nccl:1.2.3" and IMAGE_ARGS["allReduceArgs"] == "-b 1G -e 8G -f 2 -g 1"
    for name in ("mpimaster", "mpiworker"):
        assert container(stack, name)["image"] == "example.io/nccl:1.2.3"
    assert env(stack)["ALL_REDUCE_ARGS"] == "-b 1G -e 8G -f 2 -g 1"


def test_launcher_configmap_carries_the_script(dev):
    cm = as_api(dev.one(CONFIGMAP, "fabric-test-launcher").inputs)
    assert cm["data"] == {"launcher.sh": LAUNCHER.read_text()}
    master = pod(dev, "mpimaster")
    volume = next(v for v in master["volumes"] if v.get("configMap", {}).get("name") == cm["metadata"]["name"])
    mount = next(m for m in container(dev, "mpimaster")["volumeMounts"] if m["name"] == volume["name"])
    assert container(dev, "mpimaster")["command"] == ["/bin/bash", f"{mount['mountPath']}/launcher.sh"]


def test_namespace_enforces_privileged_and_warns_at_baseline(dev):
    ns = as_api(dev.one(NAMESPACE, "fabric-test-namespace-ns").inputs)
    labels = ns["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"  # IPC_LOCK is beyond baseline
    assert labels["pod-security.kubernetes.io/warn"] == "baseline"
    assert labels["pod-security.kubernetes.io/audit"] == "baseline"
    assert job(dev)["metadata"]["namespace"] == ns["metadata"]["name"]


def test_a_change_to_the_launcher_or_topology_changes_the_pod_templates(dev):
    annotations = {t["name"]: t["template"]["metadata"]["annotations"] for t in job(dev)["spec"]["tasks"]}
    (digest,) = {a[mpi_job.CONFIG_HASH_ANNOTATION] for a in annotations.values()}
    expected = mpi_job.spec_hash({
        "launcher": {"launcher.sh": LAUNCHER.read_text()},
        "topology": {"topo.xml": render_xml("ndv5")},
    })
    assert digest == expected


# --- schemas ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", modes.names())
def test_job_passes_the_volcano_job_crd(reference, mode):
    stack = dev_kubernetes_half(rdmaMode=mode)
    errors = crd_errors(job(stack), reference / "crds" / pinned_name("batch.volcano.sh_jobs", "volcano"))
    assert errors == []


def test_crd_check_catches_a_misplaced_field(reference):
    broken = copy.deepcopy(job_from_dev())
    broken["spec"]["activeDeadlineSeconds"] = 60  # a pod field, not a Volcano Job field
    broken["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["securityContex"] = {}
    errors = crd_errors(broken, reference / "crds" / pinned_name("batch.volcano.sh_jobs", "volcano"))
    assert any("activeDeadlineSeconds" in e for e in errors)
    assert any("securityContex" in e for e in errors)


def job_from_dev() -> dict[str, Any]:
    return job(rendered("dev"))


def test_pod_templates_pass_kubernetes_schemas(dev):
    for t in job(dev)["spec"]["tasks"]:
        template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": t["name"]},
                    "template": t["template"]}
        assert core_errors(template) == []


def test_configmaps_and_namespace_pass_kubernetes_schemas(dev):
    for r in [*dev.of_type(CONFIGMAP), *dev.of_type(NAMESPACE)]:
        if r.name.startswith("fabric-test"):
            doc = as_api(r.inputs)
            doc.setdefault("apiVersion", "v1")
            doc.setdefault("kind", r.type.rsplit(":", 1)[-1])
            assert core_errors(doc) == []


# --- dependencies -------------------------------------------------------------------------------
def test_job_waits_for_pool_policy_gpu_operator_and_volcano(dev):
    j = dev.one(JOB)
    assert dev.depends_on(j, dev.one(POOL))
    assert dev.depends_on(j, dev.one(POLICY))
    assert dev.depends_on(j, dev.one(RELEASE, "gpu-operator-release"))
    assert dev.depends_on(j, dev.one(CONFIG_FILE, "volcano-manifest"))


def test_job_waits_for_nothing_else(dev):
    j = dev.one(JOB)
    allowed = {dev.one(POOL).urn, dev.one(POLICY).urn, dev.one(RELEASE, "gpu-operator-release").urn,
               dev.one(CONFIG_FILE, "volcano-manifest").urn}
    allowed |= {r.urn for r in dev.resources if r.name.startswith("fabric-test")}  # its namespace, ConfigMaps
    assert set(j.dependencies) <= allowed, set(j.dependencies) - allowed
    # the operators themselves never wait for the job or its pool
    assert not dev.depends_on(dev.one(POLICY), dev.one(POOL))


def test_no_nccl_job_for_cpu_only_sizes():
    stack = dev_kubernetes_half(ibPool={"vmSize": "Standard_HB120rs_v3"})
    assert not [r for r in stack.of_type(JOB) if r.name == "fabric-test-job"]
    # the certifier there judges the MPI point-to-point job (tests/stack/test_hb_stack.py), not an all-reduce
    (container,) = stack.one("kubernetes:batch/v1:Job", "fabric-check-certify").inputs["spec"]["template"]["spec"][
        "containers"]
    assert container["command"][container["command"].index("--kind") + 1] == "p2p"
    assert "allReduceMaxBusBwGbps" not in stack.outputs


def test_no_job_when_disabled(render):
    stack = render(fabricTest={"enabled": False})
    assert stack.of_type(JOB) == []
    assert not [r for r in stack.resources if r.name.startswith("fabric-")]
    assert stack.outputs["fabricVerdict"] == "not run: fabricTest.enabled is false"


def test_args_refuse_a_cpu_only_size():
    with pytest.raises(ValueError, match="no GPUs"):
        nccl_job.NcclJobArgs(sku=catalog.lookup("Standard_HX176rs"), node_count=2, rdma_mode=modes.SHARED,
                             image="x/y:1", all_reduce_args="-b 8", timeout_minutes=10)


def doctor_args(vm_size: str, nodes: int = 4, **kw) -> nccl_job.NcclJobArgs:
    sku = catalog.lookup(vm_size)
    return nccl_job.NcclJobArgs(sku=sku, node_count=nodes, rdma_mode=modes.SHARED, image="x/y:1",
                                all_reduce_args=kw.pop("all_reduce_args", "-b 8 -e 8G -f 2 -g 1"),
                                timeout_minutes=30, **{"doctor": "auto", "doctor_minutes": 10, **kw})


@pytest.mark.parametrize("vm_size", [s for s in catalog.supported_sizes() if catalog.lookup(s).has_gpus])
def test_the_doctors_lines_are_the_verdicts_exactly(vm_size):
    """The launcher decides the doctor's runs on the same pass line as the verdict, and calls a pair
    slow below the 2-node one: the numbers are written exactly, whole numbers without a trailing .0."""
    from verify.verdict import pass_line_gbps

    sku = catalog.lookup(vm_size)
    env = nccl_job.doctor_env(doctor_args(vm_size, all_reduce_args="-b 8 -e 4G"))
    line, pair = pass_line_gbps(sku.allreduce_expectation(2)), sku.allreduce_expectation(2)
    assert env["DOCTOR_PASS_BUSBW_GBPS"] == ("" if line is None else repr(line).removesuffix(".0"))
    slow = pass_line_gbps(pair)
    assert env["DOCTOR_PAIR_SLOW_BELOW_GBPS"] == ("" if slow is None else repr(slow).removesuffix(".0"))


def test_the_doctors_inputs_come_from_the_catalog_and_verify():
    env = nccl_job.doctor_env(doctor_args(A100))
    assert env["DOCTOR_NODE_ARGS"] == "-b 8G -e 8G -f 2 -g 1"  # Azure's gate size on ND96asr_v4
    assert env["DOCTOR_PAIR_ARGS"] == "-b 8G -e 8G -f 2 -g 1"  # the run's own -e
    # where the verdict starts to PASS, all nodes and a pair alike: 97 % of ND A100 v4's published baseline
    assert env["DOCTOR_PASS_BUSBW_GBPS"] == env["DOCTOR_PAIR_SLOW_BELOW_GBPS"] == "181.39"
    assert env["DOCTOR_SECONDS"] == "600" and env["DOCTOR_HCA_PAIRS"] == "2"
    # the threshold override moves both lines, as it moves the verdict, and brings no WARN band: a
    # line below the catalog's is where the verdict passes
    for override in (185.0, 175.0):
        moved = nccl_job.doctor_env(doctor_args(A100, threshold_gbps=override))
        assert moved["DOCTOR_PASS_BUSBW_GBPS"] == moved["DOCTOR_PAIR_SLOW_BELOW_GBPS"] == f"{override:g}"
    # a derived line (ND H100 v5) has no WARN band either: the threshold is the pass line
    h100 = nccl_job.doctor_env(doctor_args("Standard_ND96isr_H100_v5"))
    line = catalog.lookup("Standard_ND96isr_H100_v5").allreduce_expectation(2).threshold_gbps
    assert h100["DOCTOR_PASS_BUSBW_GBPS"] == h100["DOCTOR_PAIR_SLOW_BELOW_GBPS"] == f"{line:g}"
    # no published figure (GB200): no pass line (auto always runs), the node run at the run's -e
    gb200 = nccl_job.doctor_env(doctor_args("Standard_ND128isr_NDR_GB200_v6", all_reduce_args="-b 8 -e 16G"))
    assert gb200["DOCTOR_PASS_BUSBW_GBPS"] == "" and gb200["DOCTOR_NODE_ARGS"] == "-b 16G -e 16G -f 2 -g 1"
    # every mode hands over the same inputs (a re-test sets the doctor's on the day-0 spec); never and a
    # single node are decided here, auto on more nodes by the all-nodes run
    never = nccl_job.doctor_env(doctor_args(A100, doctor="never"))
    assert set(never) == set(env) and (never["DOCTOR_RUN"], never["DOCTOR_RUN_REASON"]) == ("no", "mode-never")
    assert (env["DOCTOR_RUN"], env["DOCTOR_RUN_REASON"]) == ("by-result", "")
    assert nccl_job.doctor_env(doctor_args(A100, doctor="always"))["DOCTOR_RUN"] == "yes"
    single = nccl_job.doctor_env(doctor_args(A100, nodes=1, doctor="always"))
    assert (single["DOCTOR_RUN"], single["DOCTOR_RUN_REASON"]) == ("no", "single-node")
    # the budget is fabricTest.doctorMinutes' in every mode; NcclJobArgs' default is the configuration's
    assert never["DOCTOR_SECONDS"] == "600"
    assert nccl_job.NcclJobArgs.__dataclass_fields__["doctor_minutes"].default == defaults.DOCTOR_MINUTES
    assert stack_config.parse(engine.as_cli_config(dev_config()), "dev").fabric_test.doctor_minutes == \
        defaults.DOCTOR_MINUTES
    # ib_write_bw as Azure's health check runs it for the memory of the size's gate
    assert (env["PERFTEST_MEMORY"], env["PERFTEST_ARGS"]) == ("cuda", nccl_job.PERFTEST_ARGS["cuda"])
    assert doctor_args(A100, doctor="never").deadline_minutes == 30 and doctor_args(A100).deadline_minutes == 40
    with pytest.raises(ValueError, match="doctor: got 'on'"):
        doctor_args(A100, doctor="on")


def test_spec_hash_is_stable_and_order_free():
    assert mpi_job.spec_hash({"a": 1, "b": [1, 2]}) == mpi_job.spec_hash({"b": [1, 2], "a": 1})
    assert mpi_job.spec_hash({"a": 1}) != mpi_job.spec_hash({"a": 2})


def test_every_gpu_generation_of_the_catalog_has_one_settings_family_and_an_unknown_one_is_refused():
    gpu_skus = [s for s in catalog.SKUS.values() if s.has_gpus]
    assert {s.generation for s in gpu_skus} == set(nccl_settings.FAMILIES)  # no family without a size
    for sku in gpu_skus:
        assert nccl_settings.family(sku).name == sku.generation
    new = replace(catalog.lookup(H100), generation="ndv7")
    with pytest.raises(ValueError, match="generation 'ndv7', which has no NCCL settings family; the families are "
                                         "ndv5, ndv4, ndv6"):
        nccl_job.NcclJobArgs(sku=new, node_count=2, rdma_mode=modes.SHARED, image=stack_config.DEFAULT_NCCL_TESTS_IMAGE,
                             all_reduce_args="-b 8 -e 8G -f 2 -g 1", timeout_minutes=60)
    for call in (nccl_settings.binding, lambda s: nccl_settings.settings(s, topology_file=True, sharp=False)):
        with pytest.raises(ValueError, match="'ndv7'"):
            call(new)
