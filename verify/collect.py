"""`python -m verify collect`: wait for the Volcano Job, read its launcher's log, parse and judge it.

Run by the stack's collect step and by people afterwards. The stack's step fetches the cluster's
credentials itself (`--aks-resource-group RG --aks-cluster NAME --subscription ID`: `az aks
get-credentials ... --file -`, read from az's stdout and never written to a file), so that no
kubeconfig is an input of that step: a credential rotation then changes nothing in the stack, and a
second `pulumi up` does not re-run the collector (`api_client` gives the order of the sources).

Facts this relies on (volcano-sh/volcano @ v1.15.1):
- the Job is `batch.volcano.sh/v1alpha1`, plural `jobs`; `.status.state.phase` is one of Pending,
  Aborting, Aborted, Running, Restarting, Completing, Completed, Terminating, Terminated, Failed
  (the CRD's enum, ../shared/reference/crds/batch.volcano.sh_jobs.v1.15.1.yaml);
- the job controller labels every pod with `volcano.sh/job-name` = the job's name and
  `volcano.sh/task-spec` = its task's name (pkg/controllers/job/job_controller_util.go createJobPod).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

VOLCANO_GROUP = "batch.volcano.sh"
VOLCANO_VERSION = "v1alpha1"
VOLCANO_PLURAL = "jobs"
JOB_NAME_LABEL = "volcano.sh/job-name"
TASK_SPEC_LABEL = "volcano.sh/task-spec"
LAUNCHER_TASK = "mpimaster"
# Phases after which the job does nothing more. Completing/Aborting/Terminating are on their way there.
DONE_PHASES = frozenset({"Completed"})
FAILED_PHASES = frozenset({"Failed", "Aborted", "Terminated"})
REQUEST_TIMEOUT_SECONDS = 30
# A long wait should survive an API server blip: this many failed polls in a row end it (401/403/404 at once).
MAX_CONSECUTIVE_POLL_ERRORS = 5
LOG_TAIL_LINES = 30


class CollectError(RuntimeError):
    """Timeout, API error, missing job or pod: one line for the user, exit code 2."""


@dataclass(frozen=True)
class Collected:
    phase: str
    job_message: str | None
    pod: str
    log: str


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
    try:
        data = yaml.safe_load(done.stdout.decode("utf-8", errors="replace"))
    except yaml.YAMLError as exc:
        raise CollectError(f"az aks get-credentials for {aks} printed no kubeconfig "
                           f"(not YAML: {exc.__class__.__name__})") from None
    if not isinstance(data, dict) or not data.get("clusters"):
        raise CollectError(f"az aks get-credentials for {aks} printed no kubeconfig (no clusters in its output)")
    return data


def api_client(kubeconfig: str | None = None, aks: AksCluster | None = None):
    """A kubernetes ApiClient from the first of: `kubeconfig` (a file, --kubeconfig), `aks` (the Azure
    CLI's credentials for that cluster, --aks-resource-group/--aks-cluster), $KUBECONFIG_CONTENT (the
    kubeconfig YAML itself), the usual $KUBECONFIG / ~/.kube/config.

    A kubeconfig read from az or from the environment is not written to a file by this code (the
    kubernetes client keeps certificate data it holds in private temporary files it removes on exit)."""
    from kubernetes import config as kconfig

    try:
        if kubeconfig:
            return kconfig.new_client_from_config(config_file=kubeconfig, persist_config=False)
        if aks:
            return kconfig.new_client_from_config_dict(aks_kubeconfig(aks), persist_config=False)
        content = os.environ.get("KUBECONFIG_CONTENT")
        if content and content.strip():
            try:
                data = yaml.safe_load(content)
            except yaml.YAMLError as exc:
                raise CollectError(f"KUBECONFIG_CONTENT is not YAML: {exc.__class__.__name__}") from None
            if not isinstance(data, dict):
                raise CollectError("KUBECONFIG_CONTENT does not hold a kubeconfig (expected a YAML mapping)")
            return kconfig.new_client_from_config_dict(data, persist_config=False)
        return kconfig.new_client_from_config(persist_config=False)
    except CollectError:
        raise
    except Exception as exc:  # kubernetes raises ConfigException, OSError, TypeError... : all mean "no usable config"
        raise CollectError(f"no usable kubeconfig: {exc}") from None


def _api_error(what: str, exc: Exception) -> CollectError:
    status = getattr(exc, "status", None)
    reason = getattr(exc, "reason", None)
    if status:
        return CollectError(f"{what}: Kubernetes API answered {status} {reason or ''}".rstrip())
    first_line = str(exc).splitlines()[0] if str(exc) else ""
    return CollectError(f"{what}: {exc.__class__.__name__}: {first_line}".rstrip(": "))


def wait_for_job(
    client,
    namespace: str,
    job: str,
    *,
    timeout_seconds: float,
    poll_seconds: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[str, str | None]:
    """Poll the Volcano Job until its phase is final; return (phase, message). Progress on stderr."""
    from kubernetes import client as k

    custom = k.CustomObjectsApi(client)
    start = clock()
    errors_in_a_row = 0
    while True:
        try:
            obj: Any = custom.get_namespaced_custom_object(
                VOLCANO_GROUP, VOLCANO_VERSION, namespace, VOLCANO_PLURAL, job,
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
            )
        except Exception as exc:
            if getattr(exc, "status", None) == 404:
                raise CollectError(
                    f"Volcano job {namespace}/{job} not found (not created yet, wrong name, or deleted after its TTL)"
                ) from None
            error = _api_error(f"reading Volcano job {namespace}/{job}", exc)
            errors_in_a_row += 1
            if getattr(exc, "status", None) in (401, 403) or errors_in_a_row >= MAX_CONSECUTIVE_POLL_ERRORS:
                raise error from None
            if clock() - start + poll_seconds > timeout_seconds:
                raise CollectError(f"timed out waiting for Volcano job {namespace}/{job}; last error: {error}") \
                    from None
            _progress(f"{error} (attempt {errors_in_a_row} of {MAX_CONSECUTIVE_POLL_ERRORS}; retrying)")
            sleep(poll_seconds)
            continue
        errors_in_a_row = 0
        status = (obj or {}).get("status") or {}
        state = status.get("state") or {}
        phase = state.get("phase") or "Pending"
        elapsed = clock() - start
        counts = ", ".join(f"{k} {status.get(k, 0)}" for k in ("pending", "running", "succeeded", "failed"))
        _progress(f"job {namespace}/{job}: {phase} ({counts}), {elapsed:.0f}s of {timeout_seconds:.0f}s")
        if phase in DONE_PHASES or phase in FAILED_PHASES:
            message = " ".join(str(x) for x in (state.get("reason"), state.get("message")) if x) or None
            return phase, message
        if elapsed + poll_seconds > timeout_seconds:
            raise CollectError(
                f"timed out after {elapsed:.0f}s waiting for Volcano job {namespace}/{job} (last phase {phase}); "
                f"raise --timeout-minutes or look at: kubectl -n {namespace} describe jobs.batch.volcano.sh {job}"
            )
        sleep(poll_seconds)


def launcher_log(client, namespace: str, job: str, task: str = LAUNCHER_TASK) -> tuple[str, str]:
    """(pod name, log text) of the job's launcher pod (the newest, if the job restarted)."""
    from kubernetes import client as k

    core = k.CoreV1Api(client)
    selector = f"{JOB_NAME_LABEL}={job},{TASK_SPEC_LABEL}={task}"
    try:
        pods = core.list_namespaced_pod(namespace, label_selector=selector, _request_timeout=REQUEST_TIMEOUT_SECONDS)
    except Exception as exc:
        raise _api_error(f"listing pods {selector} in {namespace}", exc) from None
    items = list(pods.items or [])
    if not items:
        raise CollectError(f"no launcher pod for job {namespace}/{job} (label selector {selector})")
    pod = max(items, key=lambda p: (str(p.metadata.creation_timestamp or ""), p.metadata.name))
    containers = (pod.spec.containers if pod.spec else None) or []
    container = containers[0].name if containers else None
    try:
        resp = core.read_namespaced_pod_log(
            pod.metadata.name,
            namespace,
            container=container,
            _preload_content=False,  # raw bytes: the generated client would try to deserialise the text
            _request_timeout=REQUEST_TIMEOUT_SECONDS,
        )
        data = resp.data if hasattr(resp, "data") else resp.read()
    except Exception as exc:
        raise _api_error(f"reading the log of pod {namespace}/{pod.metadata.name}", exc) from None
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else str(data)
    return pod.metadata.name, text


def collect(
    namespace: str,
    job: str,
    *,
    kubeconfig: str | None,
    timeout_seconds: float,
    poll_seconds: float,
    task: str = LAUNCHER_TASK,
    aks: AksCluster | None = None,
) -> Collected:
    client = api_client(kubeconfig, aks)
    phase, message = wait_for_job(client, namespace, job, timeout_seconds=timeout_seconds, poll_seconds=poll_seconds)
    pod, log = launcher_log(client, namespace, job, task)
    _progress(f"read {len(log.splitlines())} log lines from pod {namespace}/{pod}")
    return Collected(phase=phase, job_message=message, pod=pod, log=log)


def tail(text: str, lines: int = LOG_TAIL_LINES) -> list[str]:
    return text.rstrip("\n").splitlines()[-lines:] if text.strip() else []
