"""Row 3: the InfiniBand node pool."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_azure_native as azure_native

from core import fabric
from core.catalog import Sku

cs = azure_native.containerservice

# ND-series pools take 10-20 minutes on a good day; capacity retries take longer.
CREATE_TIMEOUT = "90m"


@dataclass(frozen=True)
class IbNodePoolArgs:
    resource_group_name: pulumi.Input[str]
    cluster_name: pulumi.Input[str]
    pool_name: str
    sku: Sku
    node_count: int
    os_disk_size_gb: int
    kubernetes_version: str
    tags: Mapping[str, str]
    protect: bool
    # What must finish before the pool is created: the AKSInfinibandSupport wait, so that the VMs
    # land on one InfiniBand fabric. Passed to the AgentPool itself (a component's depends_on is
    # not inherited by its children).
    wait_for: Sequence[pulumi.Resource] = ()
    vnet_subnet_id: str | None = None  # an existing subnet (the system pool's VNet); None: AKS's VNet
    # Set: the AKS cluster autoscaler runs the pool between this and node_count; 0 lets it go idle.
    min_node_count: int | None = None
    # One of several pools: its name, as its nodes' Volcano node group (core/fabric.py node_group_labels)
    node_group: str | None = None
    # The component's name while the pool was the stack's only one (ibPools.<name>.movedFromIbPool): the pool
    # and its AgentPool answer to it, so adding pools renames them in Pulumi's state and the AgentPool (same
    # agentPoolName) is updated in place, not replaced.
    former_name: str | None = None


def autoscale(args: IbNodePoolArgs) -> dict[str, object]:
    """The AgentPool's scaling inputs. Autoscaled pools start at node_count (the day-0 fabric test needs
    every node) and the autoscaler removes idle nodes; nodes that come back are held by the certifier's
    admission loop until certified again (docs/fabric-certifier.md)."""
    if args.min_node_count is None:
        return {"enable_auto_scaling": False}
    return {"enable_auto_scaling": True, "min_count": args.min_node_count, "max_count": args.node_count}


def pool_taints(args: IbNodePoolArgs) -> list[str]:
    """The pool taint only. The certifier's hold is not a pool taint: AKS refuses changes to pool-set
    taints through the Kubernetes API, so it could never be lifted; the admission loop puts it on each new
    boot through the API instead (clusterside/certify_admit.py, docs/fabric-certifier.md)."""
    return [fabric.IB_TAINT]


def pool_labels(sku: Sku, node_group: str | None = None) -> dict[str, str]:
    """Labels on every node of the pool: its role (what the job's node selector matches) and size, and with
    several pools its Volcano node group (what its queue's affinity names). Not the DRA kubelet plugin's label:
    the GPU Operator's driver manager rewrites it on every driver restart, which AKS refuses for a pool-set
    label; the topology labeler puts it on through the API instead."""
    return {
        fabric.IB_POOL_ROLE_LABEL: fabric.IB_POOL_ROLE,
        "aks-infiniband.io/vm-size": sku.vm_size,
        "aks-infiniband.io/ib-generation": sku.ib_generation,
        **fabric.node_group_labels(node_group),
    }


def former(args: IbNodePoolArgs, role: str) -> list[pulumi.Alias] | None:
    """The alias of the pool's resource `{name}{role}` under its former name. It names only what differs: the
    type and the parent's type (the parent's name is not in a URN) are the same."""
    return [pulumi.Alias(name=f"{args.former_name}{role}")] if args.former_name else None


class IbNodePool(pulumi.ComponentResource):
    """An `AgentPool` of an InfiniBand VM size from the catalog.

    - mode User, Ubuntu, no public IPs;
    - on GPU sizes `gpuProfile.driver = None`: the GPU Operator installs the driver (with
      GPUDirect RDMA support), and this cannot be changed once the pool exists;
    - the taint `fabric.IB_TAINT` keeps ordinary pods off; every DaemonSet that must run here
      and the fabric test job tolerate it;
    - created only after `args.wait_for` (the AKSInfinibandSupport wait), so the VMs land on one
      InfiniBand fabric.
    """

    agent_pool: cs.AgentPool
    resource_id: pulumi.Output[str]

    def __init__(self, name: str, args: IbNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:azure:IbNodePool", name, None,
                         pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=former(args, ""))))
        sku = args.sku
        self.agent_pool = cs.AgentPool(
            f"{name}-pool",
            # keyword form: the typed Args class clashes with the resource-name parameter (both resource_name)
            resource_group_name=args.resource_group_name,
            resource_name_=args.cluster_name,
            agent_pool_name=args.pool_name,
            mode=cs.AgentPoolMode.USER,
            vm_size=sku.vm_size,
            count=args.node_count,
            orchestrator_version=args.kubernetes_version,
            os_type=cs.OSType.LINUX,
            # `Ubuntu` on every size: 24.04 from Kubernetes 1.35, which the config requires where 24.04 is
            # (GB200/GB300, DRANET's NRI); `Ubuntu2404` is not in the 2025-09-01 API (core/dra.py).
            os_sku=cs.OSSKU.UBUNTU,
            os_disk_size_gb=args.os_disk_size_gb,
            type=cs.AgentPoolType.VIRTUAL_MACHINE_SCALE_SETS,
            enable_node_public_ip=False,
            vnet_subnet_id=args.vnet_subnet_id,
            **autoscale(args),
            node_taints=pool_taints(args),
            node_labels=pool_labels(sku, args.node_group),
            # Only `driver`: AKS's managed GPU experience (gpuProfile.nvidia.managementMode, preview,
            # default Unmanaged) would install AKS's own driver, device plugin and DCGM exporter next
            # to the GPU Operator's. The pinned SDK cannot set it; the policy pack refuses Managed.
            gpu_profile=cs.GPUProfileArgs(driver=cs.GPUDriver.NONE) if sku.has_gpus else None,
            tags=dict(args.tags),
            opts=pulumi.ResourceOptions(
                parent=self,
                aliases=former(args, "-pool"),
                protect=args.protect,
                depends_on=list(args.wait_for),
                custom_timeouts=pulumi.CustomTimeouts(create=CREATE_TIMEOUT, update=CREATE_TIMEOUT),
                # The autoscaler owns the node count: `pulumi up` must not reset it to node_count.
                ignore_changes=["count"] if args.min_node_count is not None else None,
            ),
        )
        self.resource_id = self.agent_pool.id
        self.register_outputs({"name": self.agent_pool.name, "resource_id": self.resource_id})
