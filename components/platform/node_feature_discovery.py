"""Row 4: Node Feature Discovery - the labels the Network Operator and the GPU Operator schedule by."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.namespace import Namespace
from components.platform.operator_release import Chart, operator_release
from core import fabric, pins

CHART = Chart(name="node-feature-discovery", repo="https://kubernetes-sigs.github.io/node-feature-discovery/charts")
NODE_FEATURE_RULE_API_VERSION = "nfd.k8s-sigs.io/v1alpha1"
NODE_FEATURE_RULE_NAME = "aks-infiniband-mellanox-ib"

# PCI classes the worker labels by vendor (`feature.node.kubernetes.io/pci-<vendor>.present`):
# 0300 VGA and 0302 3D controllers (NVIDIA GPUs: pci-10de), 0207 InfiniBand controllers
# (Mellanox HCAs: pci-15b3). Deliberately NOT 0200 (Ethernet): every AKS node with accelerated
# networking carries a Mellanox Ethernet VF, and labelling those would put the DOCA driver on the
# system pool.
PCI_INFINIBAND_CLASS = "0207"
PCI_GPU_CLASSES = ("0300", "0302")


@dataclass(frozen=True)
class NodeFeatureDiscoveryArgs:
    # Chart version (stack_config.DEFAULT_VERSIONS["nodeFeatureDiscovery"]).
    version: str
    # Namespace created for the release.
    namespace_name: str = "node-feature-discovery"
    # Helm wait, seconds.
    timeout_seconds: int = 600
    # A local archive of the chart at `version` (config charts.directory); None: the chart's repository.
    chart_archive: str | None = None
    # False: another owner runs NFD (existingCluster.preinstalled); the stack declares only its own rule.
    install: bool = True

    def __post_init__(self) -> None:
        pins.CHART_VERSION.require("version", self.version)


def chart_values() -> dict[str, Any]:
    """Values for the node-feature-discovery chart (every key exists in its values.yaml; tested)."""
    return {
        "worker": {
            # The worker must run on the IB pool (that is what it labels).
            "tolerations": fabric.fabric_tolerations(),
            "config": {
                "sources": {
                    "pci": {
                        "deviceClassWhitelist": [PCI_INFINIBAND_CLASS, *PCI_GPU_CLASSES],
                        "deviceLabelFields": ["vendor"],
                    }
                }
            },
        },
    }


def node_feature_rule_spec() -> dict[str, Any]:
    """Label nodes with a Mellanox (15b3) InfiniBand controller (class 0207) with fabric.MELLANOX_NIC_LABEL.

    NVIDIA's AKS recipe (aicr recipes/components/network-operator/manifests/nfd-network-rule.yaml,
    after Azure/aks-rdma-infiniband tests/setup-infra/network-operator-nfd.yaml) matches PCI device
    ids 101c and 101e instead. Not adopted: 101c is the ConnectX-6 virtual function, but 101e is the
    generic mlx5Gen virtual function (NVIDIA/aicr#1299), which Ethernet VFs of newer ConnectX parts
    share, so an accelerated-networking VF could put the DOCA driver on the system pool; and a new
    IB generation with another id would go unlabelled. The class says what we mean: an InfiniBand
    controller, which every IB VF of the catalog's sizes is and no Ethernet VF is.
    """
    return {
        "rules": [
            {
                "name": "mellanox-infiniband-hca",
                "labels": {fabric.MELLANOX_NIC_LABEL: "true"},
                "matchFeatures": [
                    {
                        "feature": "pci.device",
                        "matchExpressions": {
                            "vendor": {"op": "In", "value": [fabric.MELLANOX_PCI_VENDOR]},
                            "class": {"op": "In", "value": [PCI_INFINIBAND_CLASS]},
                        },
                    }
                ],
            }
        ]
    }


class NodeFeatureDiscovery(pulumi.ComponentResource):
    """The node-feature-discovery Helm release (pinned), its namespace, and a `NodeFeatureRule`.

    - the worker DaemonSet tolerates the IB pool taint and labels NVIDIA GPUs (pci-10de) and
      Mellanox InfiniBand HCAs (pci-15b3) by PCI vendor;
    - the `NodeFeatureRule` sets `feature.node.kubernetes.io/pci-15b3.present=true` on nodes with a
      Mellanox InfiniBand controller, the label the NicClusterPolicy's node affinity keys on;
    - the namespace is `privileged`: the worker mounts host paths (/sys, /boot, /etc/os-release),
      which the `baseline` level forbids.

    Depends only on the Kubernetes provider (passed in `opts`); the rule on the release, whose
    chart installs the NodeFeatureRule CRD. Without `install` (NFD is another owner's) only the rule, a
    rule of the stack's own name beside that owner's rules: its CRD is checked at `up` (stack/preinstalled.py).
    """

    namespace: Namespace | None
    release: k8s.helm.v3.Release | None
    rule: k8s.apiextensions.CustomResource

    def __init__(self, name: str, args: NodeFeatureDiscoveryArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:kubernetes:NodeFeatureDiscovery", name, None, opts)
        self.namespace, self.release = operator_release(
            name,
            self,
            chart=CHART,
            version=args.version,
            namespace_name=args.namespace_name,
            values=chart_values(),
            timeout_seconds=args.timeout_seconds, chart_archive=args.chart_archive,
        ) if args.install else (None, None)
        self.rule = k8s.apiextensions.CustomResource(
            f"{name}-rule",
            api_version=NODE_FEATURE_RULE_API_VERSION,
            kind="NodeFeatureRule",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=NODE_FEATURE_RULE_NAME),
            spec=node_feature_rule_spec(),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.release] if self.release else []),
        )
        self.register_outputs({"release": self.release.status if self.release else "another owner's",
                               "rule": NODE_FEATURE_RULE_NAME})
