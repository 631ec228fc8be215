"""The fabric test's DRA objects, declared in the test's namespace before its Job:

- a `ResourceClaimTemplate` (resource.k8s.io/v1) for each worker's devices: every GPU of the node
  (`gpu.nvidia.com`) and, in `rdmaMode: dra`, every HCA (`dranet.net`), each request of HCAs held to
  the GPUs beside them (the same PCIe switch on ND v4/v5, the same NUMA node on GB300), and all of a
  worker's HCAs to one Azure placement group;
- on the rack's NVLink run of a multi-node-NVLink size, a `ComputeDomain` (resource.nvidia.com/v1beta1),
  whose driver makes the channel template the workers claim (`spec.channel.resourceClaimTemplate.name`).

The pairs come from Azure's own topology: the NCCL topology files (components/fabric/nccl_topology.py) where
Azure publishes one, and DRANET's GB300 ResourceSlices for GB300. A size with neither has no pairing,
and `rdmaMode: dra` is refused there (stack_config).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.fabric.nccl_topology import layout
from core import dra
from core.catalog import Sku

rv1 = k8s.resource.v1
meta = k8s.meta.v1

DEVICES_TEMPLATE = "fabric-test-devices"  # the workers' ResourceClaimTemplate
DEVICES_CLAIM = "devices"  # its name in the pod
COMPUTE_DOMAIN = "fabric-test-rack"
CHANNEL_TEMPLATE = "fabric-test-imex-channel"  # made by the DRA driver from the ComputeDomain
CHANNEL_CLAIM = "imex-channel"
COMPUTE_DOMAIN_API_VERSION = "resource.nvidia.com/v1beta1"


def groups(sku: Sku) -> tuple[dra.Group, ...] | None:
    """Which HCAs sit beside which GPUs on `sku` (each PCIe switch of its NCCL topology file, else
    core.dra.PUBLISHED_GROUPS), or None where no published source says."""
    if sku.nccl_topology:
        lay = layout(sku.nccl_topology)
        return tuple(dra.Group((p.gpu_busid,), (p.hca_busid,)) for n in lay.numas for s in n.switches for p in s.pairs)
    return dra.PUBLISHED_GROUPS.get(sku.vm_size)


def _one_of(attribute: str, values: tuple[str, ...]) -> str:
    return f"{attribute} in {json.dumps(list(values))}"  # a CEL list of strings


def _request(name: str, device_class: str, count: int, *expressions: str) -> rv1.DeviceRequestArgs:
    return rv1.DeviceRequestArgs(name=name, exactly=rv1.ExactDeviceRequestArgs(
        device_class_name=device_class, allocation_mode="ExactCount", count=count,
        selectors=[rv1.DeviceSelectorArgs(cel=rv1.CELDeviceSelectorArgs(expression=e)) for e in expressions] or None,
    ))


def devices_claim(sku: Sku, nics: bool) -> rv1.DeviceClaimArgs:
    """One worker's devices. Without `nics`: every GPU of the node (the HCAs come from a device plugin).
    With them: per group of `groups(sku)` a request for its GPUs by PCI address and one for its HCAs by
    PCI address (so each rank's GPU gets the HCA NCCL pairs it with), and a constraint that every HCA
    shares one `azure.dra.net/placementGroupId` (VMs in different placement groups share no fabric)."""
    if not nics:
        return rv1.DeviceClaimArgs(requests=[_request("gpus", dra.GPU_DEVICE_CLASS, sku.gpus_per_vm)])
    found = groups(sku)
    if not found:
        raise ValueError(f"sku: {sku.vm_size} has no published GPU/HCA layout to pair claims by")
    requests, nic_names = [], []
    for i, g in enumerate(found):
        requests.append(_request(f"gpu-{i}", dra.GPU_DEVICE_CLASS, len(g.gpus), _one_of(dra.GPU_PCI_ATTRIBUTE, g.gpus)))
        requests.append(_request(f"nic-{i}", dra.NIC_DEVICE_CLASS, len(g.hcas),
                                 _one_of(dra.NIC_PCI_ATTRIBUTE, g.hcas), f"{dra.NIC_RDMA_ATTRIBUTE} == true"))
        nic_names.append(f"nic-{i}")
    return rv1.DeviceClaimArgs(
        requests=requests,
        constraints=[rv1.DeviceConstraintArgs(requests=nic_names, match_attribute=dra.PLACEMENT_GROUP_ATTRIBUTE)],
    )


def compute_domain_spec() -> dict[str, Any]:
    """The ComputeDomain of the rack run: `numNodes` omitted (0, the CRD's recommendation, optional since
    v0.4.0); its driver creates the channel template `CHANNEL_TEMPLATE` in the same namespace."""
    return {"channel": {"resourceClaimTemplate": {"name": CHANNEL_TEMPLATE}}}


@dataclass(frozen=True)
class WorkerClaims:
    """What a worker references: its pod's claims, and its container's share of them (all)."""

    pod: list[k8s.core.v1.PodResourceClaimArgs]
    container: list[k8s.core.v1.ResourceClaimArgs]


def worker_claims(compute_domain: bool) -> WorkerClaims:
    pod = [k8s.core.v1.PodResourceClaimArgs(name=DEVICES_CLAIM, resource_claim_template_name=DEVICES_TEMPLATE)]
    if compute_domain:
        pod.append(k8s.core.v1.PodResourceClaimArgs(name=CHANNEL_CLAIM, resource_claim_template_name=CHANNEL_TEMPLATE))
    return WorkerClaims(pod=pod, container=[k8s.core.v1.ResourceClaimArgs(name=c.name) for c in pod])


def declare(name: str, parent: pulumi.Resource, namespace: pulumi.Input[str], *, sku: Sku, nics: bool,
            compute_domain: bool, wait_for: Sequence[pulumi.Resource] = ()) -> list[pulumi.Resource]:
    """Declare `{name}-devices` (and `{name}-compute-domain`) in `namespace`, as children of `parent`:
    what the Job waits for. They depend on `wait_for` (the DRA driver's and DRANET's releases among it):
    created after the controller that serves their CRD and DeviceClasses, and destroyed before it, so the
    ComputeDomain's finalizer is removed by a running controller instead of hanging the namespace."""
    opts = pulumi.ResourceOptions(parent=parent, depends_on=list(wait_for))
    declared: list[pulumi.Resource] = [rv1.ResourceClaimTemplate(
        f"{name}-devices",
        rv1.ResourceClaimTemplateInitArgs(
            metadata=meta.ObjectMetaArgs(name=DEVICES_TEMPLATE, namespace=namespace),
            spec=rv1.ResourceClaimTemplateSpecArgs(spec=rv1.ResourceClaimSpecArgs(devices=devices_claim(sku, nics))),
        ),
        opts=opts,
    )]
    if compute_domain:
        declared.append(k8s.apiextensions.CustomResource(
            f"{name}-compute-domain",
            api_version=COMPUTE_DOMAIN_API_VERSION,
            kind="ComputeDomain",
            metadata=meta.ObjectMetaArgs(name=COMPUTE_DOMAIN, namespace=namespace),
            spec=compute_domain_spec(),
            opts=opts,
        ))
    return declared
