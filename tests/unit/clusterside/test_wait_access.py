"""`python -m verify wait-access` (clusterside/wait_access.py): kubelogin's exec credential run as kubectl runs
it, and the wait for an Azure RBAC assignment, bounded, against a fake API server whose reviews say no,
then yes."""

from __future__ import annotations

import argparse
import json

import pytest

from clusterside import kube_api, wait_access


def plugin(tmp_path, token: str = "t-123") -> dict:
    script = tmp_path / "kubelogin"
    script.write_text("#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\","
                      f"\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{token}\"}}}}'\n")
    script.chmod(0o755)
    return {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(script), "args": ["get-token"]}


def test_the_exec_plugins_token_is_used(tmp_path):
    assert kube_api.exec_token(plugin(tmp_path)) == "t-123"
    broken = {**plugin(tmp_path), "command": str(tmp_path / "missing")}
    with pytest.raises(kube_api.ApiError, match="did not run"):
        kube_api.exec_token(broken)


def test_it_waits_until_the_review_says_yes_and_gives_up_in_one_line(tmp_path, monkeypatch, capsys):
    kubeconfig = {"clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
                  "users": [{"name": "u", "user": {"exec": plugin(tmp_path)}}],
                  "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}], "current-context": "x"}
    monkeypatch.setenv("KUBECONFIG_JSON", json.dumps(kubeconfig))
    answers = iter([kube_api.ApiError("403 Forbidden", 403), {"status": {"allowed": False}},
                    {"status": {"allowed": True}}])
    seen = []

    def post(self, path, body):
        seen.append((path, self.creds.bearer()))
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(kube_api.Api, "post", post)
    args = argparse.Namespace(timeout_minutes=1.0, poll_seconds=1.0)
    assert wait_access.run(args, sleep=lambda s: None) == 0
    assert seen[0] == (wait_access.REVIEW, "t-123") and len(seen) == 3
    monkeypatch.setattr(kube_api.Api, "post", lambda self, path, body: {"status": {"allowed": False}})
    clock = iter(range(0, 10_000, 30))
    assert wait_access.run(args, sleep=lambda s: None, now=lambda: next(clock)) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: the deployer may still not")
