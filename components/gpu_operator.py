"""Row 6: the NVIDIA GPU Operator - GPU driver with GPUDirect RDMA, container toolkit, device plugin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

import fabric
import pins
from components.namespace import Namespace
from components.operator_release import Chart, operator_release

CHART = Chart(name="gpu-operator", repo="https://helm.ngc.nvidia.com/nvidia")

# The chart's own default toleration for its DaemonSets (values.yaml daemonsets.tolerations);
# Helm replaces a list rather than merging it, so it is kept next to the IB pool's.
CHART_DEFAULT_TOLERATION = {"key": fabric.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}


@dataclass(frozen=True)
class GpuOperatorArgs:
    # Chart version, with its leading v (stack_config.DEFAULT_VERSIONS["gpuOperator"]).
    version: str
    namespace_name: str = "gpu-operator"
    timeout_seconds: int = 600

    def __post_init__(self) -> None:
        pins.CHART_VERSION.require("version", self.version)


def chart_values() -> dict[str, Any]:
    """Values for the gpu-operator chart (every key exists in its values.yaml; tested)."""
    return {
        # Node Feature Discovery is its own release (components/node_feature_discovery.py).
        "nfd": {"enabled": False},
        "driver": {
            # GPUDirect RDMA: the driver container loads nvidia-peermem. The DOCA/OFED driver comes
            # from the Network Operator's driver container, not from the host.
            "rdma": {"enabled": True, "useHostMofed": False},
        },
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
    }


class GpuOperator(pulumi.ComponentResource):
    """The gpu-operator Helm release (pinned) in a `privileged` namespace (its driver container
    loads kernel modules). The chart's ClusterPolicy is created from values (`clusterPolicy.deployCR`).

    Only for GPU sizes: the IB pool is created with `gpuProfile.driver = None`, so this operator
    owns the driver. Depends only on the Kubernetes provider (passed in `opts`).
    """

    namespace: Namespace
    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: GpuOperatorArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:kubernetes:GpuOperator", name, None, opts)
        self.namespace, self.release = operator_release(
            name,
            self,
            chart=CHART,
            version=args.version,
            namespace_name=args.namespace_name,
            values=chart_values(),
            timeout_seconds=args.timeout_seconds,
        )
        self.register_outputs({"release": self.release.status})
