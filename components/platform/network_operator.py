"""Row 5: the NVIDIA Network Operator and its NicClusterPolicy: DOCA/OFED driver and RDMA device plugin."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.namespace import Namespace
from components.platform.operator_release import Chart, operator_release
from core import fabric, modes, pins, rdma_drivers

CHART = Chart(name="network-operator", repo="https://helm.ngc.nvidia.com/nvidia")
NIC_CLUSTER_POLICY_API_VERSION = "mellanox.com/v1alpha1"
# The operator reconciles only the policy of this name.
NIC_CLUSTER_POLICY_NAME = "nic-cluster-policy"

# Images released with the operator (its hack/release.yaml; reference/examples/example-nicclusterpolicy_cr.*);
# their tags are pinned in the pin table (core/pins.py COMPONENTS), the public registry, never nvstaging.
IMAGE_REPOSITORY = "nvcr.io/nvidia/mellanox"
DOCA_DRIVER_IMAGE = "doca-driver"

# Azure's workaround for a race in which the inbox kernel modules load before the DOCA ones
# (Azure/aks-rdma-infiniband configs/nicclusterpolicy/base/nic.yaml; Mellanox/doca-driver-build#52).
# UNLOAD_THIRD_PARTY_RDMA_MODULES stays unset: no catalog size has a MANA NIC holding ib_core
# (docs/kubernetes-layer.md#doca-driver-third-party-rdma-modules).
DOCA_DRIVER_ENV = (
    {"name": "OFED_BLACKLIST_MODULES_FILE", "value": "/host/etc/modprobe.d/blacklist-ofed-modules.conf"},
)

# DOCA upgrades cordon and drain one node at a time, as Azure's and aicr's policies do: the reload
# takes the HCAs from every pod there (docs/kubernetes-layer.md#driver-upgrade-policies).
OFED_UPGRADE_POLICY = {
    "autoUpgrade": True,
    "maxParallelUpgrades": 1,
    "drain": {"enable": True, "force": True, "deleteEmptyDir": True, "timeoutSeconds": 300},
}


@dataclass(frozen=True)
class NetworkOperatorArgs:
    # Chart version (core/pins.py COMPONENTS "networkOperator").
    version: str
    # Image tags (core/pins.py COMPONENTS: docaDriver, rdmaSharedDevicePlugin, sriovDevicePlugin).
    doca_driver_version: str
    rdma_shared_device_plugin_version: str
    sriov_device_plugin_version: str
    # The RDMA mode's record (core.modes.MODES): its device plugin, if any, is the policy's.
    rdma_mode: modes.RdmaMode
    # The IB pool's RDMA driver stack (core/rdma_drivers.py): the DOCA driver container, or the node image's own.
    rdma_driver: rdma_drivers.RdmaDriver = rdma_drivers.DOCA
    namespace_name: str = fabric.NETWORK_OPERATOR_NAMESPACE
    timeout_seconds: int = 600
    # A local archive of the chart at `version` (config charts.directory); None: the chart's repository.
    chart_archive: str | None = None

    def __post_init__(self) -> None:
        pins.CHART_VERSION.require("version", self.version)
        pins.DOCA_TAG.require("doca_driver_version", self.doca_driver_version)
        pins.IMAGE_TAG.require("rdma_shared_device_plugin_version", self.rdma_shared_device_plugin_version)
        pins.IMAGE_TAG.require("sriov_device_plugin_version", self.sriov_device_plugin_version)
        modes.require(self.rdma_mode)  # the record, not a name

    def device_plugin_version(self, plugin: modes.DevicePlugin) -> str:
        """The pinned image tag of `plugin`, by its `versions.<key>` (= its NicClusterPolicy section)."""
        return {"rdmaSharedDevicePlugin": self.rdma_shared_device_plugin_version,
                "sriovDevicePlugin": self.sriov_device_plugin_version}[plugin.section]


def chart_values() -> dict[str, Any]:
    """Values for the network-operator chart: its own NFD off (ours is a separate release) and its
    NodeFeatureRules off (ours labels InfiniBand controllers only). Everything else is the chart's
    default: the operator runs on the system pool. aicr's host changes (ib_umad/rdma_ucm, memlock)
    are declined: docs/kubernetes-layer.md#network-operator-host-changes-declined."""
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
        "tolerations": fabric.fabric_tolerations(),
    }
    # The DOCA driver container; with the node image's own drivers (rdmaDriver inbox) none: the device plugin
    # below still hands the HCAs to pods, which carry rdma-core in the test image.
    if args.rdma_driver.installs_doca:
        spec["ofedDriver"] = {
            "repository": IMAGE_REPOSITORY,
            "image": DOCA_DRIVER_IMAGE,
            "version": args.doca_driver_version,
            "env": [dict(e) for e in DOCA_DRIVER_ENV],
            "upgradePolicy": OFED_UPGRADE_POLICY,
            "startupProbe": {"initialDelaySeconds": 10, "periodSeconds": 20},
            "livenessProbe": {"initialDelaySeconds": 30, "periodSeconds": 30},
            "readinessProbe": {"initialDelaySeconds": 10, "periodSeconds": 30},
        }
    plugin = args.rdma_mode.device_plugin
    if plugin:
        spec[plugin.section] = {
            "repository": IMAGE_REPOSITORY,
            "image": plugin.image,
            "version": args.device_plugin_version(plugin),
            "config": json.dumps(plugin.config, indent=2),
        }
    return spec


# Each device plugin's own resourcePrefix, for an entry of its config that gives none (k8s-rdma-shared-dev-plugin:
# rdma; sriov-network-device-plugin: intel.com, its --resource-prefix default in cmd/sriovdp/main.go, which the
# Network Operator's state-sriov-device-plugin DaemonSet does not pass): how a NicClusterPolicy another owner
# wrote is read.
DEFAULT_PREFIX = {"rdmaSharedDevicePlugin": "rdma", "sriovDevicePlugin": "intel.com"}


def advertised(plugin: modes.DevicePlugin, config: dict[str, Any]) -> set[str]:
    """The extended resources a config of `plugin` advertises: `<resourcePrefix>/<resourceName>` of each entry of
    its lists (configList, resourceList)."""
    entries = [e for v in config.values() if isinstance(v, list) for e in v if isinstance(e, dict)]
    return {f"{e.get('resourcePrefix') or DEFAULT_PREFIX[plugin.section]}/{e['resourceName']}"
            for e in entries if isinstance(e.get("resourceName"), str)}


def policy_problems(spec: dict[str, Any], rdma_mode: modes.RdmaMode, rdma_driver: rdma_drivers.RdmaDriver) -> list[str]:
    """What a NicClusterPolicy that another owner wrote (existingCluster.preinstalled) lacks of what this stack
    relies on, as nic_cluster_policy_spec would set it: the DOCA driver container where the pool's rdmaDriver is
    doca, and the RDMA resource of the mode, advertised by its device plugin."""
    out = []
    if rdma_driver.installs_doca and not spec.get("ofedDriver"):
        out.append(f"spec.ofedDriver is unset; ibPool.rdmaDriver {rdma_driver.name} relies on the DOCA driver "
                   "container it runs (rdmaDriver inbox uses the node image's own drivers)")
    plugin = rdma_mode.device_plugin
    if plugin:
        config = (spec.get(plugin.section) or {}).get("config") or "{}"
        try:
            config = json.loads(config) if isinstance(config, str) else config
        except ValueError:
            config = {}
        there = advertised(plugin, config) if isinstance(config, dict) else set()
        if rdma_mode.resource not in there:
            out.append(f"spec.{plugin.section} advertises {', '.join(sorted(there)) or 'no resource'}, not "
                       f"{rdma_mode.resource} (rdmaMode {rdma_mode.name}: what the fabric test's pods request)")
    return out


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
        plugin = args.rdma_mode.device_plugin
        plugin_version = {plugin.section: args.device_plugin_version(plugin)} if plugin else {}
        doca = {"docaDriver": args.doca_driver_version} if args.rdma_driver.installs_doca else {}
        self.driver_versions = {"networkOperator": args.version, **doca, **plugin_version}
        self.namespace, self.release = operator_release(
            name,
            self,
            chart=CHART,
            version=args.version,
            namespace_name=args.namespace_name,
            values=chart_values(),
            timeout_seconds=args.timeout_seconds, chart_archive=args.chart_archive,
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
