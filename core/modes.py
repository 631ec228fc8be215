"""RDMA modes (`rdmaMode`): how a pod gets its node's InfiniBand HCAs, one record per mode.

The configuration looks the mode up by name once, at parse (stack_config: `StackConfig.rdma_mode` is
the record; the key's allowed values and description come from `MODES`), and every layer above takes
the record: the NicClusterPolicy (components/platform/network_operator.py: the device plugin the mode needs),
the fabric-test pods (components/fabric/nccl_job.py, p2p_job.py: what they request), the DRA rules
(core/dra.py). A name where a record belongs is refused there (`require`). The policy pack
(policy/rules.py) reads which resources count as RDMA from the records. Adding a mode is one
`RdmaMode` in `MODES`, plus the component that installs what the mode needs when no
NicClusterPolicy section does (docs/developing.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from core.catalog import Sku
from core.fabric import MELLANOX_PCI_VENDOR, RDMA_RESOURCE_PREFIX

# How many pods of one node may share its HCAs in `shared` mode (Azure's and upstream's value:
# Azure/aks-rdma-infiniband configs/nicclusterpolicy/base/nic.yaml).
RDMA_HCA_MAX = 63

# The InfiniBand ports of a Mellanox HCA, as both device plugins select them.
_IB_SELECTORS = {"vendors": [MELLANOX_PCI_VENDOR], "linkTypes": ["infiniband"]}


@dataclass(frozen=True)
class DevicePlugin:
    """An RDMA device plugin that the Network Operator deploys from a NicClusterPolicy section."""

    section: str  # the NicClusterPolicy spec key; also the `versions.<key>` that pins its image tag
    image: str  # under the operator's repository (nvcr.io/nvidia/mellanox)
    config: Mapping[str, Any]  # the plugin's own config, carried as JSON in the policy


@dataclass(frozen=True)
class RdmaRequest:
    resource: str  # e.g. "rdma/shared_ib"
    count: int  # per pod


@dataclass(frozen=True)
class RdmaMode:
    name: str  # the `rdmaMode` value
    description: str  # what a pod gets, for the configuration reference
    # The extended resource a pod that uses every HCA of its node requests, and how many of it;
    # None for a mode that hands the HCAs out some other way (a DRA claim).
    resource: str | None
    count: Callable[[Sku], int]
    # What advertises the resource; None when no NicClusterPolicy section does.
    device_plugin: DevicePlugin | None
    # The pod gets its HCAs and GPUs as DRA claims (DRANET, the NVIDIA DRA driver: core/dra.py), not
    # as device-plugin counts: the stack installs both drivers and the claims' templates.
    dra: bool = False

    def request(self, sku: Sku) -> RdmaRequest | None:
        """What one pod that uses every HCA of its node requests in this mode."""
        return RdmaRequest(self.resource, self.count(sku)) if self.resource else None

    def limits(self, sku: Sku) -> dict[str, str]:
        """The pod's extended-resource limits for the HCAs, in Kubernetes' quantity form."""
        request = self.request(sku)
        return {request.resource: str(request.count)} if request else {}


SHARED = RdmaMode(
    name="shared",
    description="rdma/shared_ib, one per pod",
    resource=f"{RDMA_RESOURCE_PREFIX}/shared_ib",
    count=lambda sku: 1,  # one unit of the shared resource exposes every HCA of the node
    device_plugin=DevicePlugin(
        section="rdmaSharedDevicePlugin",
        image="k8s-rdma-shared-dev-plugin",
        config={"configList": [{"resourcePrefix": RDMA_RESOURCE_PREFIX, "resourceName": "shared_ib",
                                "rdmaHcaMax": RDMA_HCA_MAX, "selectors": _IB_SELECTORS}]},
    ),
)
SRIOV = RdmaMode(
    name="sriov",
    description="rdma/ib, one per HCA",
    resource=f"{RDMA_RESOURCE_PREFIX}/ib",
    count=lambda sku: sku.ib_hcas_per_vm,  # each VF is its own resource: the whole fabric is all of them
    device_plugin=DevicePlugin(
        section="sriovDevicePlugin",
        image="sriov-network-device-plugin",
        # isRdma: the VF's RDMA device is mounted into the pod, not only its netdev.
        config={"resourceList": [{"resourcePrefix": RDMA_RESOURCE_PREFIX, "resourceName": "ib",
                                  "selectors": {**_IB_SELECTORS, "isRdma": True}}]},
    ),
)

DRA = RdmaMode(
    name="dra",
    description="DRA claims: DRANET for the HCAs and the NVIDIA DRA driver for the GPUs, each GPU with the HCA "
                "next to it, needs Kubernetes 1.34",
    resource=None,
    count=lambda sku: 0,  # no extended resource: the claim names the devices
    device_plugin=None,
    dra=True,
)

MODES: dict[str, RdmaMode] = {m.name: m for m in (SHARED, SRIOV, DRA)}
DEFAULT = SHARED.name


def names() -> tuple[str, ...]:
    return tuple(MODES)


def rdma_mode(name: str, key: str = "rdmaMode") -> RdmaMode:
    """The mode called `name`; a ValueError naming `key`, the value and the modes there are otherwise."""
    try:
        return MODES[name]
    except (KeyError, TypeError):
        raise ValueError(f"{key}: got {name!r}; expected one of {', '.join(MODES)}") from None


def require(value: object, key: str = "rdma_mode") -> RdmaMode:
    """`value` when it is a mode's record; a ValueError naming `key` otherwise (a name, even a known one,
    is looked up once, by the configuration, with `rdma_mode()`)."""
    if not isinstance(value, RdmaMode):
        raise ValueError(f"{key}: got {value!r}; expected a core.modes.RdmaMode record (rdma_mode(name), "
                         f"one of {', '.join(MODES)})")
    return value


def config_description() -> str:
    """The `rdmaMode` key's description in the configuration reference, from the records."""
    each = [f"`{m.name}` ({m.description})" for m in MODES.values()]
    return "How pods get the HCAs: " + (", ".join(each[:-1]) + " or " if len(each) > 1 else "") + each[-1] + "."


def extended_resources() -> tuple[str, ...]:
    """Every extended resource some mode's pods request for the HCAs, in the modes' order (what the
    policy pack accepts, and what verify's hints name)."""
    return tuple(m.resource for m in MODES.values() if m.resource)
