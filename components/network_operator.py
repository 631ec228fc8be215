"""Row 5: the NVIDIA Network Operator and its NicClusterPolicy: DOCA/OFED driver and RDMA device plugin."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

import fabric
import pins
from components.namespace import Namespace
from components.operator_release import Chart, operator_release

CHART = Chart(name="network-operator", repo="https://helm.ngc.nvidia.com/nvidia")
NIC_CLUSTER_POLICY_API_VERSION = "mellanox.com/v1alpha1"
# The operator reconciles only the policy of this name.
NIC_CLUSTER_POLICY_NAME = "nic-cluster-policy"

# Images released with the operator (reference/examples/example-nicclusterpolicy_cr.v26.4.1.yaml);
# their tags are pinned in stack_config.DEFAULT_VERSIONS.
IMAGE_REPOSITORY = "nvcr.io/nvidia/mellanox"
DOCA_DRIVER_IMAGE = "doca-driver"
RDMA_SHARED_DEVICE_PLUGIN_IMAGE = "k8s-rdma-shared-dev-plugin"
SRIOV_DEVICE_PLUGIN_IMAGE = "sriov-network-device-plugin"

# How many pods of one node may share its HCAs in `shared` mode (Azure's and upstream's value).
RDMA_HCA_MAX = 63

# Azure's workaround for a race in which the inbox kernel modules load before the DOCA ones:
# the driver container writes its module blacklist onto the host
# (Azure/aks-rdma-infiniband configs/nicclusterpolicy/base/nic.yaml; Mellanox/doca-driver-build#52).
DOCA_DRIVER_ENV = (
    {"name": "OFED_BLACKLIST_MODULES_FILE", "value": "/host/etc/modprobe.d/blacklist-ofed-modules.conf"},
)


@dataclass(frozen=True)
class NetworkOperatorArgs:
    # Chart version (stack_config.DEFAULT_VERSIONS["networkOperator"]).
    version: str
    # Image tags (stack_config.DEFAULT_VERSIONS: docaDriver, rdmaSharedDevicePlugin, sriovDevicePlugin).
    doca_driver_version: str
    rdma_shared_device_plugin_version: str
    sriov_device_plugin_version: str
    # `shared` (rdma/shared_ib) or `sriov` (rdma/ib): fabric.RDMA_MODES.
    rdma_mode: str
    namespace_name: str = "network-operator"
    timeout_seconds: int = 600

    def __post_init__(self) -> None:
        pins.CHART_VERSION.require("version", self.version)
        pins.DOCA_TAG.require("doca_driver_version", self.doca_driver_version)
        pins.IMAGE_TAG.require("rdma_shared_device_plugin_version", self.rdma_shared_device_plugin_version)
        pins.IMAGE_TAG.require("sriov_device_plugin_version", self.sriov_device_plugin_version)
        if self.rdma_mode not in fabric.RDMA_MODES:
            raise ValueError(f"rdma_mode: got {self.rdma_mode!r}; expected one of {', '.join(fabric.RDMA_MODES)}")


def chart_values() -> dict[str, Any]:
    """Values for the network-operator chart: its own NFD off (ours is a separate release) and its
    NodeFeatureRules off (ours labels InfiniBand controllers only). Everything else is the chart's
    default: the operator runs on the system pool."""
    return {"nfd": {"enabled": False, "deployNodeFeatureRules": False}}


def rdma_shared_device_plugin_config() -> dict[str, Any]:
    """The k8s-rdma-shared-dev-plugin config: one resource `rdma/shared_ib` covering every
    Mellanox InfiniBand device of the node, shared by up to RDMA_HCA_MAX pods."""
    return {
        "configList": [
            {
                "resourcePrefix": fabric.RDMA_RESOURCE_PREFIX,
                "resourceName": fabric.RDMA_SHARED_RESOURCE_NAME,
                "rdmaHcaMax": RDMA_HCA_MAX,
                "selectors": {"vendors": [fabric.MELLANOX_PCI_VENDOR], "linkTypes": ["infiniband"]},
            }
        ]
    }


def sriov_device_plugin_config() -> dict[str, Any]:
    """The sriov-network-device-plugin config: each InfiniBand VF is one `rdma/ib`, with its RDMA
    device mounted into the pod (isRdma)."""
    return {
        "resourceList": [
            {
                "resourcePrefix": fabric.RDMA_RESOURCE_PREFIX,
                "resourceName": fabric.RDMA_SRIOV_RESOURCE_NAME,
                "selectors": {"vendors": [fabric.MELLANOX_PCI_VENDOR], "linkTypes": ["infiniband"], "isRdma": True},
            }
        ]
    }


def nic_cluster_policy_spec(args: NetworkOperatorArgs) -> dict[str, Any]:
    """The NicClusterPolicy spec (validated against the pinned CRD's schema in the tests)."""
    spec: dict[str, Any] = {
        # Only nodes with a Mellanox InfiniBand HCA (labelled by Node Feature Discovery).
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": fabric.MELLANOX_NIC_LABEL, "operator": "In", "values": ["true"]}]}
                ]
            }
        },
        # Injected into every DaemonSet the operator creates from this policy.
        "tolerations": [fabric.toleration()],
        "ofedDriver": {
            "repository": IMAGE_REPOSITORY,
            "image": DOCA_DRIVER_IMAGE,
            "version": args.doca_driver_version,
            "env": [dict(e) for e in DOCA_DRIVER_ENV],
            "upgradePolicy": {
                "autoUpgrade": True,
                "maxParallelUpgrades": 1,
                "drain": {"enable": True, "force": True, "deleteEmptyDir": True, "timeoutSeconds": 300},
            },
            "startupProbe": {"initialDelaySeconds": 10, "periodSeconds": 20},
            "livenessProbe": {"initialDelaySeconds": 30, "periodSeconds": 30},
            "readinessProbe": {"initialDelaySeconds": 10, "periodSeconds": 30},
        },
    }
    if args.rdma_mode == "shared":
        spec["rdmaSharedDevicePlugin"] = {
            "repository": IMAGE_REPOSITORY,
            "image": RDMA_SHARED_DEVICE_PLUGIN_IMAGE,
            "version": args.rdma_shared_device_plugin_version,
            "config": json.dumps(rdma_shared_device_plugin_config(), indent=2),
        }
    else:
        spec["sriovDevicePlugin"] = {
            "repository": IMAGE_REPOSITORY,
            "image": SRIOV_DEVICE_PLUGIN_IMAGE,
            "version": args.sriov_device_plugin_version,
            "config": json.dumps(sriov_device_plugin_config(), indent=2),
        }
    return spec


class NetworkOperator(pulumi.ComponentResource):
    """The network-operator Helm release (pinned) and a separate `NicClusterPolicy`.

    Charts since 24.10 no longer create the policy from values, and the operator acts only on one
    named `nic-cluster-policy`. The policy holds the DOCA/OFED driver container, the RDMA device
    plugin of `rdma_mode`, node affinity on the NIC label and the IB pool toleration.

    The policy depends on the release: its CRD comes from the chart, and on destroy the policy goes
    first so the operator can remove its DaemonSets. The namespace is `privileged`: the driver
    container loads kernel modules and the device plugins mount host devices.
    """

    namespace: Namespace
    release: k8s.helm.v3.Release
    policy: k8s.apiextensions.CustomResource

    def __init__(self, name: str, args: NetworkOperatorArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:kubernetes:NetworkOperator", name, None, opts)
        self.namespace, self.release = operator_release(
            name,
            self,
            chart=CHART,
            version=args.version,
            namespace_name=args.namespace_name,
            values=chart_values(),
            timeout_seconds=args.timeout_seconds,
        )
        self.policy = k8s.apiextensions.CustomResource(
            f"{name}-policy",
            api_version=NIC_CLUSTER_POLICY_API_VERSION,
            kind="NicClusterPolicy",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=NIC_CLUSTER_POLICY_NAME),
            spec=nic_cluster_policy_spec(args),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.release]),
        )
        self.register_outputs({"release": self.release.status, "policy": NIC_CLUSTER_POLICY_NAME})
