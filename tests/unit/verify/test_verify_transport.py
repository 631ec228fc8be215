"""NCCL's transport, read from its INFO lines: real logs recorded for this project, public excerpts
from the projects' trackers, and CONSTRUCTED logs (tests/nccl_logs.py) for the shapes no public log
shows whole (64 nodes, 4 of 8 HCAs)."""

from __future__ import annotations

import os
import subprocess

import pytest

from core import catalog
from tests.nccl_logs import launcher_log, worker_hosts
from tests.paths import DATA, ROOT
from verify import launcher_env, nccl, transport
from verify.loglines import ROW_COLUMNS, nccl_line, untag
from verify.verdict import Verdict, judge

PUBLIC = DATA / "public-nccl-info"
LAUNCHER = ROOT / "scripts" / "nccl-launcher.sh"
SOCKET_2X1 = DATA / "nccl-info_2.28.9_socket-fallback_2-fake-hosts-x1-gpu_h200x2.log"
SOCKET_2X2 = DATA / "nccl-info_2.28.9_socket-fallback_2-fake-hosts-x2-gpus_h200x2.log"
SOCKET_16X2 = DATA / "nccl-info_2.28.9_socket-fallback_16-fake-hosts-x2-gpus_h200x2.log"
SINGLE_1X2 = DATA / "nccl-info_2.28.9_single-node-2-gpus_h200x2_8B-8G.log"
# NCCL 2.30.4 (the pinned test image's NCCL), recorded for issue 20 (tests/data/nccl-info_recorded_2.30.4_h200x1.md)
SOCKET_2X1_230 = DATA / "nccl-info_2.30.4_socket-fallback_2-fake-hosts-x1-gpu_h200x1.log"
SOCKET_16X1_230 = DATA / "nccl-info_2.30.4_socket-fallback_16-fake-hosts-x1-gpu_h200x1.log"
RECORDED = [SOCKET_2X1, SOCKET_2X2, SOCKET_16X2, SINGLE_1X2]
H100 = "Standard_ND96isr_H100_v5"
# A healthy 64-node figure: the catalog's own baseline for that size and node count.
H100_64_HEALTHY_GBPS = catalog.lookup(H100).allreduce_expectation(64).baseline_gbps


def condense(text: str) -> str:
    """The launcher's own filter (the awk in scripts/nccl-launcher.sh), run for real."""
    done = subprocess.run(["bash", str(LAUNCHER), "--condense-nccl-log"], input=text, capture_output=True,
                          text=True, timeout=60, check=True, env={**os.environ, **launcher_env.log_filter_env()})
    return done.stdout


# --- line prefixes -------------------------------------------------------------------------------
@pytest.mark.parametrize("line, host, level, message", [
    # NCCL 2.28.9 under mpirun --tag-output (tests/data)
    ("[1,3]<stdout>:node-1:1207:1207 [1] NCCL INFO Using network Socket", "node-1", "INFO", "Using network Socket"),
    # a WARN names the source file (src/debug.cc)
    ("nccl-allreduce-mpiworker-0:64:206 [1] transport/net_ib.cc:1695 NCCL WARN NET/IB : Got completion",
     "nccl-allreduce-mpiworker-0", "WARN", "NET/IB : Got completion"),
    # NCCL_DEBUG_TIMESTAMP_FORMAT puts a timestamp first (2.23+)
    ("[2026-11-30 10:23:30] node-0:1006:1006 [0] NCCL INFO Using network IB", "node-0", "INFO", "Using network IB"),
    # hostnames with dots are cut at the first one by NCCL; a 2.29 host has '-' for '/' and '%'
    ("gpu-3:12:13 [7] NCCL INFO NET/IB : No device found.", "gpu-3", "INFO", "NET/IB : No device found."),
])
def test_nccl_lines_are_recognised_behind_any_prefix(line, host, level, message):
    parsed = nccl_line(untag(line))
    assert parsed is not None
    assert (parsed.host, parsed.level, parsed.message) == (host, level, message)


@pytest.mark.parametrize("line", [
    "[1,0]<stdout>:     1048576        262144     float     sum      -1   442.64    2.37    2.37       0",
    "[1,0]<stdout>:#  Rank  0 Group  0 Pid   1006 on     node-0 device  0 [0000:00:06] NVIDIA H200",
    "NCCL version 2.12.9+cuda11.6",  # the bare banner of NCCL_DEBUG=VERSION: no host
    "[nccl-launcher 10:23:30] running: mpirun --prefix /usr ... NCCL INFO",
])
def test_other_lines_are_not_nccls(line):
    assert nccl_line(untag(line)) is None


# --- recorded on this project's GPU machine (tests/data/nccl-info_recorded_h200x2.md) -----------
@pytest.mark.parametrize("path, nodes, local", [(SOCKET_2X1, 2, 1), (SOCKET_2X2, 2, 2), (SOCKET_16X2, 16, 2),
                                               (SOCKET_2X1_230, 2, 1), (SOCKET_16X1_230, 16, 1)])
def test_a_real_socket_fallback_is_read_through_tagged_interleaved_ranks(path, nodes, local):
    t = nccl.parse_file(path).transport
    assert t.network == "Socket" and t.nodes == nodes and t.local_ranks == local
    assert t.hosts == tuple(f"node-{i}" for i in range(nodes))  # every host, in natural order
    assert t.socket_hosts == t.hosts
    assert set(t.inter_node_channels) == {"NET/Socket"} and t.inter_node_channels["NET/Socket"] >= 4 * nodes
    assert t.gdr is None  # sockets are no RDMA connection, with or without GPUDirect
    assert set(t.no_ib_device_hosts) == set(t.hosts)
    assert all(names == () for names in t.hcas_by_host.values())  # "NET/IB : Using [RO]; OOB ...": none
    assert t.summary().startswith("TCP sockets, not RDMA (NET/Socket x")


def test_nccl_2_30_logs_read_as_2_28_did_and_have_no_distance_line():
    """NCCL 2.30.4 (the pinned image's) prints what verify reads in the same words as 2.28.9; its
    GPUDirect RDMA distance check is TRACE from 2.30.3, so an INFO log never has that line."""
    for new, old in ((SOCKET_2X1_230, SOCKET_2X1),):
        a, b = nccl.parse_file(new), nccl.parse_file(old)
        assert a.nccl_version.startswith("2.30.4") and b.nccl_version.startswith("2.28.9")
        assert a.transport.summary() == b.transport.summary()
    for path in (SOCKET_2X1_230, SOCKET_16X1_230):
        text = path.read_text()
        assert "GPU Direct RDMA Disabled for GPU" not in text
        assert nccl.parse_file(path).transport.gdr_distance_disabled_hosts == ()


def test_a_real_single_node_run_has_no_inter_node_channel():
    result = nccl.parse_file(SINGLE_1X2)
    t = result.transport
    assert t.nodes == 1 and t.local_ranks == 2 and t.hosts == ("node-0",)
    assert t.inter_node_channels == {} and t.gdr is None
    assert t.summary() == "no inter-node channel (single node; network Socket)"
    assert result.busbw_at_max_size_gbps > 300  # NVLink between the two GPUs, 8 GiB


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_the_launchers_filter_keeps_what_the_verdict_reads(path):
    raw = path.read_text()
    condensed = condense(raw)
    assert len(condensed) < len(raw) * 0.7
    full, kept = nccl.parse(raw), nccl.parse(condensed)
    assert kept.transport == full.transport
    assert kept.rows == full.rows and kept.ranks_listed == full.ranks_listed
    for sku in ("Standard_ND96asr_v4", H100):
        assert judge(kept, sku=sku).reasons == judge(full, sku=sku).reasons
    # the filter counts what it kept and dropped, on its last line
    last = condensed.splitlines()[-1]
    assert last.startswith("[nccl-launcher] NCCL INFO lines: ")
    kept_n, dropped_n = int(last.split()[4]), int(last.split()[6])
    info = sum(" NCCL INFO " in line for line in raw.splitlines())
    assert kept_n + dropped_n == info and dropped_n > kept_n


# --- public logs (tests/data/public-nccl-info/, each names its source) -------------------------------
def public(name: str) -> transport.Transport:
    return transport.parse((PUBLIC / name).read_text())


def test_azure_aks_ib_without_gdrdma():
    t = public("azure-aks-rdma-infiniband-30_ib-without-gdrdma.log")
    assert t.network == "IB" and t.gdr is False
    assert t.hcas_by_host["nccl-tests-worker-1"] == tuple(f"mlx5_{i}" for i in range(8))
    assert t.inter_node_channels == {"NET/IB": 13}  # the P2P/CUMEM lines are intra-node, not counted
    assert set(t.hosts_without_gdr()) == {"nccl-tests-worker-0", "nccl-tests-worker-1"}


@pytest.mark.parametrize("name, count", [
    ("azure-aks-rdma-infiniband-30_nccl-2.25.1_ib-gdrdma.log", 3),
    ("azure-aks-rdma-infiniband-pr36_ib-gdrdma.log", 7),
    ("nvidia-nccl-707_old-format_gdrdma.log", 12),  # pre-2.12 "Channel 01 : 2[c7000] -> ..."
])
def test_public_gdrdma_channels(name, count):
    t = public(name)
    assert t.inter_node_channels == {"NET/IB/GDRDMA": count} and t.gdr is True
    assert t.summary(nodes=2) == "NET/IB GDRDMA"


def test_a_plugin_network_is_rdma_not_sockets():
    t = public("nvidia-nccl-1814_ibext-v8-plugin.log")
    assert t.inter_node_channels == {"NET/IBext_v8": 13} and not t.socket_hosts
    assert t.gdr is False
    sharp = public("nvidia-nccl-988_nccl-2.12.9_ibext-sharp.log")
    assert sharp.network == "IBext" and not sharp.socket_hosts
    assert len(sharp.hcas_by_host["ad5b8ae33076"]) == 8  # "[0]mlx5_0:1/IB/SHARP": InfiniBand ports


def test_roce_ports_are_not_infiniband_hcas_and_gdr_off_is_named():
    roce = public("nvidia-nccl-tests-185_nccl-2.19.3_roce.log")
    assert roce.network == "IB" and roce.hcas_by_host == {"dgxh100-3": (), "dgxh100-4": ()}
    off = public("nvidia-nccl-1537_roce_gdr-disabled-for-hca.log")
    assert off.gdr_disabled_hcas_by_host == {"hostname1": ("mlx5_0", "mlx5_1")}


def test_no_ib_device_is_recorded_per_host():
    t = public("nvidia-nccl-226_aws_no-ib-device-socket.log")
    assert len(t.no_ib_device_hosts) == 8 and "ip-172-31-12-21" in t.no_ib_device_hosts


# --- CONSTRUCTED (tests/nccl_logs.py) ------------------------------------------------------------------
def test_constructed_healthy_ib_reads_back():
    t = nccl.parse(launcher_log(worker_hosts(2), 8)).transport
    assert t.network == "IB" and t.gdr is True and t.nodes == 2 and t.local_ranks == 8
    assert t.hcas_by_host == {h: tuple(f"mlx5_ib{i}" for i in range(8)) for h in worker_hosts(2)}
    assert t.summary() == "NET/IB GDRDMA, 8 HCAs per node"
    d = t.as_dict()
    assert set(d) >= {"network", "gdr", "hcas_by_host", "inter_node_channels", "nccl_warnings"}
    assert d["inter_node_channels"] == {"NET/IB/GDRDMA": 64}  # 16 channels x 2 hosts x send + receive


def test_nccl_warn_lines_are_kept_not_dropped():
    log = launcher_log(worker_hosts(2), 8, warnings={"nccl-allreduce-mpiworker-1": "NET/IB : Got completion "
                                                                                  "from peer with status=12"})
    result = nccl.parse(log)
    assert len(result.warnings) == 1 and "status=12" in result.warnings[0]
    assert result.transport.as_dict()["nccl_warnings"] == list(result.warnings)


def test_64_nodes_every_hosts_transport_survives_the_launchers_filter():
    """At 64 nodes x 8 GPUs the raw INFO log is MBs (docs/fabric-test.md, 64 nodes); the launcher keeps the
    transport lines of every host, and the verdict sees all 64."""
    hosts = worker_hosts(64)
    raw = launcher_log(hosts, 8, busbw_gbps=H100_64_HEALTHY_GBPS, dropped_lines_per_rank=60)
    condensed = condense(raw)
    assert len(condensed) < len(raw) / 4
    parsed = nccl.parse(condensed)  # read once: the transport first, then the verdict on it
    t = parsed.transport
    assert t.hosts == tuple(hosts) and t.nodes == 64
    assert all(len(t.hcas_by_host[h]) == 8 for h in hosts)
    assert set(t.channels_by_host) == set(hosts)
    assert t.gdr is True and t.summary() == "NET/IB GDRDMA, 8 HCAs per node"
    j = judge(parsed, sku=H100, nodes=64)
    assert j.verdict is Verdict.PASS, j.reasons


def test_64_nodes_one_bad_host_is_found_in_the_condensed_log():
    hosts = worker_hosts(64)
    raw = launcher_log(hosts, 8, busbw_gbps=H100_64_HEALTHY_GBPS, hcas={hosts[41]: 4}, dropped_lines_per_rank=20)
    j = judge(nccl.parse(condense(raw)), sku=H100, nodes=64)
    assert j.verdict is Verdict.WARN
    assert [r for r in j.reasons if "HCAs" in r] == [next(r for r in j.reasons if hosts[41] in r)]


def test_a_log_that_lost_its_head_says_the_transport_was_not_seen_everywhere():
    """What kubelet's rotation does to an unfiltered log: the API returns the newest file only."""
    hosts = worker_hosts(8)
    raw = launcher_log(hosts, 8, busbw_gbps=H100_64_HEALTHY_GBPS)
    lines = raw.splitlines(keepends=True)
    tail = "".join(lines[len(lines) // 2:])  # the header and half of the ranks' lines are gone
    j = judge(nccl.parse(tail), sku=H100, nodes=8)
    assert j.verdict is Verdict.WARN
    assert any("the log is incomplete" in r and "not checked" in r for r in j.reasons), j.reasons


# --- an NCCL line glued onto a row's first columns (NCCL connects lazily since 2.22) ------------------
GLUED = {  # one the launcher's filter keeps (a connection), one it drops (intra-node)
    "kept": "Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA",
    "dropped": "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
}


def glued_onto_the_largest_row(log: str, host: str, message: str) -> str:
    """`log` with NCCL's `message` from `host` printed between the largest row's first five columns
    and the rest, as rank 0 prints it: "...  sum  -1HOST:PID:TID [0] NCCL INFO ...", the rest on
    the next line."""
    lines = log.splitlines()
    i = max(k for k, line in enumerate(lines) if ROW_COLUMNS.match(untag(line)))
    row = lines[i]
    cut = len(row) - len(untag(row)) + ROW_COLUMNS.match(untag(row)).end()
    lines[i:i + 1] = [f"{row[:cut]}{host}:1000:1001 [0] NCCL INFO {message}", f"[1,0]<stdout>:{row[cut:]}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("kind", GLUED)
def test_a_row_with_an_nccl_line_glued_on_keeps_its_figure_and_the_verdict(kind):
    """Through the real filter (bash scripts/nccl-launcher.sh --condense-nccl-log) and without it:
    the row survives (the 8 GiB figure is judged), the glued line's host is the pod's (not
    '-1nccl-allreduce-mpiworker-0'), and the verdict is that of the same log without the glue."""
    hosts = worker_hosts(2)
    plain = launcher_log(hosts, 8, busbw_gbps=catalog.lookup(H100).allreduce_expectation(2).baseline_gbps)
    log = glued_onto_the_largest_row(plain, hosts[0], GLUED[kind])
    expected = nccl.parse(plain)
    verdict = judge(expected, sku=H100, nodes=2)
    assert verdict.verdict is Verdict.PASS, verdict.reasons
    condensed = condense(log)
    # the filter prints the row's columns with its rest: one whole row again, after the glued line
    (row,) = [line for line in condensed.splitlines()
              if line.startswith("[1,0]<stdout>:  8589934592    2147483648     float     sum      -1")]
    assert row.split() == next(line for line in plain.splitlines() if line.startswith(row[:70])).split()
    for text in (log, condensed):
        result = nccl.parse(text)
        assert result.rows == expected.rows
        assert result.transport.hosts == tuple(hosts)
        j = judge(result, sku=H100, nodes=2)
        assert (j.verdict, j.reasons) == (verdict.verdict, verdict.reasons)
    assert (GLUED[kind] in condensed) is (kind == "kept")


def test_a_glued_nccl_line_is_read_after_the_rows_columns():
    line = "  8589934592  2147483648  float  sum  -1nccl-allreduce-mpiworker-0:64:64 [0] NCCL INFO Using network IB"
    parsed = nccl_line(line)
    assert (parsed.host, parsed.message) == ("nccl-allreduce-mpiworker-0", "Using network IB")
    # a host whose name starts with digits stays whole after all_reduce_perf's -1
    assert nccl_line(line.replace("-1nccl-allreduce-mpiworker-0", "-110-0-0-4")).host == "10-0-0-4"
