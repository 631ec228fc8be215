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
    ib_pool: IbNodePool

    def cost_per_hour(self, cfg: StackConfig) -> pulumi.Output[dict]:
        """The VMs' estimated cost an hour at the pool's node count (as of the last `pulumi up` or
        `pulumi refresh`: the autoscaler changes it in between) and when the pool is idle at its minimum."""
        system = ("systemPool", (cfg.system_pool.vm_size, cfg.system_pool.node_count))
        idle = cfg.ib_pool.min_node_count if cfg.ib_pool.min_node_count is not None else cfg.ib_pool.node_count

        def estimate(nodes: int | None) -> dict:
            now = prices.cost_per_hour(dict([("ibPool", (cfg.sku.vm_size, int(nodes or 0))), system]))
            at_idle = prices.cost_per_hour(dict([("ibPool", (cfg.sku.vm_size, idle)), system]))
            return {**now, "ibNodes": int(nodes or 0), "idleIbNodes": idle, "idleTotalUsd": at_idle["totalUsd"]}

        return self.ib_pool.agent_pool.count.apply(estimate)

    @property
    def handle(self) -> ClusterHandle:
        return ClusterHandle(provider=self.cluster.provider, resource_group_name=self.cluster.resource_group.name,
                             cluster_name=self.cluster.managed_cluster.name, pool=[self.ib_pool.agent_pool])


def declare(cfg: StackConfig) -> AzureHalf:
    sku = cfg.sku
    # 1. The AKSInfinibandSupport feature on the subscription Pulumi deploys to: registered and waited
    # for, or, on sizes that must not have it (GB200), checked to be absent.
    feature = FeatureRegistration(
        "ib-feature",
        FeatureRegistrationArgs(
            subscription_id=azure_native.authorization.get_client_config_output().subscription_id,
            timeout_minutes=cfg.feature_wait_timeout_minutes,
            ib_feature=sku.ib_feature,
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

    # 3. The InfiniBand pool, only after the feature is Registered (not merely requested).
    ib_pool = IbNodePool(
        "ib",
        IbNodePoolArgs(
            resource_group_name=cluster.resource_group.name,
            cluster_name=cluster.managed_cluster.name,
            pool_name=cfg.ib_pool.name,
            sku=sku,
            node_count=cfg.ib_pool.node_count,
            os_disk_size_gb=cfg.ib_pool.os_disk_size_gb,
            kubernetes_version=cfg.kubernetes_version,
            tags=cfg.tags,
            protect=cfg.protect,
            wait_for=[feature.step],
            vnet_subnet_id=cfg.network.ib_subnet_id,
            min_node_count=cfg.ib_pool.min_node_count,
        ),
    )
    return AzureHalf(feature=feature, cluster=cluster, ib_pool=ib_pool)
