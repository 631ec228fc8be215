"""`python -m verify collect` against the fake Kubernetes API (tests/fake_kube.py): the simple cases,
a list of job phases served in order, both kinds, and credentials from the Azure CLI. The scripted
scenarios of a stuck run are tests/unit/clusterside/test_verify_collect_scenarios.py."""

from __future__ import annotations

import json
import os

import pytest

from clusterside import collect
from components.fabric.mpi_job import MASTER_TASK
from components.fabric.p2p_job import P2pJobArgs
from core import catalog
from tests.fake_kube import (
    JOB,
    NS,
    PODS_PATH,
    ROOT,
    TOKEN,
    FakeClock,
    FakeKube,
    az_calls,
    fake_az,
)
from tests.schema_checks import load_yaml, pinned_name
from tests.unit.verify.test_osu_perftest import AKS_DROP, HBV3_BW, HBV3_LAT, raw_rows
from verify import __main__ as cli


@pytest.fixture(autouse=True)
def _scenario_clock(monkeypatch) -> None:
    """The collector's sleeps between polls on a fake clock (the fake API's phases move on per poll, not
    by time): the waits and timeouts below are the collector's own, and no test sleeps through them."""
    monkeypatch.setattr(collect, "CLOCK", FakeClock())


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
    text = (reference / "crds" / pinned_name("batch.volcano.sh_jobs", "volcano")).read_text()
    crd = load_yaml(text)
    version = next(v for v in crd["spec"]["versions"] if v["name"] == collect.VOLCANO_VERSION)
    phases = set(version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["state"]["properties"]
                 ["phase"]["enum"])
    assert collect.DONE_PHASES | collect.FAILED_PHASES <= phases
    assert crd["spec"]["group"] == collect.VOLCANO_GROUP and crd["spec"]["names"]["plural"] == collect.VOLCANO_PLURAL


def test_a_transient_api_error_during_the_wait_is_retried(azure_log, monkeypatch, capsys):
    with FakeKube(["Running", "Completed"], azure_log, unavailable=(2,)) as kube:  # the second read: 503
        monkeypatch.setenv("KUBECONFIG_CONTENT", kube.kubeconfig())
        assert cli.main(argv()) == 0
    captured = capsys.readouterr()
    assert "503 Service Unavailable (attempt 1 of 5; retrying)" in captured.err
    assert json.loads(captured.out)["verdict"] == "PASS"
    assert kube.job_reads == 3  # read, 503, read again


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


def aks_argv(*extra: str) -> list[str]:
    return argv("--aks-resource-group", RG, "--aks-cluster", CLUSTER, "--subscription", SUB, *extra)


def test_fetches_credentials_with_az_as_the_stack_step_runs_it(azure_log, tmp_path, monkeypatch, capsys):
    """As the Pulumi step runs it: no kubeconfig anywhere in its environment or on its command line, a
    (fake) logged-in az on PATH that prints the kubeconfig of the (fake) cluster. In this process, on an
    environment of only PATH and HOME; tests/stack/test_hb_stack.py runs the command line the stack renders
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
