"""A pod's status as a kubelet reports it, written by the harness for the pods a kwok stage holds
(e2e/kwok-stage-engine-day0.yaml): kwok runs no container, so where a program of the harness stands in for
one, the harness reports the container started or ended."""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from typing import Any

from e2e.cluster import Plane


def timestamp() -> str:
    """Now, as a kubelet writes a pod status's times (RFC 3339, UTC, seconds)."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def report(plane: Plane, pod: Mapping[str, Any], exit_code: int | None = None) -> None:
    """The pod's containers reported running and Ready (`exit_code` None), or ended with `exit_code`: the pod
    Succeeded on 0, else Failed (restartPolicy Never)."""
    now, running = timestamp(), exit_code is None
    state = ({"running": {"startedAt": now}} if running else {"terminated": {
        "exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error",
        "startedAt": now, "finishedAt": now}})
    status = {"phase": "Running" if running else "Succeeded" if exit_code == 0 else "Failed",
              "conditions": [{"type": t, "status": str(running), "lastTransitionTime": now}
                             for t in ("ContainersReady", "Ready")],
              "containerStatuses": [{"name": c["name"], "image": c["image"], "ready": running, "started": running,
                                     "restartCount": 0, "state": state} for c in pod["spec"]["containers"]]}
    if running:
        status["startTime"] = now
        status["conditions"].insert(0, {"type": "Initialized", "status": "True", "lastTransitionTime": now})
    plane.kubectl("patch", "pod", pod["metadata"]["name"], "-n", pod["metadata"]["namespace"],
                  "--subresource=status", "--type=strategic", "-p", json.dumps({"status": status}))
