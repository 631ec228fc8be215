"""Row 6: the NVIDIA GPU Operator - GPU driver with GPUDirect RDMA, container toolkit, device plugin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.namespace import Namespace
from components.operator_release import Chart, operator_release
from core import fabric, pins

CHART = Chart(name="gpu-operator", repo="https://helm.ngc.nvidia.com/nvidia")

# The chart's own default toleration for its DaemonSets (values.yaml daemonsets.tolerations);
# Helm replaces a list rather than merging it, so it is kept next to the IB pool's.
CHART_DEFAULT_TOLERATION = {"key": fabric.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}


# The container toolkit's environment (ClusterPolicy spec.toolkit.env, read by the toolkit installer).
TOOLKIT_ENV = (
    # The containerd drop-in must carry the root config's version. AKS Ubuntu 24.04 nodes run
    # containerd 2.x whose /etc/containerd/config.toml says `version = 2`; the toolkit's default
    # source, `containerd config dump`, returns the config migrated to version 4, so the drop-in it
    # writes (conf.d/99-nvidia.toml) is version 4, containerd refuses it and exits, and every GPU
    # node goes NotReady. Reading the file instead writes a version-2 drop-in. The default is still
    # `command,file` in toolkit v1.20.0, the version gpu-operator v26.7.0 ships
    # (NVIDIA/nvidia-container-toolkit@5505e2f (v1.20.0) cmd/nvidia-ctk-installer/container/runtime/runtime.go,
    # flag config-source, env RUNTIME_CONFIG_SOURCE). Sources: NVIDIA/aicr#1688 and its fix #1689
    # (NVIDIA's AKS recipe, recipes/components/gpu-operator/values-aks.yaml), NVIDIA/gpu-operator#2646
    # (maintainer's workaround). Not affected by NVIDIA/nvidia-container-toolkit#1956 (a missing
    # runtime_type with `file` and a version-3 root config): AKS's root config is version 2.
    {"name": "RUNTIME_CONFIG_SOURCE", "value": "file"},
    # Device-visibility hardening (adopted from aicr's values-aks.yaml): an unprivileged container
    # whose image sets NVIDIA_VISIBLE_DEVICES=all (every CUDA base image does) and that picks the
    # `nvidia` runtime class would otherwise see every GPU of the node without requesting one.
    # Allocated GPUs are unaffected: with cdi.enabled (the chart's default) the operator sets the
    # device plugin's DEVICE_LIST_STRATEGY to cdi-annotations,cdi-cri (NVIDIA/gpu-operator@10ee5b3
    # (v26.7.0) controllers/object_controls.go transformDevicePluginCtrForCDI), so they reach pods
    # through CDI, not through this variable; the operator's own CUDA validator is privileged.
    # Declined: aicr's companion ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS=true. aicr needs it
    # because its device plugin also uses the volume-mounts strategy; ours does not, and turning it on
    # would only open a second way to request devices.
    {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "false"},
)

# How the operator replaces the GPU driver when its version changes (driver.upgradePolicy), in the
# order of docs/upgrade-runbook.md. A driver version change is a full reinstall: the new driver pod
# rebuilds nvidia-peermem against the DOCA driver loaded at that moment, so it comes after a DOCA
# change, never together with it.
DRIVER_UPGRADE_POLICY = {
    "autoUpgrade": True,  # the operator cordons, removes GPU pods, restarts the driver pod, uncordons
    "maxParallelUpgrades": 1,  # one node at a time: the rest of the pool keeps its GPUs
    # The fabric test's workers keep /dev/shm in an in-memory emptyDir; with the chart's default
    # (false) a driver upgrade that meets a running test stops the node in upgrade-failed instead of
    # ending the test (which then reports the eviction).
    "gpuPodDeletion": {"deleteEmptyDir": True},
}


@dataclass(frozen=True)
class GpuOperatorArgs:
    # Chart version, with its leading v (stack_config.DEFAULT_VERSIONS["gpuOperator"]).
    version: str
    # GPUs are handed out by the NVIDIA DRA driver (components/dra_driver.py), not the device plugin.
    dra_gpus: bool = False
    namespace_name: str = fabric.GPU_OPERATOR_NAMESPACE
    timeout_seconds: int = 600

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


def chart_values(dra_gpus: bool = False) -> dict[str, Any]:
    """Values for the gpu-operator chart (every key exists in its values.yaml; tested), and the
    settings of NVIDIA's AKS recipe (NVIDIA/aicr recipes/components/gpu-operator/values*.yaml), each
    adopted here or declined with its reason."""
    values: dict[str, Any] = {
        # Node Feature Discovery is its own release (components/node_feature_discovery.py).
        "nfd": {"enabled": False},
        "driver": {
            # GPUDirect RDMA: the driver container loads nvidia-peermem. The DOCA/OFED driver comes
            # from the Network Operator's driver container, not from the host (as aicr: useHostMofed
            # true makes nvidia-peermem fail with an ib_core symbol mismatch).
            "rdma": {"enabled": True, "useHostMofed": False},
            "upgradePolicy": DRIVER_UPGRADE_POLICY,
            # The driver version stays the chart's (595.91.07 in v26.7.0), which carries the
            # nvidia-peermem fast-path fix NVIDIA/gpu-driver-container@446061a (NVIDIA/gpu-operator#2844).
            # Declined: aicr's driver pin (580.x) is for chart v26.3.x.
        },
        "toolkit": {"env": [dict(e) for e in TOOLKIT_ENV]},
        # Every operand DaemonSet (driver, toolkit, device plugin, validator, ...) runs on the IB pool.
        "daemonsets": {"tolerations": [CHART_DEFAULT_TOLERATION, fabric.toleration()]},
        # The stack installs no Prometheus Operator, so there is no ServiceMonitor CRD; since 26.7
        # the chart defaults this to true.
        "dcgmExporter": {"serviceMonitor": {"enabled": False}},
        # Not used on ND-series: MIG partitioning, vGPU and VM passthrough (as Azure's values).
        "migManager": {"enabled": False},
        "vgpuDeviceManager": {"enabled": False},
        "vfioManager": {"enabled": False},
        "sandboxDevicePlugin": {"enabled": False},
        # Adopted from aicr: both default to on in v26.7.0. Neither runs while sandboxWorkloads is
        # off (controllers/state_manager.go isStateEnabled needs it), and ND-series VMs are neither
        # confidential-computing nor Kata hosts; off, a later sandboxWorkloads switch cannot start them.
        "ccManager": {"enabled": False},
        "kataSandboxDevicePlugin": {"enabled": False},
        # Declined from aicr: validator.plugin.env WITH_WORKLOAD=false. aicr adds an entry because an
        # empty env once rendered `plugin: null`; v26.7.0's template writes `env: []` (the rendered
        # ClusterPolicy passes its CRD; tested). The workload check it turns off is worth keeping: an
        # unprivileged pod that asks for one GPU and runs a CUDA kernel on each node, which also
        # proves the device-visibility hardening above leaves allocated GPUs usable.
        # Declined from aicr's H100 training recipe: gdrcopy. NCCL's network transport uses
        # nvidia-peermem (GPUDirect RDMA), not gdrcopy, and the all-reduce does not need it.
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
            values=chart_values(args.dra_gpus),
            timeout_seconds=args.timeout_seconds,
        )
        self.register_outputs({"release": self.release.status})
