"""The driver settings that keep real AKS nodes working (issue 16): the container toolkit's containerd
fix and hardening, the aicr AKS settings adopted or declined, the upgrade policies of both drivers
(docs/upgrade-runbook.md), the fabric test re-running when a driver changes, root ranks for RDMA
memory registration, and the AKS-side GPU settings of the pool."""

from __future__ import annotations

import inspect

import pulumi_azure_native as azure_native
import pytest

from components.fabric import mpi_job
from components.platform import gpu_operator, network_operator
from core import fabric

RELEASE = "kubernetes:helm.sh/v3:Release"
NIC_CLUSTER_POLICY = "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy"
VOLCANO_JOB = "kubernetes:batch.volcano.sh/v1alpha1:Job"
AGENT_POOL = "azure-native:containerservice:AgentPool"
HB = "Standard_HB176rs_v4"


def gpu_values(rendering) -> dict:
    return rendering.one(RELEASE, "gpu-operator-release").inputs["values"]


def job_pods(rendering) -> dict[str, dict]:
    job = rendering.one(VOLCANO_JOB)
    return {task["name"]: task["template"] for task in job.inputs["spec"]["tasks"]}


# --- GPU Operator values ---------------------------------------------------------------------------
def test_the_toolkit_reads_containerds_config_file_and_ignores_the_envvar_when_unprivileged(dev):
    env = {e["name"]: e["value"] for e in gpu_values(dev)["toolkit"]["env"]}
    assert env == {"RUNTIME_CONFIG_SOURCE": "file", "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED": "false"}


def test_sandbox_operands_are_off_and_the_validator_keeps_its_default(dev):
    values = gpu_values(dev)
    assert values["ccManager"] == {"enabled": False}
    assert values["kataSandboxDevicePlugin"] == {"enabled": False}
    assert "validator" not in values  # WITH_WORKLOAD stays true: the GPU workload check runs on every node
    assert "gdrcopy" not in values


def test_the_gpu_driver_upgrades_one_node_at_a_time_and_may_end_a_running_test(dev):
    policy = gpu_values(dev)["driver"]["upgradePolicy"]
    assert policy["autoUpgrade"] is True and policy["maxParallelUpgrades"] == 1
    assert policy["gpuPodDeletion"]["deleteEmptyDir"] is True
    # the test's workers are the pods this has to remove: they use an emptyDir
    worker = job_pods(dev)[mpi_job.WORKER_TASK]["spec"]
    assert any("emptyDir" in v for v in worker["volumes"])


# --- Network Operator ------------------------------------------------------------------------------
def test_the_doca_driver_upgrades_drained_one_node_at_a_time(dev):
    ofed = dev.one(NIC_CLUSTER_POLICY).inputs["spec"]["ofedDriver"]
    policy = ofed["upgradePolicy"]
    assert policy["autoUpgrade"] is True and policy["maxParallelUpgrades"] == 1
    assert policy["drain"] == {"enable": True, "force": True, "deleteEmptyDir": True, "timeoutSeconds": 300}
    # not set, with the reasons in components/platform/network_operator.py
    assert "waitForCompletion" not in policy and "safeLoad" not in policy


def test_third_party_rdma_modules_are_left_alone(dev):
    """No catalog size gets a MANA NIC (components/platform/network_operator.py has the evidence)."""
    env = {e["name"] for e in dev.one(NIC_CLUSTER_POLICY).inputs["spec"]["ofedDriver"]["env"]}
    assert env == {"OFED_BLACKLIST_MODULES_FILE"}
    assert "UNLOAD_THIRD_PARTY_RDMA_MODULES" not in str(network_operator.DOCA_DRIVER_ENV)


# --- the fabric test -------------------------------------------------------------------------------
@pytest.mark.parametrize("size", ["Standard_ND96isr_H100_v5", HB])
def test_the_ranks_run_as_root_with_ipc_lock_only(dev, hb, size):
    """RDMA registers (pins) memory. Root with CAP_IPC_LOCK may pin past RLIMIT_MEMLOCK, so the nodes
    need no memlock change (aicr's LimitMEMLOCK=infinity on containerd is declined for this reason).
    A non-root rank would lose the capability at exec and fail to register its buffers."""
    stack = dev if size != HB else hb  # the dev and hb stacks are these sizes
    assert stack.outputs["vmSize"] == size
    for name, pod in job_pods(stack).items():
        spec = pod["spec"]
        assert spec["securityContext"]["runAsUser"] == mpi_job.RANK_USER_ID == 0, name
        for container in spec["containers"]:
            assert "runAsUser" not in container.get("securityContext", {}), name
            assert container["securityContext"]["privileged"] is False
        if name == mpi_job.WORKER_TASK:
            assert spec["containers"][0]["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]


def test_every_test_pod_names_the_drivers_it_runs_against(dev):
    versions = dict(pair.split("=", 1) for pair in
                    job_pods(dev)[mpi_job.WORKER_TASK]["metadata"]["annotations"]
                    [mpi_job.DRIVER_VERSIONS_ANNOTATION].split(","))
    assert set(versions) == {"networkOperator", "docaDriver", "rdmaSharedDevicePlugin", "gpuOperator"}
    for pod in job_pods(dev).values():
        assert pod["metadata"]["annotations"][mpi_job.DRIVER_VERSIONS_ANNOTATION] == mpi_job.versions_text(versions)


def test_the_cpu_test_names_the_network_drivers_only(render_kubernetes):
    pods = job_pods(render_kubernetes(ibPool={"vmSize": HB}, rdmaMode="sriov"))
    text = pods[mpi_job.WORKER_TASK]["metadata"]["annotations"][mpi_job.DRIVER_VERSIONS_ANNOTATION]
    assert [p.split("=")[0] for p in text.split(",")] == ["docaDriver", "networkOperator", "sriovDevicePlugin"]


@pytest.mark.parametrize("versions", [{"docaDriver": "doca3.4.1-26.04-1.1.0.0-2"}, {"gpuOperator": "v26.7.1"}],
                         ids=["doca-driver", "gpu-operator"])
def test_a_driver_change_reruns_the_test(dev, render_kubernetes, versions):
    """A new spec hash replaces the Job (replaceOnChanges spec) and the day-0 certifier Job (named after it)."""
    changed = render_kubernetes(versions=versions, allowUntestedVersions=True)  # a bump before its matrix row
    before, after = dev.one(VOLCANO_JOB), changed.one(VOLCANO_JOB)
    assert before.inputs["spec"] != after.inputs["spec"]
    certifiers = {r.one("kubernetes:batch/v1:Job", "fabric-check-certify").inputs["metadata"]["name"]
                  for r in (dev, changed)}
    assert len(certifiers) == 2
    assert list(versions.values())[0] in str(after.inputs["spec"])


# --- the pool on the AKS side ----------------------------------------------------------------------
def test_the_gpu_pool_asks_aks_for_no_driver_and_no_managed_gpu_stack(dev):
    """gpuProfile is exactly {driver: None}: no `nvidia.managementMode`, whose default is Unmanaged;
    Managed would make AKS install its own driver, device plugin and DCGM exporter next to the GPU
    Operator's (learn.microsoft.com/azure/aks/aks-managed-gpu-nodes, preview)."""
    assert dev.one(AGENT_POOL).inputs["gpuProfile"] == {"driver": "None"}


def test_the_pinned_sdk_cannot_even_ask_for_the_managed_gpu_stack():
    """pulumi-azure-native 3.29.0's GPUProfileArgs has only `driver`. When an upgrade brings
    `nvidia`, the test above and the policy pack (gpu-pool-driver-none) keep it off."""
    params = set(inspect.signature(azure_native.containerservice.GPUProfileArgs.__init__).parameters) - {"__self__"}
    assert params == {"driver"}, f"GPUProfileArgs now has {sorted(params)}: keep nvidia.managementMode unset"


def test_the_toleration_in_the_values_is_the_pools(dev):
    assert fabric.toleration() in gpu_values(dev)["daemonsets"]["tolerations"]
    assert gpu_operator.CHART_DEFAULT_TOLERATION in gpu_values(dev)["daemonsets"]["tolerations"]
