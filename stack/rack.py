"""The GB200/GB300 rack's NVLink run: on a pool within one NVL72 rack, an all-reduce with MNNVL on, after
the IB-only verdict run (both take every GPU of the pool), judged by the catalog's rack figure and
reported beside the verdict (the `rack...` outputs), never in it: it certifies, holds or quarantines no node.

It is declared in two steps: its access, which the certifier's Args take (`RackRun.access`: the run's
namespace, where the certifier's `certifier-rack` Role reads its job and log), then, once the verdict's
certify Job exists, its job and check (`RackRun.declare`), which resolves the namespace the Role waits for."""

from __future__ import annotations

import pulumi

from components.fabric.certifier import RackAccess
from components.fabric.fabric_check import FabricCheck, FabricCheckArgs
from components.fabric.nccl_job import NcclJob, NcclJobArgs
from stack.fabric_test import FabricTest
from stack.handoff import ClusterHandle
from stack.operators import Operators
from stack_config import StackConfig

NAMESPACE = "fabric-test-rack"


def applies(cfg: StackConfig) -> bool:
    """Whether the stack runs it: the all-reduce on a multi-node-NVLink size whose pool fits in one rack (a stack
    of one pool: with several, no rack run yet)."""
    if len(cfg.ib_pools) != 1:
        return False
    sku = cfg.sku
    return (cfg.fabric_test.enabled and cfg.fabric_test.kind.rack_run and sku.has_mnnvl
            and cfg.ib_pool.node_count <= sku.mnnvl_rack_nodes)


class RackRun:
    """`access` goes into the certifier's Args; `declare` must follow in the same program, since the
    certifier's `certifier-rack` Role waits for the namespace it resolves."""

    def __init__(self) -> None:
        namespace, self._resolve_namespace = pulumi.deferred_output()
        self.access = RackAccess(namespace_name=NAMESPACE, namespace=namespace)

    def declare(self, cfg: StackConfig, cluster: ClusterHandle, ops: Operators, test: FabricTest,
                opts: pulumi.ResourceOptions) -> FabricCheck:
        """The run's job, after the verdict's certify Job, and its check (judged only, with --mode off: no
        threshold of fabricTest's, no gate; the outputs say the figure)."""
        ft = cfg.fabric_test
        job = NcclJob(
            "fabric-test-rack",
            NcclJobArgs(
                sku=cfg.sku, node_count=cfg.ib_pool.node_count, rdma_mode=cfg.rdma_mode, image=ft.image,
                all_reduce_args=ft.all_reduce_args, timeout_minutes=ft.timeout_minutes, sharp=False,
                topology_file=ft.topology_file, rack_run=True, namespace_name=NAMESPACE,
                # after the verdict's certify Job: both runs take every GPU of the pool
                job_name="nccl-allreduce-rack",
                wait_for=[*cluster.pool(cfg.ib_pool.name), *ops.ready, test.check.certify],
                driver_versions=ops.driver_versions,
            ),
            opts=opts,
        )
        self._resolve_namespace(pulumi.Output.from_input(job.namespace))
        return FabricCheck("fabric-check-rack", FabricCheckArgs(job=job, certifier=test.certifier,
                                                                wait_for=[test.certifier.rack_role]), opts=opts)
