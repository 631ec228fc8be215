"""Row 6: the NVIDIA GPU Operator - GPU driver with GPUDirect RDMA, container toolkit, device plugin."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.namespace import Namespace
from components.platform.operator_release import Chart, operator_release
from core import fabric, pins, rdma_drivers

CHART = Chart(name="gpu-operator", repo="https://helm.ngc.nvidia.com/nvidia")

# The chart's own default toleration for its DaemonSets (values.yaml daemonsets.tolerations);
# Helm replaces a list rather than merging it, so it is kept next to the IB pool's.
CHART_DEFAULT_TOLERATION = {"key": fabric.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}


# The container toolkit's environment (ClusterPolicy spec.toolkit.env, read by the toolkit installer).
TOOLKIT_ENV = (
    # A drop-in of the root config's version (2 on AKS): the default source writes version 4, which
    # containerd 2.x refuses, and every GPU node goes NotReady (NVIDIA/aicr#1688, #1689;
    # NVIDIA/gpu-operator#2646; docs/kubernetes-layer.md#gpu-operator-container-toolkit-environment).
    {"name": "RUNTIME_CONFIG_SOURCE", "value": "file"},
    # An unprivileged container cannot see every GPU through NVIDIA_VISIBLE_DEVICES=all; allocated
    # GPUs still reach pods through CDI (aicr's values-aks.yaml; same page).
    {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "false"},
)

# How the operator replaces the GPU driver (driver.upgradePolicy): after a DOCA change, never with it,
# since the new driver pod rebuilds nvidia-peermem against the loaded DOCA driver (docs/upgrade-runbook.md).
DRIVER_UPGRADE_POLICY = {
    "autoUpgrade": True,  # the operator cordons, removes GPU pods, restarts the driver pod, uncordons
    "maxParallelUpgrades": 1,  # one node at a time: the rest of the pool keeps its GPUs
    # The test's workers keep /dev/shm in an emptyDir; the default (false) would leave the node in
    # upgrade-failed instead of ending a running test.
    "gpuPodDeletion": {"deleteEmptyDir": True},
}


GPU_OPERATOR_RDMA_DOC = "docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-rdma.html"
# How the driver container gives the HCAs GPU memory, by the pool's RDMA driver (core/rdma_drivers.py `gdr`); every
# key is in the pinned chart's values.yaml and the ClusterPolicy CRD (reference/chart-values, crds; tested).
DRIVER_GDR: dict[str, dict[str, Any]] = {
    # GPUDirect RDMA through nvidia-peermem, which the driver pod loads. The DOCA/OFED driver comes from the
    # Network Operator's driver container, not from the host (as aicr: useHostMofed true makes nvidia-peermem
    # fail with an ib_core symbol mismatch).
    rdma_drivers.PEERMEM: {"rdma": {"enabled": True, "useHostMofed": False}},
    # GPUDirect RDMA through DMA-BUF, which NVIDIA recommends over nvidia-peermem and which needs the open kernel
    # modules (GPU_OPERATOR_RDMA_DOC; ClusterPolicy v26.7.0 spec.driver.kernelModuleType: auto | open | proprietary,
    # the chart's default auto). rdma.enabled false (the chart's default): no nvidia-peermem, and the driver
    # manager waits for no MOFED (.driver-ready) that the node image's own drivers never write.
    rdma_drivers.DMABUF: {"kernelModuleType": "open", "rdma": {"enabled": False}},
}


CLUSTER_POLICY_API_VERSION = "nvidia.com/v1"
# What a field left unset in a ClusterPolicy means to the operator (NVIDIA/gpu-operator api/nvidia/v1/
# clusterpolicy_types.go, the IsEnabled methods: the driver and the device plugin on, GPUDirect RDMA off; an unset
# useHostMofed is false; kernelModuleType: the CRD's default, auto).
CLUSTER_POLICY_UNSET: dict[str, Any] = {"driver.enabled": True, "driver.rdma.enabled": False,
                                        "driver.rdma.useHostMofed": False, "driver.kernelModuleType": "auto",
                                        "devicePlugin.enabled": True}


def _leaves(tree: dict[str, Any], at: str) -> dict[str, Any]:
    """Each leaf of nested values by its dotted path (`at` before it)."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        out.update(_leaves(value, f"{at}{key}.") if isinstance(value, dict) else {f"{at}{key}": value})
    return out


def relied_on(rdma_driver: rdma_drivers.RdmaDriver, dra_gpus: bool) -> dict[str, Any]:
    """The ClusterPolicy settings this stack relies on where another owner runs the operator
    (existingCluster.preinstalled), by their path under `spec`: the ones its own release sets for the same purpose
    (chart_values): the driver from the operator (the pool has none from AKS), GPUDirect as DRIVER_GDR says for the
    pool's RDMA driver, and with DRA no device plugin."""
    need = {"driver.enabled": True, **_leaves(DRIVER_GDR[rdma_driver.gdr], "driver.")}
    return {**need, "devicePlugin.enabled": False} if dra_gpus else need


def cluster_policy_problems(spec: dict[str, Any], rdma_driver: rdma_drivers.RdmaDriver, dra_gpus: bool) -> list[str]:
    """Each setting of `relied_on` that a ClusterPolicy's spec does not have (an unset one read as the operator
    reads it): `spec.<path> is <value>, not <wanted>`."""
    out = []
    for path, want in relied_on(rdma_driver, dra_gpus).items():
        node: Any = spec
        for part in path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        got = CLUSTER_POLICY_UNSET[path] if node is None else node
        if got != want:
            unset = " (unset)" if node is None else ""
            out.append(f"spec.{path} is {json.dumps(got)}{unset}, not {json.dumps(want)}")
    return out


@dataclass(frozen=True)
class GpuOperatorArgs:
    # Chart version, with its leading v (core/pins.py COMPONENTS "gpuOperator").
    version: str
    # GPUs are handed out by the NVIDIA DRA driver (components/platform/dra_driver.py), not the device plugin.
    dra_gpus: bool = False
    # The IB pool's RDMA driver stack (core/rdma_drivers.py): how GPU memory reaches the HCAs (DRIVER_GDR).
    rdma_driver: rdma_drivers.RdmaDriver = rdma_drivers.DOCA
    namespace_name: str = fabric.GPU_OPERATOR_NAMESPACE
    timeout_seconds: int = 600
    # A local archive of the chart at `version` (config charts.directory); None: the chart's repository.
    chart_archive: str | None = None

    def __post_init__(self) -> None:
        pins.CHART_VERSION.require("version", self.version)


def dra_values() -> dict[str, Any]:
    """With the DRA driver handing out GPUs, as Azure's deploy script installs the operator "in DRA
    mode" (Azure/ai-infrastructure-on-azure@a01b073 infrastructure_references/aks/scripts/deploy-aks.sh
    install_gpu_operator): no device plugin (the DRA driver refuses to allocate GPUs beside it), and
    the driver manager evicts the DRA kubelet plugin's pods, found by the pool's label, on a driver upgrade."""
    return {
        "devicePlugin": {"enabled": False},
        "driver": {"manager": {"env": [{"name": "NODE_LABEL_FOR_GPU_POD_EVICTION",
                                        "value": fabric.DRA_KUBELET_PLUGIN_LABEL}]}},
    }


def chart_values(dra_gpus: bool = False, rdma_driver: rdma_drivers.RdmaDriver = rdma_drivers.DOCA) -> dict[str, Any]:
    """Values for the gpu-operator chart (every key exists in its values.yaml; tested), and the
    settings of NVIDIA's AKS recipe (NVIDIA/aicr recipes/components/gpu-operator/values*.yaml), each
    adopted here or declined with its reason."""
    values: dict[str, Any] = {
        # Node Feature Discovery is its own release (components/platform/node_feature_discovery.py).
        "nfd": {"enabled": False},
        "driver": {
            # GPUDirect RDMA, through nvidia-peermem or DMA-BUF by the pool's RDMA driver (DRIVER_GDR)
            **DRIVER_GDR[rdma_driver.gdr],
            "upgradePolicy": DRIVER_UPGRADE_POLICY,
            # The driver stays the chart's (595.91.07 in v26.7.0), with the nvidia-peermem fix
            # NVIDIA/gpu-driver-container@446061a (NVIDIA/gpu-operator#2844).
        },
        "toolkit": {"env": [dict(e) for e in TOOLKIT_ENV]},
        # Every operand DaemonSet (driver, toolkit, device plugin, validator, ...) runs on the IB pool.
        "daemonsets": {"tolerations": [CHART_DEFAULT_TOLERATION, *fabric.fabric_tolerations()]},
        # The stack installs no Prometheus Operator, so there is no ServiceMonitor CRD; since 26.7
        # the chart defaults this to true.
        "dcgmExporter": {"serviceMonitor": {"enabled": False}},
        # Not used on ND-series: MIG partitioning, vGPU and VM passthrough (as Azure's values).
        "migManager": {"enabled": False},
        "vgpuDeviceManager": {"enabled": False},
        "vfioManager": {"enabled": False},
        "sandboxDevicePlugin": {"enabled": False},
        # ND-series VMs are neither confidential-computing nor Kata hosts (adopted from aicr; both
        # default to on in v26.7.0).
        "ccManager": {"enabled": False},
        "kataSandboxDevicePlugin": {"enabled": False},
        # Declined from aicr: WITH_WORKLOAD=false for the validator, and gdrcopy
        # (docs/kubernetes-layer.md#gpu-operator-operands-off-and-settings-declined).
    }
    if dra_gpus:
        extra = dra_values()
        values["devicePlugin"] = extra["devicePlugin"]
        values["driver"] = {**values["driver"], **extra["driver"]}
    return values


class GpuOperator(pulumi.ComponentResource):
    """The gpu-operator Helm release (pinned) in a `privileged` namespace (its driver container
    loads kernel modules). The chart's ClusterPolicy is created from values (`clusterPolicy.deployCR`).

    Only for GPU sizes: the IB pool is created with `gpuProfile.driver = None`, so this operator
    owns the driver. Depends only on the Kubernetes provider (passed in `opts`).
    """

    namespace: Namespace
    release: k8s.helm.v3.Release
    # What the fabric test must re-run for when it changes: the chart, which pins the driver.
    driver_versions: dict[str, str]

    def __init__(self, name: str, args: GpuOperatorArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:kubernetes:GpuOperator", name, None, opts)
        self.driver_versions = {"gpuOperator": args.version}
        self.namespace, self.release = operator_release(
            name,
            self,
            chart=CHART,
            version=args.version,
            namespace_name=args.namespace_name,
            values=chart_values(args.dra_gpus, args.rdma_driver),
            timeout_seconds=args.timeout_seconds, chart_archive=args.chart_archive,
        )
        self.register_outputs({"release": self.release.status})
