"""DRANET (kubernetes-sigs/dranet): the InfiniBand HCAs as DRA devices (`dra.net`), for `rdmaMode: dra`.

It publishes each HCA with its PCI address, RDMA device, NUMA node and, on Azure, the VM's placement
group (`azure.dra.net/placementGroupId`, from IMDS), and injects only the allocated
`/dev/infiniband/uverbsN` into a pod (kubernetes-sigs/dranet@ca195e2 site/content/docs/user/azure-aks.md).
The `dranet.net` DeviceClass the claims name is the stack's: neither the chart nor install.yaml creates it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.namespace import Namespace
from components.platform.operator_release import Chart, operator_release
from core import dra, fabric, pins

# The chart as the project publishes it (README: `helm install -n kube-system dranet
# oci://registry.k8s.io/networking/charts/dranet --version v1.4.0`); its own namespace here, as the
# stack's other drivers, privileged (its DaemonSet enters pods' network namespaces through NRI).
CHART = Chart(name="dranet", repo="oci://registry.k8s.io/networking/charts")
NAMESPACE = "dranet"


@dataclass(frozen=True)
class DranetArgs:
    # Chart version (stack_config.DEFAULT_VERSIONS["dranet"]).
    version: str
    namespace_name: str = NAMESPACE
    timeout_seconds: int = 600
    # A local archive of the chart at `version` (config charts.directory); None: the chart's repository.
    chart_archive: str | None = None

    def __post_init__(self) -> None:
        pins.CHART_VERSION.require("version", self.version)


def chart_values() -> dict[str, Any]:
    """Values for the dranet chart (they pass its values.schema.json; tested)."""
    return {
        "args": {
            # Azure's ConnectX VFs are InfiniBand-only (no Ethernet netdev): with this off DRANET publishes
            # their `rdmaDevice` and does not try to move IPoIB netdevs into the pod (kubernetes-sigs/
            # dranet@ca195e2 examples/azure_aks_examples/README.md, "Cluster prerequisites").
            "moveIBInterfaces": False,
            # Azure's attributes (placementGroupId, vmSize) come from its cloud plugin; named, not guessed.
            "cloudProviderHint": "AZURE",
        },
        # Only on the IB pool: the chart's default tolerates every NoSchedule taint and selects every node.
        "nodeSelector": fabric.pool_node_selector(),
        "tolerations": fabric.fabric_tolerations(),
    }


def device_class_spec() -> k8s.resource.v1.DeviceClassSpecArgs:
    """`dranet.net`: every device DRANET publishes (kubernetes-sigs/dranet@ca195e2
    examples/distributed_training/device-class.yaml)."""
    return k8s.resource.v1.DeviceClassSpecArgs(
        selectors=[k8s.resource.v1.DeviceSelectorArgs(
            cel=k8s.resource.v1.CELDeviceSelectorArgs(expression=f'device.driver == "{dra.NIC_DRIVER}"'))],
    )


class Dranet(pulumi.ComponentResource):
    """The dranet Helm release (pinned, OCI) in a `privileged` namespace, and the `dranet.net`
    DeviceClass (cluster-scoped, resource.k8s.io/v1). Depends only on the Kubernetes provider."""

    namespace: Namespace
    release: k8s.helm.v3.Release
    device_class: k8s.resource.v1.DeviceClass
    driver_versions: dict[str, str]

    def __init__(self, name: str, args: DranetArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:kubernetes:Dranet", name, None, opts)
        self.driver_versions = {"dranet": args.version}
        self.namespace, self.release = operator_release(
            name, self, chart=CHART, version=args.version, namespace_name=args.namespace_name,
            values=chart_values(), timeout_seconds=args.timeout_seconds, chart_archive=args.chart_archive,
        )
        self.device_class = k8s.resource.v1.DeviceClass(
            f"{name}-device-class",
            k8s.resource.v1.DeviceClassInitArgs(
                metadata=k8s.meta.v1.ObjectMetaArgs(name=dra.NIC_DEVICE_CLASS), spec=device_class_spec()),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"release": self.release.status, "device_class": dra.NIC_DEVICE_CLASS})
