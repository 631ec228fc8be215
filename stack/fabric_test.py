"""The fabric test and its verdict: rows 8-10 of the design. The test image pulled ahead on each IB node,
the job of the size's kind (`JOBS`, one record per kind of core/kinds.py: the NCCL all-reduce on GPU
sizes, stack/all_reduce.py, judged in GB/s busbw; MPI point to point between two CPU-only HB / HX nodes,
stack/p2p.py, judged in Gb/s), the certifier (the same verify code in the cluster: it judges the test for
`pulumi up`, holds new nodes until they pass, re-certifies idle ones on a schedule) and the day-0 check,
whose certify Job the Kubernetes provider awaits for `pulumi up`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from components.fabric.certifier import Certifier, CertifierArgs, RackAccess
from components.fabric.fabric_check import FabricCheck, FabricCheckArgs
from components.fabric.fabric_test import FabricTestJob
from components.fabric.image_prepull import ImagePrepull, ImagePrepullArgs
from core import kinds
from stack import all_reduce, p2p
from stack.handoff import ClusterHandle
from stack.operators import Operators
from stack_config import StackConfig


@dataclass(frozen=True)
class KindJob:
    """How the stack runs one fabric-test kind: the job it declares, and what of that job the certifier's
    recurring runs and admission loop re-run (None: the kind has none, and no schedule)."""

    declare: Callable[[StackConfig, ClusterHandle, Operators, pulumi.ResourceOptions], FabricTestJob]
    retest: Callable[[Any], Mapping[str, Any] | None]


JOBS: dict[str, KindJob] = {
    kinds.NCCL: KindJob(declare=all_reduce.declare, retest=all_reduce.retest),
    kinds.P2P: KindJob(declare=p2p.declare, retest=p2p.retest),
}


def job_of(kind: kinds.Kind) -> KindJob:
    """The job of `kind`; a ValueError for a kind that no job runs."""
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
    kind_job = job_of(ft.kind)
    # The test image, pulled on each IB node as it joins, while the drivers install: waits for
    # nothing but the cluster, so the job's pods find it there (components/fabric/image_prepull.py).
    ImagePrepull("fabric-test-prepull", ImagePrepullArgs(image=ft.image), opts=opts)
    job = kind_job.declare(cfg, cluster, ops, opts)
    retest = kind_job.retest(job)
    ce = cfg.certifier
    certifier = Certifier(
        "certifier",
        CertifierArgs(
            fabric_namespace=job.namespace_name, image=ce.image, mode=ce.mode,
            # recurring runs re-run the kind's retest (the all-reduce with its doctor); without one, none
            schedule=ce.schedule if retest is not None else "off",
            max_quarantine_share=ce.max_quarantine_percent / 100, history_size=ce.history_size,
            pushgateway_url=ce.pushgateway_url, wait_for=[job.namespace],  # its Role lives there
            retest=retest, rack=rack,
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
        ),
        opts=opts,
    )
    return FabricTest(job=job, certifier=certifier, check=check)
