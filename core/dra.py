"""Dynamic Resource Allocation (DRA): what the stack needs of the cluster to hand out GPUs and NICs
as claims, in one place. Pure Python (no Pulumi import).

Two things need DRA: a size with multi-node NVLink (GB200/GB300: the NVIDIA DRA driver's
ComputeDomain, Azure's "GPU Operator | Requires NVIDIA DRA driver"), and `rdmaMode: dra` (DRANET
for the NICs, the NVIDIA DRA driver for the GPUs). Both need the GA API, resource.k8s.io/v1.
"""

from __future__ import annotations

import re

from core import modes
from core.catalog import Sku

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
NIC_DEVICE_CLASS = "dranet.net"
NIC_DRIVER = "dra.net"
# Attributes the AKS examples select by (kubernetes-sigs/dranet@ca195e2 examples/azure_aks_examples/
# gb300/resourceslice-{gpu,dranet}.yaml): the GPU's PCI address is the standard attribute, the NIC's
# is DRANET's own; Azure's placement group (from IMDS) is on every NIC.
GPU_PCI_ATTRIBUTE = 'device.attributes["resource.kubernetes.io"].pciBusID'
NIC_PCI_ATTRIBUTE = 'device.attributes["dra.net"].pciAddress'
NIC_RDMA_ATTRIBUTE = 'device.attributes["dra.net"].rdma'
PLACEMENT_GROUP_ATTRIBUTE = "azure.dra.net/placementGroupId"


def needs(sku: Sku, rdma_mode: str) -> str | None:
    """Why this stack needs DRA, or None: the one rule every layer asks."""
    if modes.MODES.get(rdma_mode, modes.SHARED).dra:
        return f"rdmaMode {rdma_mode!r} (GPUs and NICs as DRA claims)"
    if sku.has_mnnvl:
        return f"{sku.vm_size} (multi-node NVLink through the NVIDIA DRA driver's ComputeDomain)"
    return None


def _version(text: str) -> tuple[int, int, int]:
    major, minor, *patch = (int(x) for x in text.split("."))
    # MAJOR.MINOR: AKS takes the newest patch of that minor
    return major, minor, patch[0] if patch else 10**6


def kubernetes_problem(kubernetes_version: str, sku: Sku, rdma_mode: str) -> str | None:
    """What is wrong with `kubernetes_version` for this stack's DRA needs, or None."""
    why = needs(sku, rdma_mode)
    if not why or not re.fullmatch(r"\d+\.\d+(\.\d+)?", kubernetes_version):
        return None
    if _version(kubernetes_version) >= MIN_KUBERNETES:
        return None
    return f"{why} needs Kubernetes {MIN_KUBERNETES_TEXT} or newer ({API_VERSION})"
