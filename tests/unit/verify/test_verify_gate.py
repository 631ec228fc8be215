"""`verify` as docs/verify-cli.md says: the gate (`--fail-on`, `fabricTest.failOn`), the 35 % floor
under a user's threshold, a socket run judged without --sku, files that are not there, and small
figures. Logs are CONSTRUCTED (tests/nccl_logs.py); the collect cases run against the fake API server
of tests/unit/clusterside/test_verify_collect.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.nccl_logs import launcher_log, worker_hosts
from tests.unit.clusterside.test_verify_collect import argv
from verify import __main__ as cli
from verify import gate
from verify.figures import figure

H100 = "Standard_ND96isr_H100_v5"


def _log(tmp_path: Path, busbw: float, *, network: str = "IB", info: bool = True, name: str = "run.log") -> Path:
    text = launcher_log(worker_hosts(2), 8, busbw_gbps=busbw, network=network)
    if not info:  # NCCL_DEBUG not INFO: no transport lines
        text = "\n".join(line for line in text.splitlines() if "NCCL INFO" not in line) + "\n"
    path = tmp_path / name
    path.write_text(text)
    return path


def _report(capsys, *args: str) -> tuple[int, dict, str]:
    code = cli.main(["report", *map(str, args), "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


# --- the gate's rule --------------------------------------------------------------------------------
@pytest.mark.parametrize(("verdict", "level", "trips"), [
    ("PASS", "fail", False), ("WARN", "fail", False), ("UNKNOWN", "fail", False), ("FAIL", "fail", True),
    ("PASS", "warn", False), ("WARN", "warn", True), ("UNKNOWN", "warn", True), ("FAIL", "warn", True),
    ("FAIL", None, False), (None, "warn", False),
])
def test_the_gate_trips_at_its_level_and_above(verdict, level, trips):
    assert gate.trips(verdict, level) is trips


# --- report: --fail-on ------------------------------------------------------------------------------
def test_fail_on_warn_exits_1_on_a_warn_and_fail_on_fail_does_not(tmp_path, capsys):
    """200 GB/s on 2 x ND H100 v5: below the derived threshold (360), above the floor (130.9): WARN."""
    log = _log(tmp_path, 200)
    code, out, err = _report(capsys, log, "--sku", H100)
    assert out["verdict"] == "WARN" and code == 0
    for flags, expected in ((["--fail-on", "fail"], 0), (["--fail-on-low-bandwidth"], 0), (["--fail-on", "warn"], 1),
                            (["--fail-on-low-bandwidth", "--fail-on", "warn"], 1)):
        code, out, err = _report(capsys, log, "--sku", H100, *flags)
        assert code == expected, (flags, err)
    assert err.splitlines()[0] == f"WARN: {log} on {H100}"  # the reasons follow on stderr
    assert any("derived, not a published measurement" in line for line in err.splitlines()[1:])


def test_fail_on_warn_fails_an_unknown_too(tmp_path, capsys):
    """No --sku, no threshold: UNKNOWN. A gate that asks for a clean result does not let it through."""
    log = _log(tmp_path, 380)
    assert _report(capsys, log)[0] == 0
    code, out, _ = _report(capsys, log, "--fail-on", "warn")
    assert out["verdict"] == "UNKNOWN" and code == 1
    assert _report(capsys, log, "--fail-on", "fail")[0] == 0


def test_fail_on_takes_only_its_levels(tmp_path, capsys):
    with pytest.raises(SystemExit) as caught:
        cli.main(["report", str(_log(tmp_path, 380)), "--fail-on", "error"])
    assert caught.value.code == 2 and "invalid choice: 'error'" in capsys.readouterr().err


# --- the floor holds under the user's threshold -----------------------------------------------------
def test_a_socket_speed_run_without_info_lines_is_fail_even_with_a_tiny_threshold(tmp_path, capsys):
    """3.4 GB/s (NCCL on TCP) with the INFO lines stripped: the transport cannot be checked, the figure
    can. --threshold-gbps 1 does not lower the floor (35 % of the baseline)."""
    log = _log(tmp_path, 3.4, info=False)
    code, out, _ = _report(capsys, log, "--sku", H100, "--threshold-gbps", "1")
    assert out["verdict"] == "FAIL" and code == 0
    assert any("your threshold 1 GB/s is below it" in r and "130.9 GB/s" in r for r in out["reasons"])
    assert out["fail_below_gbps"] == pytest.approx(130.9, abs=0.05)


def test_a_threshold_above_the_floor_still_decides(tmp_path, capsys):
    """Control: with a threshold above the floor, a run between them is judged by the threshold."""
    log = _log(tmp_path, 150)
    _, out, _ = _report(capsys, log, "--sku", H100, "--threshold-gbps", "140")
    assert out["verdict"] == "PASS"
    _, out, _ = _report(capsys, log, "--sku", H100, "--threshold-gbps", "160")
    assert out["verdict"] == "FAIL" and any("below the threshold 160" in r for r in out["reasons"])


# --- without --sku: the log's own evidence ----------------------------------------------------------
def test_a_multi_host_socket_log_without_sku_is_fail_and_a_clean_one_unknown(tmp_path, capsys):
    """docs/verify-cli.md: without --sku the bandwidth is not judged (UNKNOWN), but what the log itself
    proves is: NCCL over sockets between hosts is FAIL whatever the size."""
    _, out, _ = _report(capsys, _log(tmp_path, 3.4, network="Socket", name="socket.log"))
    assert out["verdict"] == "FAIL" and any(r.startswith("RDMA was not used") for r in out["reasons"])
    _, out, _ = _report(capsys, _log(tmp_path, 380, name="ib.log"))
    assert out["verdict"] == "UNKNOWN"


# --- files ------------------------------------------------------------------------------------------
def test_plot_into_a_missing_directory_is_an_error_and_creates_nothing(tmp_path, capsys):
    target = tmp_path / "no" / "such" / "dir" / "busbw.png"
    code = cli.main(["report", str(_log(tmp_path, 380)), "--sku", H100, "--plot", str(target)])
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == f"error: --plot {target}: the directory {target.parent} does not exist " \
                                        "(create it first)"
    assert not (tmp_path / "no").exists()


def test_collect_with_a_missing_kubeconfig_names_it_before_waiting(tmp_path, capsys):
    missing = tmp_path / "kube" / "config"
    code = cli.main([*argv(), "--kubeconfig", str(missing)])
    captured = capsys.readouterr()
    assert code == 2 and captured.err.strip() == f"error: --kubeconfig {missing}: no such file"


def test_collect_with_a_missing_plot_directory_says_so_before_waiting(tmp_path, capsys):
    target = tmp_path / "out" / "busbw.png"
    assert cli.main([*argv(), "--plot", str(target)]) == 2
    assert "does not exist" in capsys.readouterr().err and not target.parent.exists()


# --- small figures ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "shown"), [
    (187.23, "187.2"), (3.4, "3.4"), (1.0, "1.0"), (0.84, "0.84"), (0.08, "0.08"), (0.0034, "0.0034"), (0.0, "0"),
])
def test_figures_keep_their_significant_digits(value, shown):
    assert figure(value) == shown


def test_a_tiny_busbw_is_printed_with_its_digits_in_the_headline(tmp_path, capsys):
    assert cli.main(["report", str(_log(tmp_path, 0.08)), "--sku", H100]) == 0
    out = capsys.readouterr().out
    headline = next(line for line in out.splitlines() if line.startswith("VERDICT:"))
    assert "0.08 GB/s busbw" in headline and "0.0 GB/s" not in out
