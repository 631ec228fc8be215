"""`python -m verify certify` on bad input: one line and exit 2 (`no result`), never a traceback and never
exit 1, which the CLI defines as "the gate tripped" (a CI wrapper would read a bad credential as a failed
fabric)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.paths import ROOT

KUBECONFIGS = {
    "binary": bytes(range(256)) * 2,
    "not-yaml": b"apiVersion: v1\nclusters: [\n",
    "wrong-shape": b'{"clusters": 5, "contexts": "x"}',
    "a-list": b"- a\n- b\n",
    "bad-base64-ca": (b'{"clusters":[{"name":"c","cluster":{"server":"https://127.0.0.1:1",'
                      b'"certificate-authority-data":"!!!"}}],"contexts":[{"name":"a","context":{"cluster":"c",'
                      b'"user":"u"}}],"current-context":"a","users":[{"name":"u","user":{"token":"t"}}]}'),
}
# A server urllib cannot open raised from deep in it (a traceback, exit 1); none of these is dialled.
for server in ("not a url", "https://h:abc", "https://[::1", "https://exa mple.com", "ftp://127.0.0.1:1"):
    KUBECONFIGS[f"server {server}"] = (
        b'{"clusters":[{"name":"c","cluster":{"server":"%s"}}],"contexts":[{"name":"a","context":{"cluster":"c",'
        b'"user":"u"}}],"current-context":"a","users":[{"name":"u","user":{"token":"t"}}]}' % server.encode())


@pytest.mark.parametrize("name", KUBECONFIGS)
def test_a_bad_kubeconfig_is_one_line_and_exit_2(tmp_path, name):
    path = tmp_path / "kubeconfig"
    path.write_bytes(KUBECONFIGS[name])
    done = subprocess.run([sys.executable, "-m", "verify", "certify", "--kubeconfig", str(path), "--namespace", "x",
                           "--dry-run"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("error: "), done.stderr


def test_certify_offers_no_plot_it_would_not_draw():
    done = subprocess.run([sys.executable, "-m", "verify", "certify", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "--plot OUT.png" not in done.stdout
    report = subprocess.run([sys.executable, "-m", "verify", "report", "--help"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert "--plot OUT.png" in report.stdout, "report still draws it"


def test_wait_access_names_the_kubeconfig_as_given_and_exits_2(monkeypatch, capsys):
    from verify import __main__ as cli

    monkeypatch.setenv("KUBECONFIG_JSON", KUBECONFIGS["server https://h:abc"].decode())
    assert cli.main(["wait-access", "--timeout-minutes", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: $KUBECONFIG_JSON: the cluster's server") and err.count("\n") == 1, err


def test_an_admission_pass_that_cannot_read_the_nodes_exits_2(tmp_path):
    """`--admit --once` with no API server answering did nothing: no result, exit 2 (it exited 0)."""
    path = tmp_path / "kubeconfig"  # 127.0.0.1 port 1: refused at once, nothing leaves the machine
    path.write_bytes(KUBECONFIGS["bad-base64-ca"].replace(b',"certificate-authority-data":"!!!"', b""))
    done = subprocess.run([sys.executable, "-m", "verify", "certify", "--admit", "--once", "--kubeconfig", str(path),
                           "--namespace", "x"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "could not read the IB nodes" in done.stderr, done.stderr
