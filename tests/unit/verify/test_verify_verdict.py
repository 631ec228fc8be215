"""Verdict rules: each reason fires on the input it is about, and only the worst finding decides."""

from __future__ import annotations

import re

import pytest

from core import catalog, expectations
from core.expectations import FLOOR_FRACTION_OF_BASELINE
from tests.nccl_logs import launcher_log, worker_hosts
from tests.paths import DATA, ROOT
from verify.nccl import parse, parse_file
from verify.verdict import (
    MIN_JUDGED_SIZE_BYTES,
    WARN_FRACTION_OF_BASELINE,
    Verdict,
    judge,
    pass_line_gbps,
)

A100 = "Standard_ND96asr_v4"
H200 = "Standard_ND96isr_H200_v5"
AZURE = "sample-output_azure-aks-rdma-infiniband_expected-output.txt"
H200_FILE = "h200x2_single-node_nccl-tests-2.19.6_8B-8G.txt"
OLD_H100 = "sample-output_old-header_2node-H100_lessizzmore.txt"
GH200 = "sample-output_full-header_nccl-tests-2.18.3_2node-GH200_int8.txt"

_H100_2 = catalog.lookup("Standard_ND96isr_H100_v5").allreduce_expectation(2)
_H100_FLOOR = _H100_2.baseline_gbps * FLOOR_FRACTION_OF_BASELINE


def load(reference, name):
    return parse_file(reference / "nccl-tests" / name)


def _provenance(basis: expectations.Basis) -> expectations.Provenance:
    return expectations.Provenance(basis, (expectations.Citation("test/test@0000000 x", "2026-01-01"),))


def exp(baseline, threshold):
    return expectations.Expectation(baseline_gbps=baseline, threshold_gbps=threshold,
                               provenance=_provenance(expectations.Basis.MEASURED))


def test_azure_reference_passes_against_the_catalog(reference):
    j = judge(load(reference, AZURE), sku=A100, nodes=2)
    assert j.verdict is Verdict.PASS
    assert j.judged_busbw_gbps == pytest.approx(187.22)
    expected = catalog.lookup(A100).allreduce_expectation(2)
    assert (j.baseline_gbps, j.threshold_gbps) == (expected.baseline_gbps, expected.threshold_gbps)


def test_below_threshold_fails(reference):
    j = judge(load(reference, AZURE), sku=A100, nodes=2, expectation=exp(200, 190))
    assert j.verdict is Verdict.FAIL
    assert "187.22" in j.reasons[0] and "below the threshold 190" in j.reasons[0]


def test_threshold_override_replaces_the_catalogs(reference):
    assert judge(load(reference, AZURE), sku=A100, nodes=2, threshold_gbps=188).verdict is Verdict.FAIL
    assert judge(load(reference, AZURE), sku=A100, nodes=2, threshold_gbps=150).verdict is Verdict.PASS


def test_between_threshold_and_warn_line_warns(reference):
    # 187.22 is above 150 but below 0.97 x 220 = 213.4
    j = judge(load(reference, AZURE), sku=A100, nodes=2, expectation=exp(220, 150))
    assert j.verdict is Verdict.WARN
    assert j.warn_below_gbps == pytest.approx(220 * WARN_FRACTION_OF_BASELINE)
    assert f"below {WARN_FRACTION_OF_BASELINE:.0%} of the baseline 220" in j.reasons[0]


def test_verdict_judges_the_largest_size_not_the_footer_average(reference):
    r = load(reference, AZURE)
    assert r.avg_busbw_gbps < 60  # the footer averages the tiny messages too
    assert judge(r, sku=A100, nodes=2).verdict is Verdict.PASS


def test_no_expectation_for_the_sku_is_unknown_and_says_so(reference):
    r = load(reference, OLD_H100)
    j = judge(r, sku=H200, nodes=2, expectation=None)
    assert j.verdict is Verdict.UNKNOWN
    assert any("no all-reduce expectation" in x and H200 in x for x in j.reasons)
    # ... and a threshold of one's own makes it judgeable
    assert judge(r, sku=H200, nodes=2, expectation=None, threshold_gbps=300).verdict is Verdict.PASS


def test_catalog_none_expectation_is_handled(reference):
    # whatever the catalog holds for H200 today (None or a figure), judge() must not break on it
    j = judge(load(reference, OLD_H100), sku=H200, nodes=2)
    assert j.verdict in set(Verdict)
    if catalog.lookup(H200).allreduce_expectation(2) is None:
        assert j.verdict is Verdict.UNKNOWN


def test_single_node_never_crossed_the_fabric(reference):
    j = judge(load(reference, H200_FILE), sku=H200)  # nodes from the log: one host, "vm"
    assert j.nodes == 1 and j.verdict is Verdict.UNKNOWN
    assert any("single node (vm)" in x for x in j.reasons)


def test_fewer_hosts_than_nodes_fails_and_skips_the_bandwidth(reference):
    j = judge(load(reference, H200_FILE), sku=A100, nodes=2)
    assert j.verdict is Verdict.FAIL
    assert any("expected 2 nodes" in x and "1 host" in x for x in j.reasons)
    assert not any("344.19" in x for x in j.reasons)  # NVLink bandwidth is not the fabric's


def test_rank_count_mismatch_warns(reference):
    j = judge(load(reference, GH200), sku=A100, nodes=2, expectation=exp(100, 50))
    assert any("8 ranks, expected 16" in x for x in j.reasons)


def test_small_largest_message_is_not_judged(reference):
    r = load(reference, GH200)
    assert r.max_size_bytes < MIN_JUDGED_SIZE_BYTES
    j = judge(r, sku=A100, nodes=2, expectation=exp(500, 400))  # would FAIL if judged
    assert j.verdict is Verdict.UNKNOWN
    assert any("128 MiB is below 1 GiB" in x for x in j.reasons)


def test_wrong_results_fail(reference):
    text = (reference / "nccl-tests" / H200_FILE).read_text()
    text = text.replace("344.19       0", "344.19       5").replace("values : 0 OK", "values : 1 FAILED")
    from verify.nccl import parse

    j = judge(parse(text), sku=H200, expectation=exp(300, 200))
    assert j.verdict is Verdict.FAIL
    assert any("5 wrong elements" in x for x in j.reasons)
    assert any("1 out-of-bounds" in x for x in j.reasons)


def test_failed_and_truncated_runs(reference):
    from verify.nccl import parse

    lines = (reference / "nccl-tests" / OLD_H100).read_text().splitlines()
    cut = parse("\n".join(lines[:40]))
    j = judge(cut, sku=A100, nodes=2)
    assert j.verdict is Verdict.UNKNOWN and any("cut off" in x for x in j.reasons)

    failed = parse("\n".join(lines[:40] + ["ztan-mig-gq73: Test NCCL failure common.cu:1279 'unhandled system error'"]))
    j = judge(failed, sku=A100, nodes=2)
    assert j.verdict is Verdict.FAIL and any("the run failed" in x for x in j.reasons)

    j = judge(load(reference, AZURE), sku=A100, nodes=2, job_failed="Volcano job phase Failed")
    assert j.verdict is Verdict.FAIL


def test_no_sku_no_threshold_is_unknown(reference):
    j = judge(load(reference, AZURE), nodes=2)
    assert j.verdict is Verdict.UNKNOWN and any("no SKU" in x for x in j.reasons)


def test_unknown_sku_is_unknown_with_the_catalogs_message(reference):
    j = judge(load(reference, AZURE), sku="Standard_D4s_v5", nodes=2)
    assert j.verdict is Verdict.UNKNOWN and any("not an InfiniBand-capable size" in x for x in j.reasons)


def test_node_count_unknown_without_hosts_nodes_or_sku(reference):
    j = judge(load(reference, AZURE), threshold_gbps=180)
    assert j.nodes is None and j.verdict is Verdict.UNKNOWN
    assert any("pass --nodes" in x for x in j.reasons)


def test_without_hosts_the_nodes_are_the_ranks_over_the_gpus_per_vm(reference):
    j = judge(load(reference, AZURE), sku=A100)  # 16 ranks, no "Using devices" lines
    assert j.nodes == 2 and j.verdict is Verdict.PASS
    assert "2 nodes: 16 ranks / 8 GPUs per Standard_ND96asr_v4 (the log names no hosts; pass --nodes if that is " \
           "wrong)" in j.reasons


def test_one_node_is_singular(reference):
    j = judge(load(reference, AZURE), sku=A100, nodes=1)
    assert any("(1 node x 8 GPUs" in r for r in j.reasons) and not any("1 nodes" in r for r in j.reasons)


def test_worst_finding_wins_and_comes_first(reference):
    j = judge(load(reference, AZURE), sku=A100, nodes=2, expectation=exp(200, 190), job_failed="x")
    assert j.verdict is Verdict.FAIL
    assert Verdict.FAIL.severity > Verdict.UNKNOWN.severity > Verdict.WARN.severity > Verdict.PASS.severity


def test_the_warn_band_is_not_empty_for_any_published_catalog_expectation():
    for sku in catalog.SKUS.values():
        for exp in (sku.allreduce_2_nodes, sku.allreduce_more_nodes):
            if exp is not None and not exp.derived:
                assert exp.baseline_gbps * WARN_FRACTION_OF_BASELINE > exp.threshold_gbps, sku.vm_size


def test_below_a_derived_threshold_is_a_warning_until_a_threshold_is_set(reference):
    run = load(reference, AZURE)  # 187.22 GB/s at 8 GiB
    derived = expectations.Expectation(baseline_gbps=200.0, threshold_gbps=190.0,
                                  provenance=_provenance(expectations.Basis.DERIVED))
    j = judge(run, sku=A100, nodes=2, expectation=derived)
    assert j.verdict is Verdict.WARN and "derived, not a published measurement" in j.reasons[0]
    assert judge(run, sku=A100, nodes=2, expectation=derived, threshold_gbps=190).verdict is Verdict.FAIL
    assert judge(run, sku=A100, nodes=2, expectation=exp(200, 190)).verdict is Verdict.FAIL


def derived(baseline, threshold):
    return expectations.Expectation(baseline_gbps=baseline, threshold_gbps=threshold,
                               provenance=_provenance(expectations.Basis.DERIVED))


@pytest.mark.parametrize("expectation, override", [
    (exp(220, 150), None), (exp(200, 190), None), (exp(220, 150), 215.0), (exp(187, 180), 100.0),
    # no WARN band above a derived threshold, or above the user's: the run (187.22) is inside where it was
    (derived(192, 186), None), (exp(200, 150), 185.0), (derived(200, 150), 185.0)])
def test_the_pass_line_is_where_judge_starts_to_pass(reference, expectation, override):
    """The launcher runs the doctor under `auto` below pass_line_gbps: the same line as judge()'s PASS
    (Azure's 187.22 GB/s run judged against expectations placed around it)."""
    r = load(reference, AZURE)
    line = pass_line_gbps(expectation, override)
    passed = judge(r, sku=A100, nodes=2, expectation=expectation, threshold_gbps=override).verdict is Verdict.PASS
    assert passed == (r.busbw_at_max_size_gbps >= line), (line, passed)


@pytest.mark.parametrize("size", ["Standard_ND96isr_H100_v5", H200])
def test_no_warn_band_above_a_derived_threshold(size):
    """A derived baseline is not a measurement: a run between the derived threshold and 97 % of the
    derived baseline passes (it used to read WARN)."""
    line = catalog.lookup(size).allreduce_expectation(2)
    assert line.derived and line.threshold_gbps < line.baseline_gbps * WARN_FRACTION_OF_BASELINE
    busbw = (line.threshold_gbps + line.baseline_gbps * WARN_FRACTION_OF_BASELINE) / 2
    j = judge(parse(launcher_log(worker_hosts(2), 8, busbw_gbps=busbw)), sku=size, nodes=2)
    assert j.verdict is Verdict.PASS, j.reasons
    assert j.warn_below_gbps is None and j.baseline_gbps == line.baseline_gbps
    assert pass_line_gbps(line) == line.threshold_gbps


@pytest.mark.parametrize("size", [A100, "Standard_ND96isr_H100_v5"])
def test_no_warn_band_above_the_users_threshold(size):
    """--threshold-gbps / fabricTest.thresholdGbps replaces the catalog's threshold: a run above it
    passes, however far below 97 % of the catalog's baseline (a 372 GB/s run with --threshold-gbps
    350 on ND H100 v5 read WARN 'below 97% of the baseline 394.8')."""
    line = catalog.lookup(size).allreduce_expectation(2)
    override = line.baseline_gbps * 0.9
    busbw = (override + line.baseline_gbps * WARN_FRACTION_OF_BASELINE) / 2
    j = judge(parse(launcher_log(worker_hosts(2), 8, busbw_gbps=busbw)), sku=size, nodes=2, threshold_gbps=override)
    assert j.verdict is Verdict.PASS, j.reasons
    assert j.warn_below_gbps is None and j.threshold_gbps == override
    assert pass_line_gbps(line, override) == override


def test_the_warn_band_stays_above_a_published_threshold():
    line = catalog.lookup(A100).allreduce_expectation(2)
    busbw = (line.threshold_gbps + line.baseline_gbps * WARN_FRACTION_OF_BASELINE) / 2
    j = judge(parse(launcher_log(worker_hosts(2), 8, busbw_gbps=busbw)), sku=A100, nodes=2)
    assert j.verdict is Verdict.WARN and f"below 97% of the baseline {line.baseline_gbps:g}" in j.reasons[0]
    assert j.warn_below_gbps == pytest.approx(line.baseline_gbps * WARN_FRACTION_OF_BASELINE)


def test_no_threshold_no_pass_line():
    assert pass_line_gbps(None) is None
    assert pass_line_gbps(None, 100) == 100.0
    assert pass_line_gbps(exp(374, 360)) == pytest.approx(374 * WARN_FRACTION_OF_BASELINE)


# --- the transport NCCL used (verify/transport.py; logs in tests/data, constructed in tests/nccl_logs.py) ---
SOCKET_2X1 = DATA / "nccl-info_2.28.9_socket-fallback_2-fake-hosts-x1-gpu_h200x2.log"  # real, NCCL 2.28.9
ND_SIZES = ["Standard_ND96asr_v4", "Standard_ND96isr_H100_v5", "Standard_ND96isr_H200_v5"]


@pytest.mark.parametrize("sku", ND_SIZES)
def test_a_real_socket_run_across_nodes_fails_on_every_nd_size(sku):
    j = judge(parse_file(SOCKET_2X1), sku=sku)
    assert j.verdict is Verdict.FAIL
    rdma = next(r for r in j.reasons if r.startswith("RDMA was not used"))
    assert "Socket network" in rdma and "via NET/Socket" in rdma and "node-0, node-1" in rdma
    for check in ("rdma/shared_ib", "/dev/infiniband", "IPC_LOCK", "device plugin"):
        assert check in rdma


@pytest.mark.parametrize("sku", ND_SIZES)
def test_sockets_fail_even_when_the_bandwidth_would_pass(sku):
    """The transport rule does not lean on the bandwidth: a fast log over sockets still fails."""
    log = launcher_log(worker_hosts(2), 8, network="Socket", busbw_gbps=400.0)
    j = judge(parse(log), sku=sku, nodes=2)
    assert j.verdict is Verdict.FAIL
    assert j.reasons[0].startswith("RDMA was not used")
    (bandwidth,) = [r for r in j.reasons if r.startswith("busbw")]
    assert "below" not in bandwidth  # the figure alone would not have failed it


@pytest.mark.parametrize("sku, busbw", [(A100, 187.0), ("Standard_ND96isr_H100_v5", _H100_2.baseline_gbps)])
def test_healthy_ib_with_gdrdma_on_every_channel_passes(sku, busbw):
    j = judge(parse(launcher_log(worker_hosts(2), 8, busbw_gbps=busbw)), sku=sku, nodes=2)
    assert j.verdict is Verdict.PASS, j.reasons
    assert "transport: NET/IB GDRDMA, 8 HCAs per node" in j.reasons


def test_healthy_transport_with_azures_real_table_passes(reference):
    """Azure's published 2 x 8 A100 table (reference) behind constructed IB + GDRDMA lines."""
    table = (reference / "nccl-tests" / AZURE).read_text()
    log = launcher_log(worker_hosts(2), 8).split("[1,0]<stdout>:#\n[1,0]<stdout>:#       size")[0] + table
    j = judge(parse(log), sku=A100, nodes=2)
    assert j.verdict is Verdict.PASS and j.judged_busbw_gbps == pytest.approx(187.22)


@pytest.mark.parametrize("sku", ND_SIZES)
def test_ib_without_gdrdma_fails_with_the_gpudirect_reason(sku):
    busbw = catalog.lookup(sku).allreduce_expectation(2).baseline_gbps
    j = judge(parse(launcher_log(worker_hosts(2), 8, gdr=False, busbw_gbps=busbw)), sku=sku, nodes=2)
    assert j.verdict is Verdict.FAIL
    (gdr,) = [r for r in j.reasons if r.startswith("GPUDirect RDMA was not used")]
    assert "64 of 64" in gdr and "NET/IB x64" in gdr
    assert "nvidia-peermem" in gdr and "dma-buf" in gdr


def test_gdr_disabled_for_the_hca_is_named_as_the_cause():
    log = launcher_log(worker_hosts(2), 8, gdr=False, gdr_hca_disabled=True, busbw_gbps=187.0)
    j = judge(parse(log), sku=A100, nodes=2)
    hosts = ", ".join(worker_hosts(2))
    assert f"'GPU Direct RDMA Disabled for HCA' on {hosts}" in j.reasons[0]


@pytest.mark.parametrize("version, named", [("2.30.4+cuda13.0", True), ("2.30.3+cuda12.9", True),
                                            ("2.30.2+cuda13.0", False), ("2.28.3+cuda12.9", False)])
def test_without_the_distance_line_nccl_2_30_3_and_later_name_the_distance_check(version, named):
    """NCCL 2.30.3 stopped printing "GPU Direct RDMA Disabled for GPU ... (distance ...)": there its
    absence is no evidence, so the reason names the distance check as a possible cause; before, the
    line would have been there, and its absence rules the distance check out."""
    log = launcher_log(worker_hosts(2), 8, gdr=False, busbw_gbps=187.0)
    log = re.sub(r"NCCL version [0-9][^ \n]*", f"NCCL version {version}", log)
    j = judge(parse(log), sku=A100, nodes=2)
    (gdr,) = [r for r in j.reasons if r.startswith("GPUDirect RDMA was not used")]
    assert ("no longer logs its distance check" in gdr) is named
    assert (f"NCCL {version}" in gdr) is named


def test_four_of_eight_hcas_on_one_host_warns_naming_that_host():
    hosts = worker_hosts(2)
    j = judge(parse(launcher_log(hosts, 8, hcas={hosts[1]: 4}, busbw_gbps=187.0)), sku=A100, nodes=2)
    assert j.verdict is Verdict.WARN
    (warn,) = [r for r in j.reasons if "HCAs" in r]
    assert warn.startswith(f"host {hosts[1]} opened 4 of the 8 InfiniBand HCAs of {A100}")
    assert "missing mlx5_ib4, mlx5_ib5, mlx5_ib6, mlx5_ib7" in warn and hosts[0] not in warn


def test_a_log_without_transport_lines_keeps_the_bandwidth_verdict_and_says_so(reference):
    j = judge(load(reference, AZURE), sku=A100, nodes=2)
    assert j.verdict is Verdict.PASS
    assert j.reasons[-1].startswith("transport not checked: the log has no NCCL INFO transport lines")


def test_a_single_node_run_keeps_unknown_and_says_no_inter_node_channel():
    j = judge(parse_file(DATA / "nccl-info_2.28.9_single-node-2-gpus_h200x2_8B-8G.log"), sku=H200)
    assert j.verdict is Verdict.UNKNOWN  # "Using network Socket" on one node is no fault
    assert "transport: no inter-node channel (single node; network Socket)" in j.reasons
    assert not any(r.startswith("RDMA was not used") for r in j.reasons)


@pytest.mark.parametrize("busbw, verdict", [
    (_H100_FLOOR - 1, Verdict.FAIL),
    (157.11, Verdict.WARN),  # NVIDIA's own AKS run, settings unknown (expectations.CITE_AICR_H100_AKS): IB worked
    (_H100_2.baseline_gbps, Verdict.PASS),
])
def test_the_floor_under_a_derived_threshold(busbw, verdict):
    """ND H100 v5's threshold is derived: below it is WARN, but below the floor it is FAIL."""
    sku = "Standard_ND96isr_H100_v5"
    assert _H100_2.derived and _H100_FLOOR < 150 < _H100_2.threshold_gbps  # under NVIDIA's own AKS gate
    j = judge(parse(launcher_log(worker_hosts(2), 8, busbw_gbps=busbw)), sku=sku, nodes=2)
    assert j.verdict is verdict, j.reasons
    assert j.fail_below_gbps == pytest.approx(_H100_FLOOR)
    if verdict is Verdict.FAIL:
        assert f"below 35% of the baseline {_H100_2.baseline_gbps:g} GB/s" in j.reasons[0]


def test_the_floor_figures_quoted_in_the_code_and_docs_are_the_catalogs():
    """The 35 % floor's comment and docs/fabric-test.md quote it in GB/s per derived size: those
    figures, and the baseline the comment names, follow the catalog."""
    comment = (ROOT / "core" / "expectations.py").read_text()
    doc = (ROOT / "docs" / "fabric-test.md").read_text()
    assert f"of the derived {_H100_2.baseline_gbps:g} GB/s baseline" in comment
    quoted = dict(re.findall(r"for (ND H[12]00 v5)(?: that is)? (\d+) GB/s", doc))
    for family, size in (("ND H100 v5", "Standard_ND96isr_H100_v5"), ("ND H200 v5", H200)):
        floor = catalog.lookup(size).allreduce_expectation(2).baseline_gbps * FLOOR_FRACTION_OF_BASELINE
        assert f"{family} {floor:.1f} GB/s" in comment
        assert quoted[family] == f"{floor:.0f}", family


def test_the_floor_does_not_soften_a_published_threshold():
    # A100's threshold is Azure's published 180 GB/s: below it is FAIL with or without the floor
    j = judge(parse(launcher_log(worker_hosts(2), 8, busbw_gbps=179.0)), sku=A100, nodes=2)
    assert j.verdict is Verdict.FAIL and "below the threshold 180" in j.reasons[0]
