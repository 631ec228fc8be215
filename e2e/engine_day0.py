"""What a day-0 `pulumi up` of a stack with the fabric test needs of this cluster that AKS would do by itself,
done by the harness beside the CLI (a thread, while `pulumi up` runs). Each stand-in, and only these:

1. Volcano's programs (e2e/volcano.py) for the pods of the manifest's Deployments, started once the stack has
   applied the manifest. Until they answer, kwok holds those pods Pending (e2e/kwok-stage-engine-day0.yaml),
   so the stack's await of the Deployments is what orders its Volcano Job after them.
2. The launcher's log, served by kwok (fabric_run.serve_log): a REAL recording (fabric_run.recorded_log). kwok
   plays the launcher and the workers as in every fabric run (e2e/kwok-stage-mpirun.yaml); Volcano's
   controller, scheduler and webhook do the rest.
3. The day-0 certify pod: kwok holds it Running. The harness runs the pod's own command (`python -S -m verify
   certify ...`) from this checkout, the code the pod's ConfigMaps hold, with a token of the pod's
   ServiceAccount bound to the pod. Then it reports the pod finished with that exit code, as a kubelet
   would: the pod's phase and its container's terminated state. One flag is added, `--poll-seconds`, because
   kwok's launcher runs seconds, not the minutes of a real run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from components.fabric import certifier
from e2e import fabric_run, kubelet, volcano
from e2e.cluster import ROOT, ClusterError, Plane, kubeconfig, say, wait

CERTIFY_SECONDS = 300
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def certify_pod(plane: Plane) -> dict[str, Any] | None:
    """The day-0 certify Job's pod, once kwok runs it (the certifier's labels, a Job's pod)."""
    selector = ",".join([*(f"{k}={v}" for k, v in certifier.LABELS.items()), JOB_NAME_LABEL])
    pods = json.loads(plane.kubectl("get", "pods", "-n", certifier.NAMESPACE, "-l", selector, "-o", "json").stdout)
    running = [p for p in pods["items"] if (p.get("status") or {}).get("phase") == "Running"]
    return running[0] if running else None


def verify_args(pod: Mapping[str, Any]) -> list[str]:
    """The pod's `python3 -S -m verify ARGS...` -> ARGS."""
    command = pod["spec"]["containers"][0]["command"]
    return command[command.index("verify") + 1:]


def pod_kubeconfig(plane: Plane, pod: Mapping[str, Any], path: Path) -> Path:
    """A kubeconfig with a token of the pod's ServiceAccount bound to the pod (what the kubelet mounts)."""
    meta, account = pod["metadata"], pod["spec"]["serviceAccountName"]
    token = plane.kubectl("create", "token", account, "-n", meta["namespace"], "--bound-object-kind=Pod",
                          f"--bound-object-name={meta['name']}", f"--bound-object-uid={meta['uid']}",
                          "--duration=1h").stdout.strip()
    return kubeconfig(path, plane.state / "pki", account, {"token": token})


class Day0:
    """The stand-ins above for one `pulumi up`, in a thread: start() before the CLI, join() after it.
    `manifest`: Volcano's objects as the stack applies them; `job`: the fabric test's Volcano Job as the stack
    renders it; `log`: the launcher's log to serve; `start_volcano` False for a later `up`, Volcano already
    running. After join: `code` and `stderr` of the certify run, `args` (the pod's verify arguments), `certify_job`."""

    def __init__(self, plane: Plane, manifest: Sequence[Mapping[str, Any]], job: Mapping[str, Any], log: str,
                 workdir: Path, up_seconds: float, start_volcano: bool = True):
        self.plane, self.manifest, self.job, self.log, self.dir = plane, manifest, job, log, workdir
        self.up_seconds, self.start_volcano = up_seconds, start_volcano
        self.code: int | None = None
        self.args: list[str] = []  # the certify pod's verify arguments
        self.certify_job = ""  # the certify pod's Job
        self.stderr = ""
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="day0-stand-ins", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def join(self, timeout: float = 60) -> None:
        """Waits for the stand-ins to end; raises what went wrong in them."""
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise ClusterError(f"the day-0 stand-ins still run {timeout:.0f} s after `pulumi up` ended")
        if self.error:
            raise self.error

    def _run(self) -> None:
        try:
            if self.start_volcano:
                volcano.start(self.plane, self.manifest, applied_by_stack=self.up_seconds)
            ns = self.job["metadata"]["namespace"]
            wait(f"the fabric test's namespace {ns} (the stack's)", lambda: self.plane.kubectl(
                "get", "namespace", ns, check=False).returncode == 0, self.up_seconds)
            fabric_run.serve_log(self.plane, self.job, "mpimaster", self.log, self.dir / "logs")
            found: list[dict[str, Any]] = []

            def running() -> bool:
                found[:] = [pod] if (pod := certify_pod(self.plane)) else []
                return bool(found)
            wait("the day-0 certify pod Running (the stack's Job; kwok holds it)", running, self.up_seconds)
            self.certify(found[0])
        except BaseException as err:  # noqa: BLE001 (handed to join, in the test's thread)
            self.error = err

    def certify(self, pod: Mapping[str, Any]) -> None:
        name = pod["metadata"]["name"]
        self.args, self.certify_job = verify_args(pod), pod["metadata"]["labels"][JOB_NAME_LABEL]
        argv = [sys.executable, "-S", "-m", "verify", *self.args,
                "--kubeconfig", str(pod_kubeconfig(self.plane, pod, self.dir / "certify-pod.kubeconfig")),
                "--poll-seconds", fabric_run.CERTIFY_POLL_SECONDS]
        say(f"running the certify pod {name}'s command as its ServiceAccount: {' '.join(argv[4:8])} ...")
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=CERTIFY_SECONDS,
                              env=fabric_run.CERTIFY_ENV)
        self.code, self.stderr = done.returncode, done.stderr
        (self.dir / "certify.stderr").write_text(done.stderr)
        kubelet.report(self.plane, pod, done.returncode)
        say(f"certify pod {name} reported ended, exit {done.returncode}")
