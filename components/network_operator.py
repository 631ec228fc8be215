"""Row 5: the NVIDIA Network Operator and its NicClusterPolicy: DOCA/OFED driver and RDMA device plugin."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.namespace import Namespace
from components.operator_release import Chart, operator_release
from core import fabric, modes, pins

CHART = Chart(name="network-operator", repo="https://helm.ngc.nvidia.com/nvidia")
NIC_CLUSTER_POLICY_API_VERSION = "mellanox.com/v1alpha1"
# The operator reconciles only the policy of this name.
NIC_CLUSTER_POLICY_NAME = "nic-cluster-policy"

# Images released with the operator (reference/examples/example-nicclusterpolicy_cr.v26.4.1.yaml);
# their tags are pinned in stack_config.DEFAULT_VERSIONS.
IMAGE_REPOSITORY = "nvcr.io/nvidia/mellanox"
DOCA_DRIVER_IMAGE = "doca-driver"

# Azure's workaround for a race in which the inbox kernel modules load before the DOCA ones:
# the driver container writes its module blacklist onto the host
# (Azure/aks-rdma-infiniband configs/nicclusterpolicy/base/nic.yaml; Mellanox/doca-driver-build#52).
#
# Deliberately not set: UNLOAD_THIRD_PARTY_RDMA_MODULES (default false). It matters only when a
# non-Mellanox RDMA module holds ib_core, e.g. mana_ib on a VM whose frontend NIC is Azure's MANA:
# then the DOCA reload cannot unload ib_core (the Go entrypoint stops with "third-party RDMA modules
# are loaded"; Mellanox/doca-driver-build@e5decdd (network-operator-v26.4.1)
# entrypoint/internal/entrypoint/entrypoint.go). The catalog's sizes do not get MANA: Azure lists the
# existing sizes placed on MANA hardware as D/E/B/F/G/L series only, MANA otherwise coming with the
# v6 Intel sizes (MicrosoftDocs/azure-docs@03e5750 articles/virtual-network/
# accelerated-networking-mana-existing-sizes.md), and ND A100 v4, ND H100/H200 v5, HB v3/v4 and HX
# are not among them. The system pool (D-series) may get MANA, but the DOCA driver never runs there
# (node affinity on the InfiniBand label). Turning it on anyway is not free: the bash entrypoint
# then rewrites openibd's unload list with sed and exits if that fails (entrypoint.sh
# unload_third_party_rdma_modules), a path no Azure configuration exercises. ND GB200 v6 is a v6
# size whose frontend NIC is not established here; docs/upgrade-runbook.md says how to recognise
# the failure and set the variable.
DOCA_DRIVER_ENV = (
    {"name": "OFED_BLACKLIST_MODULES_FILE", "value": "/host/etc/modprobe.d/blacklist-ofed-modules.conf"},
)

# How the operator replaces the DOCA driver when its version changes (docs/upgrade-runbook.md:
# DOCA first, then a reboot of each node, then the GPU driver). The reload takes the HCAs away from
# every pod on the node, so the node is cordoned and drained first, one node at a time (Azure's and
# NVIDIA aicr's nic-cluster-policy-aks.yaml use the same policy).
# - force: the fabric test's pods belong to a Volcano Job, not to a controller drain knows;
#   deleteEmptyDir: its workers keep /dev/shm in an in-memory emptyDir.
# - not waitForCompletion: it would hold the upgrade until a running fabric test ends, and that test
#   measures the old driver.
# - not safeLoad (cordon and drain before the driver loads on a node that starts): nothing that
#   needs the fabric can land there early, since the RDMA resource appears only once the driver is
#   loaded and nvidia.com/gpu only after the GPU driver, which waits for it.
OFED_UPGRADE_POLICY = {
    "autoUpgrade": True,
    "maxParallelUpgrades": 1,
    "drain": {"enable": True, "force": True, "deleteEmptyDir": True, "timeoutSeconds": 300},
}


@dataclass(frozen=True)
class NetworkOperatorArgs:
    # Chart version (stack_config.DEFAULT_VERSIONS["networkOperator"]).
    version: str
    # Image tags (stack_config.DEFAULT_VERSIONS: docaDriver, rdmaSharedDevicePlugin, sriovDevicePlugin).
    doca_driver_version: str
    rdma_shared_device_plugin_version: str
    sriov_device_plugin_version: str
    # `shared` (rdma/shared_ib) or `sriov` (rdma/ib): a name in core.modes.MODES.
    rdma_mode: str
    namespace_name: str = fabric.NETWORK_OPERATOR_NAMESPACE
    timeout_seconds: int = 600

    def __post_init__(self) -> None:
        pins.CHART_VERSION.require("version", self.version)
        pins.DOCA_TAG.require("doca_driver_version", self.doca_driver_version)
        pins.IMAGE_TAG.require("rdma_shared_device_plugin_version", self.rdma_shared_device_plugin_version)
        pins.IMAGE_TAG.require("sriov_device_plugin_version", self.sriov_device_plugin_version)
        modes.rdma_mode(self.rdma_mode, key="rdma_mode")  # raises with the modes there are

    @property
    def mode(self) -> modes.RdmaMode:
        return modes.rdma_mode(self.rdma_mode, key="rdma_mode")

    def device_plugin_version(self, plugin: modes.DevicePlugin) -> str:
        """The pinned image tag of `plugin`, by its `versions.<key>` (= its NicClusterPolicy section)."""
        return {"rdmaSharedDevicePlugin": self.rdma_shared_device_plugin_version,
                "sriovDevicePlugin": self.sriov_device_plugin_version}[plugin.section]


def chart_values() -> dict[str, Any]:
    """Values for the network-operator chart: its own NFD off (ours is a separate release) and its
    NodeFeatureRules off (ours labels InfiniBand controllers only). Everything else is the chart's
    default: the operator runs on the system pool.

    Declined from NVIDIA's AKS recipe (aicr recipes/components/network-operator/manifests/
    ib-node-config-aks.yaml, a privileged host DaemonSet):
    - loading ib_umad and rdma_ucm from the host: NCCL's InfiniBand transport and perftest use verbs
      only (ib_uverbs, loaded with the DOCA stack); neither uses MADs (ib_umad) or the RDMA connection
      manager (rdma_ucm). A host `modprobe` would also pick the inbox modules, which the DOCA driver
      container blacklists on the host (its OFED_BLACKLIST_MODULES default lists ib_umad and rdma_ucm)
      to keep them from racing its own.
    - LimitMEMLOCK=infinity for containerd and kubelet, which restarts both on every IB node: the
      fabric test's ranks run as root with CAP_IPC_LOCK, and the kernel lets such a process pin
      memory past RLIMIT_MEMLOCK (components/mpi_job.py says so, and a test keeps it true).
    """
    return {"nfd": {"enabled": False, "deployNodeFeatureRules": False}}


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
            "upgradePolicy": OFED_UPGRADE_POLICY,
            "startupProbe": {"initialDelaySeconds": 10, "periodSeconds": 20},
            "livenessProbe": {"initialDelaySeconds": 30, "periodSeconds": 30},
            "readinessProbe": {"initialDelaySeconds": 10, "periodSeconds": 30},
        },
    }
    plugin = args.mode.device_plugin
    if plugin:
        spec[plugin.section] = {
            "repository": IMAGE_REPOSITORY,
            "image": plugin.image,
            "version": args.device_plugin_version(plugin),
            "config": json.dumps(plugin.config, indent=2),
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
    # What the fabric test must re-run for when it changes: the chart, the DOCA driver and the RDMA
    # device plugin of the mode.
    driver_versions: dict[str, str]

    def __init__(self, name: str, args: NetworkOperatorArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:kubernetes:NetworkOperator", name, None, opts)
        plugin = args.mode.device_plugin
        plugin_version = {plugin.section: args.device_plugin_version(plugin)} if plugin else {}
        self.driver_versions = {"networkOperator": args.version, "docaDriver": args.doca_driver_version,
                                **plugin_version}
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
