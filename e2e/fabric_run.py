"""A fabric test run as Volcano leaves it, on the real API server: the Volcano Job the stack renders
(accepted by its CRD), its pods bound to the kwok nodes, the launcher's log served by kwok from a file,
and the Job's final phase.

What is played here, and why: Volcano's controller (which creates a Job's pods) and scheduler (which binds
them) cannot be built from the module proxy (e2e/cluster.py VOLCANO_NOT_BUILT). This module writes what
they would: pods named `<job>-<task>-<index>` with Volcano's labels (`volcano.sh/job-name`,
`volcano.sh/task-spec`), `spec.hostname` and `spec.subdomain` as the `svc` plugin sets them, an owner
reference to the Job, bound to a node (`spec.nodeName`); then `status.state.phase` on the Job (its status
subresource). Every write goes through the real API server with its admission (Pod Security of the
namespace included). kwok turns the pods Running, then, because their owner is a `Job`, Succeeded.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from clusterside.kube import JOB_NAME_LABEL, TASK_SPEC_LABEL
from e2e.cluster import Plane, wait


def cri_log(text: str, at: str = "2026-12-01T00:00:00.000000000Z") -> str:
    """`text` in the CRI log format kwok (and the kubelet) read: `<time> stdout F <line>` per line."""
    return "".join(f"{at} stdout F {line}\n" for line in text.splitlines())


def pods_of(job: Mapping[str, Any], nodes_by_task: Mapping[str, Sequence[str]]) -> list[dict[str, Any]]:
    """The pods Volcano's controller creates for `job`, bound as its scheduler would to `nodes_by_task`."""
    meta = job["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    out = []
    for task in job["spec"]["tasks"]:
        template = copy.deepcopy(task["template"])
        for i in range(int(task.get("replicas", 1))):
            pod_name = f"{name}-{task['name']}-{i}"
            spec = copy.deepcopy(template["spec"])
            spec.update({"hostname": pod_name, "subdomain": name, "nodeName": nodes_by_task[task["name"]][i],
                         "schedulerName": job["spec"].get("schedulerName", "volcano")})
            labels = {**(template.get("metadata", {}).get("labels") or {}), JOB_NAME_LABEL: name,
                      TASK_SPEC_LABEL: task["name"], "volcano.sh/job-namespace": namespace}
            out.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": pod_name, "namespace": namespace, "labels": labels,
                "annotations": {"volcano.sh/job-name": name, "volcano.sh/task-spec": task["name"]},
                "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": name,
                                     "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
                "spec": spec})
    return out


def run(plane: Plane, job: Mapping[str, Any], nodes_by_task: Mapping[str, Sequence[str]], launcher_log: str,
        log_dir: Path, phase: str = "Completed", launcher_task: str = "mpimaster") -> list[dict[str, Any]]:
    """The Job (created here unless the stack's apply created it), its pods, the launcher's log, and its end
    in `phase`."""
    meta = job["metadata"]
    if plane.kubectl("get", "jobs.batch.volcano.sh", meta["name"], "-n", meta["namespace"], check=False).returncode:
        plane.kubectl("create", "-f", "-", input=json.dumps(job))
    meta = job["metadata"]
    created = json.loads(plane.kubectl("get", "jobs.batch.volcano.sh", meta["name"], "-n", meta["namespace"],
                                       "-o", "json").stdout)
    pods = pods_of(created, nodes_by_task)
    log_dir.mkdir(parents=True, exist_ok=True)
    launcher = next(p for p in pods if p["metadata"]["labels"][TASK_SPEC_LABEL] == launcher_task)
    log_file = log_dir / f"{launcher['metadata']['name']}.log"
    log_file.write_text(cri_log(launcher_log))
    logs = {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Logs",
            "metadata": {"name": launcher["metadata"]["name"], "namespace": meta["namespace"]},
            "spec": {"logs": [{"containers": [c["name"] for c in launcher["spec"]["containers"]],
                               "logsFile": str(log_file)}]}}
    plane.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [logs, *pods]}))
    names = [p["metadata"]["name"] for p in pods]
    wait(f"the {len(names)} pods of {meta['name']} Succeeded (kwok)", lambda: _all_phase(plane, meta, names), 60)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    plane.kubectl("patch", "jobs.batch.volcano.sh", meta["name"], "-n", meta["namespace"], "--subresource=status",
                  "--type=merge", "-p", json.dumps({"status": {"state": {"phase": phase, "lastTransitionTime": now}}}))
    return pods


def _all_phase(plane: Plane, meta: Mapping[str, Any], names: Sequence[str], phase: str = "Succeeded") -> bool:
    done = plane.kubectl("get", "pods", "-n", meta["namespace"], "-l", f"{JOB_NAME_LABEL}={meta['name']}",
                         "-o", "json", check=False)
    if done.returncode:
        return False
    got = {p["metadata"]["name"]: p.get("status", {}).get("phase") for p in json.loads(done.stdout)["items"]}
    return all(got.get(n) == phase for n in names)
