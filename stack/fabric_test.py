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

from components.fabric import mpi_job
from components.fabric.certifier import Certifier, CertifierArgs, PoolCertification, RackAccess
from components.fabric.fabric_check import FabricCheck, FabricCheckArgs
from components.fabric.fabric_test import FabricTestJob
from components.fabric.image_prepull import ImagePrepull, ImagePrepullArgs
from components.fabric.nccl_job import NcclJob, NcclJobArgs
from components.fabric.p2p_job import P2pJob, P2pJobArgs
from core import dra, kinds
from stack.handoff import ClusterHandle
from stack.operators import Operators
from stack_config import IbPool, StackConfig, cron

# A kind's job from the typed configuration and the pool it tests, what it waits for (the pool and the platform:
# `Operators.ready`) and the driver versions it records. Each builder maps the pool's configuration onto its
# job's Args, nothing more. One pool keeps the names it always had; each of several runs in its own namespace,
# on its own nodes (`IbPool.named`, the agent pool's label), since each pool is its own fabric.
JobBuilder = Callable[[StackConfig, IbPool, Sequence[pulumi.Resource], dict[str, str], pulumi.ResourceOptions],
                      FabricTestJob]


def all_reduce_job(cfg: StackConfig, pool: IbPool, wait_for: Sequence[pulumi.Resource],
                   driver_versions: dict[str, str], opts: pulumi.ResourceOptions) -> NcclJob:
    """The NCCL all-reduce across every GPU node of the pool (components/fabric/nccl_job.py)."""
    ft = pool.fabric_test
    return NcclJob(
        pool.named("fabric-test"),
        NcclJobArgs(
            sku=pool.sku, node_count=pool.node_count, rdma_mode=cfg.rdma_mode, image=ft.image,
            all_reduce_args=ft.all_reduce_args, timeout_minutes=ft.timeout_minutes, doctor=ft.doctor,
            doctor_minutes=ft.doctor_minutes, threshold_gbps=ft.threshold_gbps, sharp=ft.sharp,
            topology_file=ft.topology_file, wait_for=wait_for, driver_versions=driver_versions,
            rdma_driver=pool.rdma_driver,
            namespace_name=pool.named(mpi_job.NAMESPACE), agent_pool=None if pool.alone else pool.name,
        ),
        opts=opts,
    )


def point_to_point_job(cfg: StackConfig, pool: IbPool, wait_for: Sequence[pulumi.Resource],
                       driver_versions: dict[str, str], opts: pulumi.ResourceOptions) -> P2pJob:
    """MPI point to point between two nodes of the pool: osu_bw, osu_latency (components/fabric/p2p_job.py)."""
    ft = pool.fabric_test
    return P2pJob(
        pool.named("fabric-test-p2p"),
        P2pJobArgs(sku=pool.sku, rdma_mode=cfg.rdma_mode, image=ft.image, timeout_minutes=ft.timeout_minutes,
                   wait_for=wait_for, driver_versions=driver_versions,
                   namespace_name=pool.named(mpi_job.NAMESPACE), agent_pool=None if pool.alone else pool.name),
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
    jobs: dict[str, FabricTestJob]  # by pool name
    certifier: Certifier
    checks: dict[str, FabricCheck]  # each pool's day-0 verdict, by pool name: the stack's fabric outputs

    @property
    def job(self) -> FabricTestJob:
        """The one pool's job (a stack of one pool)."""
        (job,) = self.jobs.values()
        return job

    @property
    def check(self) -> FabricCheck:
        """The one pool's verdict (a stack of one pool)."""
        (check,) = self.checks.values()
        return check


def declare(cfg: StackConfig, cluster: ClusterHandle, ops: Operators, opts: pulumi.ResourceOptions,
            rack: RackAccess | None = None) -> FabricTest:
    """`rack`: the GB200/GB300 rack's NVLink run, which the certifier judges too (stack/rack.py)."""
    # The test image, pulled on each IB node as it joins, while the drivers install: waits for
    # nothing but the cluster, so the job's pods find it there (components/fabric/image_prepull.py).
    # One image for every pool (fabricTest.image is the stack's).
    ImagePrepull("fabric-test-prepull", ImagePrepullArgs(image=cfg.ib_pools[0].fabric_test.image), opts=opts)
    jobs: dict[str, FabricTestJob] = {}
    for pool in cfg.ib_pools:
        ft = pool.fabric_test
        job = job_of(ft.kind)(cfg, pool, [*cluster.pool(pool.name), *ops.ready], ops.driver_versions, opts)
        if (job.retest is not None) != ft.kind.retests:  # the config's admission rules read the record
            raise ValueError(f"fabricTest: the {ft.kind.name!r} job's retest disagrees with its record's retests "
                             f"({ft.kind.retests}): core/kinds.py and its job component must agree")
        jobs[pool.name] = job
    ce = cfg.certifier
    several = [PoolCertification(pool=name, fabric_namespace=job.namespace_name, retest=job.retest)
               for name, job in jobs.items()] if len(jobs) > 1 else []
    first = next(iter(jobs.values()))
    certifier = Certifier(
        "certifier",
        CertifierArgs(
            fabric_namespace=first.namespace_name, image=ce.image, mode=ce.mode,
            # recurring runs re-run the job's retest (the all-reduce with its doctor); a kind without one, none
            schedule=ce.schedule if any(j.retest is not None for j in jobs.values()) else "off",
            max_quarantine_share=ce.max_quarantine_percent / 100, history_size=ce.history_size,
            pushgateway_url=ce.pushgateway_url, peer_wait_minutes=ce.peer_wait_minutes,
            wait_for=[j.namespace for j in jobs.values()],  # its Roles live there
            retest=first.retest, rack=rack, pools=several,
            # the GPUs are DRA devices: the same for every pool (stack_config/pools.py)
            dra_gpus=dra.needs(cfg.ib_pools[0].sku, cfg.rdma_mode) is not None,
            # alerts: the rules wait two of the schedule's longest gaps for a missing run
            alerts_period_seconds=(cron.longest_gap_seconds(ce.schedule) if ce.schedule != "off" else 0)
            if cfg.alerts.enabled else None,
        ),
        opts=opts,
    )
    checks = {
        pool.name: FabricCheck(
            pool.named("fabric-check"),
            FabricCheckArgs(
                job=jobs[pool.name],
                certifier=certifier,
                threshold=pool.fabric_test.threshold,  # in the kind's unit; the config allows only that one
                fail_on_low_bandwidth=pool.fabric_test.fail_on_low_bandwidth,
                fail_on=pool.fabric_test.fail_on,
                pool=None if pool.alone else pool.name,
                rdma_driver=pool.rdma_driver,
            ),
            opts=opts,
        )
        for pool in cfg.ib_pools
    }
    for pool in cfg.ib_pools:  # each pool's admission loop starts once its day 0 has judged its nodes
        certifier.admit_after([checks[pool.name].certify], None if pool.alone else pool.name)
    return FabricTest(jobs=jobs, certifier=certifier, checks=checks)
