"""`python -m verify collect` against a FAKE Kubernetes API: a small HTTP server on 127.0.0.1 in the
test process that serves exactly the endpoints the collector calls (there is no cluster here).

Two ways to drive it: a list of job phases served in order (the simple cases), or a scenario - a
function from the scenario's clock (seconds since T0) to what the cluster looks like then - with a
fake clock the collector sleeps on, so an hour-long wait runs in a second and every time asserted
is the scenario's."""

from __future__ import annotations

import copy
import json
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from components.mpi_job import MASTER_TASK
from components.p2p_job import P2pJobArgs
from core import catalog, fabric, modes
from tests.test_osu_perftest import AKS_DROP, HBV3_BW, HBV3_LAT, raw_rows
from verify import __main__ as cli
from verify import collect, kube

ROOT = Path(__file__).resolve().parent.parent
AZURE = "sample-output_azure-aks-rdma-infiniband_expected-output.txt"
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


class FakeKube:
    """Either `phases` (served in order, the last one repeats; one launcher pod, `log` as its log) or
    `scenario(t)` -> Cluster with `clock`. `namespace` and `job` name the one Volcano Job it knows (the
    NCCL job by default; the p2p tests pass theirs); `spec` is that job's spec (its tasks)."""

    def __init__(self, phases: list[str] | None = None, log: str = "", *, pods: bool = True,
                 job_exists: bool = True, namespace: str = NS, job: str = JOB, spec: dict | None = None,
                 scenario: Callable[[float], Cluster] | None = None, clock: FakeClock | None = None,
                 forbidden: tuple[str, ...] = ()):
        self.phases, self.log, self.pods, self.job_exists = list(phases or ["Completed"]), log, pods, job_exists
        self.phase = self.phases[0]
        self.namespace, self.job, self.spec = namespace, job, spec or {}
        self.scenario, self.clock, self.forbidden = scenario, clock, forbidden  # forbidden: paths answered 403
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

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # a short poll interval: shutdown() returns as soon as the loop sees it (the default is 0.5 s)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01},
                                       daemon=True)

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

    def kubeconfig(self) -> str:
        host, port = self.server.server_address[:2]
        return yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": f"http://{host}:{port}"}}],
            "users": [{"name": "fake", "user": {"token": TOKEN}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        })

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def _selected(obj: dict, selector: str | None) -> bool:
    """An equality label selector (`a=b,c=d`), as the collector writes them."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in (term.split("=", 1) for term in (selector or "").split(",") if term))


@pytest.fixture
def azure_log(reference) -> str:
    return (reference / "nccl-tests" / AZURE).read_text()


def argv(*extra: str) -> list[str]:
    return ["collect", "--namespace", NS, "--job", JOB, "--sku", "Standard_ND96asr_v4", "--nodes", "2",
            "--poll-seconds", "0.05", "--json", *extra]


def only_environment(monkeypatch, **env: str) -> None:
    """This process's environment becomes exactly `env`, as a subprocess started with env=... would see it."""
    for name in list(os.environ):
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def test_waits_through_pending_running_then_reads_the_launcher(azure_log, monkeypatch, capsys):
    with FakeKube(["Pending", "Running", "Running", "Completed"], azure_log) as kube:
        monkeypatch.setenv("KUBECONFIG_CONTENT", kube.kubeconfig())
        code = cli.main(argv())
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = json.loads(captured.out)
    assert out["verdict"] == "PASS" and out["busbw_at_max_size_gbps"] == 187.22 and out["ranks"] == 16
    assert out["job_phase"] == "Completed" and out["pod"] == f"{JOB}-mpimaster-0"
    assert out["log_tail"][-1].startswith("# Avg bus bandwidth")
    assert len(out["log_tail"]) == len(azure_log.splitlines())  # fewer than 30 lines: all of them
    # progress on stderr: a line when the phase changes, not one per poll
    progress = [line for line in captured.err.splitlines() if "[verify collect] job" in line]
    assert [p.split(": ")[1].split(" ")[0].rstrip(",") for p in progress] == ["Pending", "Running", "Completed"]
    # while it ran, the launcher's lines were streamed (timestamped, bounded reads, each line once)
    streamed = [line.removeprefix("[launcher] ") for line in captured.err.splitlines() if line.startswith("[launcher]")]
    assert streamed == azure_log.splitlines()
    # the launcher is found by Volcano's pod labels, and the kubeconfig's credentials are used
    selector = f"volcano.sh/job-name={JOB},volcano.sh/task-spec=mpimaster"
    pod_lists = [q for path, q, _ in kube.requests if path == PODS_PATH]
    assert {"labelSelector": selector} in pod_lists and {"labelSelector": f"volcano.sh/job-name={JOB}"} in pod_lists
    log_reads = [q for path, q, _ in kube.requests if path.endswith("/log")]
    assert log_reads[-1] == {"container": "mpimaster"}  # the whole log, read once the job is done
    assert all(q["timestamps"] == "true" and int(q["limitBytes"]) == collect.STREAM_LIMIT_BYTES
               for q in log_reads[:-1]) and len(log_reads) >= 2
    assert {auth for _, _, auth in kube.requests} == {f"Bearer {TOKEN}"}


def test_kubeconfig_file_argument(azure_log, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("KUBECONFIG_CONTENT", raising=False)
    with FakeKube(["Completed"], azure_log) as kube:
        path = tmp_path / "kubeconfig"
        path.write_text(kube.kubeconfig())
        assert cli.main(argv("--kubeconfig", str(path))) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "PASS"


def test_the_result_says_whether_sharp_was_measured(azure_log, monkeypatch, capsys):
    with FakeKube(["Completed"], azure_log) as kube:
        monkeypatch.setenv("KUBECONFIG_CONTENT", kube.kubeconfig())
        assert cli.main(argv()) == 0
        assert json.loads(capsys.readouterr().out)["sharp"] is False  # NCCL's own IB transport
        assert cli.main(argv("--sharp")) == 0
        assert json.loads(capsys.readouterr().out)["sharp"] is True


def test_low_bandwidth_fails_with_reasons_and_log_tail(azure_log, monkeypatch, capsys):
    with FakeKube(["Running", "Completed"], azure_log) as kube:
        monkeypatch.setenv("KUBECONFIG_CONTENT", kube.kubeconfig())
        code = cli.main(argv("--threshold-gbps", "190", "--fail-on-low-bandwidth"))
    captured = capsys.readouterr()
    assert code == 1
    assert json.loads(captured.out)["verdict"] == "FAIL"  # the JSON still goes to stdout
    assert "below the threshold 190" in captured.err
    assert "# Avg bus bandwidth    : 56.3994" in captured.err  # the tail of the log


def test_low_bandwidth_without_the_flag_exits_0(azure_log, monkeypatch, capsys):
    with FakeKube(["Completed"], azure_log) as kube:
        monkeypatch.setenv("KUBECONFIG_CONTENT", kube.kubeconfig())
        assert cli.main(argv("--threshold-gbps", "190")) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "FAIL"


SOCKET_2X1 = ROOT / "tests" / "data" / "nccl-info_2.28.9_socket-fallback_2-fake-hosts-x1-gpu_h200x2.log"


@pytest.mark.parametrize("sku", ["Standard_ND96asr_v4", "Standard_ND96isr_H100_v5", "Standard_ND96isr_H200_v5"])
def test_a_socket_run_fails_the_collect_step_on_every_nd_size(sku, monkeypatch, capsys):
    """A real NCCL 2.28.9 log whose ranks fell back to TCP (tests/data): FAIL and exit 1, whether the
    size's threshold is published (A100) or derived (H100/H200)."""
    args = argv("--fail-on-low-bandwidth")
    args[args.index("--sku") + 1] = sku
    with FakeKube(["Completed"], SOCKET_2X1.read_text()) as kube:
        monkeypatch.setenv("KUBECONFIG_CONTENT", kube.kubeconfig())
        code = cli.main(args)
    captured = capsys.readouterr()
    assert code == 1
    out = json.loads(captured.out)
    assert out["verdict"] == "FAIL" and out["reasons"][0].startswith("RDMA was not used")
    assert out["transport"]["network"] == "Socket"
    assert "RDMA was not used" in captured.err


def test_failed_job_with_garbage_log_is_a_fail_not_a_crash(monkeypatch, capsys):
    log = "ssh: connect to host nccl-allreduce-mpiworker-0 port 22: Connection refused\n" * 3
    with FakeKube(["Running", "Failed"], log) as kube:
        monkeypatch.setenv("KUBECONFIG_CONTENT", kube.kubeconfig())
        code = cli.main(argv("--fail-on-low-bandwidth"))
    captured = capsys.readouterr()
    assert code == 1
    out = json.loads(captured.out)
    assert out["verdict"] == "FAIL" and out["job_phase"] == "Failed"
    assert any("Failed" in r for r in out["reasons"]) and any("no nccl-tests result" in r for r in out["reasons"])
    assert out["log_tail"][0].startswith("ssh: connect")
    assert "Connection refused" in captured.err


def test_timeout_is_one_line_exit_2(azure_log, monkeypatch, capsys):
    with FakeKube(["Pending", "Running"], azure_log) as kube:
        monkeypatch.setenv("KUBECONFIG_CONTENT", kube.kubeconfig())
        code = cli.main(argv("--timeout-minutes", "0.005"))  # 0.3 s
    captured = capsys.readouterr()
    assert code == 2
    errors = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "timed out" in errors[0] and "last phase Running" in errors[0]
    out = json.loads(captured.out)  # the result of a run that did not complete: FAIL, and why
    assert out["verdict"] == "FAIL" and out["job_phase"] == "Running" and "timed out" in out["gave_up"]
    assert out["diagnosis"] == [{"what": "Running", "where": f"job {NS}/{JOB}",
                                 "message": out["diagnosis"][0]["message"]}]
    assert not any(path.endswith("/log") and "timestamps" not in q for path, q, _ in kube.requests)


def test_missing_job_and_missing_pod_and_auth_are_exit_2(azure_log, monkeypatch, capsys):
    with FakeKube(["Completed"], azure_log, job_exists=False) as kube:
        monkeypatch.setenv("KUBECONFIG_CONTENT", kube.kubeconfig())
        assert cli.main(argv()) == 2
    assert "not found" in capsys.readouterr().err

    with FakeKube(["Completed"], azure_log, pods=False) as kube:
        monkeypatch.setenv("KUBECONFIG_CONTENT", kube.kubeconfig())
        assert cli.main(argv()) == 2
    assert "no launcher pod" in capsys.readouterr().err

    with FakeKube(["Completed"], azure_log) as kube:
        monkeypatch.setenv("KUBECONFIG_CONTENT", kube.kubeconfig().replace(TOKEN, "wrong"))
        assert cli.main(argv()) == 2
    assert "401" in capsys.readouterr().err


def test_unreachable_api_and_bad_kubeconfig_are_exit_2(monkeypatch, capsys):
    monkeypatch.setenv("KUBECONFIG_CONTENT", "just a string")
    assert cli.main(argv()) == 2
    assert "KUBECONFIG_CONTENT" in capsys.readouterr().err
    monkeypatch.delenv("KUBECONFIG_CONTENT")
    assert cli.main(argv("--kubeconfig", "/nonexistent/kubeconfig")) == 2
    assert "kubeconfig" in capsys.readouterr().err


def test_reads_kubeconfig_from_the_environment_only(azure_log, monkeypatch, capsys):
    """The kubeconfig in KUBECONFIG_CONTENT and nowhere else: an environment of only that, PATH and a
    HOME that does not exist (no ~/.kube/config, no KUBECONFIG), nothing secret on the command line.
    In this process, on an environment of only those three (see only_environment)."""
    with FakeKube(["Running", "Completed"], azure_log) as kube:
        only_environment(monkeypatch, KUBECONFIG_CONTENT=kube.kubeconfig(), PATH="/usr/bin:/bin", HOME="/nonexistent")
        code = cli.main(argv())
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Traceback" not in captured.err
    assert json.loads(captured.out)["verdict"] == "PASS"


def test_terminal_phases_match_the_volcano_crd(reference):
    text = (reference / "crds" / "batch.volcano.sh_jobs.v1.15.1.yaml").read_text()
    crd = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    version = next(v for v in crd["spec"]["versions"] if v["name"] == collect.VOLCANO_VERSION)
    phases = set(version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["state"]["properties"]
                 ["phase"]["enum"])
    assert collect.DONE_PHASES | collect.FAILED_PHASES <= phases
    assert crd["spec"]["group"] == collect.VOLCANO_GROUP and crd["spec"]["names"]["plural"] == collect.VOLCANO_PLURAL


def test_a_transient_api_error_during_the_wait_is_retried(azure_log, monkeypatch, capsys):
    with FakeKube(["Running", "Completed"], azure_log) as kube:
        monkeypatch.setenv("KUBECONFIG_CONTENT", kube.kubeconfig())
        from kubernetes import client as k

        original = k.CustomObjectsApi.get_namespaced_custom_object
        calls = {"n": 0}

        def flaky(self, *args, **kwargs):
            calls["n"] += 1
            if calls["n"] == 2:
                raise k.exceptions.ApiException(status=503, reason="Service Unavailable")
            return original(self, *args, **kwargs)

        monkeypatch.setattr(k.CustomObjectsApi, "get_namespaced_custom_object", flaky)
        assert cli.main(argv()) == 0
    captured = capsys.readouterr()
    assert "503 Service Unavailable (attempt 1 of 5; retrying)" in captured.err
    assert json.loads(captured.out)["verdict"] == "PASS"


# --- --kind p2p: the CPU-only job's launcher log (osu_bw then osu_latency) ---------------------------
P2P_NS, P2P_JOB = P2pJobArgs.namespace_name, P2pJobArgs.job_name  # as the component names them
HBV3 = "Standard_HB120rs_v3"


@pytest.fixture
def p2p_log() -> str:
    return HBV3_BW.read_text() + "\n" + HBV3_LAT.read_text()


def p2p_argv(*extra: str) -> list[str]:
    return ["collect", "--kind", "p2p", "--namespace", P2P_NS, "--job", P2P_JOB, "--sku", HBV3,
            "--poll-seconds", "0.05", "--json", *extra]


def test_p2p_collect_reads_the_p2p_launcher_and_judges_in_gbits(p2p_log, monkeypatch, capsys):
    with FakeKube(["Running", "Completed"], p2p_log, namespace=P2P_NS, job=P2P_JOB) as kube:
        monkeypatch.setenv("KUBECONFIG_CONTENT", kube.kubeconfig())
        code = cli.main(p2p_argv())
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = json.loads(captured.out)
    bw, lat = raw_rows(HBV3_BW), raw_rows(HBV3_LAT)
    assert out["kind"] == "p2p" and out["tool"] == "osu_bw" and out["sku"] == HBV3
    assert out["max_size_bytes"] == max(bw)
    assert out["bw_at_max_size_gbits"] == round(float(bw[max(bw)][0]) * 8 / 1000, 2)
    assert out["latency_us"] == round(float(lat[1][0]), 2)
    assert out["verdict"] == "PASS" and out["threshold_gbits"] == catalog.lookup(HBV3).p2p.threshold_gbits
    assert out["job"] == P2P_JOB and out["job_phase"] == "Completed" and out["pod"] == f"{P2P_JOB}-mpimaster-0"
    # the launcher of the p2p job is found by the task name that job gives it
    pod_lists = [q for path, q, _ in kube.requests if path == kube.pods_path]
    assert pod_lists and all(q == {"labelSelector": f"volcano.sh/job-name={P2P_JOB},volcano.sh/task-spec={MASTER_TASK}"}
                             for q in pod_lists)


def test_p2p_low_bandwidth_fails_with_the_threshold_in_gbits(monkeypatch, capsys):
    log = AKS_DROP.read_text()  # bandwidth falls at the largest message
    with FakeKube(["Completed"], log, namespace=P2P_NS, job=P2P_JOB) as kube:
        monkeypatch.setenv("KUBECONFIG_CONTENT", kube.kubeconfig())
        code = cli.main(p2p_argv("--fail-on-low-bandwidth"))
    captured = capsys.readouterr()
    assert code == 1
    out = json.loads(captured.out)
    assert out["verdict"] == "FAIL" and any("Gb/s" in r and "below the threshold" in r for r in out["reasons"])
    assert "point to point" in captured.err and out["log_tail"][-1] in captured.err


def test_p2p_failed_job_with_no_table_is_a_fail_naming_the_tools(monkeypatch, capsys):
    log = "[p2p-launcher 10:00:00] error: worker p2p-mpiworker-1: sshd did not answer within 600s\n"
    with FakeKube(["Running", "Failed"], log, namespace=P2P_NS, job=P2P_JOB) as kube:
        monkeypatch.setenv("KUBECONFIG_CONTENT", kube.kubeconfig())
        assert cli.main(p2p_argv()) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "p2p" and out["verdict"] == "FAIL" and out["job_phase"] == "Failed"
    assert any("Failed" in r for r in out["reasons"]) and any("osu_bw" in r for r in out["reasons"])


def test_p2p_wrong_unit_or_missing_nodes_stop_before_any_request(p2p_log, monkeypatch, capsys):
    with FakeKube(["Completed"], p2p_log, namespace=P2P_NS, job=P2P_JOB) as kube:
        monkeypatch.setenv("KUBECONFIG_CONTENT", kube.kubeconfig())
        assert cli.main(p2p_argv("--threshold-gbps", "24")) == 2
        assert "--threshold-gbits" in capsys.readouterr().err
        nccl_without_nodes = ["collect", "--namespace", NS, "--job", JOB, "--sku", "Standard_ND96asr_v4", "--json"]
        assert cli.main(nccl_without_nodes) == 2
        assert "--nodes is required" in capsys.readouterr().err
        assert cli.main(p2p_argv("--sharp")) == 2
        assert "--sharp applies to the NCCL all-reduce" in capsys.readouterr().err
    assert kube.requests == []


# --- credentials from the Azure CLI (--aks-resource-group / --aks-cluster / --subscription) -----------
# How the stack's collect step runs: no kubeconfig among its inputs, `az aks get-credentials --file -`.
RG, CLUSTER, SUB = "aks-infiniband-dev", "aks-ib-dev", "11111111-2222-3333-4444-555555555555"
AZ_ARGV = ["aks", "get-credentials", "--resource-group", RG, "--name", CLUSTER, "--subscription", SUB,
           "--file", "-", "--only-show-errors"]
NOT_LOGGED_IN = "ERROR: Please run 'az login' to setup account.\n"


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


def aks_argv(*extra: str) -> list[str]:
    return argv("--aks-resource-group", RG, "--aks-cluster", CLUSTER, "--subscription", SUB, *extra)


def test_fetches_credentials_with_az_as_the_stack_step_runs_it(azure_log, tmp_path, monkeypatch, capsys):
    """As the Pulumi step runs it: no kubeconfig anywhere in its environment or on its command line, a
    (fake) logged-in az on PATH that prints the kubeconfig of the (fake) cluster. In this process, on an
    environment of only PATH and HOME; tests/test_hb_stack.py runs the command line the stack renders
    as a fresh process, end to end."""
    home = tmp_path / "home"
    home.mkdir()
    with FakeKube(["Running", "Completed"], azure_log) as kube:
        bindir, calls = fake_az(tmp_path, stdout=kube.kubeconfig())
        only_environment(monkeypatch, PATH=f"{bindir}:/usr/bin:/bin", HOME=str(home))
        code = cli.main(aks_argv())
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert json.loads(captured.out)["verdict"] == "PASS"
    assert az_calls(calls) == [AZ_ARGV]  # once, for that cluster, to stdout (--file -)
    # the API was called with the credentials az printed
    assert kube.requests and {auth for _, _, auth in kube.requests} == {f"Bearer {TOKEN}"}
    assert list(home.iterdir()) == [], "the kubeconfig was written under HOME"
    assert TOKEN not in captured.err


def test_az_credentials_come_before_kubeconfig_content(azure_log, tmp_path, monkeypatch, capsys):
    with FakeKube(["Completed"], azure_log) as kube:
        bindir, calls = fake_az(tmp_path, stdout=kube.kubeconfig())
        monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
        # a stale kubeconfig in the environment (wrong token): the az flags win
        monkeypatch.setenv("KUBECONFIG_CONTENT", kube.kubeconfig().replace(TOKEN, "stale"))
        code = cli.main(aks_argv())
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert az_calls(calls) == [AZ_ARGV]
    assert {auth for _, _, auth in kube.requests} == {f"Bearer {TOKEN}"}


def test_an_explicit_kubeconfig_file_wins_and_az_is_not_called(azure_log, tmp_path, monkeypatch, capsys):
    bindir, calls = fake_az(tmp_path, stderr=NOT_LOGGED_IN, code=1)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    monkeypatch.delenv("KUBECONFIG_CONTENT", raising=False)
    with FakeKube(["Completed"], azure_log) as kube:
        path = tmp_path / "kubeconfig"
        path.write_text(kube.kubeconfig())
        code = cli.main(aks_argv("--kubeconfig", str(path)))
    assert code == 0, capsys.readouterr().err
    assert az_calls(calls) == []


def test_without_subscription_az_uses_its_current_one(azure_log, tmp_path, monkeypatch, capsys):
    with FakeKube(["Completed"], azure_log) as kube:
        bindir, calls = fake_az(tmp_path, stdout=kube.kubeconfig())
        monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
        assert cli.main(argv("--aks-resource-group", RG, "--aks-cluster", CLUSTER)) == 0, capsys.readouterr().err
    (call,) = az_calls(calls)
    assert "--subscription" not in call and call[:6] == AZ_ARGV[:6]


def _one_error_line(err: str) -> str:
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


def test_az_missing_is_exit_2_naming_the_cli(tmp_path, monkeypatch, capsys):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("KUBECONFIG_CONTENT", raising=False)
    assert cli.main(aks_argv()) == 2
    captured = capsys.readouterr()
    error = _one_error_line(captured.err)
    assert "Azure CLI (az) is not on PATH" in error and f"{RG}/{CLUSTER}" in error and "az login" in error
    assert captured.out == ""


@pytest.mark.parametrize("stderr, code, expected", [
    (NOT_LOGGED_IN, 1, "not logged in (or its login expired): run 'az login'"),
    ("WARNING: something\nERROR: (ResourceNotFound) The Resource 'Microsoft.ContainerService/managedClusters/"
     f"{CLUSTER}' under resource group '{RG}' was not found.\n", 3, "(exit 3): (ResourceNotFound)"),
])
def test_az_failing_is_exit_2_with_its_reason(tmp_path, monkeypatch, capsys, stderr, code, expected):
    bindir, calls = fake_az(tmp_path, stderr=stderr, code=code)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    assert cli.main(aks_argv()) == 2
    captured = capsys.readouterr()
    error = _one_error_line(captured.err)
    assert error.startswith(f"error: az aks get-credentials for AKS cluster {RG}/{CLUSTER} in subscription {SUB}")
    assert expected in error
    assert az_calls(calls) == [AZ_ARGV] and captured.out == ""


def test_az_printing_no_kubeconfig_is_exit_2_and_never_echoed(tmp_path, monkeypatch, capsys):
    secret_looking = "token: do-not-print-me\n: : [unbalanced"
    bindir, _ = fake_az(tmp_path, stdout=secret_looking)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    assert cli.main(aks_argv()) == 2
    err = capsys.readouterr().err
    assert "printed no kubeconfig" in _one_error_line(err)
    assert "do-not-print-me" not in err


def test_a_hung_az_is_exit_2(tmp_path, monkeypatch, capsys):
    bindir, _ = fake_az(tmp_path, stdout="", sleep=30)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    monkeypatch.setattr(collect, "AZ_TIMEOUT_SECONDS", 0.1)
    assert cli.main(aks_argv()) == 2
    assert "did not answer within 0.1s" in _one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("flags, message", [
    (["--aks-cluster", CLUSTER], "--aks-resource-group and --aks-cluster go together"),
    (["--aks-resource-group", RG], "--aks-resource-group and --aks-cluster go together"),
    (["--subscription", SUB], "--subscription only applies with"),
])
def test_incomplete_cluster_flags_stop_before_az_or_any_request(tmp_path, monkeypatch, capsys, flags, message):
    bindir, calls = fake_az(tmp_path, stdout="never read")
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    assert cli.main(argv(*flags)) == 2
    assert message in _one_error_line(capsys.readouterr().err)
    assert az_calls(calls) == []


# --- scripted scenarios: a stuck fabric test, diagnosed, by the scenario's clock ----------------------
# Each scenario is a timeline (seconds after T0 -> the cluster), the collector starts at T0 with the
# stack's own timeout (NODE_SETUP_BUDGET_MINUTES + the job's 60 min + 5) and polls every 15 s, as the
# stack's step runs it. The job is the one the dev stack renders: the collector reads what it requests
# (nvidia.com/gpu: 8, rdma/shared_ib: 1 per mpiworker) and tolerates from its pod templates.
JOB_KIND = "kubernetes:batch.volcano.sh/v1alpha1:Job"
GPU, RDMA = fabric.GPU_RESOURCE, modes.SHARED.resource
IMAGE_OF_TEST = "ghcr.io/coreweave/nccl-tests:12.9.1-devel-ubuntu22.04-nccl2.28.3-1-8b67957"
ALLOWANCE = collect.NODE_SETUP_BUDGET_MINUTES * MIN
STACK_TIMEOUT_MINUTES = collect.NODE_SETUP_BUDGET_MINUTES + 60 + 5
DRIVER_POD, DRIVER_CONTAINER = "nvidia-driver-daemonset-7xk2p", "nvidia-driver-ctr"
GPU_OPERATOR_NS, NETWORK_OPERATOR_NS = fabric.GPU_OPERATOR_NAMESPACE, fabric.NETWORK_OPERATOR_NAMESPACE


@pytest.fixture(scope="module")
def stack_job(dev) -> dict:
    from tests.schema_checks import as_api

    return as_api(dev.one(JOB_KIND, "fabric-test-job").inputs)


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


@pytest.mark.parametrize("ready_minutes_before_start", [10, 120])
def test_rdma_resource_never_advertised(stack_job, monkeypatch, capsys, ready_minutes_before_start):
    """The RDMA device plugin never registers rdma/shared_ib. Volcano's enqueue turns the gang away, so
    there is not a single pod: the nodes' allocatable says why. The wait ends when the allowance,
    counted from the nodes' Ready, has passed: 35 min in when they were Ready 10 min before the
    collector started, at once (the done criterion: within a minute) when they were Ready 2 h before."""
    ready_at = -ready_minutes_before_start * MIN

    def scenario(t: float) -> Cluster:
        overused = event("PodGroup", f"{JOB}-{JOB_UID}", "Unschedulable", "resource in cluster is overused: "
                         f"overused {RDMA}", first=0, last=t, count=int(t // 15) + 1, type_="Normal")
        return Cluster(phase="Pending", pod_group=pod_group("Pending"), events=[overused],
                       nodes=nodes(t, ready_at=ready_at, rdma_from=None),
                       **healthy_operators(nic_policies=[nic_policy(False)]))

    code, out, err, waited, _ = run_scenario(scenario, stack_job, monkeypatch, capsys)
    assert code == 2
    expected = max(0.0, (ready_at + ALLOWANCE) / MIN)  # when the allowance ends, by the scenario's clock
    assert expected <= waited < expected + 1, f"waited {waited:.2f} min"
    (line,) = gave_up_lines(err)
    assert f"{RDMA} is not advertised: 0 of 2 Ready IB-pool nodes" in line and "node-setup allowance" in line
    assert out["verdict"] == "FAIL" and out["gave_up"] in line and out["job_phase"] == "Pending"
    diagnosis = {(d["what"], d["where"]) for d in out["diagnosis"]}
    assert (f"{RDMA} not advertised", f"nodes with label {fabric.IB_POOL_ROLE_LABEL}={fabric.IB_POOL_ROLE}") \
        in diagnosis
    assert ("PodGroup Unschedulable", f"podgroup {NS}/{JOB}-{JOB_UID}") in diagnosis  # Volcano's own words
    assert ("NicClusterPolicy state-RDMA-device-plugin", "nicclusterpolicy nic-cluster-policy") in diagnosis
    ib_pool = next(d for d in out["diagnosis"] if d["what"] == "IB pool")
    assert ib_pool["message"].startswith(f"2 of 2 Ready, the 2 needed since {at(ready_at)}")  # not the system node
    assert f"{GPU} advertised by 2 of 2 (8 per node); {RDMA} advertised by 0 of 2" in ib_pool["message"]
    assert all(str(d["message"]) in " ".join(out["reasons"]) for d in out["diagnosis"])


def test_gpu_driver_pod_crash_loops(stack_job, monkeypatch, capsys):
    """The GPU Operator's driver container crash-loops, so no node advertises nvidia.com/gpu. During
    the allowance the crash loop is shown as the pending reason; at its end the wait stops, naming the
    resource, and the diagnosis names the pod and the container."""
    ready_at = -5 * MIN

    def scenario(t: float) -> Cluster:
        return Cluster(phase="Pending", pod_group=pod_group("Pending"),
                       nodes=nodes(t, ready_at=ready_at, gpu_from=None),
                       **healthy_operators(cluster_policies=[cluster_policy(False)],
                                           operator_pods={NETWORK_OPERATOR_NS: [],
                                                          GPU_OPERATOR_NS: [driver_pod(True)]}))

    code, out, err, waited, _ = run_scenario(scenario, stack_job, monkeypatch, capsys)
    assert code == 2
    assert 40 <= waited < 41, f"waited {waited:.2f} min"  # the allowance from the nodes' Ready, not from T0
    (line,) = gave_up_lines(err)
    assert f"{GPU} is not advertised" in line and "GPU Operator's device plugin" in line
    crash = next(d for d in out["diagnosis"] if d["what"] == "CrashLoopBackOff")
    assert crash["where"] == f"pod {GPU_OPERATOR_NS}/{DRIVER_POD} container {DRIVER_CONTAINER}"
    assert "restarted 9 times, last exit: Error, exit code 1" in crash["message"]
    assert any(d["what"] == "ClusterPolicy Ready" and "state-driver" in d["message"] for d in out["diagnosis"])
    # shown while it waited, long before it gave up: the first poll already named the crash loop
    first = progress_lines(err)[:8]
    assert any("CrashLoopBackOff" in p and DRIVER_POD in p for p in first)


@pytest.mark.parametrize("failing_since_minutes", [1, -10])
def test_job_image_pull_backs_off(stack_job, monkeypatch, capsys, failing_since_minutes):
    """The test image does not exist. The pods are placed, the kubelet fails to pull and backs off.
    By the events' own record (firstTimestamp), the wait ends IMAGE_PULL_GIVE_UP_MINUTES after the
    first failure: 3 min after it began 1 min in, or at once (within a minute, the done criterion)
    for a collector started when the back-off had lasted 10 min."""
    image = "ghcr.io/coreweave/nccl-tests:no-such-tag"
    since = failing_since_minutes * MIN
    from verify.diagnose import IMAGE_PULL_GIVE_UP_MINUTES

    def scenario(t: float) -> Cluster:
        failing = t >= since
        waiting = (("ImagePullBackOff", f'Back-off pulling image "{image}"') if failing else
                   ("ContainerCreating", ""))
        pods = job_pods("Pending", image=image, waiting=waiting)
        events = []
        for pod in pods:
            name_, task = pod["metadata"]["name"], pod["metadata"]["labels"]["volcano.sh/task-spec"]
            events.append(event("Pod", name_, "Pulling", f'Pulling image "{image}"', first=min(0, since),
                                last=max(since, min(t, since + 60)), type_="Normal", container=task))
            if failing:
                attempts = 1 + int((t - since) // 40)
                events.append(event("Pod", name_, "Failed", f'Failed to pull image "{image}": rpc error: code = '
                                    "NotFound desc = failed to pull and unpack image: not found",
                                    first=since, last=t, count=attempts, container=task))
                events.append(event("Pod", name_, "BackOff", f'Back-off pulling image "{image}"', first=since + 10,
                                    last=t, count=attempts, type_="Normal", container=task))
        return Cluster(phase="Pending", pod_group=pod_group("Inqueue"), pods=pods, events=events,
                       nodes=nodes(t, ready_at=-30 * MIN), **healthy_operators())

    code, out, err, waited, _ = run_scenario(scenario, stack_job, monkeypatch, capsys)
    assert code == 2
    expected = max(0.0, failing_since_minutes + IMAGE_PULL_GIVE_UP_MINUTES)
    assert expected <= waited < expected + 1, f"waited {waited:.2f} min"
    (line,) = gave_up_lines(err)
    assert f"image {image} of pod {NS}/{JOB}-mpimaster-0 (container mpimaster) cannot be pulled" in line
    assert f"since {at(since)}" in line and "not found" in line
    pulls = [d for d in out["diagnosis"] if d["what"] == "ImagePullBackOff"]
    assert {d["where"] for d in pulls} == {f"pod {NS}/{JOB}-{p} container {p.rsplit('-', 1)[0]}"
                                           for p in ("mpimaster-0", "mpiworker-0", "mpiworker-1")}
    assert all(image in d["message"] for d in pulls)


def test_pool_taint_not_tolerated(stack_job, monkeypatch, capsys):
    """A job whose pods lack the pool's toleration: the scheduler cannot place them on the IB nodes
    (and the system node has no GPU). The allowance runs from the nodes' Ready; then the wait ends,
    naming the taint and the task."""
    spec = copy.deepcopy(stack_job)
    for task in spec["spec"]["tasks"]:
        task["template"]["spec"].pop("tolerations")
    ready_at = -20 * MIN
    message = (f"0/3 nodes are unavailable: 1 Insufficient {GPU}, 2 node(s) had untolerated taint "
               f"{{{fabric.IB_TAINT_KEY}: {fabric.IB_TAINT_VALUE}}}.")

    def scenario(t: float) -> Cluster:
        pods = job_pods("Pending", unschedulable=message)
        events = [event("Pod", p["metadata"]["name"], "FailedScheduling", message, first=0, last=t) for p in pods]
        return Cluster(phase="Pending", pod_group=pod_group("Inqueue"), pods=pods, events=events,
                       nodes=nodes(t, ready_at=ready_at), **healthy_operators())

    code, out, err, waited, _ = run_scenario(scenario, spec, monkeypatch, capsys)
    assert code == 2
    assert 25 <= waited < 26, f"waited {waited:.2f} min"
    (line,) = gave_up_lines(err)
    assert "the job's mpimaster pods do not tolerate the IB pool's taint: 0 of 2 Ready IB-pool nodes" in line
    assert fabric.IB_TAINT in line
    unschedulable = [d for d in out["diagnosis"] if d["what"] == "Unschedulable"]
    assert len(unschedulable) == 3 and all(d["message"] == message for d in unschedulable)
    assert not [d for d in out["diagnosis"] if d["what"] == "FailedScheduling"]  # the same words, said once
    assert not [d for d in out["diagnosis"] if d["what"].endswith("not advertised")]


def completing(t: float, start: float) -> tuple[str, list[dict], list[tuple[float, str]]]:
    """A run that starts at `start`: pods Running, the launcher writes its rows over 5 minutes, the
    job is Completed 8 minutes in. Returns (phase, pods, log)."""
    log = [(start + 60 + 300 * i / len(AZURE_ROWS), line) for i, line in enumerate(AZURE_ROWS)]
    phase = "Completed" if t >= start + 8 * MIN else "Running"
    pods = job_pods("Succeeded" if phase == "Completed" else "Running")
    return phase, pods, log


AZURE_ROWS: list[str] = []


@pytest.fixture
def azure_rows(azure_log, monkeypatch) -> list[str]:
    rows = azure_log.splitlines()
    monkeypatch.setattr(sys.modules[__name__], "AZURE_ROWS", rows)
    return rows


def test_nodes_ready_late_the_allowance_does_not_fire_early(stack_job, azure_rows, monkeypatch, capsys):
    """The nodes are NotReady for the first 20 min (a reboot), the GPUs appear at 35 min and the RDMA
    resource at 50 min: 50 min after the collector started, but only 30 after the nodes' Ready, so
    the allowance still runs. The job then runs, its rows are streamed, and it passes."""
    ready_at, start = 20 * MIN, 50 * MIN

    def scenario(t: float) -> Cluster:
        node_list = nodes(t, ready_at=ready_at, gpu_from=35 * MIN, rdma_from=start)
        if t < start:
            return Cluster(phase="Pending", pod_group=pod_group("Pending"), nodes=node_list,
                           **healthy_operators(nic_policies=[nic_policy(False)]))
        phase, pods, log = completing(t, start)
        return Cluster(phase=phase, pod_group=pod_group("Running"), pods=pods, nodes=node_list, log=log,
                       **healthy_operators())

    code, out, err, waited, _ = run_scenario(scenario, stack_job, monkeypatch, capsys)
    assert code == 0, err
    assert out["verdict"] == "PASS" and out["job_phase"] == "Completed" and out["diagnosis"] == [], out["reasons"]
    assert out["gave_up"] is None
    assert 58 <= waited < 59, f"waited {waited:.2f} min"
    assert not gave_up_lines(err)
    # what it said while it waited: the nodes NotReady, the allowance from their NotReady (5 min before
    # the start), then from their Ready, then running
    lines = progress_lines(err)
    assert any("NodeNotReady" in p and "aks-ib-12345678-vmss000000" in p for p in lines)
    assert any(f"node-setup allowance of 45 min from {at(-5 * MIN)} (node aks-ib-12345678-vmss00000" in p
               and "NotReady) ends" in p for p in lines)
    assert any(f"node-setup allowance of 45 min from {at(ready_at)}" in p for p in lines)
    # the rows as they arrived, each once
    streamed = [line.removeprefix("[launcher] ") for line in err.splitlines() if line.startswith("[launcher]")]
    assert streamed == azure_rows


@pytest.mark.parametrize("not_ready_minutes_before_start, condition", [(50, True), (10, True), (50, False)])
def test_nodes_that_stay_not_ready_end_the_wait(stack_job, monkeypatch, capsys, not_ready_minutes_before_start,
                                                condition):
    """Every GPU node goes NotReady (containerd refuses the toolkit's drop-in and exits; the kubelet
    goes down with it, or reports the runtime down) and stays so. The node-setup allowance runs from
    when they went NotReady (the Ready condition's lastTransitionTime), or from the node's creation
    when it has no Ready condition: at once (within a minute) when that was 50 min before the collector
    started, 35 min in when 10 min before. The give-up names each node and its Ready condition."""
    since = -not_ready_minutes_before_start * MIN
    why = {0: ("Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."),
           1: ("False", "KubeletNotReady", "container runtime is down")}

    def not_ready(i: int) -> dict:
        node = ib_node(i, 0, ready_at=float("inf"))
        node["metadata"]["creationTimestamp"] = at(since)
        status, reason, message = why[i]
        node["status"]["conditions"] = [{"type": "Ready", "status": status, "reason": reason, "message": message,
                                         "lastTransitionTime": at(since)}] if condition else []
        return node

    def scenario(t: float) -> Cluster:
        return Cluster(phase="Pending", pod_group=pod_group("Pending"),
                       nodes=[system_node(), not_ready(0), not_ready(1)],
                       **healthy_operators(cluster_policies=[cluster_policy(False)]))

    code, out, err, waited, _ = run_scenario(scenario, stack_job, monkeypatch, capsys)
    assert code == 2
    expected = max(0.0, (since + ALLOWANCE) / MIN)
    assert expected <= waited < expected + 1, f"waited {waited:.2f} min"
    (line,) = gave_up_lines(err)
    assert out["verdict"] == "FAIL" and out["gave_up"] in line
    assert "0 of 2 IB-pool nodes are Ready, the job needs 2" in line
    for i in (0, 1):
        name_ = f"aks-ib-12345678-vmss00000{i}"
        text = f"Ready={why[i][0]} {why[i][1]}: {why[i][2]}" if condition else "Ready=not reported"
        assert f"{name_} NotReady since {at(since)} ({text})" in line, line
        assert {"what": "NodeNotReady", "where": f"node {name_}", "message": text} in out["diagnosis"]
    assert "node-setup allowance" in line and "containerd" in line and "kubelet" in line
    assert "GPU Operator's container toolkit" in line  # the job wants GPUs: the known cause on them is named


def test_slow_image_pull_that_succeeds(stack_job, azure_rows, monkeypatch, capsys):
    """A 25-minute pull of the test image (a large image, a slow registry). The nodes have been Ready
    for 30 min, so the allowance passes during the pull: a pull in progress is no reason to stop.
    Progress says what it waits for, without a line every poll."""
    start = 25 * MIN

    def scenario(t: float) -> Cluster:
        node_list = nodes(t, ready_at=-30 * MIN)
        if t < start:
            pods = job_pods("Pending", waiting=("ContainerCreating", ""))
            events = [event("Pod", p["metadata"]["name"], "Pulling", f'Pulling image "{IMAGE_OF_TEST}"', first=0,
                            last=0, type_="Normal", container=p["metadata"]["labels"]["volcano.sh/task-spec"])
                      for p in pods]
            return Cluster(phase="Pending", pod_group=pod_group("Inqueue"), pods=pods, events=events,
                           nodes=node_list, **healthy_operators())
        phase, pods, log = completing(t, start)
        return Cluster(phase=phase, pod_group=pod_group("Running"), pods=pods, nodes=node_list, log=log,
                       **healthy_operators())

    code, out, err, waited, _ = run_scenario(scenario, stack_job, monkeypatch, capsys)
    assert code == 0, err
    assert out["verdict"] == "PASS" and out["gave_up"] is None
    assert 33 <= waited < 34, f"waited {waited:.2f} min"
    lines = progress_lines(err)
    assert any(f"Pulling (pod {NS}/{JOB}-mpiworker-0 container mpiworker): image {IMAGE_OF_TEST}, pulling since "
               f"{at(0)}" in p for p in lines)
    # change-driven: 100 polls while pulling, a handful of lines (the pods, the findings, 5-minute heartbeats)
    heartbeats = [p for p in lines if "still waiting after" in p]
    assert 4 <= len(heartbeats) <= 5
    assert all(f"waiting for: Pulling (pod {NS}/{JOB}-mpimaster-0 container mpimaster)" in p for p in heartbeats)
    assert len(lines) < 25


@pytest.mark.parametrize("old_events_name_the_uid", [True, False])
def test_a_rerun_is_not_judged_by_the_old_pods_events(stack_job, azure_rows, monkeypatch, capsys,
                                                      old_events_name_the_uid):
    """A re-run: Volcano names the new pods as it named the old ones (<job>-mpiworker-0), and the old
    pods' events live on for about an hour. The old run's pull failed 35 to 31 min ago (3 attempts,
    then a FailedMount); the new pods start pulling 10 s in, one attempt fails at 30 s (a registry
    hiccup), the retry succeeds and the job passes. Only the new pods' events count: matched on
    involvedObject.uid, or, for an event that names no uid, not older than the pod's creation."""
    image, start = IMAGE_OF_TEST, 3 * MIN
    old_since = -35 * MIN

    def scenario(t: float) -> Cluster:
        node_list = nodes(t, ready_at=-60 * MIN)
        if t >= start:
            phase, pods, log = completing(t, start)
            return Cluster(phase=phase, pod_group=pod_group("Running"), pods=pods, log=log, nodes=node_list,
                           **healthy_operators())
        hiccup = 30 <= t < 2 * MIN
        pods = job_pods("Pending", waiting=("ErrImagePull", "rpc error: code = Unknown desc = i/o timeout")
                        if hiccup else ("ContainerCreating", ""))
        events = []
        for pod in pods:
            name_, new_uid = pod["metadata"]["name"], pod["metadata"]["uid"]
            task = pod["metadata"]["labels"]["volcano.sh/task-spec"]
            old_uid = f"old-{new_uid}" if old_events_name_the_uid else None
            events += [
                event("Pod", name_, "Pulling", f'Pulling image "{image}"', first=old_since, last=-31 * MIN,
                      count=3, type_="Normal", container=task, uid=old_uid),
                event("Pod", name_, "Failed", f'Failed to pull image "{image}": rpc error: code = NotFound desc = '
                      "not found", first=old_since, last=-31 * MIN, count=3, container=task, uid=old_uid),
                event("Pod", name_, "FailedMount", 'MountVolume.SetUp failed for volume "ssh" : secret '
                      f'"{JOB}-ssh" not found', first=-32 * MIN, last=-31 * MIN, uid=old_uid)]
            if t >= 10:
                events.append(event("Pod", name_, "Pulling", f'Pulling image "{image}"', first=10,
                                    last=10 if t < 2 * MIN else 2 * MIN, count=1 if t < 2 * MIN else 2,
                                    type_="Normal", container=task, uid=new_uid))
            if t >= 30:
                events.append(event("Pod", name_, "Failed", f'Failed to pull image "{image}": rpc error: code = '
                                    "Unknown desc = i/o timeout", first=30, last=30, container=task, uid=new_uid))
        return Cluster(phase="Pending", pod_group=pod_group("Inqueue"), pods=pods, events=events, nodes=node_list,
                       **healthy_operators())

    code, out, err, waited, _ = run_scenario(scenario, stack_job, monkeypatch, capsys)
    assert code == 0, err
    assert out["verdict"] == "PASS" and out["gave_up"] is None, out["reasons"]
    assert not gave_up_lines(err)
    lines = progress_lines(err)
    # the new pods' own failure, from its own time; nothing of the old run
    assert any(f"ErrImagePull (pod {NS}/{JOB}-mpiworker-0 container mpiworker): image {image} fails to pull since "
               f"{at(30)}: " in p and "i/o timeout" in p for p in lines), lines
    old_times = (at(old_since), at(-32 * MIN), at(-31 * MIN))
    assert not [p for p in lines if any(t in p for t in old_times) or "FailedMount" in p or "NotFound" in p]
    assert any(f"Pulling (pod {NS}/{JOB}-mpiworker-1 container mpiworker): image {image}, pulling since {at(2 * MIN)}"
               in p for p in lines)


def test_the_stack_step_reports_an_incomplete_run_in_its_outputs(dev, stack_job, tmp_path, monkeypatch, capsys):
    """The dev stack's own collect command (with --incomplete-as-fail): the give-up is a FAIL result
    with the diagnosis as its reasons, exit 0, and the stack's parser turns it into the outputs
    fabricVerdict / fabricVerdictReasons. With failOnLowBandwidth the step (and `pulumi up`) fails."""
    import shlex

    from components.fabric_check import parse_result

    create = shlex.split(dev.one("command:local:Command", "fabric-check-collect").inputs["create"])
    assert "--incomplete-as-fail" in create
    clock = FakeClock()
    monkeypatch.setattr(collect, "CLOCK", clock)

    def scenario(t: float) -> Cluster:
        return Cluster(phase="Pending", pod_group=pod_group("Pending"),
                       nodes=nodes(t, ready_at=-120 * MIN, rdma_from=None), **healthy_operators())

    for extra, exit_code in (([], 0), (["--fail-on-low-bandwidth"], 1)):
        with FakeKube(scenario=scenario, clock=clock, spec=stack_job["spec"],
                      job=create[create.index("--job") + 1]) as kube_:
            bindir, _ = fake_az(tmp_path, stdout=kube_.kubeconfig())
            monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
            code = cli.main([*create[3:], *extra])
        captured = capsys.readouterr()
        assert code == exit_code, captured.err
        result = parse_result(captured.out)
        assert result.verdict == "FAIL"
        assert result.reasons[0].startswith("the fabric test did not complete: gave up after 0s")
        assert any(r.startswith(f"{RDMA} not advertised") for r in result.reasons)
        assert "error:" not in captured.err  # a result, not an error


def test_a_failed_job_pod_ends_it_as_today_and_says_which(stack_job, monkeypatch, capsys):
    """A worker is OOM-killed 3 min into the run; Volcano terminates the job (TerminateJob). The log is
    judged as before (FAIL), and the reasons name the pod, the container and its exit."""
    def scenario(t: float) -> Cluster:
        pods = job_pods("Running")
        if t >= 3 * MIN:
            worker = pods[1]["status"]
            worker["phase"] = "Failed"
            worker["containerStatuses"][0]["state"] = {"terminated": {"reason": "OOMKilled", "exitCode": 137}}
        return Cluster(phase="Terminated" if t >= 3.5 * MIN else "Running", pods=pods, pod_group=pod_group("Running"),
                       nodes=nodes(t, ready_at=-60 * MIN), log=[(30, "launcher: waiting for sshd on 2 workers")],
                       **healthy_operators())

    code, out, err, waited, _ = run_scenario(scenario, stack_job, monkeypatch, capsys, "--fail-on-low-bandwidth")
    assert code == 1
    assert 3.5 <= waited < 3.75, f"waited {waited:.2f} min"
    assert out["verdict"] == "FAIL" and out["job_phase"] == "Terminated" and out["gave_up"] is None
    assert {"what": "Terminated", "where": f"pod {NS}/{JOB}-mpiworker-0 container mpiworker",
            "message": "OOMKilled, exit code 137"} in out["diagnosis"]
    assert f"Terminated (pod {NS}/{JOB}-mpiworker-0 container mpiworker): OOMKilled, exit code 137" in out["reasons"]
    assert "[launcher] launcher: waiting for sshd on 2 workers" in err.splitlines()


def test_an_unreadable_object_is_a_finding_not_the_end(stack_job, monkeypatch, capsys):
    """Without read access to nodes (RBAC), the collector still waits and says so; without the nodes'
    Ready time it cannot start the allowance, so only its timeout ends the wait."""
    def scenario(t: float) -> Cluster:
        return Cluster(phase="Pending", pod_group=pod_group("Pending"),
                       nodes=nodes(t, ready_at=-120 * MIN, rdma_from=None), **healthy_operators())

    code, out, err, waited, _ = run_scenario(scenario, stack_job, monkeypatch, capsys, timeout_minutes=6,
                                             forbidden=("/api/v1/nodes",))
    assert code == 2 and 5.5 <= waited <= 6
    assert "timed out" in out["gave_up"]
    assert {"what": "cannot read", "where": f"nodes with label {fabric.IB_POOL_ROLE_LABEL}={fabric.IB_POOL_ROLE}",
            "message": "Kubernetes API answered 403 Forbidden"} in out["diagnosis"]
    assert any("node-setup allowance unknown (the IB pool's nodes could not be read)" in line
               for line in progress_lines(err))


@pytest.mark.parametrize("ready, not_ready_minutes_ago, gives_up", [
    (0, (50, 10), True),  # both are needed: one is past its allowance, so waiting cannot help
    (1, (50, 10), False),  # one more is needed: the one NotReady for 10 min may still come up
    (1, (60, 50), True),  # one more is needed, and both are past their allowance
])
def test_the_not_ready_allowance_waits_while_enough_nodes_may_still_come_up(stack_job, ready, not_ready_minutes_ago,
                                                                             gives_up):
    """The job needs 2 nodes. With fewer Ready, each NotReady node has the allowance from when it went
    NotReady; the wait ends once fewer of them are within it than nodes are missing."""
    from verify.diagnose import Diagnoser, Snapshot

    now = T0
    node_list = [ib_node(i, 0, ready_at=-60 * MIN) for i in range(ready)]
    for i, minutes in enumerate(not_ready_minutes_ago, start=ready):
        node_list.append(ib_node(i, 0, ready_at=float("inf"), not_ready_since=-minutes * MIN))
    snap = Snapshot(namespace=NS, job=stack_job, nodes=node_list)
    verdict = Diagnoser(NS, JOB, setup_allowance_seconds=ALLOWANCE).assess(snap, now)
    assert (verdict.give_up is not None) == gives_up, verdict.give_up
    if gives_up:
        assert verdict.give_up.startswith(f"{ready} of {ready + 2} IB-pool nodes are Ready, the job needs 2")
    else:
        assert f"from {at(-10 * MIN)} (node aks-ib-12345678-vmss00000{ready + 1} NotReady) ends" in verdict.allowance


# --- the facts the diagnosis reads, against the upstream schemas and rules ------------------------------
def _crd(reference: Path, name: str) -> dict:
    text = (reference / "crds" / name).read_text()
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _status(crd: dict, version: str) -> dict:
    found = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    return found["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]


def test_the_custom_resources_read_match_their_crds(reference):
    """Group, version, plural, scope and every status field the diagnosis reads, per CRD."""
    cases = [
        ("mellanox.com_nicclusterpolicies.v26.4.1.yaml", kube.NIC_POLICY_GROUP, kube.NIC_POLICY_VERSION,
         kube.NIC_POLICY_PLURAL, "Cluster"),
        ("nvidia.com_clusterpolicies.v26.7.0.yaml", kube.CLUSTER_POLICY_GROUP, kube.CLUSTER_POLICY_VERSION,
         kube.CLUSTER_POLICY_PLURAL, "Cluster"),
        ("scheduling.volcano.sh_podgroups.v1.15.1.yaml", kube.PODGROUP_GROUP, kube.PODGROUP_VERSION,
         kube.PODGROUP_PLURAL, "Namespaced"),
    ]
    for file, group, version, plural, scope in cases:
        crd = _crd(reference, file)
        assert (crd["spec"]["group"], crd["spec"]["names"]["plural"], crd["spec"]["scope"]) == (group, plural, scope)
        assert version in [v["name"] for v in crd["spec"]["versions"]]
    nic = _status(_crd(reference, cases[0][0]), kube.NIC_POLICY_VERSION)
    assert kube.READY_STATE in nic["state"]["enum"] and "reason" in nic
    applied = nic["appliedStates"]["items"]["properties"]
    assert {"name", "state", "message"} <= set(applied) and {"notReady", "error"} <= set(applied["state"]["enum"])
    gpu = _status(_crd(reference, cases[1][0]), kube.CLUSTER_POLICY_VERSION)
    assert kube.READY_STATE in gpu["state"]["enum"] and gpu["namespace"]["type"] == "string"
    assert {"type", "status", "reason", "message"} <= set(gpu["conditions"]["items"]["properties"])
    pg = _status(_crd(reference, cases[2][0]), kube.PODGROUP_VERSION)
    assert "Pending" in pg["phase"]["enum"]
    assert {"type", "status", "reason", "message", "lastTransitionTime"} <= set(pg["conditions"]["items"]["properties"])


def test_the_job_tasks_the_collector_reads_match_the_volcano_crd(reference, stack_job):
    from verify.diagnose import tasks_of

    crd = _crd(reference, "batch.volcano.sh_jobs.v1.15.1.yaml")
    version = next(v for v in crd["spec"]["versions"] if v["name"] == collect.VOLCANO_VERSION)
    task = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["tasks"]["items"]["properties"]
    assert {"name", "replicas", "template"} <= set(task)
    # what the collector reads from the stack's own job: the RDMA resource and every GPU per worker
    tasks = {t.name: t for t in tasks_of(stack_job)}
    assert tasks["mpiworker"].devices == {GPU: 8, RDMA: 1} and tasks["mpiworker"].replicas == 2
    assert tasks["mpimaster"].devices == {} and tasks["mpimaster"].tolerations == (fabric.toleration(),)


@pytest.mark.parametrize("toleration, tolerated", [
    (fabric.toleration(), True),
    ({"key": fabric.IB_TAINT_KEY, "operator": "Exists"}, True),
    ({"operator": "Exists"}, True),  # no key, Exists: every taint
    ({"key": fabric.IB_TAINT_KEY, "operator": "Equal", "value": "false", "effect": "NoSchedule"}, False),
    ({"key": fabric.IB_TAINT_KEY, "operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": fabric.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}, False),
])
def test_tolerations_follow_kubernetes_rules(toleration, tolerated):
    from verify.diagnose import _tolerates

    taint = {"key": fabric.IB_TAINT_KEY, "value": fabric.IB_TAINT_VALUE, "effect": fabric.IB_TAINT_EFFECT}
    assert _tolerates(toleration, taint) is tolerated


def test_api_timestamps_order_exactly():
    """Log timestamps trim trailing zeros (RFC 3339 nano): .1 is later than .09, earlier than .12."""
    a, b, c = (kube.time_ns(f"2026-03-01T12:00:00.{f}Z") for f in ("09", "1", "12"))
    assert a < b < c and c - b == 20_000_000
    assert kube.epoch("2026-03-01T12:00:00Z") == T0 == kube.epoch("2026-03-01T13:00:00+01:00")
    assert kube.iso(T0) == "2026-03-01T12:00:00Z" and kube.time_ns("yesterday") is None


def test_durations_read_as_whole_minutes_or_seconds():
    """One helper for the collector's and the diagnosis' messages: under a minute in seconds."""
    assert [kube.duration(s) for s in (0, 45, 59.4, 60, 89, 91, 45 * MIN)] == \
        ["0s", "45s", "59s", "1 min", "1 min", "2 min", "45 min"]
