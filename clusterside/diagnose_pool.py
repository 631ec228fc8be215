"""What the IB pool's nodes say about running the fabric test job: which are Ready and since when, the
device resources they advertise against what the job's pods request, the taints the pods do not tolerate,
and when the node-setup allowance started. `view` turns a snapshot's nodes into a `PoolView`: findings,
a summary line, and the causes that end the wait once the allowance has passed, which
clusterside/diagnose.py's `Diagnoser.assess` weighs with what the pods and the operators say.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clusterside import kube
from clusterside.kube import get, name
from clusterside.snapshot import Finding, Snapshot, Task, count, pool_selector, wants_gpu
from core import fabric

# Taints the node lifecycle controller sets and lifts by itself (not-ready, unreachable, cordoned...).
LIFECYCLE_TAINT_PREFIX = "node.kubernetes.io/"
HARD_TAINT_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def _tolerates(toleration: dict, taint: dict) -> bool:
    """Kubernetes' rule (core/v1 Toleration.ToleratesTaint): same effect or none given; same key, or no
    key with operator Exists; then Exists matches any value and Equal (the default) the same value."""
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    operator = toleration.get("operator") or "Equal"
    if not toleration.get("key"):
        return operator == "Exists"
    if toleration.get("key") != taint.get("key"):
        return False
    return operator == "Exists" or (toleration.get("value") or "") == (taint.get("value") or "")


def _taint_text(taint: dict) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"


@dataclass(frozen=True)
class PoolNode:
    name: str
    ready: bool
    ready_since: float | None  # the Ready condition's lastTransitionTime, when Ready is True
    # when Ready is not True: since when (the Ready condition's lastTransitionTime, or the node's creation
    # when the kubelet never reported one), and why, from the condition
    not_ready_since: float | None
    not_ready: str  # "" when Ready
    allocatable: dict[str, int]
    taints: tuple[dict, ...]

    @classmethod
    def of(cls, node: dict) -> PoolNode:
        ready = kube.condition(node, "Ready") or {}
        is_ready = ready.get("status") == "True"
        why = "" if is_ready else (f"Ready={ready.get('status', 'not reported')}"
                                   + (f" {ready['reason']}" if ready.get("reason") else "")
                                   + (f": {ready['message']}" if ready.get("message") else ""))
        hard = tuple(t for t in get(node, "spec", "taints") or [] if t.get("effect") in HARD_TAINT_EFFECTS
                     and not str(t.get("key") or "").startswith(LIFECYCLE_TAINT_PREFIX))
        changed = kube.epoch(ready.get("lastTransitionTime"))
        created = kube.epoch(get(node, "metadata", "creationTimestamp"))
        return cls(name=name(node), ready=is_ready, ready_since=changed if is_ready else None,
                   not_ready_since=None if is_ready else changed or created,
                   not_ready=why,
                   allocatable={r: count(q) for r, q in (get(node, "status", "allocatable") or {}).items()},
                   taints=hard)


def _device_hint(resource: str) -> str:
    if resource.startswith(f"{fabric.RDMA_RESOURCE_PREFIX}/"):
        return (f"the RDMA device plugin that the NicClusterPolicy deploys advertises it, on nodes labelled "
                f"{fabric.MOFED_WAIT_LABEL}=false: the Network Operator sets that once the DOCA driver is ready, or "
                f"without ofedDriver (rdmaDriver inbox) on nodes with {fabric.MELLANOX_NIC_LABEL}")
    if resource == fabric.GPU_RESOURCE:
        return "the GPU Operator's device plugin advertises it, after its driver container has loaded the driver"
    return "a device plugin advertises it"


@dataclass(frozen=True)
class AllowanceStart:
    """When the node-setup allowance started, and what it is counted from (for the messages)."""

    at: float
    counted_from: str  # e.g. "the IB nodes' Ready"
    since: str  # e.g. "the IB pool's nodes have been Ready since <time>"
    not_ready: bool  # counted from NotReady nodes: too few Ready nodes is then the cause to report


def _allowance_start(ready: list[PoolNode], not_ready: list[PoolNode], needed: int) -> AllowanceStart | None:
    """From when as many nodes as the job needs were Ready. With too few Ready, each NotReady node gets the
    allowance from when it went NotReady: waiting helps while as many of them as are missing are still
    within theirs, so it is counted from the one, most recent first, that completes the number."""
    ready_times = sorted(n.ready_since for n in ready if n.ready_since is not None)
    if len(ready_times) >= needed:
        at = ready_times[needed - 1]
        return AllowanceStart(at=at, counted_from="the IB nodes' Ready",
                              since=f"the IB pool's nodes have been Ready since {kube.iso(at)}", not_ready=False)
    missing = needed - len(ready)
    recent_first = sorted((n for n in not_ready if n.not_ready_since is not None),
                          key=lambda n: n.not_ready_since or 0.0, reverse=True)
    if missing <= 0 or len(recent_first) < missing:
        return None
    node = recent_first[missing - 1]
    at = node.not_ready_since or 0.0
    return AllowanceStart(at=at, counted_from=f"node {node.name} NotReady",
                          since=f"node {node.name} has been NotReady since {kube.iso(at)}", not_ready=True)


def _not_ready_text(nodes: list[PoolNode], not_ready: list[PoolNode], needed: int) -> str:
    each = "; ".join(f"{n.name} NotReady since {kube.iso(n.not_ready_since) if n.not_ready_since else '?'} "
                     f"({n.not_ready})" for n in not_ready)
    return f"{len(nodes) - len(not_ready)} of {len(nodes)} IB-pool nodes are Ready, the job needs {needed}: {each}"


def _not_ready_hint(gpus: bool) -> str:
    """Where to look for a NotReady node (kubelet node status, and the node lifecycle controller's
    Unknown when the kubelet stops posting)."""
    gpu_cause = (" On GPU nodes one known cause: containerd refuses a config drop-in and exits, as with the one the "
                 "GPU Operator's container toolkit writes on containerd 2.x without RUNTIME_CONFIG_SOURCE=file "
                 "(docs/kubernetes-layer.md)." if gpus else "")
    return ("Ready=Unknown: the kubelet stopped posting the node's status (it, or the VM, is down); Ready=False: the "
            f"kubelet runs and reports what is not ready, often the container runtime (containerd).{gpu_cause} Look "
            "at `kubectl describe node` and at `journalctl -u kubelet -u containerd` on the node (through `az vmss "
            "run-command invoke` when no pod can start there)")


@dataclass(frozen=True)
class PoolView:
    """What the IB pool's nodes say: problems, a summary line, the allowance, and the causes that end
    the wait once it has passed (the most telling first)."""

    findings: list[Finding]
    summary: Finding | None = None
    allowance: AllowanceStart | None = None
    blockers: list[str] = field(default_factory=list)
    hint: str = ""  # where to look, after the give-up line


def view(snap: Snapshot, tasks: list[Task], job: str) -> PoolView:
    """What the IB pool's nodes say about running `job`'s `tasks` (Diagnoser.assess reads it)."""
    if snap.nodes is None:
        return PoolView(findings=[])
    where_pool = f"nodes with label {pool_selector()}"
    if not snap.nodes:
        return PoolView(findings=[Finding("no IB pool node", where_pool, "no node carries the IB pool's label: "
                                          "is the pool scaled to zero, or still being created?")])
    nodes = [PoolNode.of(n) for n in snap.nodes]
    ready = [n for n in nodes if n.ready]
    not_ready = [n for n in nodes if not n.ready]
    findings = [Finding("NodeNotReady", f"node {n.name}", n.not_ready) for n in not_ready]

    # the job spreads its device-holding pods one per node
    needed = max((t.replicas for t in tasks if t.devices), default=1)
    allowance = _allowance_start(ready, not_ready, needed)
    blockers: list[str] = []
    hint = ""
    if allowance and allowance.not_ready:
        blockers.append(_not_ready_text(nodes, not_ready, needed))
        hint = _not_ready_hint(wants_gpu(tasks))
    needs: dict[str, tuple[int, int, list[str]]] = {}
    for task in tasks:
        for resource, units in task.devices.items():
            most, pods, names = needs.get(resource, (0, 0, []))
            needs[resource] = (max(most, units), pods + task.replicas, [*names, task.name])
    for resource, (units, pods, names) in sorted(needs.items()):
        having = [n for n in ready if n.allocatable.get(resource, 0) >= units]
        if len(having) < pods:
            message = (f"{len(having)} of {len(ready)} Ready IB-pool nodes advertise {units} or more in "
                       f"allocatable; the job's {pods} {'/'.join(names)} pod(s) need {units} each, one node "
                       f"each ({_device_hint(resource)})")
            findings.append(Finding(f"{resource} not advertised", where_pool, message))
            blockers.append(f"{resource} is not advertised: {message}")
    for task in tasks:
        accepting, refused = 0, {}
        for node in ready:
            untolerated = [t for t in node.taints if not any(_tolerates(tol, t) for tol in task.tolerations)]
            for taint in untolerated:
                refused.setdefault(_taint_text(taint), []).append(node.name)
            accepting += not untolerated
        need = task.replicas if task.devices else 1
        if ready and accepting < need:
            taints = "; ".join(f"{taint} on {', '.join(names)}" for taint, names in refused.items())
            message = (f"{accepting} of {len(ready)} Ready IB-pool nodes accept its pods ({need} needed): "
                       f"it does not tolerate {taints}")
            findings.append(Finding("untolerated taint", f"task {task.name} of job {snap.namespace}/{job}",
                                    message))
            blockers.append(f"the job's {task.name} pods do not tolerate the IB pool's taint: {message}")

    counts = "; ".join(_advertised(resource, ready) for resource in sorted(needs))
    since = (f", the {needed} needed since {kube.iso(allowance.at)}" if allowance and not allowance.not_ready
             else "")
    summary = Finding("IB pool", where_pool, f"{len(ready)} of {len(nodes)} Ready{since}"
                      + (f"; {counts}" if counts else ""))
    return PoolView(findings=findings, summary=summary, allowance=allowance, blockers=blockers, hint=hint)


def _advertised(resource: str, ready: list[PoolNode]) -> str:
    having = [n.allocatable[resource] for n in ready if n.allocatable.get(resource, 0) > 0]
    units = f" ({max(having)} per node)" if having else ""
    return f"{resource} advertised by {len(having)} of {len(ready)}{units}"
