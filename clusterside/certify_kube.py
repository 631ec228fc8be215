"""The certifier against the API server: read the IB nodes and the fabric test job, write what
clusterside/certify.py decided (taints, the FabricCertified condition, labels, Events, the history ring, the
day-0 result) and push metrics. Every write goes through `Writer`, which in dry-run records instead.

What it writes, and why that way (the API reference):
- taints: a JSON Patch (RFC 6902) whose first op `test`s the resourceVersion read, then replaces
  `spec.taints`: `taints` has no patch strategy, so a merge would replace the list anyway, and the test
  makes a concurrent change (kubectl taint, AKS) fail the write (422) instead of being overwritten;
- the condition: a strategic-merge PATCH of nodes/status (conditions merge by `type`, as NPD writes);
- Events: events.k8s.io/v1 Events in `default`, `regarding` the Node (`kubectl describe node` lists them).
  An Event about a cluster-scoped object must live in `default` (the API server answers 422 elsewhere:
  pkg/apis/core/validation/events.go), and the new API requires eventTime, action and the reporting
  controller and instance;
- history and result: merge PATCHes of ConfigMaps the stack created (the RBAC names them).

The result is written before any node write, and Events and conditions are best effort: a failed one is
said on stderr and counted in the result (`failed_writes`), never raised, so a side effect cannot hide the
verdict or fail the day-0 Job. A failed taint or label write is counted too and makes the run exit 2 once
the result is written: the node it concerns stays as it was.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterside import certify, kube
from clusterside.kube import JOB_NAME_LABEL, TASK_SPEC_LABEL, VOLCANO_GROUP, VOLCANO_PLURAL, VOLCANO_VERSION
from clusterside.kube_api import JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE, Api, ApiError
from core import fabric
from verify import logread

HISTORY_KEEP = 10  # records per node in the history ring
EVENT_NOTE_BYTES = 1024  # events.k8s.io/v1 `note` limit (1 kB); the full evidence is in the history
EVENTS_NAMESPACE = "default"  # the one namespace the API accepts for Events about Nodes (kube-system aside)
EVENTS_PATH = f"/apis/events.k8s.io/v1/namespaces/{EVENTS_NAMESPACE}/events"
REPORTING_CONTROLLER = f"aks-infiniband.io/{certify.CERTIFIER}"
DONE, FAILED = frozenset({"Completed"}), frozenset({"Failed", "Aborted", "Terminated"})


def _say(message: str) -> None:
    print(f"[verify certify] {message}", file=sys.stderr, flush=True)


def ib_nodes(api: Api, pool: str | None = None) -> list[dict]:
    """The IB nodes; with `pool`, those of that agent pool only (a stack of several pools certifies each
    within itself: its peers, its breaker and its history are its own)."""
    selector = ",".join(f"{k}={v}" for k, v in fabric.pool_node_selector(pool).items())
    return kube.items(api.get("/api/v1/nodes", labelSelector=selector))


def job_pods(api: Api, namespace: str, job: str) -> list[dict]:
    return kube.items(api.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"{JOB_NAME_LABEL}={job}"))


def host_to_node(pods: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Each pod's host name (spec.hostname, which Volcano's svc plugin sets to the pod name; else the pod
    name, as gethostname() returns it in the pod) -> the node it ran on (spec.nodeName)."""
    out = {}
    for pod in pods:
        node = kube.get(pod, "spec", "nodeName")
        if node:
            out[str(kube.get(pod, "spec", "hostname") or kube.name(pod))] = str(node)
            out[kube.name(pod)] = str(node)
    return out


def worker_hosts(pods: Sequence[Mapping[str, Any]], launcher_task: str) -> dict[str, str]:
    """host_to_node of the worker pods only (the launcher runs no rank)."""
    return host_to_node([p for p in pods if (kube.get(p, "metadata", "labels") or {}).get(TASK_SPEC_LABEL)
                         != launcher_task])


def worker_torsets(pods: Sequence[Mapping[str, Any]], launcher_task: str, nodes: Sequence[Mapping[str, Any]]
                   ) -> dict[str, str]:
    """Each worker's torset (its node's fabric.TORSET_LABEL) under every name the log may give its host: the
    pod's name, its host name, and `<hostname>.<subdomain>` (the name the svc plugin's hostfile gives it and
    the doctor's markers use). {} when a worker's node has no torset: the doctor then compares all pairs."""
    torset = {kube.name(n): (kube.get(n, "metadata", "labels") or {}).get(fabric.TORSET_LABEL) for n in nodes}
    out: dict[str, str] = {}
    for pod in pods:
        if (kube.get(pod, "metadata", "labels") or {}).get(TASK_SPEC_LABEL) == launcher_task:
            continue
        label = torset.get(str(kube.get(pod, "spec", "nodeName") or ""))
        if not label:
            return {}
        host = str(kube.get(pod, "spec", "hostname") or kube.name(pod))
        subdomain = kube.get(pod, "spec", "subdomain")
        out.update(dict.fromkeys([kube.name(pod), host, *([f"{host}.{subdomain}"] if subdomain else [])], label))
    return out


def job_path(namespace: str, job: str) -> str:
    return f"/apis/{VOLCANO_GROUP}/{VOLCANO_VERSION}/namespaces/{namespace}/{VOLCANO_PLURAL}/{job}"


def phase(job: Mapping[str, Any]) -> str:
    return kube.get(job, "status", "state", "phase") or "Pending"


def record_placement(placed: dict[str, dict], pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """Keep each pod that has a node (spec.nodeName), by name, the newest read winning (a restarted job's
    pod of the same name may land elsewhere); the names newly placed. Volcano deletes a job's pods that have
    not finished when a policy ends the job (killJob with PodRetainPhaseSoft: the launcher's TaskCompleted
    -> CompleteJob, a failed pod's TerminateJob), and the workers run sshd until then: what was seen while the
    job ran is all that is left of where they ran."""
    new = []
    for pod in pods:
        if kube.get(pod, "spec", "nodeName"):
            if kube.name(pod) not in placed:
                new.append(kube.name(pod))
            placed[kube.name(pod)] = dict(pod)
    return new


def wait_for_job(api: Api, namespace: str, job: str, *, timeout_seconds: float, poll_seconds: float,
                 placed: dict[str, dict] | None = None, sleep=time.sleep, now=time.monotonic) -> dict:
    """The Volcano Job once its phase is final; ApiError at the timeout. With `placed`, each poll also
    records where the job's pods are (record_placement). The pod-side wait is bounded by the certifier
    Job's activeDeadlineSeconds too. (`python -m verify collect` explains a wait; run it from a
    workstation to see why a job does not start.)"""
    start, said = now(), None
    while True:
        obj = api.get(job_path(namespace, job))
        if phase(obj) != said:
            said = phase(obj)
            _say(f"job {namespace}/{job}: {said}")
        if placed is not None:
            new = record_placement(placed, job_pods(api, namespace, job))
            if new:
                _say("placed: " + ", ".join(f"{n} on {placed[n]['spec']['nodeName']}" for n in sorted(new)))
        if said in DONE or said in FAILED:
            return obj
        if now() - start + poll_seconds > timeout_seconds:
            raise ApiError(f"timed out after {now() - start:.0f}s waiting for Volcano job {namespace}/{job} "
                           f"(last phase {said})")
        sleep(poll_seconds)


def task_pod_names(job: Mapping[str, Any], skip_task: str) -> list[str]:
    """The pods Volcano makes for the job's tasks but `skip_task`: `<job>-<task>-<index>` (its
    jobhelpers.MakePodName), `replicas` of each."""
    return [f"{kube.name(job)}-{t.get('name')}-{i}" for t in kube.get(job, "spec", "tasks") or []
            if t.get("name") != skip_task for i in range(int(t.get("replicas", 1)))]


def launcher_log(api: Api, namespace: str, pods: Sequence[Mapping[str, Any]], task: str, kind: str,
                 tail: int) -> tuple[str, logread.LogFold]:
    """The launcher pod's name and its log, read as it arrives (the pod's memory limit is below what a big
    run's log can reach), as `kind`, with its last `tail` lines."""
    launchers = [p for p in pods if (kube.get(p, "metadata", "labels") or {}).get(TASK_SPEC_LABEL) == task]
    if not launchers:
        raise ApiError(f"no launcher pod (task {task}) among the job's pods in {namespace}: Volcano deletes a job's "
                       "unfinished pods when a policy ends the job (a launcher still running when a worker failed)")
    pod = max(launchers, key=lambda p: (str(kube.get(p, "metadata", "creationTimestamp") or ""), kube.name(p)))
    containers = kube.get(pod, "spec", "containers") or [{}]
    log = api.stream(f"/api/v1/namespaces/{namespace}/pods/{kube.name(pod)}/log",
                     lambda body: logread.read(body, kind, tail=tail), container=containers[0].get("name"))
    return kube.name(pod), log


def reporting_instance() -> str:
    """The pod's name (HOSTNAME in a pod), else this host's: which certifier run wrote an Event."""
    return (os.environ.get("HOSTNAME") or socket.gethostname() or certify.CERTIFIER)[:128]


def micro_time(at: str) -> str:
    """An API time (whole seconds, `Z`) as a MicroTime (six digits of fraction): eventTime's format."""
    return at.replace("Z", ".000000Z") if at.endswith("Z") and "." not in at else at


def note(message: str) -> str:
    """The message cut to the note's limit in bytes (UTF-8), on a character boundary."""
    return message.encode()[:EVENT_NOTE_BYTES].decode(errors="ignore")


@dataclass
class Writer:
    """Applies a plan; in dry run, records what it would write and writes nothing. A best-effort write
    that fails is said and kept in `failed` (and so is any other failed write: the caller decides)."""

    api: Api
    namespace: str  # where the ConfigMaps live
    dry_run: bool
    writes: list[str] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)  # {write, error, best_effort}

    def _do(self, what: str, call, *args, best_effort: bool = False) -> None:
        self.writes.append(("would " if self.dry_run else "") + what)
        if self.dry_run:
            return
        try:
            call(*args)
        except ApiError as exc:
            self.failed.append({"write": what, "error": str(exc), "best_effort": best_effort})
            _say(f"failed to {what}: {exc}" + (" (best effort: the run goes on)" if best_effort else ""))
            if not best_effort:
                raise

    def taints(self, node: Mapping[str, Any], taints: list[dict], why: str) -> None:
        body = [{"op": "test", "path": "/metadata/resourceVersion", "value": kube.get(node, "metadata",
                                                                                     "resourceVersion")},
                {"op": "add", "path": "/spec/taints", "value": taints}]  # add replaces an existing member
        self._do(f"set taints of node {kube.name(node)}: {why}", self.api.patch,
                 f"/api/v1/nodes/{kube.name(node)}", body, JSON_PATCH)

    def hold(self, node: Mapping[str, Any], taint: bool, at: str, why: str) -> None:
        """Mark a new boot held, in one JSON Patch that `test`s the resourceVersion: the hold taint (with
        `taint`), the state label and the record of the boot held (certify.HELD_ANNOTATION), so that a hold
        a person lifts later is seen as theirs and left alone."""
        meta = kube.get(node, "metadata") or {}
        record = json.dumps({"boot_id": kube.get(node, "status", "nodeInfo", "bootID"), "at": at})
        body = [{"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
                {"op": "add", "path": "/metadata/annotations",
                 "value": {**(meta.get("annotations") or {}), certify.HELD_ANNOTATION: record}},
                {"op": "add", "path": "/metadata/labels",
                 "value": {**(meta.get("labels") or {}), fabric.FABRIC_STATE_LABEL: fabric.UNCERTIFIED}}]
        if taint:
            body.append({"op": "add", "path": "/spec/taints", "value": [
                *(kube.get(node, "spec", "taints") or []),
                {"key": fabric.HOLD_TAINT_KEY, "value": fabric.UNCERTIFIED, "effect": fabric.FABRIC_TAINT_EFFECT}]})
        self._do(f"hold node {kube.name(node)}" + (f" ({fabric.HOLD_TAINT_KEY}={fabric.UNCERTIFIED})" if taint else
                                                  f" (label {fabric.FABRIC_STATE_LABEL}={fabric.UNCERTIFIED})")
                 + f": {why}", self.api.patch, f"/api/v1/nodes/{kube.name(node)}", body, JSON_PATCH)

    def metadata(self, node: str, labels: dict, annotations: dict) -> None:
        self._do(f"label/annotate node {node}: {labels}", self.api.patch, f"/api/v1/nodes/{node}",
                 {"metadata": {"labels": labels, "annotations": annotations}}, MERGE_PATCH)

    def condition(self, node: str, status: str, reason: str, message: str, at: str) -> None:
        cond = {"type": fabric.FABRIC_CONDITION, "status": status, "reason": reason, "message": message[:1024],
                "lastTransitionTime": at, "lastHeartbeatTime": at}
        self._do(f"condition {fabric.FABRIC_CONDITION}={status} ({reason}) on node {node}", self.api.patch,
                 f"/api/v1/nodes/{node}/status", {"status": {"conditions": [cond]}}, STRATEGIC_MERGE,
                 best_effort=True)

    def event(self, node: Mapping[str, Any], kind: str, reason: str, action: str, message: str, at: str) -> None:
        name = kube.name(node)
        body = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"generateName": f"{name}.fabric-", "namespace": EVENTS_NAMESPACE},
                "regarding": {"apiVersion": "v1", "kind": "Node", "name": name,
                              "uid": kube.get(node, "metadata", "uid")},
                "type": kind, "reason": reason, "action": action, "note": note(message),
                "eventTime": micro_time(at), "reportingController": REPORTING_CONTROLLER,
                "reportingInstance": reporting_instance()}
        self._do(f"{kind} Event {reason} on node {name}", self.api.post, EVENTS_PATH, body, best_effort=True)

    def create_job(self, namespace: str, job: dict) -> None:
        name = job["metadata"]["name"]
        self._do(f"create Volcano job {namespace}/{name} on {job['spec']['minAvailable'] - 1} node(s)", self.api.post,
                 f"/apis/{VOLCANO_GROUP}/{VOLCANO_VERSION}/namespaces/{namespace}/{VOLCANO_PLURAL}", job)

    def delete_job(self, namespace: str, name: str) -> None:
        self._do(f"delete stale Volcano job {namespace}/{name}", self.api.delete,
                 f"/apis/{VOLCANO_GROUP}/{VOLCANO_VERSION}/namespaces/{namespace}/{VOLCANO_PLURAL}/{name}")

    def configmap(self, name: str, data: dict[str, str], best_effort: bool = False) -> None:
        self._do(f"update ConfigMap {self.namespace}/{name} ({', '.join(sorted(data))})", self.api.patch,
                 f"/api/v1/namespaces/{self.namespace}/configmaps/{name}", {"data": data}, MERGE_PATCH,
                 best_effort=best_effort)


def _taints_after(node: Mapping[str, Any], *, quarantine: bool, lift_quarantine: bool) -> list[dict]:
    """The node's taints without the hold; without our quarantine where `lift_quarantine`; with the
    quarantine added where `quarantine`. Every other taint (the pool's, a person's) is kept as it is."""
    out = [t for t in kube.get(node, "spec", "taints") or [] if not certify.is_hold(t) and not (
        (lift_quarantine or quarantine) and t.get("key") == fabric.FABRIC_TAINT_KEY
        and t.get("value") == fabric.QUARANTINED)]
    if quarantine:
        out.append({"key": fabric.FABRIC_TAINT_KEY, "value": fabric.QUARANTINED, "effect": fabric.FABRIC_TAINT_EFFECT})
    return out


def apply(writer: Writer, plan: certify.Plan, nodes: Sequence[Mapping[str, Any]], policy: certify.Policy,
          *, at: str) -> None:
    """Write the plan. A tripped breaker writes one Warning Event per node it would have quarantined and
    nothing else. Mode `off` writes nothing; `label` writes everything but taints."""
    if policy.mode == "off":
        return
    by_name = {kube.name(n): n for n in nodes}
    if plan.breaker:
        for d in plan.decisions:
            if d.action == certify.QUARANTINE:
                writer.event(by_name[d.node], "Warning", "FabricCircuitBreakerOpen", "Quarantine",
                             f"{plan.breaker}. Evidence: {d.reason}", at)
        return
    taint = policy.mode == "taint"
    for d in plan.decisions:
        try:
            _apply_one(writer, d, by_name[d.node], taint, at)
        except ApiError:  # said and kept in writer.failed; this node's later writes are skipped
            continue


def _apply_one(writer: Writer, d: certify.Decision, node: Mapping[str, Any], taint: bool, at: str) -> None:
    """One node's writes, the taint first: when it fails nothing else is said about the node."""
    f = certify.facts(node)
    if d.action == certify.CERTIFY:
        # the hold goes; a quarantined taint that a person set stays: it is theirs to remove
        after = _taints_after(node, quarantine=False, lift_quarantine=f.ours)
        if taint and after != (kube.get(node, "spec", "taints") or []):
            writer.taints(node, after, f"lift {'the quarantine' if f.ours else 'the hold'}: {d.reason}")
        record = {"at": d.evidence.get("at") or at, "run": d.evidence.get("run"),
                  "against": d.evidence.get("against"), "boot_id": f.boot_id}  # a re-image changes it
        writer.metadata(d.node, {fabric.FABRIC_STATE_LABEL: "certified"}, {
            certify.CERTIFIED_AT_ANNOTATION: json.dumps(record),
            **({certify.QUARANTINED_BY_ANNOTATION: None} if f.ours else {})})
        writer.condition(d.node, "True", "FabricTestPassed", d.reason, at)
        writer.event(node, "Normal", "FabricCertified", "Certify", d.reason
                     + (" (released from quarantine)" if f.state == fabric.QUARANTINED else ""), at)
    elif d.action == certify.QUARANTINE:
        if taint:
            writer.taints(node, _taints_after(node, quarantine=True, lift_quarantine=False),
                          f"{fabric.FABRIC_TAINT_KEY}={fabric.QUARANTINED}: {d.reason}")
        writer.metadata(d.node, {fabric.FABRIC_STATE_LABEL: "quarantined"},
                        {certify.QUARANTINED_BY_ANNOTATION: certify.CERTIFIER} if taint else {})
        writer.condition(d.node, "False", "FabricTestFailed", d.reason, at)
        writer.event(node, "Warning", "FabricQuarantined", "Quarantine",
                     f"{d.reason}. Evidence: {json.dumps(d.evidence, sort_keys=True)}", at)
    elif d.action == certify.HOLD:
        writer.event(node, "Warning", "FabricNotCertified", "Hold", d.reason, at)


def history_records(api: Api, namespace: str, name: str) -> dict[str, list[dict]]:
    try:
        data = kube.get(api.get(f"/api/v1/namespaces/{namespace}/configmaps/{name}"), "data") or {}
    except ApiError as exc:
        if exc.status == 404:
            return {}
        raise
    out = {}
    for node, text in data.items():
        try:
            records = json.loads(text)
        except ValueError:
            continue
        out[node] = [r for r in records if isinstance(r, dict)] if isinstance(records, list) else []
    return out


def history_update(history: Mapping[str, list[dict]], plan: certify.Plan, *, at: str, run: str,
                   keep: int = HISTORY_KEEP) -> dict[str, str]:
    """The ring's new entries for the nodes this run judged: the last `keep` records per node."""
    out = {}
    for d in plan.decisions:
        if d.action == certify.KEEP and d.verdict == "UNKNOWN":
            continue
        against = d.evidence.get("against") or []
        record = {"at": at, "run": run, "action": d.action, "verdict": d.verdict, "reason": d.reason,
                  "busbw_gbps": max((a.get("busbw_gbps") or 0 for a in against), default=None) or None,
                  "peers": [a["peer"] for a in against], "breaker": plan.breaker}
        out[d.node] = json.dumps([*history.get(d.node, []), record][-keep:], sort_keys=True)
    return out


def metrics_text(plan: certify.Plan, nodes: Sequence[certify.NodeFacts], at_epoch: float) -> str:
    """Prometheus text exposition for a Pushgateway (a batch job cannot be scraped)."""
    lines = ["# TYPE aks_infiniband_fabric_node_state gauge"]
    after = {} if plan.breaker else {d.node: {certify.CERTIFY: "certified", certify.QUARANTINE: fabric.QUARANTINED}
                                      .get(d.action) for d in plan.decisions}
    for n in nodes:  # the state this run leaves (a tripped breaker leaves every node as it was)
        lines.append(f'aks_infiniband_fabric_node_state{{node="{n.name}",state="{after.get(n.name) or n.state}"}} 1')
    lines.append("# TYPE aks_infiniband_fabric_pair_busbw_gbps gauge")
    for d in plan.decisions:
        for a in d.evidence.get("against") or []:
            if a.get("busbw_gbps") is not None:
                lines.append(f'aks_infiniband_fabric_pair_busbw_gbps{{node="{d.node}",peer="{a["peer"]}"}} '
                             f'{a["busbw_gbps"]}')
    lines += ["# TYPE aks_infiniband_fabric_breaker_open gauge",
              f"aks_infiniband_fabric_breaker_open {1 if plan.breaker else 0}",
              "# TYPE aks_infiniband_fabric_last_run_timestamp_seconds gauge",
              f"aks_infiniband_fabric_last_run_timestamp_seconds {at_epoch:.0f}"]
    return "\n".join(lines) + "\n"


def push_metrics(url: str, text: str, timeout: float = 10, pool: str | None = None) -> None:
    """PUT the group to a Pushgateway (its API: /metrics/job/<job>{/<label>/<value>}, text format). A PUT
    replaces its whole group: with `pool` (several IB pools) each pool's run is its own group, `pool` a grouping
    label the Pushgateway adds to every series, so one pool's run never erases another's."""
    group = f"/metrics/job/{certify.CERTIFIER}" + (f"/pool/{pool}" if pool else "")
    req = urllib.request.Request(f"{url.rstrip('/')}{group}", data=text.encode(),
                                 method="PUT", headers={"Content-Type": "text/plain; version=0.0.4"})
    with urllib.request.urlopen(req, timeout=timeout):  # noqa: S310 (a configured Pushgateway)
        pass
