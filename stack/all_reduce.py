"""The all-reduce fabric test (GPU sizes, core/kinds.py ALL_REDUCE): the NCCL all-reduce across every GPU
node (components/fabric/nccl_job.py), judged in GB/s of bus bandwidth. The job alone waits for everything."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from components.fabric.nccl_job import NcclJob, NcclJobArgs
from stack.handoff import ClusterHandle
from stack.operators import Operators
from stack_config import StackConfig


def wait_for(cluster: ClusterHandle, ops: Operators) -> list[pulumi.Resource]:
    """What an all-reduce job waits for: the pool, the NicClusterPolicy, the GPU Operator, Volcano's
    manifest and the DRA drivers (the rack's NVLink run too, stack/rack.py). GPU sizes, the all-reduce's
    (FabricTest.kind), always have the GPU Operator."""
    return [*cluster.pool, ops.network_operator.policy, ops.gpu_operator.release, ops.volcano.manifest, *ops.dra]


def driver_versions(ops: Operators) -> dict[str, str]:
    """The driver versions an all-reduce job records: the Network Operator's, the GPU Operator's, the DRA drivers'."""
    return {**ops.network_operator.driver_versions, **ops.gpu_operator.driver_versions, **ops.dra_versions}


def declare(cfg: StackConfig, cluster: ClusterHandle, ops: Operators, opts: pulumi.ResourceOptions) -> NcclJob:
    ft = cfg.fabric_test
    return NcclJob(
        "fabric-test",
        NcclJobArgs(
            sku=cfg.sku,
            node_count=cfg.ib_pool.node_count,
            rdma_mode=cfg.rdma_mode,
            image=ft.image,
            all_reduce_args=ft.all_reduce_args,
            timeout_minutes=ft.timeout_minutes,
            doctor=ft.doctor,
            doctor_minutes=ft.doctor_minutes,
            threshold_gbps=ft.threshold_gbps,
            sharp=ft.sharp,
            topology_file=ft.topology_file,
            wait_for=wait_for(cluster, ops),
            driver_versions=driver_versions(ops),
        ),
        opts=opts,
    )


def retest(job: NcclJob) -> Mapping[str, Any] | None:
    """What the certifier's recurring runs and admission loop re-run: the all-reduce with its doctor."""
    return job.retest
