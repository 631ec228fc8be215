"""The NVIDIA DRA driver for GPUs: GPUs as DRA devices (`gpu.nvidia.com`) and, on multi-node-NVLink
sizes, ComputeDomains (IMEX channels across an NVL72 rack).

Azure runs it on GB200/GB300 with the GPU Operator's device plugin off (Azure/ai-infrastructure-on-azure
@a01b073 infrastructure_references/aks/README.md section 6, "GPU Operator | Requires NVIDIA DRA driver";
scripts/deploy-aks.sh install_dra_driver). The chart moved to kubernetes-sigs at v0.4.0 and is
published as an OCI artifact (reference/examples/dra-driver-nvidia-gpu.v0.4.1/docs/install.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.namespace import Namespace
from components.platform.operator_release import Chart, operator_release
from core import dra, fabric, pins

CHART = Chart(name="dra-driver-nvidia-gpu", repo="oci://registry.k8s.io/dra-driver-nvidia/charts")
# The chart refuses the `default` namespace (its templates/validation.yaml); its docs' namespace.
NAMESPACE = "dra-driver-nvidia-gpu"
# The chart's own default toleration for its kubelet plugin (values.yaml kubeletPlugin.tolerations);
# Helm replaces a list rather than merging it, so it is kept next to the IB pool's.
CHART_DEFAULT_TOLERATION = {"key": fabric.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}


@dataclass(frozen=True)
class DraDriverArgs:
    # Chart version, SemVer without a leading v since v0.4.0 (stack_config.DEFAULT_VERSIONS["draDriver"]).
    version: str
    # Whether the stack uses ComputeDomains (a multi-node-NVLink size): the IMEX side of the driver.
    compute_domains: bool
    namespace_name: str = NAMESPACE
    timeout_seconds: int = 600
    # A local archive of the chart at `version` (config charts.directory); None: the chart's repository.
    chart_archive: str | None = None

    def __post_init__(self) -> None:
        pins.CHART_VERSION.require("version", self.version)


def chart_values(compute_domains: bool) -> dict[str, Any]:
    """Values for the dra-driver-nvidia-gpu chart (every key exists in its values.yaml; tested), as
    Azure's GB300 deploy script sets them, each with its reason."""
    return {
        # The GPU Operator's driver container owns the driver; its root is mounted here (chart values.yaml
        # comment; Azure's deploy-aks.sh: --set nvidiaDriverRoot=/run/nvidia/driver).
        "nvidiaDriverRoot": "/run/nvidia/driver",
        # GPUs through DRA: the chart refuses to allocate them unless told the classic device plugin is
        # off (the GPU Operator's devicePlugin.enabled=false, components/platform/gpu_operator.py).
        "gpuResourcesEnabledOverride": True,
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": compute_domains}},
        # The API the stack's claims use: the chart's auto-detection can pick a version the server does
        # not serve (its values.yaml comment), and the stack requires 1.34 for v1 (core/dra.py).
        "resourceApiVersion": dra.API_VERSION,
        "kubeletPlugin": {
            # Only on the nodes the pool marks (Azure labels them by hand; the pool does it here), which
            # the GPU Operator's driver manager also evicts the plugin from on a driver upgrade.
            "nodeSelector": {fabric.DRA_KUBELET_PLUGIN_LABEL: "true"},
            "tolerations": [CHART_DEFAULT_TOLERATION, *fabric.fabric_tolerations()],
        },
        # Declined from Azure's script: `controller.affinity: {}`. In 0.4.1 the controller's affinity
        # prefers control-plane nodes but does not require them, so it schedules on AKS's system pool.
    }


class DraDriver(pulumi.ComponentResource):
    """The dra-driver-nvidia-gpu Helm release (pinned, OCI) in a `privileged` namespace (its kubelet
    plugin is privileged: values.yaml kubeletPlugin.containers.*.securityContext). The chart installs
    the ComputeDomain CRDs and the `gpu.nvidia.com` DeviceClasses. Depends only on the Kubernetes
    provider (passed in `opts`)."""

    namespace: Namespace
    release: k8s.helm.v3.Release
    driver_versions: dict[str, str]  # re-run the fabric test when the driver changes

    def __init__(self, name: str, args: DraDriverArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:kubernetes:DraDriver", name, None, opts)
        self.driver_versions = {"draDriver": args.version}
        self.namespace, self.release = operator_release(
            name,
            self,
            chart=CHART,
            version=args.version,
            namespace_name=args.namespace_name,
            values=chart_values(args.compute_domains),
            timeout_seconds=args.timeout_seconds, chart_archive=args.chart_archive,
        )
        self.register_outputs({"release": self.release.status})
