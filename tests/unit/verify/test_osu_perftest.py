"""The point-to-point parsers (OSU osu_bw / osu_latency, perftest ib_write_bw / ib_write_lat) on
published outputs, and the verdict against the SKU's link rate from the catalog.

Expected values are read from the fixture rows themselves (the raw number times the unit factor),
never typed in, so a wrong column or unit fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from core import catalog, expectations
from tests.paths import DATA
from verify import osu, p2p, perftest

P2P_FIXTURES = sorted([*DATA.glob("osu_*.txt"), *DATA.glob("perftest_*.txt")])

HBV3_BW = DATA / "osu_bw_v5.8_azure-hb120-96rs_v3.txt"
HBV3_LAT = DATA / "osu_latency_v5.8_azure-hb120-96rs_v3.txt"
AKS_DROP = DATA / "osu_bw_v5.8_aks-hb120-96rs_v3_large-message-drop.txt"
OMB7_BW = DATA / "osu_bw_v7.4_lumi-hostmpi.txt"
OMB72_LAT = DATA / "osu_latency_v7.2_aks-hpcx.txt"
CUDA_BW = DATA / "osu_bw_v7.5_mpi-cuda_cscs-validation.txt"
PT_BW = DATA / "perftest_ib_write_bw_ndv4_aks-rdma-infiniband.txt"
PT_LAT = DATA / "perftest_ib_read_lat_ndv4_aks-rdma-infiniband.txt"


def raw_rows(path: Path) -> dict[int, list[str]]:
    """size -> the remaining columns of each numeric row, read naively from the file (the oracle)."""
    rows: dict[int, list[str]] = {}
    for line in path.read_text().splitlines()[1:]:
        cells = line.split()
        if len(cells) >= 2 and cells[0].isdigit() and cells[1].replace(".", "", 1).isdigit():
            rows[int(cells[0])] = cells[1:]
    return rows


@pytest.mark.parametrize("path", P2P_FIXTURES, ids=lambda p: p.name)
def test_fixture_names_its_source(path):
    first = path.read_text().splitlines()[0]
    assert first.startswith("# SOURCE: ") and len(first) > 40


@pytest.mark.parametrize("path", P2P_FIXTURES, ids=lambda p: p.name)
def test_every_fixture_parses_one_table_with_every_row(path):
    (series,) = p2p.parse_file(path)
    rows = raw_rows(path)
    assert [p.size_bytes for p in series.points] == list(rows)


def test_osu_bw_5x_converts_mb_per_s_to_gbits():
    (bw,) = osu.parse(HBV3_BW.read_text())
    rows = raw_rows(HBV3_BW)
    assert (bw.tool, bw.kind, bw.version, bw.unit_printed) == ("osu_bw", p2p.BANDWIDTH, "5.8", "MB/s")
    for point in bw.points:
        assert point.value == pytest.approx(float(rows[point.size_bytes][0]) * 8 / 1000)
    assert bw.largest.size_bytes == max(rows)


def test_osu_7x_datatype_line_and_header_order_quirk():
    (bw,) = osu.parse(OMB7_BW.read_text())
    assert bw.version == "7.4" and len(bw.points) == len(raw_rows(OMB7_BW))
    # 7.2: column header BEFORE "# Datatype", and this copy's title lost its '#'
    (lat,) = osu.parse(OMB72_LAT.read_text())
    rows = raw_rows(OMB72_LAT)
    assert (lat.tool, lat.kind, lat.version) == ("osu_latency", p2p.LATENCY, "7.2")
    assert lat.at_or_above(1).value == pytest.approx(float(rows[min(rows)][0]))


def test_osu_latency_5x_keeps_the_zero_byte_row_but_reports_one_byte():
    (lat,) = osu.parse(HBV3_LAT.read_text())
    rows = raw_rows(HBV3_LAT)
    assert lat.points[0].size_bytes == 0
    assert lat.at_or_above(1).value == pytest.approx(float(rows[1][0]))


def test_osu_mpi_cuda_title_and_validation_column():
    (bw,) = osu.parse(CUDA_BW.read_text())
    assert bw.accelerator == "CUDA" and bw.validation_failed_sizes == ()
    broken = CUDA_BW.read_text().replace("4194304             23989.54              Pass",
                                         "4194304             23989.54              Fail")
    assert broken != CUDA_BW.read_text()
    (bad,) = osu.parse(broken)
    assert bad.validation_failed_sizes == (4194304,)
    verdict = p2p.judge([bad], "Standard_HB120rs_v3")
    assert verdict.status == p2p.FAIL and any("validation" in r for r in verdict.reasons)


def test_noise_around_the_table_is_ignored():
    # the AKS file carries a flux jobspec/eventlog trailer; the VMSS one kernel messages and timings
    for path in (AKS_DROP, HBV3_BW):
        (bw,) = osu.parse(path.read_text())
        assert len(bw.points) == len(raw_rows(path)) == 23


def test_perftest_report_gbits_uses_bw_average_column():
    (bw,) = perftest.parse(PT_BW.read_text())
    rows = raw_rows(PT_BW)
    assert (bw.tool, bw.unit_printed) == ("ib_write_bw", "Gb/sec")
    for point in bw.points:
        peak, average = rows[point.size_bytes][1], rows[point.size_bytes][2]
        assert point.value == pytest.approx(float(average)) and peak  # average, not peak


def test_perftest_latency_table_uses_t_avg():
    (lat,) = perftest.parse(PT_LAT.read_text())
    rows = raw_rows(PT_LAT)
    size = min(rows)
    # columns after #bytes: iterations, t_min, t_max, t_typical, t_avg, ...
    assert (lat.tool, lat.kind) == ("ib_read_lat", p2p.LATENCY)
    assert lat.points[0].value == pytest.approx(float(rows[size][4]))


# Tables in the formats perftest prints without --report_gbits and in duration mode (-D), built from
# the header strings of linux-rdma/perftest@00b55b6 src/perftest_parameters.h (RESULT_FMT,
# RESULT_FMT_LAT_DUR); no published two-node run in those formats was found. The numbers test unit
# handling, they are not a measurement.
MIB_TABLE = """\
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]
Conflicting CPU frequency values detected: 1846.550000 != 2596.396000. CPU Frequency is not max.
 65536      5000             1000.00            500.00              0.008000
---------------------------------------------------------------------------------------
"""
DURATION_LAT = """\
                    RDMA_Write Latency Test
 #bytes        #iterations       t_avg[usec]    tps average
 2             1000000            1.25           400000.00
---------------------------------------------------------------------------------------
"""


def test_perftest_mib_per_sec_is_two_to_the_twenty_bytes():
    (bw,) = perftest.parse(MIB_TABLE)
    assert bw.unit_printed == "MiB/sec" and len(bw.points) == 1
    assert bw.points[0].value == pytest.approx(500.0 * 1048576 * 8 / 1e9)
    legacy = MIB_TABLE.replace("MiB/sec", "MB/sec")  # perftest before 1d202bb: same 2^20 unit
    assert perftest.parse(legacy)[0].points[0].value == pytest.approx(bw.points[0].value)


def test_perftest_duration_mode_latency():
    (lat,) = perftest.parse(DURATION_LAT)
    assert (lat.tool, lat.points[0].size_bytes, lat.points[0].value) == ("ib_write_lat", 2, 1.25)


def test_one_log_with_bandwidth_and_latency_gives_both_and_detects_the_tool():
    log = HBV3_BW.read_text() + "\n" + HBV3_LAT.read_text()
    kinds = [s.kind for s in p2p.parse(log)]
    assert kinds == [p2p.BANDWIDTH, p2p.LATENCY]
    assert p2p.detect(log) == "osu" and p2p.detect(PT_BW.read_text()) == "perftest"
    assert p2p.detect("hello\nworld\n") is None
    with pytest.raises(p2p.ParseError):
        p2p.parse("no table here\n")


def test_nccl_output_is_not_mistaken_for_a_point_to_point_table(reference):
    for path in sorted((reference / "nccl-tests").glob("*.txt")):
        assert p2p.detect(path.read_text()) is None, path.name


# --- the verdict ---------------------------------------------------------------------------------
def _expect(size: str) -> expectations.LinkExpectation:
    return catalog.lookup(size).p2p


def test_hbv3_two_vm_osu_bw_passes_against_hdr_and_fails_against_ndr():
    series = p2p.parse(HBV3_BW.read_text() + HBV3_LAT.read_text())
    hdr = p2p.judge(series, "Standard_HB120rs_v3")
    assert hdr.status == p2p.PASS
    assert (hdr.threshold_gbits, hdr.line_rate_gbits) == (_expect("Standard_HB120rs_v3").threshold_gbits,
                                                          _expect("Standard_HB120rs_v3").baseline_gbits)
    assert hdr.latency_size_bytes == 1 and hdr.latency_tool == "osu_latency"
    for ndr in ("Standard_HB176rs_v4", "Standard_HX176rs"):
        v = p2p.judge(series, ndr)
        assert v.status == p2p.FAIL and v.threshold_gbits == _expect(ndr).threshold_gbits
        assert v.bw_at_max_size_gbits < v.threshold_gbits


def test_judged_figure_is_the_largest_message_not_the_peak():
    series = osu.parse(AKS_DROP.read_text())
    v = p2p.judge(series, "Standard_HB120rs_v3")
    assert v.status == p2p.FAIL
    assert v.max_size_bytes == max(raw_rows(AKS_DROP))
    assert v.max_bw_gbits > v.bw_at_max_size_gbits  # the peak was higher; the verdict did not use it
    assert "4 MiB" in v.reasons[0]
    # an explicit threshold override below the judged figure passes it
    assert p2p.judge(series, "Standard_HB120rs_v3", threshold_gbits=v.bw_at_max_size_gbits - 1).status == p2p.PASS


def test_perftest_azure_ndv4_result_passes_the_hdr_gate():
    v = p2p.judge(perftest.parse(PT_BW.read_text()), "Standard_HB120rs_v3")
    assert v.status == p2p.PASS and v.tool == "ib_write_bw" and v.max_size_bytes == max(raw_rows(PT_BW))


def test_a_sweep_that_stops_early_is_not_judged():
    kept = [line for line in HBV3_BW.read_text().splitlines()
            if not (line.split() and line.split()[0].isdigit() and int(line.split()[0]) > 65536)]
    v = p2p.judge(osu.parse("\n".join(kept)), "Standard_HB120rs_v3")
    assert v.status == p2p.UNKNOWN and v.max_size_bytes == 65536


def test_above_line_rate_means_the_fabric_was_not_measured():
    rate = _expect("Standard_HB120rs_v3").baseline_gbits
    s = p2p.Series(tool="osu_bw", kind=p2p.BANDWIDTH,
                   points=(p2p.Point(1 << 20, rate * 2), p2p.Point(1 << 22, rate * 2)))
    v = p2p.judge([s], "Standard_HB120rs_v3")
    assert v.status == p2p.WARN and any("one InfiniBand HCA" in r for r in v.reasons)


def _flat(tool: str, gbits: float) -> p2p.Series:
    return p2p.Series(tool=tool, kind=p2p.BANDWIDTH, points=(p2p.Point(1 << 20, gbits), p2p.Point(1 << 22, gbits)))


@pytest.mark.parametrize("size", ["Standard_HB176rs_v4", "Standard_HX176rs"])
def test_osu_bw_just_below_the_ib_write_bw_gate_warns_on_ndr(size):
    """Azure's NDR gate (390 Gb/s) was measured with ib_write_bw: osu_bw within the band warns."""
    link = _expect(size)
    assert link.gate_tool == "ib_write_bw" and link.other_tool_warn_from_gbits == 380.0
    inside = (link.other_tool_warn_from_gbits + link.threshold_gbits) / 2
    v = p2p.judge([_flat("osu_bw", inside)], size)
    assert v.status == p2p.WARN and "measures with ib_write_bw" in v.reasons[0]
    # the gate's own tool gets no band; below the band osu_bw fails; a set threshold has no band
    assert p2p.judge([_flat("ib_write_bw", inside)], size).status == p2p.FAIL
    assert p2p.judge([_flat("osu_bw", link.other_tool_warn_from_gbits - 1)], size).status == p2p.FAIL
    assert p2p.judge([_flat("osu_bw", inside)], size, threshold_gbits=link.threshold_gbits).status == p2p.FAIL
    assert p2p.judge([_flat("osu_bw", link.threshold_gbits)], size).status == p2p.PASS


def test_gpu_sizes_judge_one_hca_by_their_own_gpudirect_gate():
    gates = {size: _expect(size).threshold_gbits for size in
             ("Standard_ND96asr_v4", "Standard_ND96isr_H100_v5", "Standard_ND96isr_H200_v5")}
    assert gates == {"Standard_ND96asr_v4": 180.0, "Standard_ND96isr_H100_v5": 380.0,
                     "Standard_ND96isr_H200_v5": 360.0}
    for size in gates:
        assert "check_ib_bw_gdr" in _expect(size).source and "non_gdr" not in _expect(size).source


def test_device_buffers_warn_on_a_cpu_only_size():
    v = p2p.judge(osu.parse(CUDA_BW.read_text()), "Standard_HB120rs_v3")
    assert v.status == p2p.WARN


def test_latency_only_and_failed_job():
    lat = osu.parse(HBV3_LAT.read_text())
    assert p2p.judge(lat, "Standard_HB176rs_v4").status == p2p.UNKNOWN
    bw = osu.parse(HBV3_BW.read_text())
    v = p2p.judge(bw, "Standard_HB120rs_v3", job_failed="launcher exited 1")
    assert v.status == p2p.FAIL and v.reasons[0].startswith("the job failed")


def test_verdict_json_keys_and_plot(tmp_path):
    v = p2p.judge(p2p.parse(HBV3_BW.read_text() + HBV3_LAT.read_text()), "Standard_HB120rs_v3")
    d = v.result().to_json()
    for key in ("verdict", "reasons", "max_size_bytes", "bw_at_max_size_gbits", "max_bw_gbits", "latency_us",
                "threshold_gbits", "line_rate_gbits", "source"):
        assert d[key] not in (None, []), key
    assert d["verdict"] == "PASS" and d["source"] == _expect("Standard_HB120rs_v3").source
    pytest.importorskip("matplotlib")
    out = p2p.plot(v, tmp_path / "bw.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
