"""Row 9: the day-0 verdict, judged in the cluster. A `batch/v1` Job runs the project's own certifier
(`python -m verify certify`, components/fabric/certifier.py's pod) against the fabric test job: it waits for the
job, judges its log as `python -m verify collect` does (verify/readers.py), certifies or quarantines the
nodes it ran on, and writes the typed result (verify/result.py) and its decisions into the result
ConfigMap. `pulumi up` waits through the Kubernetes provider's own await of that Job (until its
`Complete` condition; at once on `Failed`; `customTimeouts` lift the 10-minute default), not through a
process on the deployer's machine, and no `az` credentials are needed for it. The stack's outputs are
then one read of that ConfigMap (`ConfigMap.get`, seconds), parsed by `parse_result`.

Both fabric tests go through it: it takes the job (`fabric_test.FabricTestJob`: `NcclJob` or `P2pJob`),
whose `kind` says how the log is judged and which stack outputs the result gives (`core.kinds.Kind`).
With `fail_on_low_bandwidth`, a FAIL (or, with `fail_on="warn"`, anything but PASS) makes the certifier
exit 1: the Job fails, and so does `pulumi up`.
A run that did not complete (the Volcano job failed, or never finished within the Job's deadline) is a
FAIL with the reason, or a failed Job at the deadline.

The Job is named after its own spec (mpi_job.hashed_name), as the test's Volcano Job is: a Job's pod template
is immutable, so a changed one is a new Job. It is replaced (and the verdict re-judged) exactly when the test
job is (its name and hash are in the command), when the certifier's code changes (its hash is in the pod
template), or when its policy does; a re-run finds its earlier result for the same test job when that job has
passed its TTL (`--run-id`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from clusterside.certify_cli import CERTIFICATION_KEY, RESULT_KEY
from clusterside.collect import NODE_SETUP_BUDGET_MINUTES
from components.fabric import certifier as certifier_mod
from components.fabric import mpi_job
from components.fabric.certifier import Certifier
from components.fabric.fabric_test import FabricTestJob, number_arg
from core import rdma_drivers
from core.kinds import COLLECT_DEFAULT, Kind
from verify.result import FabricResult as VerifyResult
from verify.result import ResultError

# How long the certifier waits. The job is created as soon as the pool and the operators' releases
# exist, but its pods start only once the nodes advertise GPUs and RDMA devices: the DOCA driver
# build, then the GPU driver container (it waits for the DOCA driver), the device plugins, and the
# test image's pull come first (NODE_SETUP_BUDGET_MINUTES, clusterside/collect.py, which also gives up
# once that much time has passed since the IB nodes became Ready and a resource is still missing).
# The pods' own deadline (activeDeadlineSeconds = timeoutMinutes, plus doctorMinutes when the fabric
# doctor may run: the job's deadline_minutes) starts only when they do. So the
# certifier allows that setup, then the job's deadline, then a margin to report the job's real end
# (Terminated at its deadline) rather than "still running"; its Job's deadline and Pulumi's timeout are
# longer still.
COLLECT_MARGIN_MINUTES = 5
PULUMI_MARGIN_MINUTES = 5
PENDING = "PENDING"


@dataclass(frozen=True)
class FabricCheckArgs:
    # The fabric test job to judge (NcclJob or P2pJob): which job, where, how it is judged, what it
    # spans; the certifier's Job waits for it and is replaced exactly when it is.
    job: FabricTestJob
    # Where the certifier runs (its ServiceAccount, code, ConfigMaps) and its policy (mode, breaker).
    certifier: Certifier
    # The fail threshold in the unit of the job's kind (job.kind.unit: GB/s busbw for the all-reduce,
    # Gb/s for point to point); None: the catalog's for the size.
    threshold: float | None = None
    fail_on_low_bandwidth: bool = False
    fail_on: str = "fail"  # with fail_on_low_bandwidth, the verdict that fails `pulumi up` (core.choices.GATE_LEVELS)
    # what the certify Job waits for besides the job and the certifier (the rack run's Role: Certifier.rack_role)
    wait_for: Sequence[pulumi.Resource] = ()
    # The pool's RDMA driver stack (core/rdma_drivers.py): with DMA-BUF, PASS needs NCCL to show it on every HCA.
    rdma_driver: rdma_drivers.RdmaDriver = rdma_drivers.DOCA
    # a stack of several IB pools: the pool the job ran in, certified within itself (its result ConfigMap,
    # history, breaker: certifier.PoolCertification); None: the stack's one pool
    pool: str | None = None

    @property
    def collect_timeout_minutes(self) -> int:
        return NODE_SETUP_BUDGET_MINUTES + self.job.deadline_minutes + COLLECT_MARGIN_MINUTES


def result_configmap(job: FabricTestJob, pool: str | None = None) -> str:
    """The ConfigMap the certify run writes: the rack's NVLink run has its own, apart from the verdict's; each
    pool of several its own."""
    if job.rack_run:
        return certifier_mod.RACK_RESULT_CONFIGMAP
    return certifier_mod.RESULT_CONFIGMAP + (f"-{pool}" if pool else "")


def certify_argv(args: FabricCheckArgs) -> list[str]:
    """`python -m verify` arguments of the day-0 certifier: the job, how to judge it, the policy."""
    job = args.job
    argv = [
        "certify",
        # every kind but verify's default is named: a kind added later is never judged as the default
        *([] if job.kind.name == COLLECT_DEFAULT else ["--kind", job.kind.name]),
        "--namespace", job.namespace_name,
        "--job", job.job_name,
        "--sku", job.sku.vm_size,
        # a kind that spans the pool is told how many nodes; one of a fixed count (point to point) knows it
        *(["--nodes", str(job.node_count)] if job.kind.nodes is None else []),
        "--wait-minutes", str(args.collect_timeout_minutes),
        "--run-id", job.spec_sha256,
        "--result-configmap", result_configmap(job, args.pool),
        # the rack's NVLink run judges NVLink, not the fabric: it certifies, holds or quarantines no node
        *(["--mode", "off", "--certifier-namespace", certifier_mod.NAMESPACE] if job.rack_run
          else certifier_mod.policy_args(args.certifier.args, args.pool)),
    ]
    if args.threshold is not None:
        argv += [job.kind.threshold_flag, number_arg(args.threshold)]
    if args.fail_on_low_bandwidth:  # the level `fail` keeps the flag it always had: no re-run of the step
        argv += ["--fail-on-low-bandwidth"] if args.fail_on == "fail" else ["--fail-on", args.fail_on]
    if args.rdma_driver.name != rdma_drivers.DEFAULT:  # verify's default is the config's: named when not it
        argv += ["--rdma-driver", args.rdma_driver.name]
    if job.sharp:  # which transport the run measured, recorded in the result
        argv.append("--sharp")
    if job.rack_run:  # the rack's NVLink run: judged by the catalog's rack (MNNVL) figure
        argv.append("--rack")
    return [*argv, "--json"]


@dataclass(frozen=True)
class FabricResult:
    """What the stack reports, taken from the collector's result (`of`). Numbers are None until a run
    has produced them: never made up."""

    verdict: str
    max_busbw_gbps: float | None = None
    busbw_at_max_size_gbps: float | None = None
    max_size_bytes: int | None = None
    ranks: int | None = None
    hosts: int | None = None  # distinct host names in the log
    gpus_per_node: int | None = None
    nccl_version: str | None = None
    transport: str | None = None  # the result's transport.summary: "NET/IB GDRDMA, 8 HCAs per node"
    reasons: tuple[str, ...] = field(default_factory=tuple)
    # p2p: Gb/s and microseconds
    bw_at_max_size_gbits: float | None = None
    max_bw_gbits: float | None = None
    latency_us: float | None = None
    # the suspects as the certifier names them: {node, vm, host, hca, reason, evidence, verdict}
    suspects: tuple[dict[str, Any], ...] = ()

    @classmethod
    def of(cls, result: VerifyResult) -> FabricResult:
        """The stack's figures of a result, each from the field of the same name."""
        nccl, p2p = result.allreduce, result.p2p
        return cls(
            verdict=result.verdict or "UNKNOWN",
            reasons=result.reasons,
            max_busbw_gbps=nccl and nccl.max_busbw_gbps,
            busbw_at_max_size_gbps=nccl and nccl.busbw_at_max_size_gbps,
            max_size_bytes=result.figures.max_size_bytes if result.figures else None,
            ranks=nccl and nccl.ranks,
            hosts=len(set(nccl.hosts)) or None if nccl and nccl.hosts else None,
            gpus_per_node=nccl and nccl.gpus_per_node,
            nccl_version=nccl and nccl.nccl_version,
            transport=nccl.transport.summary if nccl and nccl.transport else None,
            bw_at_max_size_gbits=p2p and p2p.bw_at_max_size_gbits,
            max_bw_gbits=p2p and p2p.max_bw_gbits,
            latency_us=p2p and p2p.latency_us,
            suspects=tuple(s.to_json() for s in result.suspects),
        )

    def ranks_text(self, expected_nodes: int, gpus_per_node: int) -> str:
        expected = f"{expected_nodes} nodes x {gpus_per_node} GPUs = {expected_nodes * gpus_per_node} ranks"
        if self.ranks is None:
            return f"{PENDING.lower()} (expected {expected})"
        if self.hosts and self.gpus_per_node:
            return f"{self.hosts} nodes x {self.gpus_per_node} GPUs = {self.ranks} ranks"
        return f"{self.ranks} ranks (expected {expected})"


def parse_result(data: dict[str, str] | None) -> FabricResult:
    """The result ConfigMap's data -> the stack's result, read through the result type (verify/result.py,
    the published schema), with the suspects as the certifier named them (node, VM, host, HCA). No
    data (a preview, the offline mocks, or a certifier that has not written yet) is PENDING; anything
    the schema refuses is UNKNOWN, with the reason naming the key."""
    text = ((data or {}).get(RESULT_KEY) or "").strip()
    if not text:
        return FabricResult(verdict=PENDING, reasons=("the certifier has written no result yet",))
    try:
        read = VerifyResult.loads(text)
    except ResultError as err:
        return FabricResult(verdict="UNKNOWN", reasons=(f"the certifier's result is no fabric result: {err}",))
    if read.verdict is None:
        return FabricResult(verdict="UNKNOWN", reasons=(f"the certifier had no result: {read.error}",))
    result = FabricResult.of(read)
    try:
        certification = json.loads((data or {}).get(CERTIFICATION_KEY) or "{}")
    except ValueError:
        certification = {}
    named = certification.get("suspects") if isinstance(certification, dict) else None
    if isinstance(named, list) and all(isinstance(s, dict) for s in named):
        keys = ("node", "vm", "host", "hca", "reason", "evidence", "verdict")
        reasons = certification.get("reasons")
        result = dataclasses.replace(
            result, suspects=tuple({k: s.get(k) for k in keys} for s in named),
            reasons=tuple(map(str, reasons)) if isinstance(reasons, list) else result.reasons,
            verdict=str(certification.get("verdict") or result.verdict))
    return result


class FabricCheck(pulumi.ComponentResource):
    """Collects the fabric test's result once `args.job` has been created.

    Outputs: `verdict`, `reasons`; nccl: `max_busbw_gbps`, `busbw_at_max_size_gbps`, `ranks`,
    `nccl_version`, `transport` (what NCCL used between the nodes, one line), `suspects` (the fabric
    doctor's named nodes / HCAs, [] when none); p2p: `bw_at_max_size_gbits`, `max_bw_gbits`,
    `latency_us`. Each says PENDING / None until a run has produced it.
    """

    certify: k8s.batch.v1.Job
    read: k8s.core.v1.ConfigMap
    result: pulumi.Output[FabricResult]
    verdict: pulumi.Output[str]
    max_busbw_gbps: pulumi.Output[float | None]
    busbw_at_max_size_gbps: pulumi.Output[float | None]
    ranks: pulumi.Output[str]
    nccl_version: pulumi.Output[str]
    transport: pulumi.Output[str]
    sharp: pulumi.Output[bool]
    reasons: pulumi.Output[list[str]]
    bw_at_max_size_gbits: pulumi.Output[float | None]
    max_bw_gbits: pulumi.Output[float | None]
    latency_us: pulumi.Output[float | None]
    suspects: pulumi.Output[list[dict[str, Any]]]
    kind: Kind
    test_job: str  # <namespace>/<name> of the Volcano Job judged

    def __init__(self, name: str, args: FabricCheckArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:verify:FabricCheck", name, None, opts)
        cert, job = args.certifier, args.job
        spec = k8s.batch.v1.JobSpecArgs(
            backoff_limit=0,  # a verdict is not retried: a FAIL is the answer
            active_deadline_seconds=(args.collect_timeout_minutes + PULUMI_MARGIN_MINUTES) * 60,
            template=k8s.core.v1.PodTemplateSpecArgs(
                metadata=k8s.meta.v1.ObjectMetaArgs(labels=certifier_mod.LABELS),
                spec=certifier_mod.pod_spec(cert.args.image, certify_argv(args), cert.code_sha256, cert.files)),
        )
        self.certify = k8s.batch.v1.Job(
            f"{name}-certify",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=mpi_job.hashed_name("fabric-certify", {"namespace": certifier_mod.NAMESPACE,
                                                            "spec": mpi_job.plain(spec)}),
                namespace=cert.namespace.name,
                labels=certifier_mod.LABELS,
                # a failed verdict is re-judged by the next `up` (a new Job), not awaited again
                annotations={"pulumi.com/replaceUnready": "true"}),
            spec=spec,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[job.job, *cert.ready, *args.wait_for],
                delete_before_replace=True,  # one verdict at a time, for one result ConfigMap
                custom_timeouts=pulumi.CustomTimeouts(
                    create=f"{args.collect_timeout_minutes + 2 * PULUMI_MARGIN_MINUTES}m",
                    update=f"{args.collect_timeout_minutes + 2 * PULUMI_MARGIN_MINUTES}m"),
            ),
        )
        # One read once the Job has completed: its id is known only then (unknown in a first preview).
        self.read = k8s.core.v1.ConfigMap.get(
            f"{name}-result",
            self.certify.metadata.apply(lambda m: f"{m.namespace}/{result_configmap(job, args.pool)}"),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.certify]),
        )
        self.result = self.read.data.apply(parse_result)
        self.verdict = self.result.apply(lambda r: r.verdict)
        self.max_busbw_gbps = self.result.apply(lambda r: r.max_busbw_gbps)
        self.busbw_at_max_size_gbps = self.result.apply(lambda r: r.busbw_at_max_size_gbps)
        # one rank per GPU where the kind runs on GPUs (the all-reduce); otherwise one per node, not counted
        self.ranks = self.result.apply(
            lambda r: r.ranks_text(job.node_count, job.sku.gpus_per_vm) if job.kind.gpus
            else f"not counted: one rank on each of {job.node_count} nodes"
        )
        self.nccl_version = self.result.apply(
            lambda r: r.nccl_version or ("pending" if r.verdict == PENDING else "unknown (not in the log)")
        )
        self.transport = self.result.apply(
            lambda r: r.transport or ("pending" if r.verdict == PENDING else "unknown (no transport in the result)")
        )
        # which transport the figures measure: SHARP/CollNet, or NCCL's own IB (the thresholds' basis)
        self.sharp = pulumi.Output.from_input(job.sharp)
        self.reasons = self.result.apply(lambda r: list(r.reasons))
        self.bw_at_max_size_gbits = self.result.apply(lambda r: r.bw_at_max_size_gbits)
        self.max_bw_gbits = self.result.apply(lambda r: r.max_bw_gbits)
        self.latency_us = self.result.apply(lambda r: r.latency_us)
        self.suspects = self.result.apply(lambda r: [dict(s) for s in r.suspects])
        self.kind = job.kind
        # the Volcano Job the verdict judged, as kubectl names it: its name has its spec's hash (mpi_job.hashed_name)
        self.test_job = f"{job.namespace_name}/{job.job_name}"
        self.register_outputs({"verdict": self.verdict,
                               **{attr: getattr(self, attr) for _, attr in job.kind.stack_outputs}})

    def stack_outputs(self) -> dict[str, pulumi.Output[Any]]:
        """The stack outputs of this kind of result, by export name (listed in docs/fabric-test.md)."""
        figures = {export: getattr(self, attr) for export, attr in self.kind.stack_outputs}
        return {"fabricVerdict": self.verdict, **figures, "fabricVerdictReasons": self.reasons,
                "fabricTestJob": pulumi.Output.from_input(self.test_job)}
