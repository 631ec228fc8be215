"""`python -m verify collect`: wait for the Volcano Job while saying what it waits for, give up early
when it cannot succeed, stream the launcher's log while it runs, then read that log to judge it.

Run by the stack's collect step and by people afterwards. The stack's step fetches the cluster's
credentials itself (`--aks-resource-group RG --aks-cluster NAME --subscription ID`: `az aks
get-credentials ... --file -`, read from az's stdout and never written to a file), so that no
kubeconfig is an input of that step: a credential rotation then changes nothing in the stack, and a
second `pulumi up` does not re-run the collector (`api_client` gives the order of the sources).

While the job is not running, each poll reads the cluster (clusterside/diagnose.py: the job's pods and
events, its PodGroup, the IB pool's nodes, the operators) and prints what changed: a new phase, a new
cause. Between changes a heartbeat every HEARTBEAT_MINUTES says how long it has waited and what is
still missing. It gives up (`Incomplete`) when diagnose.py says success is impossible, or at the
timeout, with the diagnosis. The Kubernetes facts it relies on are in clusterside/kube.py.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from clusterside import kube, kube_api
from clusterside.diagnose import Diagnoser
from clusterside.kube import (  # noqa: F401  (re-exported: the CLI and the tests name them here)
    JOB_NAME_LABEL,
    TASK_SPEC_LABEL,
    VOLCANO_GROUP,
    VOLCANO_PLURAL,
    VOLCANO_VERSION,
)
from clusterside.snapshot import Finding, read_snapshot

LAUNCHER_TASK = "mpimaster"
# Phases after which the job does nothing more. Completing/Aborting/Terminating are on their way there.
DONE_PHASES = frozenset({"Completed"})
FAILED_PHASES = frozenset({"Failed", "Aborted", "Terminated"})
# Phases in which the job's pods run: the launcher's log is streamed instead of diagnosing the cluster.
RUNNING_PHASES = frozenset({"Running", "Completing"})
REQUEST_TIMEOUT_SECONDS = 30
# A long wait should survive an API server blip: this many failed polls in a row end it (401/403/404 at once).
MAX_CONSECUTIVE_POLL_ERRORS = 5
LOG_TAIL_LINES = 30
# How long the nodes' own setup may take once the IB pool's nodes are Ready: the DOCA driver build,
# then the GPU driver container (it waits for the DOCA driver), the device plugins, and the test
# image's pull - up to ~35 minutes by the high estimates in offline/durations.py. The job's pods start
# only after it, and their own deadline (activeDeadlineSeconds = timeoutMinutes) with them, so the
# stack's collect step waits this long plus that deadline (components/fabric/fabric_check.py). Until it has
# passed, a missing GPU or RDMA resource is setup still under way; after it, a reason to give up.
NODE_SETUP_BUDGET_MINUTES = 45
HEARTBEAT_MINUTES = 5  # a line at least this often, even when nothing changes
# While the job waits, the cluster is read (about eight GETs) at most this often, and whenever the job's
# phase changes; the job itself every poll. So a reason to give up ends the wait within a minute.
DIAGNOSE_SECONDS = 45
STREAM_LIMIT_BYTES = 256 * 1024  # the most one launcher-log read returns
STREAM_OVERLAP_SECONDS = 30  # re-read this much before the last line seen (duplicates are dropped)
STREAM_MAX_LINES = 200  # the most launcher lines shown per poll
# NCCL's INFO lines (hundreds with NCCL_DEBUG=INFO) stay in the log that is judged; the stream shows the rest.
STREAM_SKIP = " NCCL INFO "


class CollectError(RuntimeError):
    """Timeout, API error, missing job or pod: one line for the user, exit code 2."""


class Incomplete(CollectError):
    """The run did not complete: the collector gave up (success impossible) or timed out. Carries the
    diagnosis, so the CLI can report it as a result rather than as a bare error line."""

    def __init__(self, message: str, *, phase: str, diagnosis: tuple[Finding, ...], waited_seconds: float):
        super().__init__(message)
        self.phase, self.diagnosis, self.waited_seconds = phase, diagnosis, waited_seconds


@dataclass(frozen=True)
class Collected:
    phase: str
    job_message: str | None
    pod: str
    log: str
    # Why a failed job failed (its pods' exit codes, reasons); empty for a completed job.
    diagnosis: tuple[Finding, ...] = field(default_factory=tuple)


class Clock:
    """Wall-clock time in epoch seconds (comparable with the API's timestamps; a skew of a few seconds
    between this machine and the cluster is noise next to the allowances) and sleeping. Tests pass a
    fake one: scripted timelines, no real waiting."""

    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


CLOCK = Clock()  # the clock `collect` uses unless given one


def _progress(message: str) -> None:
    print(f"[verify collect] {message}", file=sys.stderr, flush=True)


AZ_TIMEOUT_SECONDS = 120  # one `az aks get-credentials` call (a token refresh included)


@dataclass(frozen=True)
class AksCluster:
    """An AKS cluster by its coordinates: what `az aks get-credentials` needs (nothing secret)."""

    resource_group: str
    name: str
    subscription: str | None = None  # None: az's current subscription

    def az_argv(self) -> list[str]:
        """`az` arguments that print the cluster's user kubeconfig to stdout (`--file -`): the same
        clusterUser credentials the stack reads with list_managed_cluster_user_credentials."""
        argv = ["aks", "get-credentials", "--resource-group", self.resource_group, "--name", self.name]
        if self.subscription:
            argv += ["--subscription", self.subscription]
        return [*argv, "--file", "-", "--only-show-errors"]

    def __str__(self) -> str:
        where = f" in subscription {self.subscription}" if self.subscription else ""
        return f"AKS cluster {self.resource_group}/{self.name}{where}"


def _az_detail(stderr: str) -> str:
    """The last line az printed on stderr (its error), without its `ERROR: ` prefix."""
    lines = [line.strip() for line in (stderr or "").splitlines() if line.strip()]
    return lines[-1].removeprefix("ERROR:").strip() if lines else "no message"


def aks_kubeconfig(aks: AksCluster) -> dict[str, Any]:
    """The cluster's user kubeconfig, fetched with the Azure CLI and kept in memory. Missing az, az
    not logged in, a failed or hung call, or output that is no kubeconfig: CollectError (exit 2).
    Never quotes az's stdout (it is the credential)."""
    az = shutil.which("az")
    if not az:
        raise CollectError(
            f"the Azure CLI (az) is not on PATH; it is needed to fetch the credentials of {aks}. Install it "
            "(https://learn.microsoft.com/cli/azure/install-azure-cli) and run 'az login', or pass --kubeconfig"
        )
    argv = aks.az_argv()
    _progress(f"fetching the credentials of {aks}: az {' '.join(argv[:2])}")
    try:
        done = subprocess.run([az, *argv], stdin=subprocess.DEVNULL, capture_output=True, timeout=AZ_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        raise CollectError(f"az aks get-credentials for {aks} did not answer within {AZ_TIMEOUT_SECONDS}s "
                           "(is az waiting for a login? run 'az login')") from None
    except OSError as exc:
        raise CollectError(f"cannot run {az}: {exc.strerror or exc}") from None
    stderr = done.stderr.decode("utf-8", errors="replace")
    if done.returncode != 0:
        hint = ("; the Azure CLI is not logged in (or its login expired): run 'az login'"
                if "az login" in stderr.lower() else "")
        raise CollectError(f"az aks get-credentials for {aks} failed (exit {done.returncode}): "
                           f"{_az_detail(stderr)}{hint}")
    import yaml  # here, not at the top: `python -m verify report` runs without the deploy requirements

    try:
        data = yaml.safe_load(done.stdout.decode("utf-8", errors="replace"))
    except yaml.YAMLError as exc:
        raise CollectError(f"az aks get-credentials for {aks} printed no kubeconfig "
                           f"(not YAML: {exc.__class__.__name__})") from None
    if not isinstance(data, dict) or not data.get("clusters"):
        raise CollectError(f"az aks get-credentials for {aks} printed no kubeconfig (no clusters in its output)")
    return data


def api_client(kubeconfig: str | None = None, aks: AksCluster | None = None) -> kube_api.Api:
    """The one client (clusterside/kube_api.py) from the first of: `kubeconfig` (a file, --kubeconfig),
    `aks` (the Azure CLI's credentials for that cluster, --aks-resource-group/--aks-cluster),
    $KUBECONFIG_CONTENT (the kubeconfig YAML itself), the usual $KUBECONFIG / ~/.kube/config. A user
    whose credential is an exec plugin (kubelogin, on an Entra ID cluster) gets its token from it.

    A kubeconfig read from az or from the environment is not written to a file by this code (certificate
    data goes to private temporary files, as ssl loads only files)."""
    import yaml  # here, not at the top: `python -m verify report` runs without the deploy requirements

    try:
        if kubeconfig:
            creds = kube_api.from_kubeconfig(kubeconfig, allow_exec=True)
        elif aks:
            creds = kube_api.from_kubeconfig_data(aks_kubeconfig(aks), f"the kubeconfig az printed for {aks}",
                                                  allow_exec=True)
        elif (content := os.environ.get("KUBECONFIG_CONTENT")) and content.strip():
            try:
                data = yaml.safe_load(content)
            except yaml.YAMLError as exc:
                raise CollectError(f"KUBECONFIG_CONTENT is not YAML: {exc.__class__.__name__}") from None
            if not isinstance(data, dict):
                raise CollectError("KUBECONFIG_CONTENT does not hold a kubeconfig (expected a YAML mapping)")
            creds = kube_api.from_kubeconfig_data(data, "KUBECONFIG_CONTENT", allow_exec=True)
        else:
            creds = kube_api.default_kubeconfig()
        return kube_api.Api(creds)
    except kube_api.ApiError as exc:
        raise CollectError(f"no usable kubeconfig: {exc}") from None
    except (OSError, ValueError) as exc:  # ssl: a CA or key file that is not one
        raise CollectError(f"no usable kubeconfig: {exc.__class__.__name__}: {exc}") from None


def _api_error(what: str, exc: Exception) -> CollectError:
    return CollectError(f"{what}: {kube.error_text(exc)}")


@dataclass(frozen=True)
class Waited:
    phase: str
    message: str | None
    job: dict  # the Volcano Job as last read


class _Progress:
    """Lines on stderr when something changes, and a heartbeat when nothing has for a while."""

    def __init__(self, clock: Clock, heartbeat_seconds: float):
        self.clock, self.heartbeat_seconds = clock, heartbeat_seconds
        self.last_line_at = clock.now()
        self.state: str | None = None
        self.said: set[Finding] = set()

    def say(self, message: str) -> None:
        _progress(message)
        self.last_line_at = self.clock.now()

    def changed(self, state: str, line: str) -> None:
        if state != self.state:
            self.state = state
            self.say(line)

    def findings(self, findings: tuple[Finding, ...]) -> None:
        for finding in findings:
            if finding not in self.said:
                self.said.add(finding)
                self.say(f"  {finding}")

    def heartbeat(self, line: str) -> None:
        if self.clock.now() - self.last_line_at >= self.heartbeat_seconds:
            self.say(line)


def _pods_text(pods: list[dict] | None) -> str:
    """`2 Pending/ImagePullBackOff, 1 Running`: each pod's phase and, when one says more, the reason."""
    if not pods:
        return "no pods yet"
    counts: dict[str, int] = {}
    for pod in pods:
        text = kube.get(pod, "status", "phase") or "Pending"
        scheduled = kube.condition(pod, "PodScheduled") or {}
        waiting = [kube.get(s, "state", "waiting", "reason") for s in
                   (kube.get(pod, "status", "initContainerStatuses") or [])
                   + (kube.get(pod, "status", "containerStatuses") or [])]
        reason = (scheduled.get("reason") if scheduled.get("status") == "False" else None) or next(
            (w for w in waiting if w), None)
        key = f"{text}/{reason}" if reason else text
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n} {key}" for key, n in sorted(counts.items()))


class LauncherStream:
    """Shows the launcher's new log lines while it runs: each read asks for the last few minutes
    (`sinceSeconds`, from the last line seen, with an overlap) with timestamps, bounded by
    `limitBytes`, and drops what was already shown by timestamp."""

    def __init__(self, client, namespace: str, job: str, task: str, clock: Clock):
        self.client, self.namespace, self.job, self.task, self.clock = client, namespace, job, task, clock
        self.pod: str | None = None
        self.last_ns: int | None = None  # the timestamp of the last line shown (epoch nanoseconds)
        self.at_last: set[str] = set()  # the lines shown with exactly that timestamp
        self.warned = False
        self.shown = 0

    def poll(self) -> None:
        try:
            pod, container = self._launcher()
            if pod is None:
                return
            if pod != self.pod:  # the first read, or a new launcher pod (the job restarted)
                self.pod, self.last_ns, self.at_last = pod, None, set()
            window = {}
            if self.last_ns is not None:
                window["sinceSeconds"] = max(1, math.ceil(self.clock.now() - self.last_ns / 1e9)
                                             + STREAM_OVERLAP_SECONDS)
            text = kube.get_text(self.client, kube.POD_LOG, {"namespace": self.namespace, "name": pod},
                                 container=container, limitBytes=STREAM_LIMIT_BYTES, **window, timestamps=True,
                                 request_timeout=REQUEST_TIMEOUT_SECONDS)
        except Exception as exc:
            if not self.warned:
                self.warned = True
                _progress(f"cannot stream the launcher's log (it is still read at the end): {kube.error_text(exc)}")
            return
        lines = text.splitlines()
        if len(text.encode()) >= STREAM_LIMIT_BYTES and lines:
            lines = lines[:-1]  # cut off by limitBytes: read again in full next time
        new = []
        for line in lines:
            stamp, _, body = line.partition(" ")
            at = kube.time_ns(stamp)
            if at is None or (self.last_ns is not None and (at < self.last_ns
                                                            or (at == self.last_ns and body in self.at_last))):
                continue
            if at != self.last_ns:
                self.last_ns, self.at_last = at, set()
            self.at_last.add(body)
            new.append(body)
        shown = [body for body in new if STREAM_SKIP not in body]
        for body in shown[:STREAM_MAX_LINES]:
            print(f"[launcher] {body}", file=sys.stderr, flush=True)
        if len(shown) > STREAM_MAX_LINES:
            _progress(f"... {len(shown) - STREAM_MAX_LINES} more launcher lines (all of them are judged at the end)")
        self.shown += len(shown)

    def _launcher(self) -> tuple[str | None, str | None]:
        """The newest launcher pod that is running, and its first container (None: none runs yet)."""
        found = kube.get_json(self.client, kube.PODS, {"namespace": self.namespace},
                              labelSelector=f"{JOB_NAME_LABEL}={self.job},{TASK_SPEC_LABEL}={self.task}",
                              request_timeout=REQUEST_TIMEOUT_SECONDS)
        running = [p for p in kube.items(found) if kube.get(p, "status", "phase") in ("Running", "Succeeded",
                                                                                      "Failed")]
        if not running:
            return None, None
        pod = max(running, key=lambda p: (str(kube.get(p, "metadata", "creationTimestamp") or ""), kube.name(p)))
        containers = kube.get(pod, "spec", "containers") or [{}]
        return kube.name(pod), containers[0].get("name")


def wait_for_job(
    client,
    namespace: str,
    job: str,
    *,
    timeout_seconds: float,
    poll_seconds: float,
    task: str = LAUNCHER_TASK,
    clock: Clock | None = None,
    setup_allowance_seconds: float = NODE_SETUP_BUDGET_MINUTES * 60,
    heartbeat_seconds: float = HEARTBEAT_MINUTES * 60,
) -> Waited:
    """Poll the Volcano Job until its phase is final; return it. Progress on stderr. Raises
    Incomplete when success is impossible (clusterside/diagnose.py) or at the timeout."""
    clock = clock or CLOCK
    job_path = {"group": VOLCANO_GROUP, "version": VOLCANO_VERSION, "namespace": namespace, "plural": VOLCANO_PLURAL,
                "name": job}
    diagnoser = Diagnoser(namespace, job, setup_allowance_seconds=setup_allowance_seconds)
    stream = LauncherStream(client, namespace, job, task, clock)
    progress = _Progress(clock, heartbeat_seconds)
    start = clock.now()
    errors_in_a_row = 0
    findings: tuple[Finding, ...] = ()
    phase = "Pending"
    looked_in, looked_at = None, -math.inf  # the phase and time of the last look at the cluster
    while True:
        try:
            obj: Any = kube.get_json(client, kube.NAMESPACED_OBJECT, job_path, request_timeout=REQUEST_TIMEOUT_SECONDS)
        except Exception as exc:
            if kube.status_of(exc) == 404:
                raise CollectError(
                    f"Volcano job {namespace}/{job} not found (not created yet, wrong name, or deleted after its TTL)"
                ) from None
            error = _api_error(f"reading Volcano job {namespace}/{job}", exc)
            errors_in_a_row += 1
            if kube.status_of(exc) in (401, 403) or errors_in_a_row >= MAX_CONSECUTIVE_POLL_ERRORS:
                raise error from None
            if clock.now() - start + poll_seconds > timeout_seconds:
                raise CollectError(f"timed out waiting for Volcano job {namespace}/{job}; last error: {error}") \
                    from None
            progress.say(f"{error} (attempt {errors_in_a_row} of {MAX_CONSECUTIVE_POLL_ERRORS}; retrying)")
            clock.sleep(poll_seconds)
            continue
        errors_in_a_row = 0
        status = (obj or {}).get("status") or {}
        state = status.get("state") or {}
        phase = state.get("phase") or "Pending"
        now = clock.now()
        elapsed = now - start
        counts = ", ".join(f"{k} {status.get(k, 0)}" for k in ("pending", "running", "succeeded", "failed"))
        if phase in DONE_PHASES or phase in FAILED_PHASES:
            if stream.pod:
                stream.poll()  # the lines written since the last read
            progress.say(f"job {namespace}/{job}: {phase} ({counts}) after {kube.duration(elapsed)}")
            message = " ".join(str(x) for x in (state.get("reason"), state.get("message")) if x) or None
            return Waited(phase=phase, message=message, job=obj)
        if phase in RUNNING_PHASES:
            progress.changed(phase, f"job {namespace}/{job}: {phase} ({counts}) after {kube.duration(elapsed)}; "
                                    f"streaming the launcher's log")
            stream.poll()
            progress.heartbeat(f"still running after {kube.duration(elapsed)}: job {phase} ({counts}), "
                               f"{stream.shown} launcher lines so far")
        elif phase != looked_in or now - looked_at >= DIAGNOSE_SECONDS:
            snap = read_snapshot(client, namespace, obj, request_timeout=REQUEST_TIMEOUT_SECONDS)
            verdict = diagnoser.assess(snap, now)
            looked_in, looked_at, findings = phase, now, verdict.findings
            pods = _pods_text(snap.pods)
            progress.changed(f"{phase} {pods}", f"job {namespace}/{job}: {phase}, pods: {pods} "
                                                f"({kube.duration(elapsed)} waited)")
            progress.findings(findings)
            if verdict.give_up:
                raise Incomplete(f"gave up after {kube.duration(elapsed)} waiting for Volcano job {namespace}/{job} "
                                 f"(phase {phase}): {verdict.give_up}", phase=phase, diagnosis=findings,
                                 waited_seconds=elapsed)
            missing = f"{findings[0].what} ({findings[0].where})" if findings else "the job's pods to start"
            progress.heartbeat(f"still waiting after {kube.duration(elapsed)}: job {phase}, pods: {pods}; "
                               f"{verdict.allowance}; waiting for: {missing}")
        if elapsed + poll_seconds > timeout_seconds:
            if phase in RUNNING_PHASES:
                findings = (Finding(phase, f"job {namespace}/{job}", "still running when the collector's timeout "
                                    f"ran out ({stream.shown} launcher lines shown)"),)
            raise Incomplete(
                f"timed out after {elapsed:.0f}s waiting for Volcano job {namespace}/{job} (last phase {phase}); "
                f"raise --timeout-minutes or look at: kubectl -n {namespace} describe jobs.batch.volcano.sh {job}",
                phase=phase, diagnosis=findings, waited_seconds=elapsed)
        clock.sleep(poll_seconds)


def failed_job_diagnosis(client, namespace: str, job: dict, now: float) -> tuple[Finding, ...]:
    """Why a failed job failed: what its pods say (exit codes, reasons, Warning events)."""
    snap = read_snapshot(client, namespace, job, request_timeout=REQUEST_TIMEOUT_SECONDS)
    found, _ = Diagnoser(namespace, kube.name(job), setup_allowance_seconds=0).job_pods(snap, now)
    return tuple(found)


def launcher_log(client, namespace: str, job: str, task: str = LAUNCHER_TASK) -> tuple[str, str]:
    """(pod name, log text) of the job's launcher pod (the newest, if the job restarted)."""
    selector = f"{JOB_NAME_LABEL}={job},{TASK_SPEC_LABEL}={task}"
    try:
        found = kube.get_json(client, kube.PODS, {"namespace": namespace}, labelSelector=selector,
                              request_timeout=REQUEST_TIMEOUT_SECONDS)
    except Exception as exc:
        raise _api_error(f"listing pods {selector} in {namespace}", exc) from None
    pods = kube.items(found)
    if not pods:
        raise CollectError(f"no launcher pod for job {namespace}/{job} (label selector {selector}); Volcano deletes a "
                           "job's unfinished pods when a policy ends the job, so a launcher still running when a "
                           "worker failed is gone with its log (the lines streamed above are what is left)")
    pod = max(pods, key=lambda p: (str(kube.get(p, "metadata", "creationTimestamp") or ""), kube.name(p)))
    containers = kube.get(pod, "spec", "containers") or []
    container = containers[0].get("name") if containers else None
    try:
        text = kube.get_text(client, kube.POD_LOG, {"namespace": namespace, "name": kube.name(pod)},
                             container=container, request_timeout=REQUEST_TIMEOUT_SECONDS)
    except Exception as exc:
        raise _api_error(f"reading the log of pod {namespace}/{kube.name(pod)}", exc) from None
    return kube.name(pod), text


def collect(
    namespace: str,
    job: str,
    *,
    kubeconfig: str | None,
    timeout_seconds: float,
    poll_seconds: float,
    task: str = LAUNCHER_TASK,
    aks: AksCluster | None = None,
    clock: Clock | None = None,
) -> Collected:
    client = api_client(kubeconfig, aks)
    clock = clock or CLOCK
    waited = wait_for_job(client, namespace, job, timeout_seconds=timeout_seconds, poll_seconds=poll_seconds,
                          task=task, clock=clock)
    diagnosis: tuple[Finding, ...] = ()
    if waited.phase in FAILED_PHASES:
        diagnosis = failed_job_diagnosis(client, namespace, waited.job, clock.now())
    pod, log = launcher_log(client, namespace, job, task)
    _progress(f"read {len(log.splitlines())} log lines from pod {namespace}/{pod}")
    return Collected(phase=waited.phase, job_message=waited.message, pod=pod, log=log, diagnosis=diagnosis)


def tail(text: str, lines: int = LOG_TAIL_LINES) -> list[str]:
    return text.rstrip("\n").splitlines()[-lines:] if text.strip() else []
