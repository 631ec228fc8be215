"""What one look at the cluster reads for the diagnosis (clusterside/diagnose.py), and what the job needs.

`read_snapshot` does GETs and LISTs only: the job's pods and the events in its namespace, its Volcano
PodGroup, the IB pool's nodes (by the label the node pool sets, fabric.IB_POOL_ROLE_LABEL), and the two
operators (NicClusterPolicy, GPU Operator ClusterPolicy, their pods) when the job asks for their
resources. A read that fails becomes a `Finding`; it never ends the wait. What the job needs (its
device resources, tolerations, replicas) is read from the Job's own pod templates (`tasks_of`), so no
fact is copied here. Field names and their sources: clusterside/kube.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clusterside import kube
from clusterside.kube import get, items, name
from core import fabric


@dataclass(frozen=True)
class Finding:
    """One cause, in one line: what (a reason, e.g. FailedScheduling), where (the object), the message.
    Messages hold no ages or event counts, so a cause that has not changed reads the same on every
    poll (and is printed once); a restart count that grows is a change worth a line."""

    what: str
    where: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"what": self.what, "where": self.where, "message": self.message}

    def __str__(self) -> str:
        return f"{self.what} ({self.where}): {self.message}"


@dataclass(frozen=True)
class Task:
    """A task of the Volcano Job, as far as scheduling is concerned."""

    name: str
    replicas: int
    devices: dict[str, int]  # extended resources (domain/name) per pod, e.g. {"rdma/shared_ib": 1}
    tolerations: tuple[dict, ...]


def count(quantity: Any) -> int:
    """An extended resource's quantity (always a whole number: "8", "63"; 0 when unreadable)."""
    try:
        return int(str(quantity))
    except ValueError:
        return 0


def _device_requests(container: dict) -> dict[str, int]:
    # Extended resources are domain-qualified (`rdma/shared_ib`, `nvidia.com/gpu`); for them a request
    # equals its limit and either may be written.
    wanted = {**(get(container, "resources", "limits") or {}), **(get(container, "resources", "requests") or {})}
    return {r: count(q) for r, q in wanted.items() if "/" in r and count(q) > 0}


def tasks_of(job: dict) -> list[Task]:
    tasks = []
    for task in get(job, "spec", "tasks") or []:
        spec = get(task, "template", "spec") or {}
        devices: dict[str, int] = {}
        for container in spec.get("containers") or []:  # containers run together: their requests add up
            for resource, units in _device_requests(container).items():
                devices[resource] = devices.get(resource, 0) + units
        for container in spec.get("initContainers") or []:  # one at a time: the largest counts
            for resource, units in _device_requests(container).items():
                devices[resource] = max(devices.get(resource, 0), units)
        tasks.append(Task(name=str(task.get("name") or ""), replicas=int(task.get("replicas") or 1),
                          devices=devices, tolerations=tuple(spec.get("tolerations") or ())))
    return tasks


def wants_rdma(tasks: list[Task]) -> bool:
    return any(r.startswith(f"{fabric.RDMA_RESOURCE_PREFIX}/") for t in tasks for r in t.devices)


def wants_gpu(tasks: list[Task]) -> bool:
    return any(fabric.GPU_RESOURCE in t.devices for t in tasks)


def pool_selector() -> str:
    return ",".join(f"{k}={v}" for k, v in fabric.pool_node_selector().items())


@dataclass
class Snapshot:
    """What one look at the cluster saw; None: not read (not relevant, or unreadable: see `unreadable`)."""

    namespace: str
    job: dict
    pods: list[dict] | None = None
    events: list[dict] | None = None
    pod_group_name: str | None = None
    pod_group: dict | None = None
    nodes: list[dict] | None = None
    nic_policies: list[dict] | None = None
    cluster_policies: list[dict] | None = None
    operator_pods: dict[str, list[dict]] = field(default_factory=dict)
    unreadable: list[Finding] = field(default_factory=list)


def read_snapshot(client, namespace: str, job: dict, *, request_timeout: float) -> Snapshot:
    """Read everything the diagnosis needs, GETs and LISTs only. A read that fails (no RBAC, a CRD
    that is not installed) becomes a finding; it never ends the wait."""
    snap, job_name, tasks = Snapshot(namespace=namespace, job=job), name(job), tasks_of(job)

    def read(where: str, path: str, path_params: dict | None = None, *, not_found: str | None = None,
             **query) -> Any:
        try:
            return kube.get_json(client, path, path_params, request_timeout=request_timeout, **query)
        except Exception as exc:
            if kube.status_of(exc) == 404 and not_found:
                snap.unreadable.append(Finding("not found", where, not_found))
            else:
                snap.unreadable.append(Finding("cannot read", where, kube.error_text(exc)))
            return None

    found = read(f"pods of job {namespace}/{job_name}", kube.PODS, {"namespace": namespace},
                 labelSelector=f"{kube.JOB_NAME_LABEL}={job_name}")
    snap.pods = items(found) if found is not None else None
    found = read(f"events in namespace {namespace}", kube.EVENTS, {"namespace": namespace})
    snap.events = items(found) if found is not None else None

    uid = get(job, "metadata", "uid")
    for candidate in ([f"{job_name}-{uid}"] if uid else []) + [job_name]:  # kube.py: Volcano's naming
        try:
            snap.pod_group = kube.get_json(client, kube.NAMESPACED_OBJECT, {
                "group": kube.PODGROUP_GROUP, "version": kube.PODGROUP_VERSION, "namespace": namespace,
                "plural": kube.PODGROUP_PLURAL, "name": candidate}, request_timeout=request_timeout)
            snap.pod_group_name = candidate
            break
        except Exception as exc:
            if kube.status_of(exc) != 404:
                snap.unreadable.append(Finding("cannot read", f"podgroup {namespace}/{candidate}",
                                               kube.error_text(exc)))
                break

    found = read(f"nodes with label {pool_selector()}", kube.NODES, labelSelector=pool_selector())
    snap.nodes = items(found) if found is not None else None

    operator_namespaces = []
    if wants_rdma(tasks):
        found = read("nicclusterpolicies", kube.CLUSTER_OBJECTS, {"group": kube.NIC_POLICY_GROUP,
                     "version": kube.NIC_POLICY_VERSION, "plural": kube.NIC_POLICY_PLURAL},
                     not_found="the NicClusterPolicy CRD is not installed: is the Network Operator?")
        snap.nic_policies = items(found) if found is not None else None
        operator_namespaces.append(fabric.NETWORK_OPERATOR_NAMESPACE)
    if wants_gpu(tasks):
        found = read("clusterpolicies", kube.CLUSTER_OBJECTS, {"group": kube.CLUSTER_POLICY_GROUP,
                     "version": kube.CLUSTER_POLICY_VERSION, "plural": kube.CLUSTER_POLICY_PLURAL},
                     not_found="the ClusterPolicy CRD is not installed: is the GPU Operator?")
        snap.cluster_policies = items(found) if found is not None else None
        named = [get(p, "status", "namespace") for p in snap.cluster_policies or []]
        operator_namespaces.append(next((n for n in named if n), fabric.GPU_OPERATOR_NAMESPACE))
    for operator_namespace in operator_namespaces:
        found = read(f"pods in namespace {operator_namespace}", kube.PODS, {"namespace": operator_namespace})
        if found is not None:
            snap.operator_pods[operator_namespace] = items(found)
    return snap
