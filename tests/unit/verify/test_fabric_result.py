"""The fabric result's type and its published JSON Schema (verify/result.py,
verify/schema/fabric-result.v1.json): every `--json` output, of `report` and `collect`, for an
all-reduce log, a point-to-point log and an error, validates against the shipped file, and reads
back through the type to the same document. (conftest.py also holds every result any test writes
to the schema.)"""

from __future__ import annotations

import json

import jsonschema
import pytest

from clusterside import collect
from core import kinds
from tests.fake_kube import FakeClock, FakeKube
from tests.unit.clusterside.test_verify_collect import P2P_JOB, P2P_NS, SOCKET_2X1, argv, p2p_argv
from tests.unit.verify.test_osu_perftest import HBV3_BW, HBV3_LAT, PT_BW
from tests.unit.verify.test_verify_cli import run
from verify import __main__ as cli
from verify import result, result_schema
from verify.result import FabricResult, ResultError

SCHEMA = json.loads(result.SCHEMA_PATH.read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
DOCTOR_LOG = "tests/data/doctor-launcher_always-4x1_h200x2-fake-hosts.log"


def check(stdout: str) -> dict:
    """The one JSON object on stdout: valid against the shipped schema, and the same once read back."""
    doc = json.loads(stdout)
    VALIDATOR.validate(doc)
    assert doc["schemaVersion"] == result.SCHEMA_VERSION
    assert FabricResult.from_json(doc).to_json() == doc
    return doc


def test_the_shipped_schema_is_the_types_schema():
    """The file users code against is what the type generates (`python -m verify.result_schema` rewrites it)."""
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert result.SCHEMA_PATH.read_text() == result_schema.schema_text()
    assert result.SCHEMA_PATH.name == f"fabric-result.v{result.SCHEMA_VERSION}.json"


@pytest.mark.parametrize(("args", "kind", "verdict"), [
    (["{reference}/nccl-tests/sample-output_azure-aks-rdma-infiniband_expected-output.txt",
      "--sku", "ND96asr_v4", "--nodes", "2"], "nccl", "PASS"),
    ([DOCTOR_LOG, "--sku", "Standard_ND96isr_H200_v5"], "nccl", "FAIL"),  # with the doctor's block
    ([str(HBV3_BW), "--sku", "Standard_HB120rs_v3"], "p2p", "PASS"),
    ([str(HBV3_LAT), "--sku", "Standard_HB120rs_v3"], "p2p", "UNKNOWN"),  # latency only: no bandwidth figure
    ([str(PT_BW)], "p2p", "UNKNOWN"),
])
def test_report_json_validates(args, kind, verdict, reference):
    p = run("report", *[a.format(reference=reference) for a in args], "--json")
    doc = check(p.stdout)
    assert (doc["kind"], doc["verdict"]) == (kind, verdict)
    assert ("doctor" in doc) == (kind == "nccl")  # the doctor's block: the all-reduce's only


@pytest.mark.parametrize("args", [
    ["/nonexistent/launcher.log"],
    [str(SOCKET_2X1), "--no-such-flag"],  # argparse's own error
    [str(HBV3_BW), "--threshold-gbps", "100"],  # the other kind's unit
])
def test_report_errors_validate(args):
    p = run("report", *args, "--json")
    assert p.returncode == 2
    doc = check(p.stdout)
    assert doc["verdict"] is None and doc["error"]
    assert FabricResult.from_json(doc) == FabricResult.failure(doc["error"])


def test_collect_json_validates_for_both_kinds_and_a_failure(reference, monkeypatch, capsys):
    azure = (reference / "nccl-tests" / "sample-output_azure-aks-rdma-infiniband_expected-output.txt").read_text()
    cases = [
        (["Running", "Completed"], azure, {}, argv(), ("nccl", "PASS")),
        (["Running", "Failed"], "ssh: connect to host w0 port 22: Connection refused\n", {}, argv(),
         ("nccl", "FAIL")),  # no table: a FAIL with the doctor's (empty) block, no figures
        (["Running", "Completed"], HBV3_BW.read_text(), {"namespace": P2P_NS, "job": P2P_JOB}, p2p_argv(),
         ("p2p", "PASS")),
        (["Running", "Failed"], "no table\n", {"namespace": P2P_NS, "job": P2P_JOB}, p2p_argv(), ("p2p", "FAIL")),
        (["Pending", "Running"], azure, {}, argv("--timeout-minutes", "0.005"), ("nccl", "FAIL")),  # gave up
        (["Pending", "Running"], azure, {}, argv("--timeout-minutes", "0.005", "--incomplete-as-fail"),
         ("nccl", "FAIL")),
    ]
    monkeypatch.setattr(collect, "CLOCK", FakeClock())  # the collector's waits on a fake clock: no real sleeps
    for phases, log, where, args, (kind, verdict) in cases:
        with FakeKube(phases, log, **where) as kube:
            monkeypatch.setenv("KUBECONFIG_CONTENT", kube.kubeconfig())
            cli.main(args)
        doc = check(capsys.readouterr().out)
        assert (doc["kind"], doc["verdict"]) == (kind, verdict), args
        assert doc["job"] and "log_tail" in doc and "waited_minutes" in doc
        assert ("max_size_bytes" in doc) == (verdict == "PASS")


def test_collect_errors_print_no_document(monkeypatch, capsys):
    """collect's errors (no result at all) are one line on stderr; stdout stays empty for the stack."""
    monkeypatch.delenv("KUBECONFIG_CONTENT", raising=False)
    assert cli.main(argv("--kubeconfig", "/nonexistent/kubeconfig")) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error:")


@pytest.mark.parametrize(("change", "named"), [
    ({"schemaVersion": 2}, "schemaVersion"),
    ({"kind": "dra"}, "kind"),
    ({"verdict": "GREAT"}, "verdict"),
    ({"rows": [{"size_bytes": "8", "busbw_gbps": 1.0, "in_place_busbw_gbps": 1.0}]}, "size_bytes"),
    ({"tool": "osu_bw"}, "tool"),  # a p2p key in an all-reduce result
])
def test_from_json_refuses_what_the_schema_refuses_naming_the_key(change, named, reference):
    p = run("report", str(reference / "nccl-tests" / "sample-output_azure-aks-rdma-infiniband_expected-output.txt"),
            "--json")
    doc = {**json.loads(p.stdout), **change}
    assert not VALIDATOR.is_valid(doc)
    with pytest.raises(ResultError, match=named):
        FabricResult.from_json(doc)


def test_a_figure_group_is_whole_or_absent(reference):
    """Present when the log held a table (then every one of its keys is), absent otherwise."""
    p = run("report", str(HBV3_BW), "--json")
    doc = json.loads(p.stdout)
    del doc["line_rate_gbits"]
    assert not VALIDATOR.is_valid(doc)
    with pytest.raises(ResultError, match="line_rate_gbits"):
        FabricResult.from_json(doc)


def test_every_kind_has_its_figures_and_no_other_kind_is_read(reference, monkeypatch):
    """A kind's figures are its log format's; a name core/kinds.py does not know is refused by name, never
    read as one of the kinds', and a kind it gains is read with its format's figures."""
    import dataclasses

    assert {k: result.figures_of(k).field for k in kinds.KINDS} == {"nccl": "allreduce", "p2p": "p2p"}
    doc = json.loads(run("report", str(HBV3_BW), "--json").stdout)
    with pytest.raises(ResultError, match="kind: 'gpu-pair', allowed: nccl, p2p"):
        FabricResult.from_json({**doc, "kind": "gpu-pair"})
    monkeypatch.setitem(kinds.BY_NAME, "gpu-pair", dataclasses.replace(kinds.POINT_TO_POINT, name="gpu-pair"))
    read = FabricResult.from_json({**doc, "kind": "gpu-pair"})
    assert read.kind == "gpu-pair" and read.figures == FabricResult.from_json(doc).p2p
