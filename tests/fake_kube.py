"""A FAKE Kubernetes API for `python -m verify collect` (there is no cluster here): a small HTTP
server on 127.0.0.1 in the test process that serves exactly the endpoints the collector calls,
answering as the real one does (object shapes, label selectors, PATCHes and Events recorded), and
the builders of the scenarios it serves.

Two ways to drive it: a list of job phases served in order (the simple cases), or a scenario - a
function from the scenario's clock (seconds since T0) to what the cluster looks like then - with a
fake clock the collector sleeps on, so an hour-long wait runs in a second and every time asserted
is the scenario's. Used by tests/unit/clusterside/test_verify_collect.py and
tests/unit/clusterside/test_verify_collect_scenarios.py."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from clusterside import collect, kube
from core import fabric, modes
from tests.fake_server import LoopbackServer
from verify import __main__ as cli

ROOT = Path(__file__).resolve().parent.parent
NS, JOB, TOKEN = "fabric-test", "nccl-allreduce", "fake-token-123"
JOB_PATH = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NS}/jobs/{JOB}"
PODS_PATH = f"/api/v1/namespaces/{NS}/pods"
JOB_UID = "5f0c6a3e-0000-4000-8000-000000000001"
T0 = kube.epoch("2026-03-01T12:00:00Z")  # the scenario's clock starts here; the collector starts at T0
MIN = 60.0


class FakeClock:
    """The collector's clock in a scenario: `sleep` only moves time on."""

    def __init__(self, start: float = T0):
        self.t = start

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


@dataclass
class Cluster:
    """What the fake API serves at one moment, as the API's JSON. `nic_policies` / `cluster_policies`
    None: that CRD is not installed (404). `log`: the launcher's lines, (seconds after T0, text)."""

    phase: str = "Pending"
    pods: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    pod_group: dict | None = None
    nodes: list[dict] = field(default_factory=list)
    nic_policies: list[dict] | None = field(default_factory=list)
    cluster_policies: list[dict] | None = field(default_factory=list)
    operator_pods: dict[str, list[dict]] = field(default_factory=dict)
    log: list[tuple[float, str]] = field(default_factory=list)


def at(t: float) -> str:
    """Seconds after T0 as an API timestamp."""
    return kube.iso(T0 + t)


def launcher_pod(phase: str, job: str = JOB, namespace: str = NS) -> dict:
    return {"metadata": {"name": f"{job}-mpimaster-0", "namespace": namespace, "uid": "uid-launcher",
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "labels": {"volcano.sh/job-name": job, "volcano.sh/task-spec": "mpimaster"}},
            "spec": {"containers": [{"name": "mpimaster", "image": "nccl-tests"}]},
            "status": {"phase": phase}}


class FakeKube(LoopbackServer):
    """Either `phases` (served in order, the last one repeats; one launcher pod, `log` as its log) or
    `scenario(t)` -> Cluster with `clock`. `namespace` and `job` name the one Volcano Job it knows (the
    NCCL job by default; the p2p tests pass theirs); `spec` is that job's spec (its tasks)."""

    def __init__(self, phases: list[str] | None = None, log: str = "", *, pods: bool = True,
                 job_exists: bool = True, namespace: str = NS, job: str = JOB, spec: dict | None = None,
                 scenario: Callable[[float], Cluster] | None = None, clock: FakeClock | None = None,
                 forbidden: tuple[str, ...] = (), unavailable: tuple[int, ...] = ()):
        self.phases, self.log, self.pods, self.job_exists = list(phases or ["Completed"]), log, pods, job_exists
        self.phase = self.phases[0]
        self.namespace, self.job, self.spec = namespace, job, spec or {}
        self.scenario, self.clock, self.forbidden = scenario, clock, forbidden  # forbidden: paths answered 403
        self.unavailable, self.job_reads = unavailable, 0  # unavailable: the job reads (1, 2, ...) answered 503
        self.job_path = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{namespace}/jobs/{job}"
        self.pods_path = f"/api/v1/namespaces/{namespace}/pods"
        self.requests: list[tuple[str, dict, str | None]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.1 as the API server speaks it: the client keeps its connection open between requests
            # (no connect and no new server thread per request); no Nagle delay between headers and body
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args):  # keep pytest output clean
                pass

            def _send(self, code: int, body, content_type="application/json"):
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                url = urlparse(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                fake.requests.append((url.path, query, self.headers.get("Authorization")))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._send(401, {"kind": "Status", "code": 401, "reason": "Unauthorized"})
                code, body = fake.answer(url.path, query)
                return self._send(code, body, "text/plain" if isinstance(body, str) else "application/json")

        self.serve(Handler, TOKEN)

    def now(self) -> float:
        return self.clock.now() if self.clock else T0

    def cluster(self) -> Cluster:
        if self.scenario:
            return self.scenario(self.now() - T0)
        pods = [launcher_pod("Succeeded", self.job, self.namespace)] if self.pods else []
        return Cluster(phase=self.phase, pods=pods, log=[(0.0, line) for line in self.log.splitlines()])

    def answer(self, path: str, query: dict) -> tuple[int, object]:
        not_found = (404, {"kind": "Status", "code": 404, "reason": "NotFound"})
        listing = lambda kind, items: (200, {"kind": kind, "apiVersion": "v1", "metadata": {}, "items": items})  # noqa: E731
        if path in self.forbidden:
            return 403, {"kind": "Status", "code": 403, "reason": "Forbidden"}
        if path == self.job_path:
            self.job_reads += 1
            if self.job_reads in self.unavailable:
                return 503, {"kind": "Status", "code": 503, "reason": "ServiceUnavailable"}
            if not self.job_exists:
                return not_found
            if not self.scenario:
                self.phase = self.phases.pop(0) if len(self.phases) > 1 else self.phases[0]
            phase = self.cluster().phase
            return 200, {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                         "metadata": {"name": self.job, "namespace": self.namespace, "uid": JOB_UID},
                         "spec": self.spec,
                         "status": {"state": {"phase": phase}, "running": 3 if phase == "Running" else 0,
                                    "succeeded": 3 if phase == "Completed" else 0}}
        c = self.cluster()
        if path == self.pods_path:
            return listing("PodList", [p for p in c.pods if _selected(p, query.get("labelSelector"))])
        if path == f"/api/v1/namespaces/{self.namespace}/events":
            return listing("EventList", c.events)
        if path == f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{self.namespace}/podgroups/{self.job}-{JOB_UID}":
            return (200, c.pod_group) if c.pod_group else not_found
        if path == "/api/v1/nodes":
            return listing("NodeList", [n for n in c.nodes if _selected(n, query.get("labelSelector"))])
        if path == "/apis/mellanox.com/v1alpha1/nicclusterpolicies":
            return not_found if c.nic_policies is None else listing("NicClusterPolicyList", c.nic_policies)
        if path == "/apis/nvidia.com/v1/clusterpolicies":
            return not_found if c.cluster_policies is None else listing("ClusterPolicyList", c.cluster_policies)
        for namespace, pods in c.operator_pods.items():
            if path == f"/api/v1/namespaces/{namespace}/pods":
                return listing("PodList", pods)
        launcher = next((p for p in c.pods if p["metadata"]["name"].endswith("-mpimaster-0")), None)
        if launcher and path == f"{self.pods_path}/{launcher['metadata']['name']}/log":
            return 200, self.log_text(c, query)
        return not_found

    def log_text(self, c: Cluster, query: dict) -> str:
        """The launcher's lines written by now; `sinceSeconds`, `timestamps`, `limitBytes` as the API
        applies them (lines at or after now - sinceSeconds; an RFC 3339 nanosecond stamp and a space)."""
        now = self.now() - T0
        since = now - int(query["sinceSeconds"]) if "sinceSeconds" in query else None
        lines = []
        for i, (t, text) in enumerate(c.log):
            if t <= now and (since is None or t >= since):
                stamp = at(t).replace("Z", f".{i + 1:09d}Z")  # distinct, increasing nanoseconds
                lines.append(f"{stamp} {text}" if query.get("timestamps") == "true" else text)
        text = "".join(f"{line}\n" for line in lines)
        return text[:int(query["limitBytes"])] if "limitBytes" in query else text


def _selected(obj: dict, selector: str | None) -> bool:
    """An equality label selector (`a=b,c=d`), as the collector writes them."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in (term.split("=", 1) for term in (selector or "").split(",") if term))



# --- a fake Azure CLI (credentials for --aks-resource-group / --aks-cluster) --------------------------
def fake_az(tmp_path: Path, *, stdout: str = "", stderr: str = "", code: int = 0,
            sleep: float = 0) -> tuple[Path, Path]:
    """A fake `az` in its own bin directory: records each argv (one JSON line in the returned log),
    prints `stdout` / `stderr`, exits `code`. Returns (bin directory, argv log)."""
    bindir, calls = tmp_path / "fake-az-bin", tmp_path / "az-calls.jsonl"
    bindir.mkdir(exist_ok=True)
    script = bindir / "az"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys, time\n"
        f"with open({str(calls)!r}, 'a') as f:\n"
        "    f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"time.sleep({sleep!r})\n"
        f"sys.stdout.write({stdout!r})\n"
        f"sys.stderr.write({stderr!r})\n"
        f"sys.exit({code!r})\n"
    )
    script.chmod(0o755)
    return bindir, calls


def az_calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


# --- scenario builders: the cluster at a moment, as the dev stack's job sees it -----------------------
JOB_KIND = "kubernetes:batch.volcano.sh/v1alpha1:Job"
GPU, RDMA = fabric.GPU_RESOURCE, modes.SHARED.resource
IMAGE_OF_TEST = "ghcr.io/coreweave/nccl-tests:12.9.1-devel-ubuntu22.04-nccl2.28.3-1-8b67957"
ALLOWANCE = collect.NODE_SETUP_BUDGET_MINUTES * MIN
STACK_TIMEOUT_MINUTES = collect.NODE_SETUP_BUDGET_MINUTES + 60 + 5
DRIVER_POD, DRIVER_CONTAINER = "nvidia-driver-daemonset-7xk2p", "nvidia-driver-ctr"
GPU_OPERATOR_NS, NETWORK_OPERATOR_NS = fabric.GPU_OPERATOR_NAMESPACE, fabric.NETWORK_OPERATOR_NAMESPACE



def ib_node(i: int, t: float, *, ready_at: float, gpu_from: float | None = 0, rdma_from: float | None = 0,
            not_ready_since: float = -5 * MIN) -> dict:
    """An IB-pool node (label and taint as the pool sets them): NotReady from `not_ready_since` (by
    default a node that registered 5 min before the collector started) until `ready_at`, then Ready
    since then; it advertises GPUs / the RDMA resource from the given times (None: never)."""
    ready = t >= ready_at
    allocatable = {"cpu": "94", "memory": "1800Gi", "pods": "110"}
    if ready and gpu_from is not None and t >= gpu_from:
        allocatable[GPU] = "8"
    if ready and rdma_from is not None and t >= rdma_from:
        allocatable[RDMA] = "63"
    condition = ({"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting "
                  "ready status", "lastTransitionTime": at(ready_at)} if ready else
                 {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "container runtime "
                  "network not ready", "lastTransitionTime": at(not_ready_since)})
    return {"metadata": {"name": f"aks-ib-12345678-vmss00000{i}", "labels": fabric.pool_node_selector()},
            "spec": {"taints": [{"key": fabric.IB_TAINT_KEY, "value": fabric.IB_TAINT_VALUE,
                                 "effect": fabric.IB_TAINT_EFFECT}]},
            "status": {"conditions": [condition], "allocatable": allocatable}}


def system_node() -> dict:
    """Not in the IB pool: the collector must not count it (it has no GPU and no label)."""
    return {"metadata": {"name": "aks-system-23456789-vmss000000", "labels": {"kubernetes.azure.com/mode": "system"}},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": at(-600 * MIN)}],
                       "allocatable": {"cpu": "4"}}}


def nodes(t: float, **kwargs) -> list[dict]:
    return [system_node(), ib_node(0, t, **kwargs), ib_node(1, t, **kwargs)]


def job_pods(phase: str, *, image: str = IMAGE_OF_TEST, unschedulable: str | None = None,
             waiting: tuple[str, str] | None = None) -> list[dict]:
    """The job's launcher and two workers, as Volcano creates them (labels; containers named after the task)."""
    pods = []
    for task, index in (("mpimaster", 0), ("mpiworker", 0), ("mpiworker", 1)):
        status: dict = {"phase": phase, "conditions": []}
        if unschedulable:
            status["conditions"].append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                         "message": unschedulable})
        if waiting:
            status["containerStatuses"] = [{"name": task, "ready": False, "restartCount": 0, "image": image,
                                            "state": {"waiting": {"reason": waiting[0], "message": waiting[1]}}}]
        elif phase == "Running":
            status["containerStatuses"] = [{"name": task, "ready": True, "restartCount": 0, "image": image,
                                            "state": {"running": {"startedAt": at(0)}}}]
        pods.append({"metadata": {"name": f"{JOB}-{task}-{index}", "namespace": NS, "uid": f"uid-{task}-{index}",
                                  "creationTimestamp": at(0),
                                  "labels": {"volcano.sh/job-name": JOB, "volcano.sh/task-spec": task}},
                     "spec": {"containers": [{"name": task, "image": image}]}, "status": status})
    return pods


def event(kind: str, obj: str, reason: str, message: str, *, first: float, last: float, count: int = 1,
          type_: str = "Warning", container: str | None = None, uid: str | None = None) -> dict:
    involved = {"kind": kind, "name": obj, "namespace": NS, **({"uid": uid} if uid else {})}
    if container:
        involved["fieldPath"] = f"spec.containers{{{container}}}"
    return {"metadata": {"name": f"{obj}.{reason}.{int(first)}"}, "involvedObject": involved, "type": type_,
            "reason": reason, "message": message, "count": count, "firstTimestamp": at(first),
            "lastTimestamp": at(last)}


def pod_group(phase: str) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": f"{JOB}-{JOB_UID}", "namespace": NS}, "status": {"phase": phase}}


def nic_policy(ready: bool) -> dict:
    applied = [{"name": "state-OFED", "state": "ready"},
               {"name": "state-RDMA-device-plugin", "state": "ready" if ready else "notReady",
                "message": "" if ready else "waiting for the RDMA shared device plugin pods to be ready"}]
    return {"metadata": {"name": "nic-cluster-policy"},
            "status": {"state": "ready" if ready else "notReady", "appliedStates": applied}}


def cluster_policy(ready: bool) -> dict:
    conditions = [{"type": "Ready", "status": "True" if ready else "False", "reason": "Ready" if ready else
                   "OperandNotReady", "message": "" if ready else "ClusterPolicy is not ready, states not ready: "
                   "[state-driver state-device-plugin]", "lastTransitionTime": at(0)}]
    return {"metadata": {"name": "cluster-policy"},
            "status": {"state": "ready" if ready else "notReady", "namespace": GPU_OPERATOR_NS,
                       "conditions": conditions}}


def driver_pod(crash_looping: bool) -> dict:
    """The GPU Operator's driver pod on an IB node: Ready, or crash-looping (restarts, last exit 1)."""
    if crash_looping:
        status = {"name": DRIVER_CONTAINER, "ready": False, "restartCount": 9, "image": "nvcr.io/nvidia/driver",
                  "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting failed "
                                        f"container={DRIVER_CONTAINER} pod={DRIVER_POD}"}},
                  "lastState": {"terminated": {"reason": "Error", "exitCode": 1, "finishedAt": at(0)}}}
        pod_status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}],
                      "containerStatuses": [status]}
    else:
        pod_status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                      "containerStatuses": [{"name": DRIVER_CONTAINER, "ready": True, "restartCount": 0,
                                             "state": {"running": {"startedAt": at(-30 * MIN)}}}]}
    return {"metadata": {"name": DRIVER_POD, "namespace": GPU_OPERATOR_NS},
            "spec": {"containers": [{"name": DRIVER_CONTAINER, "image": "nvcr.io/nvidia/driver:580"}]},
            "status": pod_status}


def healthy_operators(**overrides) -> dict:
    base = {"nic_policies": [nic_policy(True)], "cluster_policies": [cluster_policy(True)],
            "operator_pods": {NETWORK_OPERATOR_NS: [], GPU_OPERATOR_NS: [driver_pod(False)]}}
    return {**base, **overrides}


def run_scenario(scenario: Callable[[float], Cluster], spec: dict, monkeypatch, capsys, *extra: str,
                 timeout_minutes: float = STACK_TIMEOUT_MINUTES,
                 forbidden: tuple[str, ...] = ()) -> tuple[int, dict, str, float, FakeKube]:
    """Run `collect` as the stack does (15 s polls, the stack's timeout) against the scenario, on a fake
    clock. Returns (exit code, the JSON result, stderr, minutes waited by the scenario's clock, the fake)."""
    clock = FakeClock()
    monkeypatch.setattr(collect, "CLOCK", clock)
    with FakeKube(scenario=scenario, clock=clock, spec=spec["spec"], forbidden=forbidden) as kube_:
        monkeypatch.setenv("KUBECONFIG_CONTENT", kube_.kubeconfig())
        code = cli.main(["collect", "--namespace", NS, "--job", JOB, "--sku", "Standard_ND96asr_v4", "--nodes", "2",
                         "--timeout-minutes", str(timeout_minutes), "--json", *extra])
    captured = capsys.readouterr()
    assert captured.out, captured.err
    return code, json.loads(captured.out), captured.err, (clock.now() - T0) / MIN, kube_


def gave_up_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error: gave up")]


def progress_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("[verify collect]")]
