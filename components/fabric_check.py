"""Row 9: the in-stack collect step. Waits for the fabric test job, parses the launcher's log and
turns the verdict into stack outputs; with `fail_on_low_bandwidth`, a FAIL (or, with `fail_on="warn"`,
anything but PASS) fails `pulumi up`.

Both fabric tests go through it: it takes the job (`fabric_test.FabricTestJob`: `NcclJob` or
`P2pJob`), whose `kind` says how the log is judged, in which unit, and which stack outputs the
result gives (`core.kinds.Kind`). The kind is on the command line as `--kind p2p` (nccl is the
collector's default, so the GPU command is unchanged).

The step is a `pulumi_command.local.Command` that runs `<python> -m verify collect ... --json` from
the project directory, with the interpreter that runs the program (`python_command`), named
relative to the project: an absolute path would differ between checkouts and show as a diff in
every other user's preview. No kubeconfig is among its inputs: the command line
names the cluster (`--aks-resource-group RG --aks-cluster NAME --subscription ID`, stable and not
secret) and the collector fetches the credentials itself with `az aks get-credentials --file -`.
A Command with no `update` re-runs its create command whenever an input differs; the kubeconfig,
read afresh on every run, differs after any credential or certificate rotation, and a re-run after
the job's 24 h TTL would fail or block `pulumi up`. With stable inputs only the trigger (the job's
spec hash) re-runs it, and a second `pulumi up` changes nothing. Progress goes to stderr, which
Pulumi shows; the result is the one JSON object on stdout (verify/result.py, its published schema),
read by `parse_result`. A run that did
not complete (`--incomplete-as-fail`) is such a result too: verdict FAIL, its diagnosis as reasons.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_azure_native as azure_native
import pulumi_command as command

from components.fabric_test import FabricTestJob, number_arg
from core.kinds import POINT_TO_POINT, Kind
from verify.collect import NODE_SETUP_BUDGET_MINUTES, AksCluster
from verify.result import FabricResult as VerifyResult
from verify.result import ResultError

PROJECT_DIR = Path(__file__).parent.parent  # lexically: a symlinked .venv stays inside it
# How long the collector waits. The job is created as soon as the pool and the operators' releases
# exist, but its pods start only once the nodes advertise GPUs and RDMA devices: the DOCA driver
# build, then the GPU driver container (it waits for the DOCA driver), the device plugins, and the
# test image's pull come first (NODE_SETUP_BUDGET_MINUTES, verify/collect.py, which also gives up
# once that much time has passed since the IB nodes became Ready and a resource is still missing).
# The pods' own deadline (activeDeadlineSeconds = timeoutMinutes, plus doctorMinutes when the fabric
# doctor may run: the job's deadline_minutes) starts only when they do. So the
# collector allows that setup, then the job's deadline, then a margin to report the job's real end
# (Terminated at its deadline) rather than "still running"; Pulumi's own timeout is longer still.
COLLECT_MARGIN_MINUTES = 5
PULUMI_MARGIN_MINUTES = 5
PENDING = "PENDING"


@dataclass(frozen=True)
class FabricCheckArgs:
    # Where the collector fetches credentials (az aks get-credentials): stable, non-secret names.
    resource_group_name: pulumi.Input[str]
    cluster_name: pulumi.Input[str]
    # The fabric test job to collect (NcclJob or P2pJob): which job, where, how it is judged, what it
    # spans; the collect step waits for it and re-runs exactly when it is replaced.
    job: FabricTestJob
    # The fail threshold in the unit of the job's kind (job.kind.unit: GB/s busbw for the all-reduce,
    # Gb/s for point to point); None: the catalog's for the size.
    threshold: float | None = None
    fail_on_low_bandwidth: bool = False
    fail_on: str = "fail"  # with fail_on_low_bandwidth, the verdict that fails `pulumi up` (verify.gate.LEVELS)
    # None: the subscription Pulumi deploys to (azure-native getClientConfig), so az never uses another
    subscription_id: pulumi.Input[str] | None = None
    @property
    def collect_timeout_minutes(self) -> int:
        return NODE_SETUP_BUDGET_MINUTES + self.job.deadline_minutes + COLLECT_MARGIN_MINUTES


def python_command(executable: str = sys.executable, project: Path = PROJECT_DIR) -> str:
    """The interpreter that runs this program (so pip, uv and poetry toolchains all work), as the
    collect command names it.

    The command line is an input of the Command, and a Command with no `update` re-runs its create
    command whenever an input differs: it must read the same in every checkout. An environment inside
    the project (Pulumi.yaml's `virtualenv: .venv`, uv's `.venv`, poetry with
    `virtualenvs.in-project`) is named relative to it, `.venv/bin/python` for everyone. One outside
    (poetry's default cache) can only be named absolutely, which differs between machines: there a
    preview by someone else shows the collect step as changed, and their `up` re-runs it."""
    path = Path(executable)
    try:
        return path.relative_to(project).as_posix()
    except ValueError:
        return path.as_posix()


def collect_command(args: FabricCheckArgs, cluster: AksCluster) -> str:
    """The command line: the job, how to judge it, and the cluster's coordinates (nothing secret)."""
    job = args.job
    p2p = job.kind is POINT_TO_POINT
    argv = [
        python_command(), "-m", "verify", "collect",
        *(["--kind", job.kind.name] if p2p else []),
        "--aks-resource-group", cluster.resource_group,
        "--aks-cluster", cluster.name,
        *(["--subscription", cluster.subscription] if cluster.subscription else []),
        "--namespace", job.namespace_name,
        "--job", job.job_name,
        "--sku", job.sku.vm_size,
        *([] if p2p else ["--nodes", str(job.node_count)]),  # p2p: always two nodes
        "--timeout-minutes", str(args.collect_timeout_minutes),
    ]
    if args.threshold is not None:
        argv += [job.kind.threshold_flag, number_arg(args.threshold)]
    if args.fail_on_low_bandwidth:  # the level `fail` keeps the flag it always had: no re-run of the step
        argv += ["--fail-on-low-bandwidth"] if args.fail_on == "fail" else ["--fail-on", args.fail_on]
    if job.sharp:  # which transport the run measured, recorded in the result
        argv.append("--sharp")
    if getattr(job, "rack_run", False):  # the rack's NVLink run: judged by the catalog's rack (MNNVL) figure
        argv.append("--rack")
    # A run that did not complete (the collector gave up, or timed out) is a FAIL whose reasons are
    # its diagnosis: reported in the outputs, and failing `pulumi up` only with failOnLowBandwidth,
    # as any FAIL. (Without the flag it would exit 2: the step fails and no output says why.)
    argv += ["--incomplete-as-fail", "--json"]
    return shlex.join(argv)


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
    # the fabric doctor's suspects, as `python -m verify` prints them: {host, hca, reason, evidence, verdict}
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


def parse_result(stdout: str | None) -> FabricResult:
    """The collect step's stdout -> the stack's result, read through the result type (verify/result.py,
    the published schema). Empty stdout (a preview, the offline mocks, or a step that has not run) is
    PENDING; anything the schema refuses is UNKNOWN, with the reason naming the key."""
    text = (stdout or "").strip()
    if not text:
        return FabricResult(verdict=PENDING, reasons=("the collect step has produced no result yet",))
    try:  # the collector prints one object (indented); a last line of JSON is read as well
        read = VerifyResult.loads(text if text.startswith("{") else text.splitlines()[-1])
    except ResultError as err:
        return FabricResult(verdict="UNKNOWN", reasons=(f"the collect step printed no fabric result: {err}",))
    if read.verdict is None:
        return FabricResult(verdict="UNKNOWN", reasons=(f"the collect step had no result: {read.error}",))
    return FabricResult.of(read)


class FabricCheck(pulumi.ComponentResource):
    """Collects the fabric test's result once `args.job` has been created.

    Outputs: `verdict`, `reasons`; nccl: `max_busbw_gbps`, `busbw_at_max_size_gbps`, `ranks`,
    `nccl_version`, `transport` (what NCCL used between the nodes, one line), `suspects` (the fabric
    doctor's named nodes / HCAs, [] when none); p2p: `bw_at_max_size_gbits`, `max_bw_gbits`,
    `latency_us`. Each says PENDING / None until a run has produced it.
    """

    collect: command.local.Command
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

    def __init__(self, name: str, args: FabricCheckArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:verify:FabricCheck", name, None, opts)
        subscription_id = (args.subscription_id if args.subscription_id is not None else
                           azure_native.authorization.get_client_config_output(
                               opts=pulumi.InvokeOptions(parent=self)).subscription_id)
        create = pulumi.Output.all(args.resource_group_name, args.cluster_name, subscription_id).apply(
            lambda v: collect_command(args, AksCluster(resource_group=v[0], name=v[1], subscription=v[2] or None)))
        self.collect = command.local.Command(
            f"{name}-collect",
            command.local.CommandArgs(
                create=create,
                # no environment: the collector fetches the kubeconfig itself (module docstring)
                # a new job (its spec hash) is a new run to collect; nothing else re-runs it
                triggers=[args.job.spec_sha256],
                # progress (stderr) is shown during `pulumi up`; the JSON result (stdout) is captured
                logging=command.local.Logging.STDERR,
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[args.job.job],
                custom_timeouts=pulumi.CustomTimeouts(
                    create=f"{args.collect_timeout_minutes + PULUMI_MARGIN_MINUTES}m"
                ),
            ),
        )
        self.result = self.collect.stdout.apply(parse_result)
        self.verdict = self.result.apply(lambda r: r.verdict)
        self.max_busbw_gbps = self.result.apply(lambda r: r.max_busbw_gbps)
        self.busbw_at_max_size_gbps = self.result.apply(lambda r: r.busbw_at_max_size_gbps)
        job = args.job
        self.ranks = self.result.apply(
            lambda r: f"not counted: point to point, one rank on each of {job.node_count} nodes"
            if job.kind is POINT_TO_POINT else r.ranks_text(job.node_count, job.sku.gpus_per_vm)
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
        self.register_outputs({"verdict": self.verdict,
                               **{attr: getattr(self, attr) for _, attr in job.kind.stack_outputs}})

    def stack_outputs(self) -> dict[str, pulumi.Output[Any]]:
        """The stack outputs of this kind of result, by export name (listed in docs/fabric-test.md)."""
        figures = {export: getattr(self, attr) for export, attr in self.kind.stack_outputs}
        return {"fabricVerdict": self.verdict, **figures, "fabricVerdictReasons": self.reasons}
