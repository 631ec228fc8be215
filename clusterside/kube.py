"""The Kubernetes API as `verify collect` reads it: names and field facts with their sources, raw JSON
reads (through the one client, clusterside/kube_api.py), and the API's timestamps. Read-only: nothing
here writes to the cluster.

Objects are read as the JSON the API serves (get_json), so every field below has its API name
(camelCase) and the code reads exactly what `kubectl get -o json` shows.
"""

from __future__ import annotations

import re
import urllib.parse
from datetime import UTC, datetime
from typing import Any

from clusterside.kube_api import Api, ApiError

# Volcano (volcano-sh/volcano @ v1.15.1):
# - the Job is `batch.volcano.sh/v1alpha1`, plural `jobs`; `.status.state.phase` is one of Pending,
#   Aborting, Aborted, Running, Restarting, Completing, Completed, Terminating, Terminated, Failed
#   (the CRD's enum, ../shared/reference/crds/batch.volcano.sh_jobs.v1.15.1.yaml); its tasks are
#   `.spec.tasks[]` with `name`, `replicas` and a pod `template`;
# - the job controller labels every pod with `volcano.sh/job-name` = the job's name and
#   `volcano.sh/task-spec` = its task's name (pkg/controllers/job/job_controller_util.go createJobPod);
# - it names the job's PodGroup `<job name>-<job uid>` (pkg/controllers/job/job_controller_actions.go
#   generateRelatedPodGroupName; before v1.5 it was the job's name, which getPodGroupByJob still
#   falls back to), and creates the pods only once that PodGroup's phase is no longer Pending
#   (syncJob: `pg.Status.Phase != "" && pg.Status.Phase != scheduling.PodGroupPending`): a gang the
#   scheduler does not admit has a PodGroup and no pods;
# - the PodGroup is `scheduling.volcano.sh/v1beta1`, plural `podgroups`; `.status.phase` is one of
#   Pending, Running, Unknown, Inqueue, Completed and `.status.conditions[]` has type, status, reason,
#   message, lastTransitionTime (../shared/reference/crds/scheduling.volcano.sh_podgroups.v1.15.1.yaml);
#   the gang plugin sets type `Unschedulable` (reason NotEnoughResources) or `Scheduled`;
# - the scheduler records a Warning event `FailedScheduling` on a pod it cannot place and sets the
#   pod's `PodScheduled` condition False with reason `Unschedulable` and the same message
#   (pkg/scheduler/cache/cache.go taskUnschedulable); it records `Unschedulable` events on the
#   PodGroup, Warning for a gang that does not fit and Normal when the enqueue action turns it away
#   ("resource in cluster is overused: overused rdma/shared_ib", plugins/overcommit/overcommit.go;
#   "queue resource quota insufficient: ...", plugins/proportion/proportion.go).
VOLCANO_GROUP = "batch.volcano.sh"
VOLCANO_VERSION = "v1alpha1"
VOLCANO_PLURAL = "jobs"
JOB_NAME_LABEL = "volcano.sh/job-name"
TASK_SPEC_LABEL = "volcano.sh/task-spec"
PODGROUP_GROUP = "scheduling.volcano.sh"
PODGROUP_VERSION = "v1beta1"
PODGROUP_PLURAL = "podgroups"
PODGROUP_SCHEDULED = "Scheduled"  # the one condition type that is good news

# NVIDIA Network Operator (Mellanox/network-operator @ v26.4.1,
# ../shared/reference/crds/mellanox.com_nicclusterpolicies.v26.4.1.yaml): cluster-scoped
# `mellanox.com/v1alpha1` `nicclusterpolicies`; `.status.state` is one of ignore, notReady, ready,
# error, `.status.reason` says why on error, and `.status.appliedStates[]` has name, state (same enum)
# and message per deployed component (the DOCA driver, the RDMA device plugin, ...).
NIC_POLICY_GROUP = "mellanox.com"
NIC_POLICY_VERSION = "v1alpha1"
NIC_POLICY_PLURAL = "nicclusterpolicies"

# NVIDIA GPU Operator (NVIDIA/gpu-operator @ v26.7.0,
# ../shared/reference/crds/nvidia.com_clusterpolicies.v26.7.0.yaml): cluster-scoped `nvidia.com/v1`
# `clusterpolicies`; `.status.state` is one of ignored, ready, notReady, `.status.namespace` is the
# operator's namespace, and `.status.conditions[]` are metav1.Conditions (type, status, reason, message).
CLUSTER_POLICY_GROUP = "nvidia.com"
CLUSTER_POLICY_VERSION = "v1"
CLUSTER_POLICY_PLURAL = "clusterpolicies"
READY_STATE = "ready"  # the good value of both operators' status.state

# Kubernetes core/v1 (the API reference): a Node's `.status.conditions[]` of type `Ready` has status
# True/False/Unknown and `lastTransitionTime`; `.status.allocatable` maps a resource name to a
# quantity; `.spec.taints[]` has key, value, effect (NoSchedule, PreferNoSchedule, NoExecute).
# An Event has `involvedObject` (kind, name), `type` (Normal, Warning), `reason`, `message`, and
# `count` / `firstTimestamp` / `lastTimestamp` as the kubelet's and Volcano's event recorders
# (client-go tools/record) write them; events written through events.k8s.io/v1 (the
# kube-scheduler's) carry `eventTime` and `series.count` / `series.lastObservedTime` instead.
# The pod log endpoint's `timestamps=true` prefixes each line with an RFC 3339 time (nanoseconds,
# trailing zeros trimmed) and a space; `sinceSeconds` and `limitBytes` bound what it returns.


# The paths the collector reads (the API reference; what kubernetes-client's generated methods
# list_namespaced_pod, read_namespaced_pod_log, list_namespaced_event, list_node,
# get_namespaced_custom_object and list_cluster_custom_object request); `{x}` is a path parameter.
PODS = "/api/v1/namespaces/{namespace}/pods"
POD_LOG = "/api/v1/namespaces/{namespace}/pods/{name}/log"
EVENTS = "/api/v1/namespaces/{namespace}/events"
NODES = "/api/v1/nodes"
NAMESPACED_OBJECT = "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}"
CLUSTER_OBJECTS = "/apis/{group}/{version}/{plural}"


def _path(path: str, path_params: dict[str, str] | None) -> str:
    """`path` with each parameter quoted into it (a `/` or `?` in a name stays in its segment)."""
    return path.format(**{key: urllib.parse.quote(str(value), safe="") for key, value in (path_params or {}).items()})


def _query(query: dict[str, Any]) -> dict[str, Any]:
    """The query as the API reads it: booleans `true`/`false` (Go's), None left out."""
    return {key: ("true" if value else "false") if isinstance(value, bool) else value
            for key, value in query.items() if value is not None}


def get_json(api: Api, path: str, path_params: dict[str, str] | None = None, *, request_timeout: float,
             **query: Any) -> Any:
    """The JSON the API served at `path` (path parameters quoted into it). `query` uses the API's names
    (labelSelector); None leaves one out. A non-2xx answer, or none, raises kube_api.ApiError (its
    `status` the HTTP status, None when no answer came)."""
    return api.request("GET", _path(path, path_params), query=_query(query), timeout=request_timeout)


def get_text(api: Api, path: str, path_params: dict[str, str] | None = None, *, request_timeout: float,
             **query: Any) -> str:
    """As get_json, for a text answer (a pod's log)."""
    return api.request("GET", _path(path, path_params), query=_query(query), text=True, timeout=request_timeout)


def status_of(exc: Exception) -> int | None:
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) else None


def error_text(exc: Exception) -> str:
    """One line for an API error: `Kubernetes API answered 403 Forbidden`, what kube_api says when no
    answer came, or the exception's first line."""
    status, reason = status_of(exc), getattr(exc, "reason", None)
    if status:
        return f"Kubernetes API answered {status} {reason or ''}".rstrip()
    if isinstance(exc, ApiError):
        return str(exc)
    first_line = str(exc).splitlines()[0] if str(exc) else ""
    return f"{exc.__class__.__name__}: {first_line}".rstrip(": ")


_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")


def time_ns(text: Any) -> int | None:
    """An API timestamp (RFC 3339, `Z` or an offset, up to nanoseconds) as integer epoch nanoseconds:
    exact, so log lines order correctly even where their fractions have different lengths."""
    match = _TIME.match(text) if isinstance(text, str) else None
    if not match:
        return None
    zone = "+00:00" if match[3] == "Z" else match[3]
    seconds = int(datetime.fromisoformat(match[1] + zone).timestamp())
    return seconds * 1_000_000_000 + int((match[2] or "0").ljust(9, "0"))


def epoch(text: Any) -> float | None:
    ns = time_ns(text)
    return ns / 1e9 if ns is not None else None


def iso(seconds: float) -> str:
    """Epoch seconds as the API writes times (UTC, whole seconds)."""
    return datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def duration(seconds: float) -> str:
    """How long, as the collector's messages write it: whole minutes from one minute on, else seconds."""
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f}s"


def get(obj: Any, *path: str) -> Any:
    """obj[path[0]][path[1]]..., or None where a level is missing (API objects omit empty fields)."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def items(obj: Any) -> list[dict]:
    """The `items` of a List the API served (always a list of mappings)."""
    return [i for i in (get(obj, "items") or []) if isinstance(i, dict)]


def name(obj: Any) -> str:
    return str(get(obj, "metadata", "name") or "")


def condition(obj: Any, kind: str) -> dict | None:
    """The `.status.conditions[]` entry of type `kind` (None: not reported)."""
    for cond in get(obj, "status", "conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond
    return None
