"""`python -m verify report` as a user runs it: a subprocess, its stdout, stderr and exit code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
AZURE = "sample-output_azure-aks-rdma-infiniband_expected-output.txt"
H200_FILE = "h200x2_single-node_nccl-tests-2.19.6_8B-8G.txt"
REQUIRED_KEYS = {
    "max_size_bytes", "busbw_at_max_size_gbps", "max_busbw_gbps", "avg_busbw_gbps", "ranks", "hosts", "wrong",
    "verdict", "reasons", "nccl_version", "nccl_tests_version", "gpus", "nodes", "sku", "baseline_gbps",
    "threshold_gbps",
}


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "verify", *args], cwd=ROOT, capture_output=True, text=True, input=stdin, timeout=120
    )


def test_report_json_azure(reference):
    p = run("report", str(reference / "nccl-tests" / AZURE), "--sku", "Standard_ND96asr_v4", "--nodes", "2", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)  # ONE JSON object, nothing else on stdout
    assert REQUIRED_KEYS <= set(out)
    assert out["max_size_bytes"] == 8 << 30
    assert out["busbw_at_max_size_gbps"] == 187.22
    assert out["max_busbw_gbps"] == 187.22
    assert out["avg_busbw_gbps"] == 56.3994
    assert out["ranks"] == 16 and out["hosts"] is None and out["nodes"] == 2
    assert out["wrong"] is None  # '#wrong N/A': not checked
    assert out["verdict"] == "PASS" and out["sku"] == "Standard_ND96asr_v4"


def test_report_json_nodes_default_to_hosts(reference):
    p = run("report", str(reference / "nccl-tests" / H200_FILE), "--sku", "Standard_ND96isr_H200_v5", "--json")
    out = json.loads(p.stdout)
    assert out["hosts"] == ["vm"] and out["nodes"] == 1
    assert out["verdict"] == "UNKNOWN"
    assert out["nccl_version"] == "2.28.9" and out["nccl_tests_version"] == "2.19.6"
    assert out["gpus"] == ["NVIDIA H200"] and out["wrong"] == 0


def test_report_threshold_override(reference):
    p = run("report", str(reference / "nccl-tests" / AZURE), "--sku", "Standard_ND96asr_v4", "--nodes", "2",
            "--threshold-gbps", "190", "--json")
    out = json.loads(p.stdout)
    assert out["verdict"] == "FAIL" and out["threshold_gbps"] == 190


def test_report_table(reference):
    p = run("report", str(reference / "nccl-tests" / AZURE), "--sku", "Standard_ND96asr_v4", "--nodes", "2")
    assert p.returncode == 0
    assert "VERDICT: PASS" in p.stdout
    assert "187.22" in p.stdout and "8G" in p.stdout


def test_report_from_stdin(reference):
    p = run("report", "-", "--json", stdin=(reference / "nccl-tests" / AZURE).read_text())
    assert json.loads(p.stdout)["busbw_at_max_size_gbps"] == 187.22


@pytest.mark.parametrize("content", ["this is not an nccl-tests log\n", "", "{not json"])
def test_garbage_is_one_line_error_no_traceback(tmp_path, content):
    log = tmp_path / "garbage.log"
    log.write_text(content)
    p = run("report", str(log), "--json")
    assert p.returncode == 2
    assert p.stdout == ""
    assert "Traceback" not in p.stderr
    assert p.stderr.startswith("error: ") and len(p.stderr.strip().splitlines()) == 1


def test_missing_file_is_one_line_error(tmp_path):
    p = run("report", str(tmp_path / "nope.log"))
    assert p.returncode == 2 and "Traceback" not in p.stderr and "cannot read" in p.stderr


def test_bad_arguments_exit_2(reference):
    p = run("report", str(reference / "nccl-tests" / AZURE), "--nodes", "0")
    assert p.returncode == 2 and "Traceback" not in p.stderr


def test_plot_is_a_deterministic_png(reference, tmp_path):
    paths = []
    for name in ("a.png", "b.png"):
        out = tmp_path / name
        p = run("report", str(reference / "nccl-tests" / AZURE), "--sku", "Standard_ND96asr_v4", "--nodes", "2",
                "--plot", str(out), "--json")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["plot"] == str(out)
        paths.append(out)
    data = paths[0].read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 10_000
    assert b"Software" not in data  # no matplotlib version stamped into the file
    assert data == paths[1].read_bytes()
