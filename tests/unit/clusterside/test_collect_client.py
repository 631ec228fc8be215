"""`python -m verify collect` on the one Kubernetes client (clusterside/kube_api.py, the certifier's standard-
library client), against the fake API (tests/fake_kube.py): kubelogin's exec credential as kubectl runs it
(an Entra ID cluster's kubeconfig), its token kept until it expires; $KUBECONFIG's files merged as kubectl
merges them; no `kubernetes` package needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from clusterside import collect, kube_api
from tests.fake_kube import JOB, NS, ROOT, TOKEN, FakeClock, FakeKube
from verify import __main__ as cli


@pytest.fixture(autouse=True)
def _scenario_clock(monkeypatch) -> None:
    monkeypatch.setattr(collect, "CLOCK", FakeClock())


def argv(*extra: str) -> list[str]:
    return ["collect", "--namespace", NS, "--job", JOB, "--sku", "Standard_ND96asr_v4", "--nodes", "2",
            "--poll-seconds", "0.05", "--json", *extra]


def kubelogin(tmp_path, token: str = TOKEN, expires_in: timedelta | None = timedelta(hours=1)) -> tuple[dict, object]:
    """A stand-in for kubelogin (an ExecCredential on stdout) that counts its runs, and the `exec` entry of a
    kubeconfig user that runs it as `az aks get-credentials` writes it for an Entra ID cluster."""
    runs = tmp_path / "runs"
    status = {"token": token}
    if expires_in is not None:
        status["expirationTimestamp"] = (datetime.now(UTC) + expires_in).strftime("%Y-%m-%dT%H:%M:%SZ")
    credential = json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                             "status": status})
    script = tmp_path / "kubelogin"
    script.write_text(f"#!/bin/sh\necho run >> '{runs}'\necho '{credential}'\n")
    script.chmod(0o755)
    plugin = {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(script),
              "args": ["get-token", "--login", "azurecli", "--server-id", "6dae42f8-4368-4678-94ff-3960e28e3630"]}
    return plugin, runs


def with_user(kubeconfig: str, user: dict) -> str:
    doc = json.loads(kubeconfig)
    doc["users"] = [{"name": "fake", "user": user}]
    return json.dumps(doc)


def test_collect_signs_in_with_kubelogins_exec_credential_and_keeps_its_token(azure_log, tmp_path, monkeypatch,
                                                                             capsys):
    plugin, runs = kubelogin(tmp_path)
    with FakeKube(["Pending", "Running", "Running", "Completed"], azure_log) as kube:
        monkeypatch.setenv("KUBECONFIG_CONTENT", with_user(kube.kubeconfig(), {"exec": plugin}))
        code = cli.main(argv())
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert json.loads(captured.out)["verdict"] == "PASS"
    assert len(kube.requests) > 5 and {auth for _, _, auth in kube.requests} == {f"Bearer {TOKEN}"}
    assert runs.read_text().splitlines() == ["run"], "the token is kept until it expires, as client-go keeps it"


def test_a_token_without_expiry_is_kept_until_a_401_and_one_about_to_expire_is_asked_for_again(tmp_path):
    """client-go's rule (plugin/pkg/client/auth/exec): no expirationTimestamp, the credential is kept until
    the API server refuses it."""
    plugin, runs = kubelogin(tmp_path, expires_in=None)
    assert kube_api.exec_token(plugin) == kube_api.exec_token(plugin) == TOKEN
    assert len(runs.read_text().splitlines()) == 1
    kube_api.forget_exec_token(plugin)
    kube_api.exec_token(plugin)
    assert len(runs.read_text().splitlines()) == 2
    (tmp_path / "soon").mkdir()
    plugin, runs = kubelogin(tmp_path / "soon", expires_in=timedelta(seconds=30))  # within the margin
    kube_api.exec_token(plugin)
    kube_api.exec_token(plugin)
    assert len(runs.read_text().splitlines()) == 2


def test_a_legacy_auth_provider_is_one_line_and_exit_2(monkeypatch, capsys):
    with FakeKube(["Completed"]) as kube:
        monkeypatch.setenv("KUBECONFIG_CONTENT", with_user(kube.kubeconfig(), {"auth-provider": {"name": "azure"}}))
        assert cli.main(argv()) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "legacy auth-provider (azure)" in err and "KUBECONFIG_CONTENT" in err
    assert kube.requests == []


def test_kubeconfig_files_merge_as_kubectl_merges_them(azure_log, tmp_path, monkeypatch, capsys):
    """$KUBECONFIG's files, in order: the first to name an entry or set current-context wins; a missing
    file is skipped. Without $KUBECONFIG, ~/.kube/config."""
    monkeypatch.delenv("KUBECONFIG_CONTENT", raising=False)
    with FakeKube(["Completed"], azure_log) as kube:
        doc = json.loads(kube.kubeconfig())
        first = tmp_path / "users"  # the context and its user, and a stale cluster of another name
        first.write_text(json.dumps({"current-context": "fake", "contexts": doc["contexts"], "users": doc["users"],
                                     "clusters": [{"name": "other", "cluster": {"server": "http://127.0.0.1:1"}}]}))
        second = tmp_path / "clusters"  # the cluster, and a context of the same name that loses
        second.write_text(json.dumps({"current-context": "elsewhere", "clusters": doc["clusters"], "contexts": [
            {"name": "fake", "context": {"cluster": "other", "user": "fake"}}]}))
        monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(first), str(tmp_path / "missing"), str(second)]))
        code, captured = cli.main(argv()), capsys.readouterr()
        assert code == 0 and json.loads(captured.out)["verdict"] == "PASS", captured.err
        assert kube_api.default_kubeconfig().server == doc["clusters"][0]["cluster"]["server"]
        monkeypatch.delenv("KUBECONFIG")
        (tmp_path / "home" / ".kube").mkdir(parents=True)
        (tmp_path / "home" / ".kube" / "config").write_text(kube.kubeconfig())
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        code, captured = cli.main(argv()), capsys.readouterr()
        assert code == 0 and json.loads(captured.out)["verdict"] == "PASS", captured.err
    with pytest.raises(kube_api.ApiError, match="no kubeconfig"):
        kube_api.default_kubeconfig(home=tmp_path / "nobody")


def test_collect_runs_without_the_kubernetes_package(azure_log, tmp_path):
    """One client: nothing the collector runs imports the `kubernetes` package (PyYAML reads kubeconfigs)."""
    blocked = "import sys, runpy; sys.modules['kubernetes'] = None; runpy.run_module('verify', run_name='__main__')"
    with FakeKube(["Completed"], azure_log) as kube:
        path = tmp_path / "kubeconfig"
        path.write_text(kube.kubeconfig())
        done = subprocess.run([sys.executable, "-c", blocked, *argv("--kubeconfig", str(path))], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["verdict"] == "PASS"
