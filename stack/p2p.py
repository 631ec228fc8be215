"""The point-to-point fabric test (CPU-only HB / HX sizes, core/kinds.py POINT_TO_POINT): MPI point to
point between two nodes (osu_bw, osu_latency: components/fabric/p2p_job.py), judged in Gb/s of link bandwidth."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from components.fabric.p2p_job import P2pJob, P2pJobArgs
from stack.handoff import ClusterHandle
from stack.operators import Operators
from stack_config import StackConfig


def declare(cfg: StackConfig, cluster: ClusterHandle, ops: Operators, opts: pulumi.ResourceOptions) -> P2pJob:
    ft = cfg.fabric_test
    return P2pJob(
        "fabric-test-p2p",
        P2pJobArgs(
            sku=cfg.sku,
            rdma_mode=cfg.rdma_mode,
            image=ft.image,
            timeout_minutes=ft.timeout_minutes,
            wait_for=[*cluster.pool, ops.network_operator.policy, ops.volcano.manifest],
            driver_versions=ops.network_operator.driver_versions,
        ),
        opts=opts,
    )


def retest(job: P2pJob) -> Mapping[str, Any] | None:
    """None: the certifier has no recurring runs or admission loop here (a point-to-point test spans two
    nodes only)."""
    return None
