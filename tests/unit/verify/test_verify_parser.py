"""The nccl-tests parser on every real output in ../shared/reference/nccl-tests, on the -J JSON layout,
and on the ways a log goes wrong (cut off, failed, garbage)."""

from __future__ import annotations

import math

import pytest

from tests.paths import DATA
from verify.nccl import ParseError, parse, parse_file

JSON_FIXTURE = DATA / "nccl-tests-2.19.6_json-v3_h200x2_constructed.json"

AZURE = "sample-output_azure-aks-rdma-infiniband_expected-output.txt"
H200 = "h200x2_single-node_nccl-tests-2.19.6_8B-8G.txt"
COREWEAVE = "sample-output_coreweave-README_h100-64.txt"
GH200 = "sample-output_full-header_nccl-tests-2.18.3_2node-GH200_int8.txt"
OLD_H100 = "sample-output_old-header_2node-H100_lessizzmore.txt"

GiB = 1 << 30

# file -> what the file itself says (rows, largest size, out-of-place busbw there, ranks, hosts, footer avg)
EXPECTED = {
    AZURE: dict(rows=16, max_size=8 * GiB, busbw=187.22, ip_busbw=187.05, ranks=16, hosts=(), avg=56.3994, wrong=None),
    H200: dict(rows=31, max_size=8 * GiB, busbw=344.19, ip_busbw=343.43, ranks=2, hosts=("vm",), avg=109.581, wrong=0),
    # The README calls this "64x H100", but every row has busbw/algbw = 2*95/96 (e.g. 386.56/195.31):
    # nccl-tests computes busbw = algbw * 2(n-1)/n, and n = 64 would give 384.52. So 96 ranks.
    COREWEAVE: dict(rows=5, max_size=8 * GiB, busbw=386.56, ip_busbw=385.56, ranks=96, hosts=(), avg=373.187, wrong=0),
    GH200: dict(rows=28, max_size=128 << 20, busbw=101.70, ip_busbw=107.63, ranks=8, hosts=("gpu-1-1", "gpu-1-2"),
                avg=17.8617, wrong=0),
    OLD_H100: dict(rows=31, max_size=8 * GiB, busbw=338.82, ip_busbw=337.35, ranks=16,
                   hosts=("ztan-mig-235z", "ztan-mig-gq73"), avg=70.742, wrong=0),
}


def test_every_reference_output_is_covered(reference):
    # The folder also holds CoreWeave's image notes and Dockerfile (nccl-tests/coreweave-images.md): not outputs.
    outputs = {p.name for p in (reference / "nccl-tests").iterdir() if p.is_file() and p.suffix == ".txt"}
    assert outputs == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_reference_outputs(reference, name):
    want = EXPECTED[name]
    r = parse_file(reference / "nccl-tests" / name)
    assert len(r.rows) == want["rows"]
    assert r.max_size_bytes == want["max_size"]
    assert r.busbw_at_max_size_gbps == pytest.approx(want["busbw"])
    assert r.in_place_busbw_at_max_size_gbps == pytest.approx(want["ip_busbw"])
    assert r.ranks == want["ranks"]
    assert r.hosts == want["hosts"]
    assert r.avg_busbw_gbps == pytest.approx(want["avg"])
    assert r.wrong == want["wrong"]
    assert r.out_of_bounds == 0
    assert r.complete and not r.errors
    # the judged figure is not the footer average
    assert r.busbw_at_max_size_gbps > r.avg_busbw_gbps


def test_azure_two_node_a100(reference):
    r = parse_file(reference / "nccl-tests" / AZURE)
    assert r.ranks_source == "busbw/algbw = 2(n-1)/n"  # no "Using devices" lines in Azure's excerpt
    first = r.rows[0]
    assert (first.size_bytes, first.count, first.type, first.redop, first.root) == (8, 2, "float", "sum", -1)
    assert first.out_of_place.time_us == pytest.approx(99.09)
    assert first.out_of_place.wrong is None and first.in_place.wrong is None  # '#wrong N/A' under -c 0
    last = r.largest
    assert last.out_of_place.algbw_gbps == pytest.approx(99.85)
    assert last.in_place.time_us == pytest.approx(86106)
    assert r.nccl_version is None and r.nccl_tests_version is None


def test_h200_versions_devices_and_header(reference):
    r = parse_file(reference / "nccl-tests" / H200)
    assert r.nccl_tests_version == "2.19.6"
    assert r.nccl_version == "2.28.9"  # nccl-library=22809
    assert r.test == "all_reduce_perf"
    assert r.gpus == ("NVIDIA H200",)
    assert [(x.rank, x.device, x.pci) for x in r.ranks_listed] == [(0, 0, "0000:00:06"), (1, 1, "0000:00:07")]
    assert r.gpus_per_process == 2 and r.min_bytes == 8 and r.max_bytes_requested == 8 * GiB
    assert r.validation is True and r.concluded


def test_gh200_full_header(reference):
    r = parse_file(reference / "nccl-tests" / GH200)
    assert r.nccl_tests_version == "2.18.3"
    assert r.nccl_version == "2.30.4"  # nccl-library=23004
    assert r.gpus == ("NVIDIA GH200 120GB",)
    assert r.rows[0].type == "int8" and r.rows[0].count == 1
    assert r.max_busbw_gbps == pytest.approx(107.63)  # in-place at 128 MiB beats out-of-place
    assert [x.pid for x in r.ranks_listed][:2] == [221423, 221421]


def test_old_header_has_no_version_line(reference):
    r = parse_file(reference / "nccl-tests" / OLD_H100)
    assert r.nccl_tests_version is None
    assert r.ranks_source == "'Using devices' lines"
    assert {x.host for x in r.ranks_listed if x.rank >= 8} == {"ztan-mig-gq73"}
    assert r.gpus == ("NVIDIA H100 80GB HBM3",)
    assert r.complete and not r.concluded  # old releases print no "Collective test concluded"


def test_coreweave_excerpt_with_ellipsis(reference):
    r = parse_file(reference / "nccl-tests" / COREWEAVE)
    assert [row.size_bytes for row in r.rows] == [512 << 20, GiB, 2 * GiB, 4 * GiB, 8 * GiB]
    assert r.max_busbw_gbps == pytest.approx(386.56)


# ---- -J JSON ---------------------------------------------------------------------------------


def test_json_fixture_names_its_source():
    assert JSON_FIXTURE.read_text().splitlines()[0].startswith("# SOURCE: constructed")


def test_json_output_matches_the_text_it_was_transcribed_from(reference):
    j = parse_file(JSON_FIXTURE)
    t = parse_file(reference / "nccl-tests" / H200)
    assert j.source_format == "json"
    assert [(r.size_bytes, r.count, r.type, r.redop, r.root) for r in j.rows] == [
        (r.size_bytes, r.count, r.type, r.redop, r.root) for r in t.rows
    ]
    assert [r.out_of_place.busbw_gbps for r in j.rows] == pytest.approx([r.out_of_place.busbw_gbps for r in t.rows])
    assert j.busbw_at_max_size_gbps == pytest.approx(344.19)
    # a non-MPI -g 2 run lists ONE device entry (util.cu parses the first line per process): 1 x nGpus 2
    assert len(j.ranks_listed) == 1 and j.ranks == 2
    assert j.hosts == ("vm",) and j.gpus == ("NVIDIA H200",)
    assert j.nccl_version == "2.28.9"
    assert j.wrong == 0 and j.out_of_bounds == 0 and j.complete
    assert j.avg_busbw_gbps == pytest.approx(109.581)
    assert j.errors == ()  # writeErrors emits [""] on a clean run


def test_json_with_unchecked_wrong_and_nan():
    doc = (
        '{"version":3,"nccl_version":22809,"config":{"nthreads":1,"ngpus":1,"devices":['
        '{"rank":0,"group":0,"pid":1,"hostname":"a","device":0,"device_hex":"0000:01:00","device_info":"G"},'
        '{"rank":1,"group":0,"pid":2,"hostname":"b","device":0,"device_hex":"0000:01:00","device_info":"G"}]},'
        '"results":[{"size":1073741824,"count":268435456,"type":"float","redop":"sum","root":"    -1",'
        '"out_of_place":{"time":"nan","alg_bw":100.0,"bus_bw":100.0,"nwrong":null},'
        '"in_place":{"time":1.0,"alg_bw":99.0,"bus_bw":99.0,"nwrong":null}}],'
        '"out_of_bounds":{"count":0,"okay":"true"},"average_bus_bandwidth":{"bandwidth":100.0,"okay":"unchecked"}}'
    )
    r = parse(doc)
    assert r.wrong is None
    assert math.isnan(r.rows[0].out_of_place.time_us)
    assert r.hosts == ("a", "b") and r.ranks == 2


def test_cut_off_json_is_a_clear_error():
    text = JSON_FIXTURE.read_text()
    with pytest.raises(ParseError, match="does not parse"):
        parse(text[: len(text) // 2])


# ---- logs as they come out of a launcher pod ---------------------------------------------------


def _rows(reference, name, start, stop):
    return (reference / "nccl-tests" / name).read_text().splitlines()[start:stop]


def test_nccl_info_lines_interleaved_even_inside_a_row(reference):
    lines = (reference / "nccl-tests" / H200).read_text().splitlines()
    row = lines[11]  # "           8             2     float     sum      -1    19.26 ..."
    cut = row.index("-1") + 2
    # nccl-tests prints a row's first five columns, measures, then the rest; NCCL (lazy connection
    # setup since 2.22) logs to the same stdout buffer in between.
    constructed = (
        ["vm:1388:1388 [0] NCCL INFO NCCL version 2.28.9+cuda13.0", "vm:1388:1400 [0] NCCL INFO Bootstrap: Using eth0"]
        + lines[:11]
        + [row[:cut] + "vm:1388:1401 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM",
           "vm:1388:1401 [1] NCCL INFO Connected all rings", row[cut:]]
        + lines[12:]
    )
    r = parse("\n".join(constructed))
    assert len(r.rows) == 31
    assert r.rows[0].size_bytes == 8 and r.rows[0].out_of_place.time_us == pytest.approx(19.26)
    assert r.nccl_version == "2.28.9+cuda13.0"  # NCCL's own banner wins over the header's code


def test_mpirun_tag_output_prefix(reference):
    lines = (reference / "nccl-tests" / OLD_H100).read_text().splitlines()
    r = parse("\n".join(f"[1,0]<stdout>:{line}" for line in lines))
    assert r.ranks == 16 and r.busbw_at_max_size_gbps == pytest.approx(338.82)


def test_per_iteration_columns_and_timestamps():
    # the -I 1 layout of src/util.cu writeResultHeader: 8 columns per placement, then a timestamp
    text = "\n".join([
        "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809",
        "# Collective test starting: all_reduce_perf",
        "#  Rank  0 Group  0 Pid      1 on      node0 device  0 [0000:01:00] GPU",
        "#  Rank  1 Group  0 Pid      2 on      node1 device  0 [0000:01:00] GPU",
        "  1073741824     268435456     float     sum      -1   5808.0  184.87  184.87       0   5700.0   5900.0"
        "   5890.0     1.20   5882.2  182.54  182.54       0   5800.0   5990.0   5980.0     1.10  2026-01-01 10:00:00",
        "# Out of bounds values : 0 OK",
        "# Avg bus bandwidth    : 184.87 ",
    ])
    r = parse(text)
    assert len(r.rows) == 1
    assert r.rows[0].out_of_place.busbw_gbps == pytest.approx(184.87)
    assert r.rows[0].in_place.busbw_gbps == pytest.approx(182.54)
    assert r.hosts == ("node0", "node1")


def test_wrong_results_are_counted(reference):
    lines = (reference / "nccl-tests" / H200).read_text().splitlines()
    assert lines[41].split()[0] == "8589934592"
    lines[41] = lines[41].replace("344.19       0", "344.19      12")  # out-of-place #wrong of the 8 GiB row
    lines = [x.replace("Out of bounds values : 0 OK", "Out of bounds values : 3 FAILED") for x in lines]
    r = parse("\n".join(lines))
    assert r.largest.out_of_place.wrong == 12
    assert r.wrong == 12 and r.out_of_bounds == 3


def test_truncated_run_has_rows_but_is_not_complete(reference):
    lines = (reference / "nccl-tests" / H200).read_text().splitlines()[:30]
    r = parse("\n".join(lines))
    assert len(r.rows) == 19 and not r.complete
    assert r.out_of_bounds is None and r.avg_busbw_gbps is None


def test_failed_run_is_a_result_with_errors(reference):
    head = (reference / "nccl-tests" / GH200).read_text().splitlines()[:21]  # header + 3 rows
    failure = [
        "gpu-1-2: Test NCCL failure common.cu:1279 'remote process exited or there was a network error / '",
        " .. gpu-1-2 pid 201122: Test failure common.cu:1100",
    ]
    r = parse("\n".join(head + failure))
    assert len(r.rows) == 3 and not r.complete
    assert len(r.errors) == 2 and "Test NCCL failure" in r.errors[0]


def test_failure_before_any_row():
    r = parse("node0: Test CUDA failure common.cu:892 'out of memory'\n")
    assert r.rows == () and r.errors


@pytest.mark.parametrize(
    "text",
    ["", "   \n", "hello world\nthis is not nccl-tests\n", "Traceback (most recent call last):\n  File x\n", "{}"],
)
def test_garbage_is_a_parse_error(text):
    with pytest.raises(ParseError) as info:
        parse(text)
    assert str(info.value)


def test_unreadable_file_is_a_parse_error(tmp_path):
    with pytest.raises(ParseError, match="cannot read"):
        parse_file(tmp_path / "missing.log")
