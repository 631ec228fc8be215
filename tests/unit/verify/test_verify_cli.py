"""`python -m verify report` as a user runs it: its stdout, stderr and exit code. Through the module's
own main() in this process (`run`: a fresh interpreter per call cost more than the reports), and as a
real subprocess where the process is the point (`run_subprocess`: test_report_json_azure; the plots: one
fresh interpreter writes both, fresh_plots)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REFERENCE

from core import catalog
from tests.paths import DATA, ROOT
from tests.unit.verify.test_osu_perftest import AKS_DROP, HBV3_BW, HBV3_LAT, PT_BW, raw_rows
from verify import p2p

AZURE = "sample-output_azure-aks-rdma-infiniband_expected-output.txt"
H200_FILE = "h200x2_single-node_nccl-tests-2.19.6_8B-8G.txt"
REQUIRED_KEYS = {
    "max_size_bytes", "busbw_at_max_size_gbps", "max_busbw_gbps", "avg_busbw_gbps", "ranks", "hosts", "wrong",
    "verdict", "reasons", "nccl_version", "nccl_tests_version", "gpus", "nodes", "sku", "baseline_gbps",
    "threshold_gbps",
}


def run_subprocess(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "verify", *args], cwd=ROOT, capture_output=True, text=True, input=stdin, timeout=120
    )


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """What `python -m verify ARGS` gives (exit code, stdout, stderr), from the main() the module runs."""
    from verify import __main__ as cli

    out, err, saved_stdin = io.StringIO(), io.StringIO(), sys.stdin
    sys.stdin = io.StringIO(stdin or "")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(list(args))
            except SystemExit as exc:  # argparse exits itself
                code = exc.code
    finally:
        sys.stdin = saved_stdin
    return subprocess.CompletedProcess(["python", "-m", "verify", *args], code, out.getvalue(), err.getvalue())


def test_report_json_azure(reference):
    p = run_subprocess("report", str(reference / "nccl-tests" / AZURE), "--sku", "Standard_ND96asr_v4", "--nodes", "2",
                       "--json")
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
    # under --json the error is also the one JSON object on stdout, for a script that reads only that
    out = json.loads(p.stdout)
    assert out["verdict"] is None and out["error"] == p.stderr.strip().removeprefix("error: ")
    assert "Traceback" not in p.stderr
    assert p.stderr.startswith("error: ") and len(p.stderr.strip().splitlines()) == 1


def test_missing_file_is_one_line_error(tmp_path):
    p = run("report", str(tmp_path / "nope.log"))
    assert p.returncode == 2 and "Traceback" not in p.stderr and "cannot read" in p.stderr


def test_bad_arguments_exit_2(reference):
    p = run("report", str(reference / "nccl-tests" / AZURE), "--nodes", "0")
    assert p.returncode == 2 and "Traceback" not in p.stderr


# One fresh interpreter writes the plots that both deterministic-PNG tests compare with their own:
# `python -m verify ARGS` as `python -m` runs it (runpy: the module as __main__, its exit through
# SystemExit), once per plot, so matplotlib is imported once for the two. After each run's JSON it
# prints that run's exit code, as one more JSON object; then it exits without the interpreter's teardown
# of matplotlib (~0.2 s), which has nothing left to write.
FRESH_PLOTS = """
import json, os, runpy, sys
for args in json.loads(sys.argv[1]):
    sys.argv = ["verify", *args]
    try:
        runpy.run_module("verify", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        print(json.dumps({"exit": exc.code}), flush=True)
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
"""


def _write_hbv3_log(log: Path) -> Path:
    """What the p2p launcher prints: osu_bw, then osu_latency, in one log."""
    log.write_text(HBV3_BW.read_text() + "\n" + HBV3_LAT.read_text())
    return log


def _plot_args(kind: str, directory: Path) -> list[str]:
    """The `report` arguments of the plot test of `kind` (nccl: Azure's published log; p2p: the HBv3 log)."""
    if kind == "nccl":
        return ["report", str(REFERENCE / "nccl-tests" / AZURE), "--sku", "Standard_ND96asr_v4", "--nodes", "2"]
    return ["report", str(_write_hbv3_log(directory / "p2p-launcher.log")), "--sku", HBV3]


@pytest.fixture(scope="module")
def fresh_plots(tmp_path_factory) -> dict[str, tuple[Path, bytes]]:
    """kind -> (the plot's path, its PNG) as the fresh interpreter wrote it (FRESH_PLOTS); each run exited
    0 and said where it wrote its plot. The NCCL plot only where the reference material is here."""
    pytest.importorskip("matplotlib")
    directory = tmp_path_factory.mktemp("fresh-plots")
    kinds = ["p2p"] + (["nccl"] if (REFERENCE / "nccl-tests" / AZURE).is_file() else [])
    runs = [[*_plot_args(kind, directory), "--plot", str(directory / f"{kind}.png"), "--json"] for kind in kinds]
    p = subprocess.run([sys.executable, "-c", FRESH_PLOTS, json.dumps(runs)], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    decoder, docs, at = json.JSONDecoder(), [], 0
    while at < len(p.stdout.rstrip()):  # each run's one JSON object, then its exit code, nothing else
        doc, at = decoder.raw_decode(p.stdout, at)
        docs.append(doc)
        at += len(p.stdout[at:]) - len(p.stdout[at:].lstrip())
    assert len(docs) == 2 * len(kinds), p.stdout
    plots = {}
    for i, kind in enumerate(kinds):
        result, exit_code = docs[2 * i], docs[2 * i + 1]
        assert exit_code == {"exit": 0}, p.stderr
        path = directory / f"{kind}.png"
        assert result["plot"] == str(path)
        plots[kind] = (path, path.read_bytes())
    return plots


def plot_twice(tmp_path: Path, fresh: tuple[Path, bytes], *args: str) -> list[bytes]:
    """`report ... --plot FILE --json` run twice: as a user runs it (a fresh interpreter: `fresh`, from
    the fresh_plots fixture) and in this process (the same main(); matplotlib is imported once per
    session, not once per run). Each run says where it wrote its plot; returns the two PNGs."""
    from verify import __main__ as cli

    second = tmp_path / "b.png"
    assert second != fresh[0]
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert cli.main([*args, "--plot", str(second), "--json"]) == 0
    assert json.loads(out.getvalue())["plot"] == str(second)
    return [fresh[1], second.read_bytes()]


def test_plot_is_a_deterministic_png(reference, tmp_path, fresh_plots):
    pngs = plot_twice(tmp_path, fresh_plots["nccl"], *_plot_args("nccl", tmp_path))
    data = pngs[0]
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 10_000
    assert b"Software" not in data  # no matplotlib version stamped into the file
    assert data == pngs[1]


# --- point-to-point logs (CPU-only HB / HX): OSU and perftest, auto-detected ------------------------
# Expected figures are read from the fixture rows (raw value x the tool's unit factor), never typed in.
HBV3 = "Standard_HB120rs_v3"
# the keys the NCCL and the p2p JSON share (same name, same meaning)
CORE_KEYS = {"kind", "verdict", "reasons", "max_size_bytes", "sku", "plot"}


@pytest.fixture
def hbv3_log(tmp_path) -> Path:
    """What the p2p launcher prints: osu_bw, then osu_latency, in one log."""
    return _write_hbv3_log(tmp_path / "p2p-launcher.log")


def test_report_osu_log_json_figures_come_from_the_rows(hbv3_log):
    p = run("report", str(hbv3_log), "--sku", HBV3, "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    bw, lat = raw_rows(HBV3_BW), raw_rows(HBV3_LAT)
    assert CORE_KEYS <= set(out) and out["kind"] == "p2p" and out["sku"] == HBV3
    assert out["tool"] == "osu_bw" and out["unit"] == "Gb/s"
    assert out["max_size_bytes"] == max(bw)
    assert out["bw_at_max_size_gbits"] == round(float(bw[max(bw)][0]) * 8 / 1000, 2)  # OSU MB/s = 10^6 B/s
    assert out["max_bw_gbits"] == round(max(float(v[0]) for v in bw.values()) * 8 / 1000, 2)
    assert out["latency_us"] == round(float(lat[1][0]), 2) and out["latency_size_bytes"] == 1
    expect = catalog.lookup(HBV3).p2p
    assert (out["threshold_gbits"], out["line_rate_gbits"]) == (expect.threshold_gbits, expect.baseline_gbits)
    assert out["verdict"] == ("PASS" if out["bw_at_max_size_gbits"] >= expect.threshold_gbits else "FAIL")
    assert out["plot"] is None


def test_report_perftest_log_judges_the_bw_average_column():
    p = run("report", str(PT_BW), "--sku", HBV3, "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    rows = raw_rows(PT_BW)
    assert out["kind"] == "p2p" and out["tool"] == "ib_write_bw" and out["max_size_bytes"] == max(rows)
    assert out["bw_at_max_size_gbits"] == round(float(rows[max(rows)][2]), 2)  # #iterations, peak, AVERAGE
    assert out["latency_us"] is None


def test_report_osu_table_names_the_verdict_and_the_tools(hbv3_log):
    p = run("report", str(hbv3_log), "--sku", HBV3)
    assert p.returncode == 0, p.stderr
    assert "osu_bw" in p.stdout and "osu_latency" in p.stdout
    assert any(line.startswith(f"VERDICT: PASS — {HBV3}, osu_bw ") for line in p.stdout.splitlines())


def test_p2p_threshold_is_in_gbits_and_changes_the_verdict():
    rows = raw_rows(AKS_DROP)  # bandwidth falls at the largest message: FAIL against the catalog
    judged = float(rows[max(rows)][0]) * 8 / 1000
    assert json.loads(run("report", str(AKS_DROP), "--sku", HBV3, "--json").stdout)["verdict"] == "FAIL"
    below = f"{judged - 1:.2f}"
    out = json.loads(run("report", str(AKS_DROP), "--sku", HBV3, "--threshold-gbits", below, "--json").stdout)
    assert out["verdict"] == "PASS" and out["threshold_gbits"] == float(below)
    above = json.loads(run("report", str(AKS_DROP), "--sku", HBV3, "--threshold-gbits", f"{judged + 1:.2f}",
                           "--json").stdout)
    assert above["verdict"] == "FAIL"


def test_the_other_kinds_threshold_is_refused_not_converted(hbv3_log, reference):
    p = run("report", str(hbv3_log), "--sku", HBV3, "--threshold-gbps", "24")
    assert p.returncode == 2 and p.stdout == "" and "Traceback" not in p.stderr
    assert "--threshold-gbits" in p.stderr and "GB/s" in p.stderr
    p = run("report", str(reference / "nccl-tests" / AZURE), "--sku", "Standard_ND96asr_v4", "--nodes", "2",
            "--threshold-gbits", "180")
    assert p.returncode == 2 and "--threshold-gbps" in p.stderr


def test_p2p_needs_a_known_sku_and_two_nodes(hbv3_log):
    for extra, says in (("--sku", "Standard_X1"), "not an InfiniBand-capable size"), \
                       (("--sku", HBV3, "--nodes", "3"), "spans 2 nodes"):
        p = run("report", str(hbv3_log), *extra)
        assert p.returncode == 2 and says in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert run("report", str(hbv3_log), "--sku", HBV3, "--nodes", "2").returncode == 0


# --- one behaviour for both kinds (issue 14) ------------------------------------------------------
HEADLINE = re.compile(r"^VERDICT: (?P<verdict>PASS|WARN|FAIL|UNKNOWN) — (?P<sku>[^,]+), (?P<figure>.+) at "
                      r"(?P<size>\d+ [KMG]iB), (?P<threshold>threshold .+|no threshold)$", re.M)


def test_both_kinds_print_the_same_headline(reference, hbv3_log):
    nccl = HEADLINE.search(run("report", str(reference / "nccl-tests" / AZURE), "--sku", "Standard_ND96asr_v4").stdout)
    osu = HEADLINE.search(run("report", str(hbv3_log), "--sku", HBV3).stdout)
    assert nccl.groupdict() == {"verdict": "PASS", "sku": "Standard_ND96asr_v4", "figure": "187.2 GB/s busbw",
                                "size": "8 GiB", "threshold": "threshold 180 GB/s"}
    assert osu["verdict"] == "PASS" and osu["sku"] == HBV3 and osu["figure"].startswith("osu_bw ")
    assert osu["figure"].endswith(" Gb/s") and osu["threshold"] == "threshold 190 Gb/s"


@pytest.mark.parametrize("kind", ["nccl", "p2p"])
def test_without_sku_either_kind_prints_its_table_unknown_exit_0(kind, reference, hbv3_log):
    log = reference / "nccl-tests" / AZURE if kind == "nccl" else hbv3_log
    p = run("report", str(log))
    assert p.returncode == 0 and p.stderr == "", p.stderr
    head = HEADLINE.search(p.stdout)
    assert head["verdict"] == "UNKNOWN" and head["sku"] == "no SKU given" and head["threshold"] == "no threshold"
    assert p.stdout.index(head[0]) > 200, "the table comes first"
    assert "no SKU given (--sku)" in p.stdout
    assert json.loads(run("report", str(log), "--json").stdout)["kind"] == kind


@pytest.mark.parametrize("spelling", ["ND96asr_v4", "standard_nd96ASR_v4", "STANDARD_ND96ASR_V4"])
def test_sku_without_standard_and_in_any_case(spelling, reference):
    out = json.loads(run("report", str(reference / "nccl-tests" / AZURE), "--sku", spelling, "--json").stdout)
    assert out["sku"] == "Standard_ND96asr_v4" and out["verdict"] == "PASS"


@pytest.mark.parametrize("kind", ["nccl", "p2p"])
def test_an_unknown_sku_is_a_usage_error_naming_the_closest(kind, reference, hbv3_log):
    log, typo, near = ((reference / "nccl-tests" / AZURE, "ND96asr_v5", "Standard_ND96asr_v4") if kind == "nccl"
                       else (hbv3_log, "Standard_HB120rs_v4", "Standard_HB120rs_v3"))
    p = run("report", str(log), "--sku", typo)
    assert p.returncode == 2 and p.stdout == "" and "Traceback" not in p.stderr
    assert p.stderr.count("\n") == 1, "one line, not the usage block"
    assert p.stderr.startswith("python -m verify report: error: argument --sku: ")
    assert f"argument --sku: '{typo}' is not an InfiniBand-capable size" in p.stderr
    assert f"did you mean {near}" in p.stderr


def test_nodes_default_to_ranks_over_gpus_when_the_log_names_no_hosts(reference):
    out = json.loads(run("report", str(reference / "nccl-tests" / AZURE), "--sku", "ND96asr_v4", "--json").stdout)
    assert out["hosts"] is None and out["ranks"] == 16 and out["nodes"] == 2 and out["verdict"] == "PASS"
    assert any(r.startswith("2 nodes: 16 ranks / 8 GPUs per Standard_ND96asr_v4") for r in out["reasons"])


def test_a_closed_pipe_ends_quietly(reference):
    """`python -m verify report LOG | head`: the reader goes away; no traceback, the SIGPIPE exit code."""
    p = subprocess.Popen([sys.executable, "-m", "verify", "report", str(reference / "nccl-tests" / AZURE)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # before the report is written
    _, err = p.communicate(timeout=120)
    assert p.returncode == 141 and err == b"", err.decode()


@pytest.mark.parametrize("command", [[], ["report"], ["collect"]])
def test_help_lists_the_exit_codes(command):
    p = run(*command, "--help")
    assert p.returncode == 0
    assert "exit codes:" in p.stdout
    for code in ("0 ", "1 ", "2 ", "141 "):
        assert f"\n  {code}" in p.stdout, code


def test_kind_can_be_forced(hbv3_log):
    p = run("report", str(hbv3_log), "--kind", "nccl", "--sku", HBV3)
    assert p.returncode == 2 and "Traceback" not in p.stderr  # an OSU log holds no nccl-tests table
    assert json.loads(run("report", "-", "--kind", "p2p", "--sku", HBV3, "--json",
                          stdin=hbv3_log.read_text()).stdout)["kind"] == "p2p"


def test_nccl_json_says_its_kind(reference):
    out = json.loads(run("report", str(reference / "nccl-tests" / AZURE), "--json").stdout)
    assert out["kind"] == "nccl" and p2p.detect((reference / "nccl-tests" / AZURE).read_text()) is None


def test_p2p_plot_is_a_deterministic_png(tmp_path, fresh_plots):
    pngs = plot_twice(tmp_path, fresh_plots["p2p"], *_plot_args("p2p", tmp_path))
    assert pngs[0][:8] == b"\x89PNG\r\n\x1a\n" and len(pngs[0]) > 10_000
    assert b"Software" not in pngs[0] and pngs[0] == pngs[1]


# --- --fail-on-low-bandwidth and errors under --json (in-process: the same main() the module runs) ----
SOCKET_2X1 = DATA / "nccl-info_2.28.9_socket-fallback_2-fake-hosts-x1-gpu_h200x2.log"  # real, NCCL 2.28.9


@pytest.mark.parametrize("sku", ["Standard_ND96asr_v4", "Standard_ND96isr_H100_v5", "Standard_ND96isr_H200_v5"])
def test_report_fails_a_socket_run_with_exit_1(sku, capsys):
    from verify import __main__ as cli

    code = cli.main(["report", str(SOCKET_2X1), "--sku", sku, "--json", "--fail-on-low-bandwidth"])
    captured = capsys.readouterr()
    assert code == 1
    out = json.loads(captured.out)  # the result still goes to stdout, whole
    assert out["verdict"] == "FAIL"
    assert out["transport"]["network"] == "Socket" and out["transport"]["gdr"] is None
    assert out["transport"]["inter_node_channels"] == {"NET/Socket": 8}
    assert out["transport"]["hcas_by_host"] == {"node-0": [], "node-1": []}
    assert captured.err.startswith(f"FAIL: {SOCKET_2X1} on {sku}") and "RDMA was not used" in captured.err


def test_report_without_the_flag_exits_0_on_fail(capsys):
    from verify import __main__ as cli

    assert cli.main(["report", str(SOCKET_2X1), "--sku", "Standard_ND96asr_v4"]) == 0
    text = capsys.readouterr().out
    assert "VERDICT: FAIL" in text
    assert "transport:    TCP sockets, not RDMA (NET/Socket x8)" in text and "  network:    Socket" in text


def test_report_flag_passes_a_good_result(reference, capsys):
    from verify import __main__ as cli

    log = str(reference / "nccl-tests" / AZURE)
    assert cli.main(["report", log, "--sku", "Standard_ND96asr_v4", "--nodes", "2", "--fail-on-low-bandwidth"]) == 0


@pytest.mark.parametrize("args", [
    ["report", "/nonexistent/launcher.log", "--json"],  # unreadable
    ["report", str(SOCKET_2X1), "--json", "--no-such-flag"],  # a usage error, from argparse
    ["report", str(SOCKET_2X1), "--json", "--threshold-gbits", "100"],  # the other kind's unit
])
def test_every_error_under_json_is_one_json_object_and_exit_2(args, capsys):
    from verify import __main__ as cli

    try:
        code = cli.main(args)
    except SystemExit as exc:  # argparse exits itself
        code = exc.code
    captured = capsys.readouterr()
    assert code == 2
    out = json.loads(captured.out)
    assert out["verdict"] is None and out["error"]
    assert "Traceback" not in captured.err


def test_a_collect_error_under_json_prints_no_document(tmp_path, capsys):
    """docs/fabric-result.md: `collect`'s errors are one `error:` line on stderr and nothing on stdout,
    --json or not (only a usage error under --json is a JSON object, from the parser)."""
    from verify import __main__ as cli

    code = cli.main(["collect", "--namespace", "fabric-test", "--job", "nccl-allreduce", "--sku", "Standard_ND96asr_v4",
                     "--nodes", "2", "--json", "--kubeconfig", str(tmp_path / "missing")])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1, captured.err


def test_collect_without_the_deploy_requirements_says_what_to_install():
    """`python -m verify collect` run by a Python without requirements.txt: one line naming what to install,
    exit 2, no traceback (and `report` does not need them at all)."""
    blocked = "import sys, runpy; sys.modules['kubernetes'] = None; sys.modules['yaml'] = None; "
    p = subprocess.run(
        [sys.executable, "-c", blocked + "runpy.run_module('verify', run_name='__main__')",
         "collect", "--namespace", "fabric-test", "--job", "nccl-allreduce", "--sku", "Standard_ND96asr_v4",
         "--nodes", "2"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert "(PyYAML not installed)" in p.stderr and "pip install -r requirements.txt" in p.stderr
    assert "make venv" in p.stderr

