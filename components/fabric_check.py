"""Row 9: the in-stack collect step. Waits for the fabric test job, parses the launcher's log and
turns the verdict into stack outputs; with `fail_on_low_bandwidth`, a FAIL fails `pulumi up`.

Both fabric tests go through it: `kind` "nccl" (the all-reduce on GPU sizes, judged in GB/s busbw)
and "p2p" (osu_bw / osu_latency between two CPU-only HB / HX nodes, judged in Gb/s); the kind is on
the command line as `--kind p2p` (nccl is the collector's default, so the GPU command is unchanged).

The step is a `pulumi_command.local.Command` that runs `python -m verify collect ... --json` from
the project directory (relative paths only: an absolute path would differ between checkouts and
show as a diff in every other user's preview). No kubeconfig is among its inputs: the command line
names the cluster (`--aks-resource-group RG --aks-cluster NAME --subscription ID`, stable and not
secret) and the collector fetches the credentials itself with `az aks get-credentials --file -`.
A Command with no `update` re-runs its create command whenever an input differs; the kubeconfig,
read afresh on every run, differs after any credential or certificate rotation, and a re-run after
the job's 24 h TTL would fail or block `pulumi up`. With stable inputs only the trigger (the job's
spec hash) re-runs it, and a second `pulumi up` changes nothing. Progress goes to stderr, which
Pulumi shows; the result is the one JSON object on stdout, parsed by `parse_result`. A run that did
not complete (`--incomplete-as-fail`) is such a result too: verdict FAIL, its diagnosis as reasons.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_azure_native as azure_native
import pulumi_command as command

from verify import kinds
from verify.collect import NODE_SETUP_BUDGET_MINUTES, AksCluster

PYTHON = ".venv/bin/python"  # the project's virtualenv (Pulumi.yaml runtime.options.virtualenv)
# How long the collector waits. The job is created as soon as the pool and the operators' releases
# exist, but its pods start only once the nodes advertise GPUs and RDMA devices: the DOCA driver
# build, then the GPU driver container (it waits for the DOCA driver), the device plugins, and the
# test image's pull come first (NODE_SETUP_BUDGET_MINUTES, verify/collect.py, which also gives up
# once that much time has passed since the IB nodes became Ready and a resource is still missing).
# The pods' own deadline (activeDeadlineSeconds = timeoutMinutes) starts only when they do. So the
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
    namespace: str
    job_name: str
    vm_size: str
    node_count: int  # the nodes the job spans (the p2p job: always its 2 workers)
    gpus_per_node: int  # 0 for the p2p job
    timeout_minutes: int  # the job's deadline (fabricTest.timeoutMinutes, plus doctorMinutes when it may run)
    job_spec_sha256: str  # re-run the collection exactly when the job is replaced
    threshold_gbps: float | None = None  # nccl: GB/s busbw; None: the catalog's threshold for the size
    fail_on_low_bandwidth: bool = False
    # What the command waits for: the fabric test job. Passed to the Command itself (a
    # component's depends_on is not inherited by its children).
    wait_for: Sequence[pulumi.Resource] = ()
    kind: str = kinds.NCCL  # kinds.KINDS: which test the job runs, so how its log is judged
    threshold_gbits: float | None = None  # p2p: Gb/s at the largest message; None: the catalog's
    # None: the subscription Pulumi deploys to (azure-native getClientConfig), so az never uses another
    subscription_id: pulumi.Input[str] | None = None
    sharp: bool = False  # nccl: the job ran with SHARP (fabricTest.sharp); the result records which was measured

    def __post_init__(self) -> None:
        if self.kind not in kinds.KINDS:
            raise ValueError(f"kind: got {self.kind!r}; expected one of {', '.join(kinds.KINDS)}")
        if self.kind == kinds.P2P and (self.threshold_gbps is not None or self.gpus_per_node):
            raise ValueError(f"kind p2p: got threshold_gbps={self.threshold_gbps!r}, gpus_per_node="
                             f"{self.gpus_per_node}; a point-to-point test has no GPU and is judged in Gb/s "
                             f"(threshold_gbits)")
        if self.kind == kinds.P2P and self.sharp:
            raise ValueError("kind p2p: got sharp=True; SHARP is an NCCL all-reduce setting")
        if self.kind == kinds.NCCL and self.threshold_gbits is not None:
            raise ValueError(f"kind nccl: got threshold_gbits={self.threshold_gbits!r}; an all-reduce is judged "
                             f"in GB/s busbw (threshold_gbps)")

    @property
    def collect_timeout_minutes(self) -> int:
        return NODE_SETUP_BUDGET_MINUTES + self.timeout_minutes + COLLECT_MARGIN_MINUTES


def _number(n: float) -> str:
    return str(int(n)) if float(n).is_integer() else repr(float(n))


def collect_command(args: FabricCheckArgs, cluster: AksCluster) -> str:
    """The command line: the job, how to judge it, and the cluster's coordinates (nothing secret)."""
    p2p = args.kind == kinds.P2P
    argv = [
        PYTHON, "-m", "verify", "collect",
        *(["--kind", kinds.P2P] if p2p else []),
        "--aks-resource-group", cluster.resource_group,
        "--aks-cluster", cluster.name,
        *(["--subscription", cluster.subscription] if cluster.subscription else []),
        "--namespace", args.namespace,
        "--job", args.job_name,
        "--sku", args.vm_size,
        *([] if p2p else ["--nodes", str(args.node_count)]),  # p2p: always two nodes
        "--timeout-minutes", str(args.collect_timeout_minutes),
    ]
    if args.threshold_gbps is not None:
        argv += ["--threshold-gbps", _number(args.threshold_gbps)]
    if args.threshold_gbits is not None:
        argv += ["--threshold-gbits", _number(args.threshold_gbits)]
    if args.fail_on_low_bandwidth:
        argv.append("--fail-on-low-bandwidth")
    if args.sharp:
        argv.append("--sharp")
    # A run that did not complete (the collector gave up, or timed out) is a FAIL whose reasons are
    # its diagnosis: reported in the outputs, and failing `pulumi up` only with failOnLowBandwidth,
    # as any FAIL. (Without the flag it would exit 2: the step fails and no output says why.)
    argv += ["--incomplete-as-fail", "--json"]
    return shlex.join(argv)


@dataclass(frozen=True)
class FabricResult:
    """What the stack reports. Numbers are None until a run has produced them: never made up."""

    verdict: str
    max_busbw_gbps: float | None = None
    busbw_at_max_size_gbps: float | None = None
    max_size_bytes: int | None = None
    ranks: int | None = None
    hosts: int | None = None  # distinct host names in the log
    gpus_per_node: int | None = None
    nccl_version: str | None = None
    reasons: tuple[str, ...] = field(default_factory=tuple)
    # p2p (`python -m verify` JSON keys of the same names): Gb/s and microseconds
    bw_at_max_size_gbits: float | None = None
    max_bw_gbits: float | None = None
    latency_us: float | None = None
    # the fabric doctor's suspects, as `python -m verify` prints them: {host, hca, reason, evidence, verdict}
    suspects: tuple[dict[str, Any], ...] = ()

    def ranks_text(self, expected_nodes: int, gpus_per_node: int) -> str:
        expected = f"{expected_nodes} nodes x {gpus_per_node} GPUs = {expected_nodes * gpus_per_node} ranks"
        if self.ranks is None:
            return f"{PENDING.lower()} (expected {expected})"
        if self.hosts and self.gpus_per_node:
            return f"{self.hosts} nodes x {self.gpus_per_node} GPUs = {self.ranks} ranks"
        return f"{self.ranks} ranks (expected {expected})"


def _float(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _hosts(v: Any) -> int | None:
    """`hosts` is the list of host names the log shows (a count is accepted too)."""
    if isinstance(v, list):
        return len(set(map(str, v))) or None
    return _int(v)


def parse_result(stdout: str | None) -> FabricResult:
    """The collect step's stdout -> the stack's result. Empty stdout (a preview, the offline mocks,
    or a step that has not run) is PENDING; anything but a JSON object is UNKNOWN with the reason."""
    text = (stdout or "").strip()
    if not text:
        return FabricResult(verdict=PENDING, reasons=("the collect step has produced no result yet",))
    try:
        doc = json.loads(text.splitlines()[-1]) if not text.startswith("{") else json.loads(text)
    except json.JSONDecodeError as err:
        return FabricResult(verdict="UNKNOWN", reasons=(f"the collect step printed no JSON result ({err.msg})",))
    if not isinstance(doc, dict):
        return FabricResult(verdict="UNKNOWN", reasons=("the collect step printed JSON that is not an object",))
    reasons = doc.get("reasons") or ()
    return FabricResult(
        verdict=str(doc.get("verdict") or "UNKNOWN"),
        max_busbw_gbps=_float(doc.get("max_busbw_gbps")),
        busbw_at_max_size_gbps=_float(doc.get("busbw_at_max_size_gbps")),
        max_size_bytes=_int(doc.get("max_size_bytes")),
        ranks=_int(doc.get("ranks")),
        hosts=_hosts(doc.get("hosts")),
        gpus_per_node=_int(doc.get("gpus_per_node")),
        nccl_version=doc.get("nccl_version") if isinstance(doc.get("nccl_version"), str) else None,
        reasons=tuple(str(r) for r in reasons) if isinstance(reasons, (list, tuple)) else (str(reasons),),
        bw_at_max_size_gbits=_float(doc.get("bw_at_max_size_gbits")),
        max_bw_gbits=_float(doc.get("max_bw_gbits")),
        latency_us=_float(doc.get("latency_us")),
        suspects=_suspects(doc.get("suspects")),
    )


def _suspects(v: Any) -> tuple[dict[str, Any], ...]:
    """The suspects list, each entry with the keys the stack output promises (anything else dropped)."""
    if not isinstance(v, list):
        return ()
    keys = ("host", "hca", "reason", "evidence", "verdict")
    return tuple({k: s.get(k) for k in keys} for s in v if isinstance(s, dict) and isinstance(s.get("host"), str))


class FabricCheck(pulumi.ComponentResource):
    """Collects the fabric test's result once the job exists (pass the job in `args.wait_for`).

    Outputs: `verdict`, `reasons`; nccl: `max_busbw_gbps`, `busbw_at_max_size_gbps`, `ranks`,
    `nccl_version`, `suspects`; p2p: `bw_at_max_size_gbits`, `max_bw_gbits`, `latency_us`. Each says PENDING /
    None until a run has produced it.
    """

    collect: command.local.Command
    result: pulumi.Output[FabricResult]
    verdict: pulumi.Output[str]
    max_busbw_gbps: pulumi.Output[float | None]
    busbw_at_max_size_gbps: pulumi.Output[float | None]
    ranks: pulumi.Output[str]
    nccl_version: pulumi.Output[str]
    reasons: pulumi.Output[list[str]]
    bw_at_max_size_gbits: pulumi.Output[float | None]
    max_bw_gbits: pulumi.Output[float | None]
    latency_us: pulumi.Output[float | None]
    suspects: pulumi.Output[list[dict[str, Any]]]
    kind: str

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
                triggers=[args.job_spec_sha256],
                # progress (stderr) is shown during `pulumi up`; the JSON result (stdout) is captured
                logging=command.local.Logging.STDERR,
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=list(args.wait_for),
                custom_timeouts=pulumi.CustomTimeouts(
                    create=f"{args.collect_timeout_minutes + PULUMI_MARGIN_MINUTES}m"
                ),
            ),
        )
        self.result = self.collect.stdout.apply(parse_result)
        self.verdict = self.result.apply(lambda r: r.verdict)
        self.max_busbw_gbps = self.result.apply(lambda r: r.max_busbw_gbps)
        self.busbw_at_max_size_gbps = self.result.apply(lambda r: r.busbw_at_max_size_gbps)
        self.ranks = self.result.apply(
            lambda r: f"not counted: point to point, one rank on each of {args.node_count} nodes"
            if args.kind == kinds.P2P else r.ranks_text(args.node_count, args.gpus_per_node)
        )
        self.nccl_version = self.result.apply(
            lambda r: r.nccl_version or ("pending" if r.verdict == PENDING else "unknown (not in the log)")
        )
        self.reasons = self.result.apply(lambda r: list(r.reasons))
        self.bw_at_max_size_gbits = self.result.apply(lambda r: r.bw_at_max_size_gbits)
        self.max_bw_gbits = self.result.apply(lambda r: r.max_bw_gbits)
        self.latency_us = self.result.apply(lambda r: r.latency_us)
        self.suspects = self.result.apply(lambda r: [dict(s) for s in r.suspects])
        self.kind = args.kind
        self._sharp = args.sharp
        figures = ({"bw_at_max_size_gbits": self.bw_at_max_size_gbits, "latency_us": self.latency_us}
                   if args.kind == kinds.P2P else {"max_busbw_gbps": self.max_busbw_gbps})
        self.register_outputs({"verdict": self.verdict, **figures})

    def stack_outputs(self) -> dict[str, pulumi.Output[Any]]:
        """The stack outputs of this kind of result, by export name (listed in the README)."""
        if self.kind == kinds.P2P:
            figures = {
                "p2pBandwidthAtMaxSizeGbits": self.bw_at_max_size_gbits,
                "p2pMaxBandwidthGbits": self.max_bw_gbits,
                "p2pLatencyUs": self.latency_us,
            }
        else:
            figures = {
                "allReduceMaxBusBwGbps": self.max_busbw_gbps,
                "allReduceBusBwAtMaxSizeGbps": self.busbw_at_max_size_gbps,
                "fabricRanks": self.ranks,
                "ncclVersion": self.nccl_version,
                "fabricSuspects": self.suspects,  # the fabric doctor's named nodes / HCAs ([] when none)
                # which transport the figures measure: SHARP/CollNet, or NCCL's own IB (the thresholds' basis)
                "allReduceSharp": pulumi.Output.from_input(self._sharp),
            }
        return {"fabricVerdict": self.verdict, **figures, "fabricVerdictReasons": self.reasons}
