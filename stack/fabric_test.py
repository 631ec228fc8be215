"""The fabric test and its verdict: rows 8-10 of the design. The test image pulled ahead on each IB node,
the job of the size's kind (`JOBS`, one entry per kind of core/kinds.py: the NCCL all-reduce across every
GPU node on GPU sizes, judged in GB/s busbw; MPI point to point between two CPU-only HB / HX nodes, judged
in Gb/s), the certifier (the same verify code in the cluster: it judges the test for `pulumi up`, holds
new nodes until they pass, re-certifies idle ones on a schedule) and the day-0 check, whose certify Job
the Kubernetes provider awaits for `pulumi up`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pulumi

from components.fabric.certifier import Certifier, CertifierArgs, RackAccess
from components.fabric.fabric_check import FabricCheck, FabricCheckArgs
from components.fabric.fabric_test import FabricTestJob
from components.fabric.image_prepull import ImagePrepull, ImagePrepullArgs
from components.fabric.nccl_job import NcclJob, NcclJobArgs
from components.fabric.p2p_job import P2pJob, P2pJobArgs
from core import dra, kinds
from stack.handoff import ClusterHandle
from stack.operators import Operators
from stack_config import StackConfig, cron

# A kind's job from the typed configuration, what it waits for (the pool and the platform: `Operators.ready`)
# and the driver versions it records. Each builder maps the configuration onto its job's Args, nothing more.
JobBuilder = Callable[[StackConfig, Sequence[pulumi.Resource], dict[str, str], pulumi.ResourceOptions], FabricTestJob]


def all_reduce_job(cfg: StackConfig, wait_for: Sequence[pulumi.Resource], driver_versions: dict[str, str],
                   opts: pulumi.ResourceOptions) -> NcclJob:
    """The NCCL all-reduce across every GPU node (components/fabric/nccl_job.py)."""
    ft = cfg.fabric_test
    return NcclJob(
        "fabric-test",
        NcclJobArgs(
            sku=cfg.sku, node_count=cfg.ib_pool.node_count, rdma_mode=cfg.rdma_mode, image=ft.image,
            all_reduce_args=ft.all_reduce_args, timeout_minutes=ft.timeout_minutes, doctor=ft.doctor,
            doctor_minutes=ft.doctor_minutes, threshold_gbps=ft.threshold_gbps, sharp=ft.sharp,
            topology_file=ft.topology_file, wait_for=wait_for, driver_versions=driver_versions,
            rdma_driver=cfg.ib_pool.rdma_driver,
        ),
        opts=opts,
    )


def point_to_point_job(cfg: StackConfig, wait_for: Sequence[pulumi.Resource], driver_versions: dict[str, str],
                       opts: pulumi.ResourceOptions) -> P2pJob:
    """MPI point to point between two nodes: osu_bw, osu_latency (components/fabric/p2p_job.py)."""
    ft = cfg.fabric_test
    return P2pJob(
        "fabric-test-p2p",
        P2pJobArgs(sku=cfg.sku, rdma_mode=cfg.rdma_mode, image=ft.image, timeout_minutes=ft.timeout_minutes,
                   wait_for=wait_for, driver_versions=driver_versions),
        opts=opts,
    )


JOBS: dict[str, JobBuilder] = {kinds.NCCL: all_reduce_job, kinds.P2P: point_to_point_job}


def job_of(kind: kinds.Kind) -> JobBuilder:
    """The job builder of `kind`; a ValueError for a kind that no job runs."""
    try:
        return JOBS[kind.name]
    except KeyError:
        raise ValueError(f"fabricTest: no job runs the {kind.name!r} fabric test (core/kinds.py)") from None


@dataclass(frozen=True)
class FabricTest:
    job: FabricTestJob
    certifier: Certifier
    check: FabricCheck  # the day-0 verdict: the stack's fabric outputs


def declare(cfg: StackConfig, cluster: ClusterHandle, ops: Operators, opts: pulumi.ResourceOptions,
            rack: RackAccess | None = None) -> FabricTest:
    """`rack`: the GB200/GB300 rack's NVLink run, which the certifier judges too (stack/rack.py)."""
    ft = cfg.fabric_test
    build = job_of(ft.kind)
    # The test image, pulled on each IB node as it joins, while the drivers install: waits for
    # nothing but the cluster, so the job's pods find it there (components/fabric/image_prepull.py).
    ImagePrepull("fabric-test-prepull", ImagePrepullArgs(image=ft.image), opts=opts)
    job = build(cfg, [*cluster.pool, *ops.ready], ops.driver_versions, opts)
    retest = job.retest
    if (retest is not None) != ft.kind.retests:  # the config's admission rules read the record
        raise ValueError(f"fabricTest: the {ft.kind.name!r} job's retest disagrees with its record's retests "
                         f"({ft.kind.retests}): core/kinds.py and its job component must agree")
    ce = cfg.certifier
    certifier = Certifier(
        "certifier",
        CertifierArgs(
            fabric_namespace=job.namespace_name, image=ce.image, mode=ce.mode,
            # recurring runs re-run the job's retest (the all-reduce with its doctor); a kind without one, none
            schedule=ce.schedule if retest is not None else "off",
            max_quarantine_share=ce.max_quarantine_percent / 100, history_size=ce.history_size,
            pushgateway_url=ce.pushgateway_url, wait_for=[job.namespace],  # its Role lives there
            retest=retest, rack=rack, dra_gpus=dra.needs(cfg.sku, cfg.rdma_mode) is not None,
            # alerts: the rules wait two of the schedule's longest gaps for a missing run
            alerts_period_seconds=(cron.longest_gap_seconds(ce.schedule) if ce.schedule != "off" else 0)
            if cfg.alerts.enabled else None,
        ),
        opts=opts,
    )
    check = FabricCheck(
        "fabric-check",
        FabricCheckArgs(
            job=job,
            certifier=certifier,
            threshold=ft.threshold,  # in the kind's unit; the config allows only that one
            fail_on_low_bandwidth=ft.fail_on_low_bandwidth,
            fail_on=ft.fail_on,
            rdma_driver=cfg.ib_pool.rdma_driver,
        ),
        opts=opts,
    )
    certifier.admit_after([check.certify])  # the admission loop starts once day 0 has judged its nodes
    return FabricTest(job=job, certifier=certifier, check=check)
