"""The doctor's parsers on recorded real outputs (tests/data, each file's first line names its source):
HCA port listings (ibstatus / sysfs, ibv_devinfo), nvidia-smi -L, ib_write_bw, nccl-tests; and the
section splitter that hands each marked section to them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from core import catalog
from tests.nccl_logs import launcher_log
from tests.paths import DATA, ROOT
from verify import doctor, doctor_checks, doctor_report, sections
from verify.__main__ import main
from verify.hca import HcaPort, infiniband_ports, parse_gpus, parse_ports

HC44 = DATA / "ibstatus_ibv_devinfo_azure-hc44rs_ompi-6723.txt"


def real(name: str) -> str:
    text = (DATA / name).read_text()
    assert text.startswith("# SOURCE: "), f"{name} must name its source on its first line"
    return text


def test_ibstatus_of_an_azure_hc44rs():
    ibstatus = real(HC44.name).split("\nibv_devinfo\n")[0]
    assert parse_ports(ibstatus) == (
        HcaPort("mlx5_0", 1, "ACTIVE", "LinkUp", 100.0, "InfiniBand", "100 Gb/sec (4X EDR)"),)


def test_ibv_devinfo_of_the_same_node():
    devinfo = real(HC44.name).split("\nibv_devinfo\n")[1]
    (port,) = parse_ports(devinfo)
    assert (port.device, port.port, port.state, port.link_layer) == ("mlx5_0", 1, "ACTIVE", "InfiniBand")
    assert port.rate_gbits is None  # without -v, ibv_devinfo prints no width or speed


def test_ibv_devinfo_verbose_gives_the_rate():
    # the -v port lines as rdma-core libibverbs/examples/devinfo.c prints them (width_str, speed_str)
    text = ("hca_id:\tmlx5_ib2\n\tphys_port_cnt:\t\t\t1\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
            "\t\t\tactive_width:\t\t2X (16)\n\t\t\tactive_speed:\t\t100.0 Gbps (64)\n"
            "\t\t\tphys_state:\t\tLINK_UP (5)\n\t\t\tlink_layer:\t\tInfiniBand\n")
    (port,) = parse_ports(text)
    assert (port.rate_gbits, port.phys_state, port.state) == (200.0, "LinkUp", "ACTIVE")


def test_the_launchers_sysfs_listing_and_an_ethernet_an0():
    """What scripts/nccl-launcher.sh prints from sysfs (file contents as the kernel writes them); the
    Ethernet mlx5_an0 of ND H200 v5 (azurehpc-health-checks conf/nd96isr_h200_v5.conf) is no HCA."""
    block = "".join(
        f"Infiniband device '{dev}' port 1 status:\n\tstate:\t 4: ACTIVE\n\tphys_state:\t 5: LinkUp\n"
        f"\trate:\t {rate}\n\tlink_layer:\t {layer}\n"
        for dev, rate, layer in [("mlx5_an0", "100 Gb/sec (4X EDR)", "Ethernet"),
                                 ("mlx5_ib0", "400 Gb/sec (4X NDR)", "InfiniBand"),
                                 ("mlx5_ib1", "200 Gb/sec (2X NDR)", "InfiniBand")])
    ports = parse_ports(block)
    assert [p.device for p in infiniband_ports(ports)] == ["mlx5_ib0", "mlx5_ib1"]
    assert [p.rate_gbits for p in ports] == [100.0, 400.0, 200.0]
    assert parse_ports("") == ()


def test_nvidia_smi_list():
    gpus = parse_gpus(real("nvidia-smi-L_akash-provider-configs-12.txt"))
    assert [(g.index, g.name) for g in gpus] == [(0, "Quadro RTX 4000"), (1, "Quadro RTX 4000")]
    assert gpus[0].uuid == "GPU-c7b57be0-94ff-d352-a59b-d0ee00aeed43"


# --- sections -----------------------------------------------------------------------------------
def marked_log(reference: Path) -> str:
    """A doctor log assembled from real outputs: Azure's 2-node A100 all-reduce, a single-node H200
    run, Azure's ib_write_bw between two ND A100 v4 nodes, the HC44rs ibstatus."""
    ref = reference / "nccl-tests"
    pair = (ref / "sample-output_azure-aks-rdma-infiniband_expected-output.txt").read_text()
    node = (ref / "h200x2_single-node_nccl-tests-2.19.6_8B-8G.txt").read_text()
    bw = real("perftest_ib_write_bw_ndv4_aks-rdma-infiniband.txt")
    ibstatus = real(HC44.name).split("\nibv_devinfo\n")[0]
    m = sections.marker
    return "\n".join([
        "[nccl-launcher 10:00:00] worker a: sshd answers",
        m("allreduce", hosts=["a", "b"]), pair,
        m("doctor", mode="auto", run="yes", reason="allreduce-below-pass-line", busbw_gbps="120.00",
          pass_gbps="181.39", budget_s=900),
        m("node", host="a", check="hca"), ibstatus,
        m("node", host="a", check="gpus"), "GPU 0: NVIDIA H200 (UUID: GPU-1)",
        m("node", host="a", check="allreduce"), node,
        m("hca-bw", hosts=["a", "b"], hca="mlx5_0"), bw,
        m("hca-bw", hosts=["a", "b"], hca="mlx5_1"), "Couldn't connect to b:18516",
        m("doctor-end", elapsed_s=212, budget_s=900),
    ])


def test_split_and_read_a_marked_log(reference):
    parts = sections.split(marked_log(reference))
    assert [s.name for s in parts] == [None, "allreduce", "doctor", "node", "node", "node", "hca-bw", "hca-bw",
                                       "doctor-end"]
    assert parts[1].hosts() == ("a", "b") and parts[1].line == 2
    run = sections.read_doctor(parts)
    assert (run.mode, run.ran, run.reason, run.finished, run.elapsed_s, run.budget_s) == (
        "auto", True, "allreduce-below-pass-line", True, 212, 900)
    assert run.decision == {"busbw_gbps": "120.00", "pass_gbps": "181.39", "budget_s": "900"}
    (node,) = run.nodes
    assert node.host == "a" and node.gpus == 1 and node.ports[0].rate_gbits == 100.0
    assert node.allreduce_busbw_gbps is not None and node.allreduce_failure is None
    ok, failed = run.hca_bws
    assert (ok.device, ok.bw_gbits) == ("mlx5_0", pytest.approx(196.55))  # BW average at 8 MiB, Gb/s
    assert failed.bw_gbits is None and "Couldn't connect" in failed.failure


def test_the_all_reduce_section_is_what_is_judged(reference):
    text = sections.allreduce_text(marked_log(reference))
    assert "worker a: sshd answers" in text and "Couldn't connect" not in text
    assert "RDMA_Write" not in text and "NVIDIA H200" not in text
    plain = "no markers here\n"
    assert sections.allreduce_text(plain) == plain and not sections.has_markers(plain)


def test_a_marker_needs_its_exact_prefix():
    assert [s.name for s in sections.split("# aks-infiniband pair round=1 hosts=a,b\n")] == ["pair"]
    assert [s.name for s in sections.split("#aks-infiniband pair\n# aks-infiniband Pair x\n")] == [None]


# --- the launcher's real output (recorded on 2 x H200 with fake hosts; the file's first line) ----
RECORDED = "doctor-launcher_always-4x1_h200x2-fake-hosts.log"


def test_a_recorded_doctor_run_reads_back():
    """Real mpirun, nvidia-smi and all_reduce_perf under the launcher: 4 nodes checked, the three
    planned rounds of two concurrent pairs, no HCA listed (the machine has none), so no ib_write_bw."""
    run = sections.read_doctor(sections.split(real(RECORDED)))
    assert (run.mode, run.ran, run.finished, run.budget_s) == ("always", True, True, 150)
    assert [n.host for n in run.nodes] == [f"node-{i}" for i in range(4)]
    assert all(n.ports == () and n.gpus == 2 for n in run.nodes)  # nvidia-smi -L lists the host's 2 GPUs
    assert all(n.allreduce_busbw_gbps is None and n.allreduce_failure is None for n in run.nodes)  # 1 rank
    assert [(p.round, p.hosts) for p in run.pairs] == [
        (1, ("node-0", "node-3")), (1, ("node-1", "node-2")), (2, ("node-0", "node-2")), (2, ("node-1", "node-3")),
        (3, ("node-0", "node-1")), (3, ("node-2", "node-3"))]
    assert all(p.failure is None and 0 < p.busbw_gbps < 10 for p in run.pairs)  # NET/Socket between fake hosts
    assert [s["reason"] for s in run.skipped] == ["no-infiniband-hca-listed"] * 2


def test_a_recorded_doctor_run_judged_as_an_h200_pool_names_what_it_lacks(capsys):

    assert main(["report", str(DATA / RECORDED), "--sku", "Standard_ND96isr_H200_v5", "--nodes", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    reasons = {(s["host"], s["reason"].split(" (")[0]) for s in out["suspects"]}
    assert reasons == {(f"node-{i}", r) for i in range(4)
                       for r in ("0 of 8 InfiniBand HCA ports visible", "2 of 8 GPUs listed by nvidia-smi -L")}
    assert out["verdict"] == "FAIL"
    assert any("all 6 pairs are slow" in n for n in out["doctor"]["notes"])


def test_a_recorded_auto_run_that_passed_its_line_ran_no_doctor(capsys):

    log = DATA / "doctor-launcher_auto-pass-2x1_h200x2-fake-hosts.log"
    run = sections.read_doctor(sections.split(real(log.name)))
    assert (run.mode, run.ran, run.reason) == ("auto", False, "allreduce-passed")
    assert run.decision["busbw_gbps"] == "3.96" and run.decision["pass_gbps"] == "0.001"
    assert main(["report", str(log), "--nodes", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["suspects"] == [] and out["doctor"]["ran"] is False


MERGED = "doctor-launcher_auto-sockets-4x1_h200x2-fake-hosts_merged.log"


def test_the_merged_launcher_on_real_mpirun_runs_the_doctor_when_nccl_used_sockets(capsys):
    """The launcher as it ships (--tag-output, the NCCL log filter, INFO lines in the doctor's runs),
    recorded on real mpirun: `auto` saw TCP sockets in the condensed all-nodes lines although no
    bandwidth line was crossed on its own terms, ran the doctor, and the verdict names the cause."""
    text = real(MERGED)
    assert "[1,0]<stdout>:" in text  # --tag-output reached the log
    run = sections.read_doctor(sections.split(text))
    assert (run.mode, run.ran, run.reason, run.finished) == ("auto", True, "allreduce-sockets", True)
    assert len(run.nodes) == 4 and len(run.pairs) == 6
    assert main(["report", str(DATA / MERGED), "--sku", "Standard_ND96isr_H200_v5", "--nodes", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "FAIL" and out["transport"]["network"] == "Socket"
    assert out["reasons"][0].startswith("RDMA was not used")
    assert any("TCP sockets" in n and "fabric-wide" in n for n in out["doctor"]["notes"])


def test_the_documented_markers_are_the_ones_verify_reads():
    doc = (ROOT / "docs" / "fabric-doctor.md").read_text()
    table = doc.split("## The log: section markers")[1].split("\n## ")[0]
    documented = set(re.findall(r"^\| `([a-z-]+)[ `]", table, flags=re.M))
    assert documented == {sections.ALLREDUCE, sections.DOCTOR, sections.NODE, sections.PAIR, sections.HCA_BW,
                          sections.DOCTOR_SKIP, sections.DOCTOR_END}
    assert all(f"`{code}`" in table for code in sections.REASONS), "every reason code the launcher prints"
    launcher = (ROOT / "scripts" / "nccl-launcher.sh").read_text()
    skips = {"time-budget", "no-infiniband-hca-listed", "killed"}
    assert set(re.findall(r"reason=([a-z-]+)", launcher)) <= set(sections.REASONS) | skips
    assert all(f"`{code}`" in table for code in skips), "every reason a step is skipped for"


def test_a_marker_that_arrives_tagged_still_opens_its_section():
    """The launcher prints its markers untagged; one under mpirun's --tag-output still counts
    (verify.loglines.untag), and the section's tagged lines reach the parsers as they are."""
    text = f"[1,0]<stdout>:{sections.marker('pair', round=1, hosts=['a', 'b'])}\n[1,0]<stdout>:x\n"
    (section,) = sections.split(text)
    assert (section.name, section.hosts(), section.text) == ("pair", ("a", "b"), "[1,0]<stdout>:x")
    assert sections.has_markers(text)


# --- doctor logs with torsets, and with every pair below the line (issue 23) ---------------------
def doctor_log(hosts: list[str], rounds, busbw) -> str:
    """A launcher log with the planned pair sections: `busbw(a, b)` for each pair (nccl-tests rows
    from tests/nccl_logs.py, 8 GPUs a node)."""
    parts = [sections.marker("allreduce", hosts=hosts), launcher_log(hosts, 8),
             sections.marker("doctor", mode="always", run="yes", reason="mode-always", budget_s=900)]
    for r, pairs in enumerate(rounds, start=1):
        for a, b in pairs:
            parts += [sections.marker("pair", round=r, hosts=[hosts[a], hosts[b]]),
                      launcher_log([hosts[a], hosts[b]], 8, busbw_gbps=busbw(a, b))]
    parts.append(sections.marker("doctor-end", elapsed_s=60, budget_s=900))
    return "\n".join(parts) + "\n"


H100 = "Standard_ND96isr_H100_v5"


@pytest.mark.parametrize("bad_node", [None, 5])
def test_a_doctor_log_with_slow_cross_torset_pairs_reports_the_path_and_names_only_a_bad_node(bad_node):
    hosts = [f"node-{i}" for i in range(12)]
    torset_of = {i: f"torset-{i // 4}" for i in range(12)}  # three torsets of four
    healthy = doctor_checks.Expectations.for_sku(catalog.lookup(H100)).pair_slow_below_gbps * 1.1

    def busbw(a, b):
        slow_path = {torset_of[a], torset_of[b]} == {"torset-0", "torset-1"}
        return healthy / 2 if slow_path or bad_node in (a, b) else healthy

    log = doctor_log(hosts, doctor.plan_pairs(12, torsets=torset_of), busbw)
    torsets = {hosts[i]: t for i, t in torset_of.items()}
    found = doctor_report.assess(log, sku=H100, threshold_gbps=None, torsets=torsets)
    assert [s.host for s in found.diagnosis.suspects] == ([] if bad_node is None else [hosts[bad_node]])
    (path,) = [n for n in found.diagnosis.notes if n.startswith("the path between torset torset-0 and torset torset-1")]
    out = found.as_result().to_json()
    assert out["tiers"]["torset-0|torset-1"]["slow"] == 4
    assert out["tiers"]["within-torset"]["slow"] == (0 if bad_node is None else 3)
    assert "within-torset:" in doctor_report.text(found)
    # the same log read without the torsets names no torset (once: the log with the bad node, whose
    # notes name the most; a 12-node doctor log costs ~0.3 s a reading)
    if bad_node is not None:
        flat = doctor_report.assess(log, sku=H100, threshold_gbps=None)
        assert flat.as_result().to_json()["tiers"] == {} and not any("torset" in n for n in flat.diagnosis.notes)


def test_a_doctor_log_every_pair_below_the_line_one_node_ten_times_slower_names_it():
    hosts = [f"node-{i}" for i in range(4)]
    below = doctor_checks.Expectations.for_sku(catalog.lookup(H100)).pair_slow_below_gbps * 0.6
    log = doctor_log(hosts, doctor.plan_pairs(4), lambda a, b: below / 10 if 1 in (a, b) else below)
    found = doctor_report.assess(log, sku=H100, threshold_gbps=None)
    assert [s.host for s in found.diagnosis.suspects] == ["node-1"]
    assert any("whole fabric is below its line" in n for n in found.diagnosis.notes)
    assert "far below the other pairs" in found.diagnosis.suspects[0].reason
