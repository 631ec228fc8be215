"""A fabric test run on the real API server, driven by Volcano's own processes (e2e/volcano.py): the Volcano
Job the stack renders is created, Volcano's webhook admits it, its controller makes the PodGroup, the pods
(`<job>-<task>-<index>`, its labels, hostname and subdomain, the `ssh` and `svc` plugins' Secret, Service
and hostfile ConfigMap) and its scheduler gang-binds them to the kwok nodes; the Job's phase is Volcano's.

What the harness still does, and only this: it serves the launcher's log through kwok (a `Logs` object
naming a file of CRI log lines: kwok runs no containers, so no process writes one), and kwok plays the
test's processes (e2e/kwok-stage-mpirun.yaml): the launcher's container exits 0 some seconds after it runs,
as mpirun ends, and the workers run until Volcano's controller deletes them when the launcher's
TaskCompleted -> CompleteJob policy ends the Job, as their sshd does. Nothing here creates or binds a pod,
or writes a Job's status.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from clusterside.kube import JOB_NAME_LABEL
from e2e.cluster import ROOT, Plane, wait

POD_SECONDS, PHASE_SECONDS = 120, 60
# How the harness runs the certifier as its pod would: without PYTHONPATH (the pod's `python3 -S` has the standard
# library and the mounted code only), polling well inside the launcher's 8 s (e2e/kwok-stage-mpirun.yaml; the
# stack's default is 15 s).
CERTIFY_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
CERTIFY_POLL_SECONDS = "0.5"
# A REAL launcher log: scripts/nccl-launcher.sh's merged output, NCCL 2.30.4 and nccl-tests 2.19.6 on two fake
# hosts of one lent H200, without InfiniBand, so NCCL fell back to TCP sockets (tests/data/
# nccl-info_recorded_2.30.4_h200x1.md). Nothing in it is edited but its host names (recorded_log).
RECORDED = "nccl-info_2.30.4_socket-fallback_2-fake-hosts-x1-gpu_h200x1.log"


def cri_log(text: str, at: str = "2026-12-01T00:00:00.000000000Z") -> str:
    """`text` in the CRI log format kwok (and the kubelet) read: `<time> stdout F <line>` per line."""
    return "".join(f"{at} stdout F {line}\n" for line in text.splitlines())


def pod_names(job: Mapping[str, Any]) -> list[str]:
    """The pods Volcano's controller makes for `job`: `<job>-<task>-<index>` (its job_controller_util.go)."""
    name = job["metadata"]["name"]
    return [f"{name}-{t['name']}-{i}" for t in job["spec"]["tasks"] for i in range(int(t.get("replicas", 1)))]


def serve_log(plane: Plane, job: Mapping[str, Any], task: str, text: str, log_dir: Path) -> Path:
    """The launcher's log, served by kwok for pod `<job>-<task>-0` from a file (its `Logs` object); the file."""
    meta = job["metadata"]
    template = next(t for t in job["spec"]["tasks"] if t["name"] == task)["template"]
    pod = f"{meta['name']}-{task}-0"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_file = log_dir / f"{pod}.log"
    log_file.write_text(cri_log(text))
    logs = {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Logs",
            "metadata": {"name": pod, "namespace": meta["namespace"]},
            "spec": {"logs": [{"containers": [c["name"] for c in template["spec"]["containers"]],
                               "logsFile": str(log_file)}]}}
    plane.kubectl("apply", "-f", "-", input=json.dumps(logs))
    return log_file


def recorded_log(job_name: str) -> str:
    """RECORDED, its two fake hosts `node-<i>` renamed `<job_name>-mpiworker-<i>`: the hostnames of the worker
    pods Volcano makes, so that the certifier finds the pods (and so the nodes) the ranks ran on."""
    text = (ROOT / "tests" / "data" / RECORDED).read_text()
    assert re.search(r"\bnode-1\b", text) and not re.search(r"\bnode-2\b", text), "the recording's two hosts"
    return re.sub(r"\bnode-(\d)\b", lambda m: f"{job_name}-mpiworker-{m.group(1)}", text)


def job_state(plane: Plane, job: Mapping[str, Any]) -> dict[str, Any]:
    meta = job["metadata"]
    done = plane.kubectl("get", "jobs.batch.volcano.sh", meta["name"], "-n", meta["namespace"], "-o", "json",
                         check=False)
    return json.loads(done.stdout) if done.returncode == 0 else {}


def pods(plane: Plane, job: Mapping[str, Any]) -> list[dict[str, Any]]:
    meta = job["metadata"]
    done = plane.kubectl("get", "pods", "-n", meta["namespace"], "-l", f"{JOB_NAME_LABEL}={meta['name']}",
                         "-o", "json", check=False)
    return json.loads(done.stdout)["items"] if done.returncode == 0 else []


def run(plane: Plane, job: Mapping[str, Any], launcher_log: str | Callable[[list[dict[str, Any]]], str],
        log_dir: Path, launcher_task: str = "mpimaster", *, created: Callable[[], None] | None = None,
        running: Callable[[], None] | None = None) -> list[dict[str, Any]]:
    """The Job (created here unless the stack's apply created it) run by Volcano to its `Completed` phase,
    the launcher's log served; returns its pods as placed while they ran (after the run only the launcher is
    left: Volcano deletes the workers). A callable log is written from those pods, once Volcano has placed
    them (a log names the hosts its ranks ran on). `created` is called once the Job exists (a certifier
    watching it starts then), `running` once every pod runs, before the launcher ends."""
    meta = job["metadata"]
    log_file = serve_log(plane, job, launcher_task, launcher_log if isinstance(launcher_log, str) else "", log_dir)
    if not job_state(plane, job):
        plane.kubectl("create", "-f", "-", input=json.dumps(job))
    if created:
        created()
    names = pod_names(job)
    placed: dict[str, dict[str, Any]] = {}

    def all_running() -> bool:
        placed.update({p["metadata"]["name"]: p for p in pods(plane, job)
                       if p["spec"].get("nodeName") and p.get("status", {}).get("phase") == "Running"})
        return set(names) <= set(placed)

    wait(f"Volcano to make and bind the {len(names)} pods of {meta['name']}, and kwok to run them", all_running,
         POD_SECONDS, plane.logs / "vc-controller-manager.log")
    if not isinstance(launcher_log, str):
        log_file.write_text(cri_log(launcher_log(list(placed.values()))))
    if running:
        running()
    wait(f"the launcher to end (e2e/kwok-stage-mpirun.yaml) and Volcano's controller to set {meta['name']} "
         "Completed", lambda: job_state(plane, job).get("status", {}).get("state", {}).get("phase") == "Completed",
         PHASE_SECONDS, plane.logs / "vc-controller-manager.log")
    return [placed[n] for n in names]


def remove(plane: Plane, job: Mapping[str, Any]) -> None:
    """The Job deleted with its dependents (its pods and PodGroup, by the garbage collector), and its served
    log, waiting until they are gone."""
    meta = job["metadata"]
    ns = ["-n", meta["namespace"]]
    plane.kubectl("delete", "jobs.batch.volcano.sh", meta["name"], *ns, "--cascade=foreground", "--wait=true",
                  "--timeout=60s", "--ignore-not-found")
    wait(f"the pods of {meta['name']} gone (garbage collector)", lambda: not pods(plane, job), 60)
    plane.kubectl("delete", "logs.kwok.x-k8s.io", "--all", *ns, "--wait=true")
