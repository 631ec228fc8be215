"""`python -m verify report` on a saved log judged by hand (issue 52): what it names, what it refuses, what
it counts; and the docs of every command's flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.paths import ROOT
from tests.unit.verify.test_verify_cli import run


def _two_node_log(tmp_path: Path, *extra: str, raw: bytes = b"") -> Path:
    from tests.nccl_logs import launcher_log, worker_hosts

    log = tmp_path / "run.log"
    log.write_bytes(launcher_log(worker_hosts(2), 8, busbw_gbps=190.0).encode() + raw
                    + "".join(f"{line}\n" for line in extra).encode())
    return log


def test_report_on_a_saved_log_names_no_stack_setting(tmp_path):
    """A log made by hand or by another tool: `report` says what the run did, not which stack key did it."""
    from verify import sections

    log = _two_node_log(tmp_path, sections.marker("doctor", mode="never", run="no", reason="mode-never"))
    p = run("report", str(log), "--sku", "ND96isr_H100_v5")
    assert "fabric doctor (never): did not run" in p.stdout, p.stdout
    assert "fabricTest.doctor" not in p.stdout + p.stderr  # the stack's key names what the user never set


@pytest.mark.parametrize("sku", ["Standard_HB176rs_v4", "HX176rs"])
def test_an_nccl_log_judged_with_a_cpu_only_size_is_an_error(tmp_path, sku):
    """A CPU-only size runs the point-to-point test; its catalog entry has no all-reduce figure, so the
    verdict was UNKNOWN, exit 0, with nothing saying the size cannot run this log."""
    p = run("report", str(_two_node_log(tmp_path)), "--sku", sku)
    assert p.returncode == 2, p.stdout
    line = p.stderr.strip()
    assert "\n" not in line and "has no GPUs" in line and "p2p" in line and "nccl" in line, line


def test_nodes_fewer_than_the_hosts_the_log_names_is_said(tmp_path):
    """--nodes 1 on a log whose ranks ran on two hosts was judged a single-node run."""
    p = run("report", str(_two_node_log(tmp_path)), "--sku", "ND96isr_H100_v5", "--nodes", "1", "--fail-on", "warn")
    assert "single node" not in p.stdout
    assert "--nodes 1" in p.stdout and "ran on 2 hosts" in p.stdout and "VERDICT: UNKNOWN" in p.stdout
    assert p.returncode == 1  # not PASS: the gate at warn trips


def test_lines_it_could_not_read_are_counted(tmp_path):
    """Bytes that are not UTF-8 are replaced and a result row cut short is skipped: both are counted."""
    broken_row = "  1073741824     268435456     float     sum      -1"  # the row's first columns, no figures
    log = _two_node_log(tmp_path, broken_row, "#  1099511627776 ...", broken_row + "  oops",
                        raw=b"NCCL INFO \xff\xfe garbled\n")
    p = run("report", str(log), "--sku", "ND96isr_H100_v5", "--json")
    notes = " ".join(json.loads(p.stdout)["reasons"] + json.loads(p.stdout).get("notes", []))
    assert "1 line(s) with bytes that are not UTF-8" in notes, notes
    assert "2 result row(s) it could not read" in notes, notes


@pytest.mark.parametrize("command", ["report", "collect", "certify"])
def test_every_flag_of_a_command_is_in_its_docs(command):
    """docs/verify-cli.md names every flag each command takes (certify's --admit, --once, --interval-seconds,
    --retest-after-minutes and --rack were missing), and states the admission loop's defaults as the code has them."""
    import argparse

    from clusterside import certify_admit
    from verify import __main__ as cli

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    flags = {s for a in sub._actions for s in a.option_strings if s.startswith("--") and s != "--help"}
    doc = (ROOT / "docs" / "verify-cli.md").read_text()
    assert not sorted(f for f in flags if f"`{f}" not in doc), "flags the docs do not name"
    if command == "certify":
        assert f"| {certify_admit.DEFAULT_INTERVAL_SECONDS:g} (`certify_admit.DEFAULT_INTERVAL_SECONDS`)" in doc
        assert f"| {certify_admit.DEFAULT_RETEST_AFTER_MINUTES:g} (`certify_admit.DEFAULT_RETEST_AFTER_MINUTES`)" in doc
