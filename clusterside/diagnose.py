"""Why the fabric test job is not running, and whether waiting longer can help.

A read-only look (`clusterside.snapshot.read_snapshot`) at the job's pods and their events, its Volcano PodGroup, the IB
pool's nodes, and the two operators (NicClusterPolicy, GPU Operator ClusterPolicy, their pods),
turned by `Diagnoser.assess` into one `Finding` per cause and, when success has become impossible,
the one-line reason to stop waiting:

- an image of a job pod that has failed to pull for IMAGE_PULL_GIVE_UP_MINUTES, by the API's own
  record (the first pull-failure event of that pod: its uid, so a re-run's pods, named as the old
  ones were, are not judged by the old pods' events), so a collector started late decides at once;
- once the node-setup allowance has passed, counted from when the IB pool's nodes became Ready (their
  Ready condition's lastTransitionTime): a GPU or RDMA resource the job requests that too few of the
  pool's Ready nodes advertise, or a taint on them that the job's pods do not tolerate. Before that,
  drivers may still be building and the device plugins not yet registered: keep waiting;
- too few of the pool's nodes Ready for the job, once the allowance has passed counted from when the
  NotReady ones became NotReady (the same lastTransitionTime; the node's creation when it has none).

What the job needs (its device resources, tolerations, replicas) is read from the Job's own pod
templates, and the pool's nodes by the label the node pool sets (fabric.IB_POOL_ROLE_LABEL), so no
fact is copied here. Field names and their sources: clusterside/kube.py. What the pool's nodes say (readiness,
resources, taints, the allowance) is clusterside/diagnose_pool.py's; this module reads the pods, the PodGroup
and the operators, and weighs it all.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterside import diagnose_pool, kube
from clusterside.kube import get, name
from clusterside.snapshot import Finding, Snapshot, tasks_of

# A pull that has failed for this long, by the events' firstTimestamp, is not a registry hiccup: the
# kubelet backs off 10 s, 20 s, 40 s ... (so three or four attempts by then); a wrong name or tag, a
# private registry without a pull secret, or no egress does not fix itself.
IMAGE_PULL_GIVE_UP_MINUTES = 3
# Container waiting reasons for an image that cannot be pulled (kubernetes pkg/kubelet/images/types.go).
IMAGE_PULL_FAILURES = frozenset({
    "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "ImageInspectError",
    "RegistryUnavailable",
})
# Waiting reasons that are progress, not a problem (the kubelet's while it pulls and creates).
WAITING_PROGRESS = frozenset({"ContainerCreating", "PodInitializing"})
# Kubelet event reasons (pkg/kubelet/events/event.go) and messages (pkg/kubelet/images/image_manager.go):
# Warning `Failed` "Failed to pull image %q: ..." per failed attempt; Normal `BackOff` "Back-off pulling
# image %q" while it waits; Normal `Pulling` "Pulling image %q" when an attempt starts, `Pulled` when
# one succeeds. `Failed` and `BackOff` also report containers that fail to start; the container's own
# waiting state says that better, so those two reasons are not repeated from the events.
PULL_FAILED_PREFIX = "Failed to pull image"
PULL_BACKOFF_PREFIX = "Back-off pulling image"
CONTAINER_EVENT_REASONS = frozenset({"Failed", "BackOff"})
MAX_FINDINGS = 20  # one line each in `pulumi up` and in fabricVerdictReasons


@dataclass(frozen=True)
class Event:
    """A core/v1 Event, with the legacy and the events.k8s.io/v1 fields folded together (kube.py)."""

    kind: str
    name: str
    uid: str  # the involved object's uid ("" when the event names none)
    field_path: str
    type: str
    reason: str
    message: str
    count: int
    first: float | None
    last: float | None

    @classmethod
    def of(cls, raw: dict) -> Event:
        first = kube.epoch(raw.get("firstTimestamp")) or kube.epoch(raw.get("eventTime"))
        last = (kube.epoch(raw.get("lastTimestamp")) or kube.epoch(get(raw, "series", "lastObservedTime"))
                or first)
        involved = raw.get("involvedObject") or {}
        return cls(kind=str(involved.get("kind") or ""), name=str(involved.get("name") or ""),
                   uid=str(involved.get("uid") or ""), field_path=str(involved.get("fieldPath") or ""),
                   type=str(raw.get("type") or ""),
                   reason=str(raw.get("reason") or ""), message=" ".join(str(raw.get("message") or "").split()),
                   count=int(raw.get("count") or get(raw, "series", "count") or 1), first=first, last=last)

    def about_pod(self, pod: dict) -> bool:
        """Volcano names a re-run's pods as it named the old ones (`<job>-mpiworker-0`) and events live
        on for about an hour (the API server's --event-ttl), so the name alone would count the old pod's
        events: an event is this pod's when it names the pod's uid, or, naming no uid, the pod's name
        and has happened since the pod was created."""
        if self.kind != "Pod" or self.name != name(pod):
            return False
        if self.uid:
            return self.uid == str(get(pod, "metadata", "uid") or "")
        created = kube.epoch(get(pod, "metadata", "creationTimestamp"))
        return created is None or self.last is None or self.last >= created

    def about_container(self, container: str) -> bool:
        """Container events name it in fieldPath (`spec.containers{name}`); one without names all of them."""
        return not self.field_path or f"{{{container}}}" in self.field_path


@dataclass(frozen=True)
class PullFailure:
    pod: str
    container: str
    image: str
    reason: str
    message: str
    since: float  # the first failed attempt, by the API's record (or this collector's first sight)
    attempts: int


def _statuses(pod: dict) -> list[dict]:
    """The pod's container statuses, init containers first, each with its spec's image as fallback."""
    spec = get(pod, "spec") or {}
    containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
    images = {c.get("name"): c.get("image") for c in containers}
    out = []
    for status in (get(pod, "status", "initContainerStatuses") or []) + (get(pod, "status", "containerStatuses") or []):
        if isinstance(status, dict):
            out.append({**status, "image": images.get(status.get("name")) or status.get("image") or "?"})
    return out


@dataclass(frozen=True)
class Assessment:
    findings: tuple[Finding, ...]  # the most telling first
    give_up: str | None  # why waiting longer cannot help; None: keep waiting
    allowance: str  # where the node-setup allowance stands, for progress lines


class Diagnoser:
    """Turns snapshots into findings and the give-up decision. Keeps one thing between polls: when it
    first saw a job container failing to pull, for a pull failure the events do not record."""

    def __init__(self, namespace: str, job: str, *, setup_allowance_seconds: float,
                 image_pull_give_up_seconds: float = IMAGE_PULL_GIVE_UP_MINUTES * 60):
        self.namespace, self.job = namespace, job
        self.setup_allowance_seconds = setup_allowance_seconds
        self.image_pull_give_up_seconds = image_pull_give_up_seconds
        self._pull_first_seen: dict[tuple[str, str], float] = {}

    # --- the job's pods -------------------------------------------------------------------------
    def job_pods(self, snap: Snapshot, now: float) -> tuple[list[Finding], list[PullFailure]]:
        events = [Event.of(e) for e in snap.events or []]
        findings: list[Finding] = []
        pulls: list[PullFailure] = []
        for pod in sorted(snap.pods or [], key=name):
            where = f"pod {snap.namespace}/{name(pod)}"
            mine = [e for e in events if e.about_pod(pod)]
            scheduled = kube.condition(pod, "PodScheduled") or {}
            if scheduled.get("status") == "False":
                findings.append(Finding(scheduled.get("reason") or "Unschedulable", where,
                                        scheduled.get("message") or "not scheduled yet"))
            for status in _statuses(pod):
                container, image = str(status.get("name")), str(status["image"])
                at = f"{where} container {container}"
                waiting = get(status, "state", "waiting") or {}
                reason, message = waiting.get("reason"), " ".join(str(waiting.get("message") or "").split())
                if reason in IMAGE_PULL_FAILURES:
                    failure = self._pull_failure(pod, container, image, reason, message, mine, now)
                    pulls.append(failure)
                    findings.append(Finding(reason, at, f"image {image} fails to pull since {kube.iso(failure.since)}"
                                                        + (f": {failure.message}" if failure.message else "")))
                elif reason in WAITING_PROGRESS:
                    pulling = self._pulling_since(mine, container)
                    if pulling is not None:
                        findings.append(Finding("Pulling", at, f"image {image}, pulling since {kube.iso(pulling)}"))
                elif reason:
                    findings.append(Finding(reason, at, message or _restarts(status)))
                terminated = get(status, "state", "terminated") or {}
                if terminated.get("exitCode") not in (None, 0):
                    findings.append(Finding("Terminated", at, _exit_text(terminated)))
            if get(pod, "status", "phase") == "Failed":
                findings.append(Finding(get(pod, "status", "reason") or "Failed", where,
                                        get(pod, "status", "message") or "the pod failed"))
            for event in mine:
                if event.type == "Warning" and event.reason not in CONTAINER_EVENT_REASONS:
                    findings.append(Finding(event.reason, where, event.message))
        return _unique(findings), pulls

    def _pull_failure(self, pod: dict, container: str, image: str, reason: str, message: str,
                      events: list[Event], now: float) -> PullFailure:
        failed = [e for e in events if e.about_container(container) and (
            (e.reason == "Failed" and e.message.startswith(PULL_FAILED_PREFIX))
            or (e.reason == "BackOff" and e.message.startswith(PULL_BACKOFF_PREFIX))
            or e.reason in IMAGE_PULL_FAILURES)]
        key = (str(get(pod, "metadata", "uid") or name(pod)), container)
        first_seen = self._pull_first_seen.setdefault(key, now)
        recorded = [e.first for e in failed if e.first is not None]
        since = min([first_seen, *recorded])
        errors = [e for e in failed if e.reason == "Failed"]
        attempts = sum(e.count for e in errors) or sum(e.count for e in failed) or 1
        last_error = max(errors, key=lambda e: e.last or 0).message if errors else message
        return PullFailure(pod=name(pod), container=container, image=image, reason=reason, message=last_error,
                           since=since, attempts=attempts)

    @staticmethod
    def _pulling_since(events: list[Event], container: str) -> float | None:
        """When the current pull began: the last `Pulling` with no `Pulled` after it (None: not pulling)."""
        pulling = [e.last for e in events if e.reason == "Pulling" and e.about_container(container) and e.last]
        pulled = [e.last for e in events if e.reason == "Pulled" and e.about_container(container) and e.last]
        if not pulling or (pulled and max(pulled) >= max(pulling)):
            return None
        return max(pulling)

    # --- the PodGroup ---------------------------------------------------------------------------
    def pod_group(self, snap: Snapshot) -> list[Finding]:
        if snap.pod_group is None:
            if snap.pods or any(f.where.startswith("podgroup") for f in snap.unreadable):
                return []
            return [Finding("no PodGroup", f"job {snap.namespace}/{self.job}",
                            "Volcano has created no PodGroup for the job: is its controller running "
                            "(namespace volcano-system)?")]
        where = f"podgroup {snap.namespace}/{snap.pod_group_name}"
        findings = []
        for cond in get(snap.pod_group, "status", "conditions") or []:
            if cond.get("status") == "True" and cond.get("type") != kube.PODGROUP_SCHEDULED:
                text = ": ".join(str(x) for x in (cond.get("reason"), cond.get("message")) if x)
                findings.append(Finding(f"PodGroup {cond.get('type')}", where, text or "no message"))
        for event in (Event.of(e) for e in snap.events or []):
            if event.kind == "PodGroup" and event.name == snap.pod_group_name and event.reason == "Unschedulable":
                findings.append(Finding("PodGroup Unschedulable", where, event.message))
        if get(snap.pod_group, "status", "phase") in (None, "Pending") and not snap.pods:
            findings.append(Finding("PodGroup Pending", where, "Volcano creates the job's pods once it admits the "
                                    "gang, and it has not yet"))
        return _unique(findings)

    # --- the operators --------------------------------------------------------------------------
    @staticmethod
    def operators(snap: Snapshot) -> tuple[list[Finding], list[Finding]]:
        """(problems, progress): a crash loop or pull error first, pods still starting after."""
        problems: list[Finding] = []
        progress: list[Finding] = []
        if snap.nic_policies is not None and not snap.nic_policies:
            problems.append(Finding("no NicClusterPolicy", "nicclusterpolicies",
                                    "none exists: the Network Operator deploys no DOCA driver and no RDMA device "
                                    "plugin without one"))
        for policy in snap.nic_policies or []:
            where = f"nicclusterpolicy {name(policy)}"
            state = get(policy, "status", "state")
            if state != kube.READY_STATE:
                reason = get(policy, "status", "reason")
                progress.append(Finding("NicClusterPolicy", where, f"state {state or 'not reported yet'}"
                                        + (f": {reason}" if reason else "")))
            for applied in get(policy, "status", "appliedStates") or []:
                if applied.get("state") in ("notReady", "error"):
                    target = problems if applied.get("state") == "error" else progress
                    target.append(Finding(f"NicClusterPolicy {applied.get('name')}", where,
                                          f"{applied.get('state')}: {applied.get('message') or 'no message'}"))
        for policy in snap.cluster_policies or []:
            where = f"clusterpolicy {name(policy)}"
            state = get(policy, "status", "state")
            if state != kube.READY_STATE:
                progress.append(Finding("ClusterPolicy", where, f"state {state or 'not reported yet'}"))
                for cond in get(policy, "status", "conditions") or []:
                    bad = (cond.get("type") == "Error" and cond.get("status") == "True") or (
                        cond.get("type") == "Ready" and cond.get("status") == "False")
                    if bad and (cond.get("reason") or cond.get("message")):
                        text = ": ".join(str(x) for x in (cond.get("reason"), cond.get("message")) if x)
                        progress.append(Finding(f"ClusterPolicy {cond.get('type')}", where, text))
        for namespace, pods in snap.operator_pods.items():
            for pod in sorted(pods, key=name):
                phase = get(pod, "status", "phase")
                if phase == "Succeeded" or (kube.condition(pod, "Ready") or {}).get("status") == "True":
                    continue
                where = f"pod {namespace}/{name(pod)}"
                scheduled = kube.condition(pod, "PodScheduled") or {}
                if scheduled.get("status") == "False":
                    problems.append(Finding(scheduled.get("reason") or "Unschedulable", where,
                                            scheduled.get("message") or "not scheduled"))
                for status in _statuses(pod):
                    at = f"{where} container {status.get('name')}"
                    waiting = get(status, "state", "waiting") or {}
                    reason = waiting.get("reason")
                    if reason and reason not in WAITING_PROGRESS:
                        detail = " ".join(str(waiting.get("message") or "").split())
                        image = f"image {status['image']}: " if reason in IMAGE_PULL_FAILURES else ""
                        problems.append(Finding(reason, at, f"{image}{detail or 'no message'}"
                                                + (f"; {_restarts(status)}" if status.get("restartCount") else "")))
                    elif get(status, "state", "running") and not status.get("ready"):
                        started = get(status, "state", "running", "startedAt") or "?"
                        progress.append(Finding("not Ready", at, f"running since {started}, not ready yet"))
        return _unique(problems), _unique(progress)

    # --- all of it ------------------------------------------------------------------------------
    def assess(self, snap: Snapshot, now: float) -> Assessment:
        tasks = tasks_of(snap.job)
        pod_findings, pulls = self.job_pods(snap, now)
        pool = diagnose_pool.view(snap, tasks, self.job)
        problems, progress = self.operators(snap)
        # the most telling first: what the pods and the nodes say, then the operators, then Volcano's view
        findings = [*pod_findings, *pool.findings, *problems, *self.pod_group(snap), *snap.unreadable,
                    *([pool.summary] if pool.summary else []), *progress]
        if len(findings) > MAX_FINDINGS:
            hidden = len(findings) - MAX_FINDINGS + 1
            findings = [*findings[:MAX_FINDINGS - 1], Finding("more", "", f"{hidden} more findings not shown")]

        give_up = None
        for pull in pulls:
            if now - pull.since >= self.image_pull_give_up_seconds:
                give_up = (f"image {pull.image} of pod {snap.namespace}/{pull.pod} (container {pull.container}) "
                           f"cannot be pulled: {pull.reason} since {kube.iso(pull.since)} "
                           f"({kube.duration(now - pull.since)}, {pull.attempts} failed attempt(s))"
                           + (f"; last error: {pull.message}" if pull.message else ""))
                break
        allowance_minutes = kube.duration(self.setup_allowance_seconds)
        if snap.nodes is None:
            allowance = "node-setup allowance unknown (the IB pool's nodes could not be read)"
        elif pool.allowance is None:
            allowance = "node-setup allowance not started (too few IB-pool nodes to count it from)"
        else:
            started = pool.allowance.at
            ends = started + self.setup_allowance_seconds
            where_it_stands = (f"ends {kube.iso(ends)}, {kube.duration(ends - now)} left" if now < ends
                               else f"passed at {kube.iso(ends)}")
            allowance = (f"node-setup allowance of {allowance_minutes} from {kube.iso(started)} "
                         f"({pool.allowance.counted_from}) {where_it_stands}")
            if give_up is None and now >= ends and pool.blockers:
                give_up = (f"{pool.blockers[0]}; {pool.allowance.since} ({kube.duration(now - started)}, past the "
                           f"{allowance_minutes} node-setup allowance)" + (f". {pool.hint}" if pool.hint else ""))
        return Assessment(findings=tuple(findings), give_up=give_up, allowance=allowance)


def _restarts(status: dict) -> str:
    last = get(status, "lastState", "terminated") or {}
    text = f"restarted {status.get('restartCount') or 0} times"
    return f"{text}, last exit: {_exit_text(last)}" if last else text


def _exit_text(terminated: dict) -> str:
    text = f"{terminated.get('reason') or 'exited'}, exit code {terminated.get('exitCode')}"
    message = " ".join(str(terminated.get("message") or "").split())
    return f"{text}: {message}" if message else text


def _unique(findings: list[Finding]) -> list[Finding]:
    """Each cause once (a FailedScheduling event repeats the PodScheduled condition's message)."""
    seen: set[tuple[str, str]] = set()
    out = []
    for finding in findings:
        key = (finding.where, finding.message)
        if key not in seen:
            seen.add(key)
            out.append(finding)
    return out
