"""The certifier's decisions, as pure functions: which IB node is certified, held or quarantined after a
judged fabric test, within the circuit breaker. No I/O here: clusterside/certify_kube.py reads the cluster
and writes what is decided; docs/fabric-certifier.md tells a node's life.

A node's state is read from its taints and its FabricCertified condition: `uncertified` (the hold,
fabric.HOLD_TAINT_KEY, which the admission loop puts on every new boot: clusterside/certify_admit.py),
`quarantined` (fabric.FABRIC_TAINT_KEY; this certifier put it there, recorded in QUARANTINED_BY_ANNOTATION;
a person's taint of the same key is theirs and stays), `certified` (neither). A node with neither that has
not passed on the boot it runs (a new node the admission loop has not held yet) is `awaiting`: tested,
never a peer. Evidence comes from three places, in this order:
1. fabric membership: every IB node must share one placement group and PKey (node labels,
   fabric.MEMBERSHIP_LABELS); a node outside the majority cannot reach the others: a FAIL suspect;
2. AKS Node Problem Detector conditions (NPD_PROBLEMS): a node reporting one is never a known-good
   peer and is a suspect with that condition as evidence (WARN: held, not quarantined on its own);
3. the judged run (verify's JSON: verdict, suspects, the doctor's pairs): its suspects mapped from pod
   host names to nodes; a node is cleared when the run PASSed, or when it was in a fast pair.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterside import kube
from core import choices, fabric

DEFAULT_MAX_QUARANTINE_SHARE = 0.25
MIN_CERTIFIED = 2  # never quarantine one of the last two certified nodes
QUARANTINED_BY_ANNOTATION = "aks-infiniband.io/fabric-quarantined-by"  # set with the taint: "this one is ours"
CERTIFIED_AT_ANNOTATION = "aks-infiniband.io/fabric-certified"  # when and against what (JSON)
HELD_ANNOTATION = "aks-infiniband.io/fabric-held"  # the boot the admission loop held, and when (JSON)
CERTIFIER = "fabric-certifier"
# Conditions AKS's Node Problem Detector reports on GPU/IB nodes (AKS docs "Node Problem Detector (NPD)
# in AKS nodes": GPU and InfiniBand problem daemons); status True means the problem is present.
NPD_PROBLEMS = ("IBLinkFlapping", "XIDErrors", "GPUMissing", "NVLinkStatusInactive", "GPUDriverIssue",
                "KernelDeadlock", "ReadonlyFilesystem")

# actions: certify (remove `uncertified`, and `quarantined` where ours), quarantine, hold (not certified,
# nothing removed), keep (not judged by this run: unchanged)
CERTIFY, QUARANTINE, HOLD, KEEP = "certify", "quarantine", "hold", "keep"


@dataclass(frozen=True)
class Policy:
    mode: str = choices.DEFAULT_CERTIFIER_MODE
    dry_run: bool = False
    max_quarantine_share: float = DEFAULT_MAX_QUARANTINE_SHARE
    min_certified: int = MIN_CERTIFIED

    def __post_init__(self) -> None:
        if self.mode not in choices.CERTIFIER_MODES:
            raise ValueError(f"mode: got {self.mode!r}; expected one of {', '.join(choices.CERTIFIER_MODES)}")
        if not 0 <= self.max_quarantine_share <= 1:
            raise ValueError(f"max quarantine share: got {self.max_quarantine_share}; expected 0 to 1")


@dataclass(frozen=True)
class NodeFacts:
    """One IB node as the certifier sees it."""

    name: str
    vm: str | None  # the VMSS instance, from spec.providerID
    state: str  # fabric.UNCERTIFIED | fabric.QUARANTINED | "certified"
    ours: bool  # the quarantined taint is this certifier's (it may remove it)
    membership: tuple[str | None, ...]  # the values of fabric.MEMBERSHIP_LABELS
    problems: tuple[dict[str, Any], ...] = ()  # NPD conditions with status True
    cordoned: bool = False  # spec.unschedulable: a person's (or AKS's) decision, never touched
    boot_id: str | None = None  # status.nodeInfo.bootID: changes on every reboot and re-image
    # the certification recorded on the node (CERTIFIED_AT_ANNOTATION) when its condition is still True
    certified: dict[str, Any] | None = None
    held_boot: str | None = None  # the boot the admission loop held (HELD_ANNOTATION)
    passed_this_boot: bool = False  # FabricCertified=True, recorded for this bootID (or before boots were)

    @property
    def awaiting(self) -> bool:
        """Not quarantined and not passed on the boot it runs: to be tested, never a peer."""
        return self.state != fabric.QUARANTINED and not self.passed_this_boot

    @property
    def new_boot(self) -> bool:
        """A boot the admission loop has neither held nor seen pass: it must be held now."""
        return self.state == "certified" and self.awaiting and (self.boot_id is None or self.held_boot != self.boot_id)


def vm_of(node: Mapping[str, Any]) -> str | None:
    """`aks-ib-12345678-vmss_3` from azure:///subscriptions/../virtualMachineScaleSets/aks-ib-12345678-vmss/
    virtualMachines/3 (the cloud provider's providerID for a VMSS instance); else the providerID itself."""
    pid = str(kube.get(node, "spec", "providerID") or "")
    parts = pid.split("/")
    if "virtualMachineScaleSets" in parts and "virtualMachines" in parts:
        vmss = parts[parts.index("virtualMachineScaleSets") + 1]
        return f"{vmss}_{parts[parts.index('virtualMachines') + 1]}"
    return pid or None


def is_hold(taint: Mapping[str, Any]) -> bool:
    """The admission hold, or the pool taint an older release set (read as a hold, lifted alike)."""
    key = taint.get("key")
    return key == fabric.HOLD_TAINT_KEY or (key, taint.get("value")) == fabric.LEGACY_POOL_HOLD


def state_of(node: Mapping[str, Any]) -> str:
    """quarantined (or another value a person gave fabric.FABRIC_TAINT_KEY) > uncertified > certified."""
    taints = kube.get(node, "spec", "taints") or []
    marked = [t for t in taints if t.get("key") == fabric.FABRIC_TAINT_KEY and not is_hold(t)]
    if marked:
        return str(marked[0].get("value"))
    return fabric.UNCERTIFIED if any(is_hold(t) for t in taints) else "certified"


def _json_annotation(annotations: Mapping[str, str], key: str) -> dict | None:
    try:
        value = json.loads(annotations.get(key) or "null")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def facts(node: Mapping[str, Any]) -> NodeFacts:
    annotations = kube.get(node, "metadata", "annotations") or {}
    labels = kube.get(node, "metadata", "labels") or {}
    state = state_of(node)
    problems = tuple({k: c.get(k) for k in ("type", "reason", "message", "lastTransitionTime")}
                     for c in kube.get(node, "status", "conditions") or []
                     if c.get("type") in NPD_PROBLEMS and c.get("status") == "True")
    record = _json_annotation(annotations, CERTIFIED_AT_ANNOTATION)
    held = _json_annotation(annotations, HELD_ANNOTATION) or {}
    boot = kube.get(node, "status", "nodeInfo", "bootID")
    passed = (kube.condition(node, fabric.FABRIC_CONDITION) or {}).get("status") == "True"
    return NodeFacts(name=kube.name(node), vm=vm_of(node), state=state, boot_id=boot,
                     certified=record if passed else None, held_boot=held.get("boot_id"),
                     passed_this_boot=passed and (record or {}).get("boot_id") in (None, boot),
                     ours=state == fabric.QUARANTINED and annotations.get(QUARANTINED_BY_ANNOTATION) == CERTIFIER,
                     membership=tuple(labels.get(k) for k in fabric.MEMBERSHIP_LABELS), problems=problems,
                     cordoned=bool(kube.get(node, "spec", "unschedulable")))


@dataclass(frozen=True)
class Membership:
    fabric: tuple[str, ...]  # the nodes of the majority group
    outside: tuple[str, ...]
    reason: str | None  # None: one fabric
    evidence: dict[str, Any] = field(default_factory=dict)


def membership(nodes: Sequence[NodeFacts]) -> Membership:
    """One placement group and PKey, or the nodes outside the largest group named with their labels.
    No labels yet (the labeler has not run) is not a split: nothing to compare. A tie names no side."""
    groups: dict[tuple, list[str]] = {}
    for n in nodes:
        groups.setdefault(n.membership, []).append(n.name)
    if len(groups) <= 1:
        return Membership(tuple(n.name for n in nodes), (), None)
    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0] == (None,) * len(fabric.MEMBERSHIP_LABELS)))
    labels = {key: dict(zip(fabric.MEMBERSHIP_LABELS, values, strict=True)) for values, key in
              ((v, ",".join(sorted(names))) for v, names in groups.items())}
    if len(ranked[0][1]) == len(ranked[1][1]):
        return Membership((), tuple(sorted(n.name for n in nodes)),
                          "the pool is split into groups of equal size that cannot reach each other: "
                          + "; ".join(f"{k} ({_labels_text(v)})" for k, v in labels.items()), {"groups": labels})
    majority = ranked[0][0]
    inside = sorted(ranked[0][1])
    outside = sorted(n for values, names in groups.items() if values != majority for n in names)
    reason = (f"these nodes cannot reach those: {', '.join(outside)} are outside the fabric of "
              f"{', '.join(inside)} ({_labels_text(dict(zip(fabric.MEMBERSHIP_LABELS, majority, strict=True)))})")
    return Membership(tuple(inside), tuple(outside), reason, {"groups": labels})


def _labels_text(values: Mapping[str, str | None]) -> str:
    return ", ".join(f"{k}={v if v is not None else '(no label)'}" for k, v in values.items())


@dataclass(frozen=True)
class Decision:
    node: str
    vm: str | None
    action: str  # CERTIFY | QUARANTINE | HOLD | KEEP
    reason: str
    verdict: str  # PASS | WARN | FAIL: this node's own
    evidence: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.node, "vm": self.vm, "action": self.action, "verdict": self.verdict,
                "reason": self.reason, "evidence": self.evidence}


@dataclass(frozen=True)
class Plan:
    decisions: tuple[Decision, ...]
    breaker: str | None  # why the breaker tripped (then nothing is applied)
    notes: tuple[str, ...] = ()
    suspects: tuple[dict[str, Any], ...] = ()  # node-named suspects for the result

    def as_dict(self) -> dict[str, Any]:
        return {"decisions": [d.as_dict() for d in self.decisions], "breaker": self.breaker,
                "notes": list(self.notes)}


def node_of(host: str, host_to_node: Mapping[str, str]) -> str | None:
    """The node of a host name as the log writes it: the pod's host name, or the hostfile's
    `<pod>.<job>` form (the ssh plugin's), cut at the first dot."""
    return host_to_node.get(host) or host_to_node.get(host.split(".")[0])


def fast_peers(result: Mapping[str, Any], host_to_node: Mapping[str, str]) -> dict[str, list[dict[str, Any]]]:
    """Per node, the fast doctor pairs it was in: {node: [{peer, busbw_gbps}]} (slow pairs excluded)."""
    doctor = result.get("doctor") or {}
    slow = {tuple(p.get("hosts") or ()) for p in doctor.get("slow_pairs") or []}
    out: dict[str, list[dict[str, Any]]] = {}
    for p in doctor.get("pairs") or []:
        hosts = tuple(p.get("hosts") or ())
        if len(hosts) != 2 or hosts in slow or p.get("failure") or p.get("busbw_gbps") is None:
            continue
        a, b = (node_of(h, host_to_node) or h for h in hosts)
        out.setdefault(a, []).append({"peer": b, "busbw_gbps": p["busbw_gbps"]})
        out.setdefault(b, []).append({"peer": a, "busbw_gbps": p["busbw_gbps"]})
    return out


def node_suspects(result: Mapping[str, Any], host_to_node: Mapping[str, str],
                  vms: Mapping[str, str | None]) -> list[dict[str, Any]]:
    """verify's suspects (pod host names) as nodes: {node, vm, host, hca, reason, evidence, verdict}."""
    out = []
    for s in result.get("suspects") or []:
        node = node_of(str(s.get("host")), host_to_node)
        out.append({"node": node, "vm": vms.get(node) if node else None, **{
            k: s.get(k) for k in ("host", "hca", "reason", "evidence", "verdict")}})
    return out


def plan(nodes: Sequence[NodeFacts], result: Mapping[str, Any] | None, host_to_node: Mapping[str, str],
         policy: Policy, *, run_id: str, at: str) -> Plan:
    """Decide for every IB node. `result`: verify's JSON of the run (None: no run, membership and NPD only).
    `host_to_node`: the run's pod host names -> node names. Nodes not in the run keep their state."""
    by_name = {n.name: n for n in nodes}
    member = membership(nodes)
    vms = {n.name: n.vm for n in nodes}
    suspects = node_suspects(result or {}, host_to_node, vms)
    in_run = set(host_to_node.values())
    verdict = str((result or {}).get("verdict") or "UNKNOWN")
    peers = fast_peers(result or {}, host_to_node)
    busbw = (result or {}).get("busbw_at_max_size_gbps")
    notes = [member.reason] if member.reason else []
    failing: dict[str, list[dict[str, Any]]] = {}
    warning: dict[str, list[dict[str, Any]]] = {}
    for name in member.outside:
        if member.fabric:  # a tie names no side: nobody is blamed, nobody certified
            failing.setdefault(name, []).append({"reason": member.reason, "evidence": member.evidence})
    for n in nodes:
        for p in n.problems:
            warning.setdefault(n.name, []).append({
                "reason": f"Node Problem Detector reports {p['type']} ({p.get('reason')}: {p.get('message')})",
                "evidence": {"condition": p}})
    for s in suspects:
        if s["node"] in by_name:
            (failing if s["verdict"] == "FAIL" else warning).setdefault(s["node"], []).append(
                {"reason": s["reason"], "evidence": {"hca": s["hca"], "host": s["host"], **(s["evidence"] or {})}})
    fabric_wide = verdict in ("FAIL", "WARN") and not suspects
    if fabric_wide and result is not None:
        notes.append(f"the run is {verdict} and names no node: a fabric-wide cause; no node is quarantined "
                     "and none is certified by it")
    decisions = []
    for n in nodes:
        if n.name in failing:
            reasons = failing[n.name]
            if n.state == fabric.QUARANTINED:
                decisions.append(Decision(n.name, n.vm, KEEP, "still failing: stays quarantined; "
                                          + reasons[0]["reason"], "FAIL", {"findings": reasons}))
            else:
                decisions.append(Decision(n.name, n.vm, QUARANTINE, reasons[0]["reason"], "FAIL",
                                          {"findings": reasons, "run": run_id, "at": at}))
        elif n.name in warning:
            reasons = warning[n.name]
            decisions.append(Decision(n.name, n.vm, HOLD, "not certified: " + reasons[0]["reason"], "WARN",
                                      {"findings": reasons}))
        elif n.name in in_run and _cleared(n.name, verdict, fabric_wide, peers, member):
            against = peers.get(n.name) or [{"peer": p, "busbw_gbps": busbw} for p in sorted(in_run - {n.name})]
            how = "its pairs with" if peers.get(n.name) else "the all-nodes run with"
            decisions.append(Decision(n.name, n.vm, CERTIFY, f"passed {how} {', '.join(a['peer'] for a in against)}",
                                      "PASS", {"run": run_id, "at": at, "against": against, "verdict": verdict}))
        elif n.name not in in_run and _reheld(n):
            decisions.append(Decision(n.name, n.vm, CERTIFY, (
                f"held on a boot that passed at {n.certified.get('at')}: the admission loop held it while it was "
                "being certified"), "PASS",
                {"run": n.certified.get("run"), "at": n.certified.get("at"),
                 "against": n.certified.get("against") or [], "boot_id": n.boot_id}))
        elif n.name in in_run:
            decisions.append(Decision(n.name, n.vm, HOLD, "not cleared by this run" + (
                " (fabric-wide result)" if fabric_wide else ""), verdict, {}))
        else:
            decisions.append(Decision(n.name, n.vm, KEEP, "not in this run: state unchanged", "UNKNOWN", {}))
    return Plan(tuple(decisions), breaker(nodes, decisions, policy), tuple(notes), tuple(suspects))


def _reheld(n: NodeFacts) -> bool:
    """Held by the admission loop on a boot that has passed (it held the node while a run certified it):
    our hold, on a node whose recorded certification names the boot it still runs (a re-image or reboot
    gives a new bootID: re-test). A hold this certifier did not record is a person's: it stays."""
    return (n.state == fabric.UNCERTIFIED and n.certified is not None and n.boot_id is not None
            and n.certified.get("boot_id") == n.boot_id == n.held_boot)


def _cleared(node: str, verdict: str, fabric_wide: bool, peers: Mapping[str, list[dict[str, Any]]],
             member: Membership) -> bool:
    """Cleared by this run: the all-nodes run PASSed on one fabric, or the node was in a fast pair (on a
    split pool: only pairs whose both ends are inside the majority's fabric count)."""
    if member.reason:
        return node in member.fabric and any(p["peer"] in member.fabric for p in peers.get(node, ()))
    return verdict == "PASS" or (not fabric_wide and bool(peers.get(node)))


def breaker(nodes: Sequence[NodeFacts], decisions: Sequence[Decision], policy: Policy) -> str | None:
    """Why the plan must not be applied (None: within bounds). Counted after the plan: quarantined nodes
    (already and new) against the share of the pool, and the certified nodes that would remain."""
    new = [d for d in decisions if d.action == QUARANTINE]
    if not new:
        return None
    state = {n.name: n.state for n in nodes}
    quarantined = sum(1 for s in state.values() if s == fabric.QUARANTINED) - sum(
        1 for d in decisions if d.action == CERTIFY and state[d.node] == fabric.QUARANTINED)
    allowed = math.floor(policy.max_quarantine_share * len(nodes))
    if quarantined + len(new) > allowed:
        return (f"circuit breaker: quarantining {', '.join(d.node for d in new)} would hold {quarantined + len(new)} "
                f"of {len(nodes)} nodes quarantined, more than the allowed share {policy.max_quarantine_share:g} "
                f"({allowed} node{'s' if allowed != 1 else ''}); nothing is changed")
    certified_after = {n.name for n in nodes if n.state == "certified"} | {
        d.node for d in decisions if d.action == CERTIFY}
    certified_after -= {d.node for d in new}
    lost = [d.node for d in new if state[d.node] == "certified"]
    if lost and len(certified_after) < policy.min_certified:
        return (f"circuit breaker: quarantining {', '.join(lost)} would leave {len(certified_after)} certified "
                f"node(s), fewer than {policy.min_certified}; nothing is changed")
    return None


def relative_warnings(history: Mapping[str, Sequence[Mapping[str, Any]]], decisions: Sequence[Decision],
                      fraction: float = 0.8, min_records: int = 3) -> list[str]:
    """Nodes certified now whose figure (their best fast pair) is below `fraction` of their own recent
    median: flagged (WARN) even above the size's line."""
    out = []
    for d in decisions:
        if d.action != CERTIFY:
            continue
        figures = [r["busbw_gbps"] for r in history.get(d.node, ()) if isinstance(r.get("busbw_gbps"), (int, float))]
        now = max((a.get("busbw_gbps") or 0 for a in d.evidence.get("against") or []), default=0)
        if len(figures) >= min_records and now:
            median = statistics.median(figures)
            if now < fraction * median:
                out.append(f"{d.node}: {now:.1f} GB/s is below {fraction:.0%} of its own recent median "
                           f"{median:.1f} GB/s ({len(figures)} runs)")
    return out


# --- the shipped code (components/fabric/certifier.py mounts it; the pod checks it) -------------------------
# The packages the pod may import from: the pure rules, the judge and this package (not the labeler, which
# ships alone in its own ConfigMap, nor the stack's).
CODE_PACKAGES = ("core", "verify", "clusterside")
CODE_ENTRY = "verify.__main__"  # every pod of the certifier runs `python3 -S -m verify ...`


def _module_file(root: Path, module: str) -> Path | None:
    path = root.joinpath(*module.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def code_files(root: Path) -> dict[str, str]:
    """The files the certifier runs, by relative path: `CODE_ENTRY` and every module of CODE_PACKAGES it
    imports, at any depth and wherever the import is written (a function's lazy import included), with
    their packages' `__init__.py`. Computed from the imports, so an edit to a module the pod never loads
    (the pin table, the DRA rules, the labeler) does not re-roll the certifier's pods."""
    found: dict[str, Path] = {}
    todo = [CODE_ENTRY]
    while todo:
        module = todo.pop()
        path = _module_file(root, module)
        if module in found or module.split(".")[0] not in CODE_PACKAGES or path is None:
            continue
        found[module] = path
        parents = module.split(".")
        todo += [".".join(parents[:i]) for i in range(1, len(parents))]
        todo += _imports(path.read_text(), str(path))
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(found.values())}


@functools.lru_cache(maxsize=512)
def _imports(source: str, path: str) -> tuple[str, ...]:
    """What a module imports, by name (`from a import b` gives a and a.b). Parsed once per text of the
    file: every render of a stack declares the certifier, and parsing took half of a render's time."""
    out: list[str] = []
    for node in ast.walk(ast.parse(source, path)):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
    return tuple(out)


def code_sha256(files: Mapping[str, str]) -> str:
    """sha256 over each path and text, in path order: the stack computes it over the checkout, the pod
    over what it finds mounted."""
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.encode() + b"\0" + files[path].encode() + b"\0")
    return h.hexdigest()
