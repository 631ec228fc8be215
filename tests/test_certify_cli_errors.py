"""`python -m verify certify` on bad input: one line and exit 2 (`no result`), never a traceback and never
exit 1, which the CLI defines as "the gate tripped" (a CI wrapper would read a bad credential as a failed
fabric)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KUBECONFIGS = {
    "binary": bytes(range(256)) * 2,
    "not-yaml": b"apiVersion: v1\nclusters: [\n",
    "wrong-shape": b'{"clusters": 5, "contexts": "x"}',
    "a-list": b"- a\n- b\n",
    "bad-base64-ca": (b'{"clusters":[{"name":"c","cluster":{"server":"https://127.0.0.1:1",'
                      b'"certificate-authority-data":"!!!"}}],"contexts":[{"name":"a","context":{"cluster":"c",'
                      b'"user":"u"}}],"current-context":"a","users":[{"name":"u","user":{"token":"t"}}]}'),
}


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
