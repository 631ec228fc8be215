"""`python -m verify collect` against a FAKE Kubernetes API: a small HTTP server on 127.0.0.1 in the
test process that serves exactly the endpoints the collector calls (there is no cluster here)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

import catalog
from components.mpi_job import MASTER_TASK
from components.p2p_job import P2pJobArgs
from tests.test_osu_perftest import AKS_DROP, HBV3_BW, HBV3_LAT, raw_rows
from verify import __main__ as cli
from verify import collect

ROOT = Path(__file__).resolve().parent.parent
AZURE = "sample-output_azure-aks-rdma-infiniband_expected-output.txt"
NS, JOB, TOKEN = "fabric-test", "nccl-allreduce", "fake-token-123"
JOB_PATH = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NS}/jobs/{JOB}"
PODS_PATH = f"/api/v1/namespaces/{NS}/pods"


class FakeKube:
    """Job phases served in order (the last one repeats), one launcher pod, its log. `namespace` and
    `job` name the one Volcano Job it knows (the NCCL job by default; the p2p tests pass theirs)."""

    def __init__(self, phases: list[str], log: str, *, pods: bool = True, job_exists: bool = True,
                 namespace: str = NS, job: str = JOB):
        self.phases, self.log, self.pods, self.job_exists = list(phases), log, pods, job_exists
        self.namespace, self.job = namespace, job
        self.job_path = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{namespace}/jobs/{job}"
        self.pods_path = f"/api/v1/namespaces/{namespace}/pods"
        self.requests: list[tuple[str, dict, str | None]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
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
                if url.path == fake.job_path:
                    if not fake.job_exists:
                        return self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                    phase = fake.phases.pop(0) if len(fake.phases) > 1 else fake.phases[0]
                    return self._send(200, {
                        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                        "metadata": {"name": fake.job, "namespace": fake.namespace},
                        "status": {"state": {"phase": phase}, "running": 3 if phase == "Running" else 0,
                                   "succeeded": 3 if phase == "Completed" else 0},
                    })
                if url.path == fake.pods_path:
                    items = []
                    if fake.pods:
                        items = [
                            {"metadata": {"name": f"{fake.job}-mpimaster-0", "namespace": fake.namespace,
                                          "creationTimestamp": "2026-01-01T00:00:00Z",
                                          "labels": {"volcano.sh/job-name": fake.job,
                                                     "volcano.sh/task-spec": "mpimaster"}},
                             "spec": {"containers": [{"name": "mpimaster", "image": "nccl-tests"}]},
                             "status": {"phase": "Succeeded"}},
                        ]
                    return self._send(200, {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items})
                if url.path == f"{fake.pods_path}/{fake.job}-mpimaster-0/log":
                    return self._send(200, fake.log, content_type="text/plain")
                return self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

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


@pytest.fixture
def azure_log(reference) -> str:
    return (reference / "nccl-tests" / AZURE).read_text()


def argv(*extra: str) -> list[str]:
    return ["collect", "--namespace", NS, "--job", JOB, "--sku", "Standard_ND96asr_v4", "--nodes", "2",
            "--poll-seconds", "0.05", "--json", *extra]


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
    # progress on stderr, one line per poll
    progress = [line for line in captured.err.splitlines() if "[verify collect] job" in line]
    assert [p.split(": ")[1].split(" ")[0] for p in progress] == ["Pending", "Running", "Running", "Completed"]
    # the launcher is found by Volcano's pod labels, and the kubeconfig's credentials are used
    pod_lists = [q for path, q, _ in kube.requests if path == PODS_PATH]
    assert pod_lists == [{"labelSelector": f"volcano.sh/job-name={JOB},volcano.sh/task-spec=mpimaster"}]
    log_reads = [q for path, q, _ in kube.requests if path.endswith("/log")]
    assert log_reads == [{"container": "mpimaster"}]
    assert {auth for _, _, auth in kube.requests} == {f"Bearer {TOKEN}"}


def test_kubeconfig_file_argument(azure_log, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("KUBECONFIG_CONTENT", raising=False)
    with FakeKube(["Completed"], azure_log) as kube:
        path = tmp_path / "kubeconfig"
        path.write_text(kube.kubeconfig())
        assert cli.main(argv("--kubeconfig", str(path))) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "PASS"


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
    assert code == 2 and captured.out == ""
    errors = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "timed out" in errors[0] and "last phase Running" in errors[0]
    assert not any(path == PODS_PATH for path, _, _ in kube.requests)


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


def test_subprocess_reads_kubeconfig_from_the_environment_only(azure_log):
    """As the Pulumi step runs it: the kubeconfig in KUBECONFIG_CONTENT, nothing secret on the command line."""
    with FakeKube(["Running", "Completed"], azure_log) as kube:
        env = {"KUBECONFIG_CONTENT": kube.kubeconfig(), "PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
        p = subprocess.run([sys.executable, "-m", "verify", *argv()], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    assert json.loads(p.stdout)["verdict"] == "PASS"


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
    assert pod_lists == [{"labelSelector": f"volcano.sh/job-name={P2P_JOB},volcano.sh/task-spec={MASTER_TASK}"}]


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


def test_subprocess_fetches_credentials_with_az_as_the_stack_step_runs_it(azure_log, tmp_path):
    """End to end as the Pulumi step runs it: no kubeconfig anywhere in its environment or on its
    command line, a (fake) logged-in az on PATH that prints the kubeconfig of the (fake) cluster."""
    home = tmp_path / "home"
    home.mkdir()
    with FakeKube(["Running", "Completed"], azure_log) as kube:
        bindir, calls = fake_az(tmp_path, stdout=kube.kubeconfig())
        env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(home)}
        p = subprocess.run([sys.executable, "-m", "verify", *aks_argv()], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["verdict"] == "PASS"
    assert az_calls(calls) == [AZ_ARGV]  # once, for that cluster, to stdout (--file -)
    # the API was called with the credentials az printed
    assert kube.requests and {auth for _, _, auth in kube.requests} == {f"Bearer {TOKEN}"}
    assert list(home.iterdir()) == [], "the kubeconfig was written under HOME"
    assert TOKEN not in p.stderr


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
    monkeypatch.setattr(collect, "AZ_TIMEOUT_SECONDS", 0.5)
    assert cli.main(aks_argv()) == 2
    assert "did not answer within 0.5s" in _one_error_line(capsys.readouterr().err)


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
