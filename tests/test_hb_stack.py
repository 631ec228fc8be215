"""The CPU-only stack (Pulumi.hb.yaml, 2 x Standard_HB176rs_v4): the full render has no GPU object at
all, and its fabric test is the MPI point-to-point Volcano job, which passes the Job CRD's schema."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

import catalog
import fabric
from components.mpi_bandwidth_job import OSU_DIR, WORKERS, MpiBandwidthJobArgs
from offline import engine

JOB_TYPE = "kubernetes:batch.volcano.sh/v1alpha1:Job"
HB = "Standard_HB176rs_v4"


@pytest.fixture(scope="module")
def hb() -> engine.Rendering:
    return engine.render("hb")


def _job(r: engine.Rendering) -> dict:
    (job,) = r.of_type(JOB_TYPE)
    return job


def _tasks(r: engine.Rendering) -> dict[str, dict]:
    return {t["name"]: t for t in _job(r).inputs["spec"]["tasks"]}


def test_hb_stack_is_the_cpu_only_size(hb):
    sku = catalog.lookup(engine.stack_file_config("hb")["aks-infiniband:ibPool"]["vmSize"])
    assert sku.vm_size == HB and not sku.has_gpus
    assert hb.outputs["vmSize"] == HB


def test_no_gpu_object_anywhere_in_the_render(hb):
    types = {r.type for r in hb.resources}
    assert not any("GpuOperator" in t or "NcclJob" in t or "NcclTopology" in t for t in types), types
    for r in hb.resources:
        text = json.dumps(r.inputs, default=str).lower()
        assert fabric.GPU_RESOURCE not in text, f"{r.type} {r.name} mentions {fabric.GPU_RESOURCE}"
        assert "gpu-operator" not in text and "nccl_topo" not in text, f"{r.type} {r.name}"
    pool = hb.one("azure-native:containerservice:AgentPool")
    assert not pool.inputs.get("gpuProfile")
    charts = {r.inputs.get("chart") for r in hb.of_type("kubernetes:helm.sh/v3:Release")}
    assert not any("gpu" in str(c) for c in charts), charts


def test_the_fabric_test_is_the_p2p_job_and_passes_the_volcano_crd(hb, reference):
    from tests.schema_checks import custom_resource_errors, load_crds

    job = _job(hb)
    obj = {"apiVersion": job.inputs["apiVersion"], "kind": job.inputs["kind"],
           "metadata": job.inputs["metadata"], "spec": job.inputs["spec"]}
    assert custom_resource_errors(obj, load_crds(reference)) == []
    broken = json.loads(json.dumps(obj))
    broken["spec"]["tasks"][1]["replica"] = 2  # a misspelt field is caught
    assert custom_resource_errors(broken, load_crds(reference))


def test_job_runs_osu_between_two_workers_one_per_node(hb):
    spec = _job(hb).inputs["spec"]
    tasks = _tasks(hb)
    assert spec["schedulerName"] == "volcano" and set(spec["plugins"]) == {"ssh", "svc"}
    assert tasks["mpiworker"]["replicas"] == WORKERS == 2 and spec["minAvailable"] == WORKERS + 1
    worker = tasks["mpiworker"]["template"]
    anti = worker["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["topologyKey"] == "kubernetes.io/hostname"
    assert anti[0]["labelSelector"]["matchLabels"].items() <= worker["metadata"]["labels"].items()
    master = tasks["mpimaster"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in master["env"]}
    assert env["OSU_DIR"] == OSU_DIR and "rc" in env["UCX_TLS"].split(",") and "tcp" not in env["UCX_TLS"]


@pytest.mark.parametrize("mode", fabric.RDMA_MODES)
def test_workers_request_rdma_and_ipc_lock_on_the_tainted_pool(render, mode):
    r = render(ibPool={"vmSize": HB}, rdmaMode=mode)
    sku = catalog.lookup(HB)
    want = fabric.rdma_request(mode, sku)
    for name, task in _tasks(r).items():
        pod = task["template"]["spec"]
        assert pod["tolerations"] == [fabric.toleration()], name
        assert pod["nodeSelector"] == fabric.pool_node_selector(), name
        for c in pod["containers"]:
            sc = c.get("securityContext", {})
            assert sc.get("privileged") is False, name
            limits = c["resources"].get("limits", {})
            assert fabric.GPU_RESOURCE not in {**limits, **c["resources"].get("requests", {})}
            if name == "mpiworker":
                assert limits[want.resource] == str(want.count)
                assert sc["capabilities"]["add"] == ["IPC_LOCK"]


def test_job_waits_for_pool_policy_and_volcano_only(hb):
    job = _job(hb)
    assert hb.depends_on(job, hb.one("azure-native:containerservice:AgentPool"))
    assert hb.depends_on(job, hb.one("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy"))
    assert any(hb.depends_on(job, v) for v in hb.of_type("kubernetes:yaml/v2:ConfigFile"))


def test_gpu_sizes_are_refused_by_the_p2p_job():
    with pytest.raises(ValueError, match="GPUs"):
        MpiBandwidthJobArgs(sku=catalog.lookup("Standard_ND96asr_v4"), rdma_mode="shared",
                            image="example.invalid/img:1.0", timeout_minutes=30)


def test_disabled_fabric_test_renders_no_job(render):
    assert render(ibPool={"vmSize": HB}, fabricTest={"enabled": False}).of_type(JOB_TYPE) == []


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_launcher_script_is_valid_bash():
    from components.mpi_bandwidth_job import LAUNCHER_SCRIPT

    subprocess.run(["bash", "-n", str(LAUNCHER_SCRIPT)], check=True)
