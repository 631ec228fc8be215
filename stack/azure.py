"""The Azure half: rows 1-3 of the design (feature registration, cluster, InfiniBand pool)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_azure_native as azure_native

from components.platform.cluster import Cluster, ClusterArgs
from components.platform.feature_registration import FeatureRegistration, FeatureRegistrationArgs
from components.platform.ib_node_pool import IbNodePool, IbNodePoolArgs
from core import prices
from stack.handoff import ClusterHandle
from stack_config import StackConfig


@dataclass(frozen=True)
class AzureHalf:
    feature: FeatureRegistration
    cluster: Cluster
    ib_pools: dict[str, IbNodePool]  # by pool name, in the configuration's order

    @property
    def ib_pool(self) -> IbNodePool:
        """The stack's one pool (the single-pool outputs)."""
        (pool,) = self.ib_pools.values()
        return pool

    def cost_per_hour(self, cfg: StackConfig) -> pulumi.Output[dict]:
        """The VMs' estimated cost an hour at the pools' node counts (as of the last `pulumi up` or
        `pulumi refresh`: the autoscaler changes them in between) and when the pools are idle at their minimum.
        One pool is `ibPool`, as it always was; several are `ibPool:<name>` each, and `ibNodes` their sum."""
        system = ("systemPool", (cfg.system_pool.vm_size, cfg.system_pool.node_count))
        label = {p.name: "ibPool" if p.alone else f"ibPool:{p.name}" for p in cfg.ib_pools}
        idle = {p.name: p.min_node_count if p.min_node_count is not None else p.node_count for p in cfg.ib_pools}
        size = {p.name: p.sku.vm_size for p in cfg.ib_pools}

        def estimate(counts: list[int | None]) -> dict:
            nodes = {name: int(n or 0) for name, n in zip(self.ib_pools, counts, strict=True)}
            now = prices.cost_per_hour(dict([*((label[n], (size[n], c)) for n, c in nodes.items()), system]))
            at_idle = prices.cost_per_hour(dict([*((label[n], (size[n], c)) for n, c in idle.items()), system]))
            return {**now, "ibNodes": sum(nodes.values()), "idleIbNodes": sum(idle.values()),
                    "idleTotalUsd": at_idle["totalUsd"]}

        return pulumi.Output.all(*(p.agent_pool.count for p in self.ib_pools.values())).apply(estimate)

    @property
    def handle(self) -> ClusterHandle:
        return ClusterHandle(provider=self.cluster.provider, resource_group_name=self.cluster.resource_group.name,
                             cluster_name=self.cluster.managed_cluster.name,
                             pools={name: [p.agent_pool] for name, p in self.ib_pools.items()})


def declare(cfg: StackConfig) -> AzureHalf:
    # 1. The AKSInfinibandSupport feature on the subscription Pulumi deploys to: registered and waited
    # for, or, on sizes that must not have it (GB200), checked to be absent.
    feature = FeatureRegistration(
        "ib-feature",
        FeatureRegistrationArgs(
            subscription_id=azure_native.authorization.get_client_config_output().subscription_id,
            timeout_minutes=cfg.feature_wait_timeout_minutes,
            ib_feature=cfg.ib_pools[0].sku.ib_feature,  # the same for every pool (stack_config/pools.py)
        ),
    )

    # 2. The cluster and the one Kubernetes provider every later piece uses.
    cluster = Cluster(
        "cluster",
        ClusterArgs(
            resource_group_name=cfg.resource_group_name,
            cluster_name=cfg.cluster_name,
            location=cfg.location,
            kubernetes_version=cfg.kubernetes_version,
            system_pool_vm_size=cfg.system_pool.vm_size,
            system_pool_node_count=cfg.system_pool.node_count,
            tags=cfg.tags,
            protect=cfg.protect,
            api_server=cfg.api_server,
            entra_id=cfg.entra_id,
            identity=cfg.identity,
            network=cfg.network,
            production=cfg.production,
            kubernetes_provider=cfg.stack_part == "all",
        ),
    )

    # 3. The InfiniBand pools, each only after the feature is Registered (not merely requested). One pool keeps
    # the name `ib` (and its URNs); several are `ib-<pool name>`, each its own scale set and so its own fabric.
    ib_pools = {
        pool.name: IbNodePool(
            pool.named("ib"),
            IbNodePoolArgs(
                resource_group_name=cluster.resource_group.name,
                cluster_name=cluster.managed_cluster.name,
                pool_name=pool.name,
                sku=pool.sku,
                node_count=pool.node_count,
                os_disk_size_gb=pool.os_disk_size_gb,
                kubernetes_version=cfg.kubernetes_version,
                tags=cfg.tags,
                protect=cfg.protect,
                wait_for=[feature.step],
                vnet_subnet_id=pool.subnet_id,
                min_node_count=pool.min_node_count,
                node_group=None if pool.alone else pool.name,  # its Volcano queue's (volcano_pools.py)
                former_name=pool.former("ib"),  # movedFromIbPool: `ib`, the one-pool name
            ),
        )
        for pool in cfg.ib_pools
    }
    return AzureHalf(feature=feature, cluster=cluster, ib_pools=ib_pools)
