"""Dynamic Resource Allocation (DRA): what the stack needs of the cluster to hand out GPUs and NICs
as claims, in one place. Pure Python (no Pulumi import).

Two things need DRA: a size with multi-node NVLink (GB200/GB300: the NVIDIA DRA driver's
ComputeDomain, Azure's "GPU Operator | Requires NVIDIA DRA driver"), and `rdmaMode: dra` (DRANET
for the NICs, the NVIDIA DRA driver for the GPUs). Both need the GA API, resource.k8s.io/v1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core import catalog
from core.catalog import Sku
from core.modes import RdmaMode, require

API_VERSION = "resource.k8s.io/v1"
# resource.k8s.io/v1 is served from Kubernetes 1.34 (the pinned kubernetes-validate 1.37.0 ships its
# schemas from v1.34.0 on, v1beta1 only before). Azure asks for 1.34.2 or newer for the DRA driver
# (Azure/ai-infrastructure-on-azure@a01b073 infrastructure_references/aks/scripts/deploy-aks.sh
# install_dra_driver: "Requires K8s v1.34.2+").
MIN_KUBERNETES = (1, 34, 2)
MIN_KUBERNETES_TEXT = "1.34 (1.34.2 or newer when a patch is pinned)"

# Device classes and drivers, as the drivers publish them: the NVIDIA DRA driver's `gpu.nvidia.com`
# (chart 0.4.1, resources.gpus.enabled) and DRANET's `dra.net`, whose `dranet.net` DeviceClass the
# stack creates itself (kubernetes-sigs/dranet@ca195e2 examples/distributed_training/device-class.yaml;
# neither the chart nor install.yaml creates it).
GPU_DEVICE_CLASS = "gpu.nvidia.com"
# The driver name on the GPUs' ResourceSlices, one per node (spec.nodeName), as the GB300 sample shows
# (kubernetes-sigs/dranet@ca195e2 examples/azure_aks_examples/gb300/resourceslice-gpu.yaml: `driver:
# gpu.nvidia.com`): the admission loop's sign that a node's GPUs can be claimed (clusterside/certify_admit.py).
GPU_DRIVER = "gpu.nvidia.com"
NIC_DEVICE_CLASS = "dranet.net"
NIC_DRIVER = "dra.net"
# Attributes the AKS examples select by (kubernetes-sigs/dranet@ca195e2 examples/azure_aks_examples/
# gb300/resourceslice-{gpu,dranet}.yaml): the GPU's PCI address is the standard attribute, the NIC's
# is DRANET's own; Azure's placement group (from IMDS) is on every NIC.
GPU_PCI_ATTRIBUTE = 'device.attributes["resource.kubernetes.io"].pciBusID'
NIC_PCI_ATTRIBUTE = 'device.attributes["dra.net"].pciAddress'
NIC_RDMA_ATTRIBUTE = 'device.attributes["dra.net"].rdma'
PLACEMENT_GROUP_ATTRIBUTE = "azure.dra.net/placementGroupId"


@dataclass(frozen=True)
class Group:
    """GPUs and the HCAs beside them on one host (PCI addresses, as the drivers publish them)."""

    gpus: tuple[str, ...]
    hcas: tuple[str, ...]


# ND GB300 v6: per NUMA node 2 GPUs and 2 HCAs (kubernetes-sigs/dranet@ca195e2
# examples/azure_aks_examples/gb300/README.md "DRA device attributes", from a live node's ResourceSlices:
# `nvidia-smi topo -m` shows NODE within a NUMA node, SYS across). Sizes with an NCCL topology file are
# paired by its layout instead (components/fabric_claims.groups).
PUBLISHED_GROUPS: dict[str, tuple[Group, ...]] = {
    "Standard_ND128isr_GB300_v6": (
        Group(gpus=("0008:06:00.0", "0009:06:00.0"), hcas=("0101:00:00.0", "0102:00:00.0")),
        Group(gpus=("0018:06:00.0", "0019:06:00.0"), hcas=("0103:00:00.0", "0104:00:00.0")),
    ),
}


def can_pair(sku: Sku) -> bool:
    """Whether a published source says which HCA sits beside which GPU on `sku`: Azure's NCCL
    topology file (every catalog topology has a layout: tests/fidelity/test_nccl_topology.py) or PUBLISHED_GROUPS."""
    return sku.has_gpus and (sku.nccl_topology is not None or sku.vm_size in PUBLISHED_GROUPS)


def needs(sku: Sku, rdma_mode: RdmaMode) -> str | None:
    """Why this stack needs DRA, or None: the one rule every layer asks."""
    if require(rdma_mode).dra:  # a name, even an unknown one, is refused: never read as "shared"
        return f"rdmaMode {rdma_mode.name!r} (GPUs and NICs as DRA claims)"
    if sku.has_mnnvl:
        return f"{sku.vm_size} (multi-node NVLink through the NVIDIA DRA driver's ComputeDomain)"
    return None


def _version(text: str) -> tuple[int, int, int]:
    major, minor, *patch = (int(x) for x in text.split("."))
    # MAJOR.MINOR: AKS takes the newest patch of that minor
    return major, minor, patch[0] if patch else 10**6


# osSKU `Ubuntu` is Ubuntu 22.04 for Kubernetes 1.25 to 1.34 and 24.04 from 1.35. `Ubuntu2404` is not in the
# 2025-09-01 API's enum (the pinned azure-native's default), so the pool gets 24.04 through the version.
UBUNTU_2404_KUBERNETES = (1, 35)
# ... and 26.04 from 1.38: the last minor known to give 24.04 is 1.37 (AKS release notes of 2026-10-25, as
# issue 52 cites them; not in the stored sources, whose AKS snapshots end 2026-08: Azure/AKS#5905 has 26.04
# in preview as osSKU Ubuntu2604 from 1.36). Azure's Grace Blackwell images need 24.04 (SRC_AKS_GB200_FLAG).
UBUNTU_2404_LAST_KUBERNETES = (1, 37)
SRC_UBUNTU_2404 = ("learn.microsoft.com/azure/aks/upgrade-os-version, 'Supported OS versions': 'Ubuntu 22.04 is "
                   "default for Kubernetes versions 1.25 to 1.34. Ubuntu 24.04 is the default OS for Kubernetes 1.35+'")


def ubuntu_2404_need(sku: Sku, rdma_mode: RdmaMode) -> str | None:
    """Why this stack needs Ubuntu 24.04 on the IB pool, or None: Azure requires it for GB200/GB300, and
    DRANET's NRI plugin needs containerd 2 (24.04's; on 22.04's containerd 1.7 NRI is off by default:
    kubernetes-sigs/dranet examples/azure_aks_examples/README.md, "Cluster prerequisites")."""
    if sku.needs_ubuntu_2404:
        return f"{sku.vm_size} needs Ubuntu 24.04 ({catalog.SRC_AKS_GB200_FLAG.split(': ', 1)[0]})"
    if require(rdma_mode).dra:
        return f"rdmaMode {rdma_mode.name!r} needs Ubuntu 24.04's containerd 2 for DRANET's NRI plugin"
    return None


def kubernetes_problem(kubernetes_version: str, sku: Sku, rdma_mode: RdmaMode) -> str | None:
    """What is wrong with `kubernetes_version` for this stack's DRA and Ubuntu needs, or None."""
    why = needs(sku, rdma_mode)
    if not why or not re.fullmatch(r"\d+\.\d+(\.\d+)?", kubernetes_version):
        return None
    if _version(kubernetes_version) < MIN_KUBERNETES:
        return f"{why} needs Kubernetes {MIN_KUBERNETES_TEXT} or newer ({API_VERSION})"
    ubuntu = ubuntu_2404_need(sku, rdma_mode)
    if sku.needs_ubuntu_2404 and _version(kubernetes_version)[:2] > UBUNTU_2404_LAST_KUBERNETES:
        last = ".".join(map(str, UBUNTU_2404_LAST_KUBERNETES))
        return (f"{ubuntu}, and AKS's osSKU Ubuntu is 24.04 only up to Kubernetes {last}: from 1.38 it is 26.04 "
                f"(AKS release notes, 2026-10-25), which Azure's Grace Blackwell images do not support: use "
                f"{'.'.join(map(str, UBUNTU_2404_KUBERNETES))} to {last}")
    if ubuntu and _version(kubernetes_version)[:2] < UBUNTU_2404_KUBERNETES:
        floor = ".".join(map(str, UBUNTU_2404_KUBERNETES))
        return (f"{ubuntu}, which AKS's osSKU Ubuntu is from Kubernetes {floor} on (the 2025-09-01 API has no "
                f"Ubuntu2404): use {floor} or newer")
    return None
