"""The fabric doctor end to end, offline: the launcher (scripts/nccl-launcher.sh) with the job's own
environment on a fake cluster (tests/launcher_stubs.py), then `python -m verify report` on its
stdout. Asserts what the launcher ran (which mpirun, on which hosts, in which rounds) and who the
report names."""

from __future__ import annotations

import pytest

from core import defaults
from tests import launcher_stubs
from tests.doctor_launcher_runs import (
    HEALTHY,
    SKU,
    Run,
    flag,
    forwarded,
    host,
    launcher_env,
    run,
)
from verify import sections
from verify.launcher_env import transport_rules
from verify.verdict import pass_line_gbps


@pytest.fixture(scope="module")
def env4() -> dict[str, str]:
    return launcher_env(4)


@pytest.fixture(scope="module")
def env2() -> dict[str, str]:
    return launcher_env(2)


# --- the job's environment ------------------------------------------------------------------------
def test_the_job_hands_the_launcher_the_plan_and_the_lines_from_python(env4, env2):
    assert env4["DOCTOR"] == "auto" and env4["DOCTOR_SECONDS"] == str(defaults.DOCTOR_MINUTES * 60)
    # auto on two or more nodes: the all-nodes run decides, in the launcher; what the job knows it decides
    assert (env4["DOCTOR_RUN"], env4["DOCTOR_RUN_REASON"]) == ("by-result", "")
    assert launcher_stubs.doctor_mode("auto", 1) == {"DOCTOR": "auto", "DOCTOR_RUN": "no",
                                                     "DOCTOR_RUN_REASON": "single-node"}
    assert env4["DOCTOR_PAIR_ROUNDS"] == "0-3 1-2;0-2 1-3;0-1 2-3"  # verify.doctor.plan_pairs(4)
    assert env2["DOCTOR_PAIR_ROUNDS"] == ""  # two nodes: the all-nodes run is the pair
    assert (env2["DOCTOR_ALLREDUCE_PAIR"], env4["DOCTOR_ALLREDUCE_PAIR"]) == ("0-1", "")
    # verify.verdict.pass_line_gbps of the 4-node expectation; a pair is slow below the 2-node one
    line = pass_line_gbps(SKU.allreduce_expectation(4))
    assert float(env4["DOCTOR_PASS_BUSBW_GBPS"]) == pytest.approx(line, abs=0.005)
    assert line == SKU.allreduce_expectation(4).threshold_gbps  # derived: no WARN band above it
    assert float(env4["DOCTOR_PAIR_SLOW_BELOW_GBPS"]) == pass_line_gbps(SKU.allreduce_expectation(2))
    # Azure's single-node gate size for H100 (check_nccl_allreduce 460.0 1 16G); pairs at the run's -e
    assert env4["DOCTOR_NODE_ARGS"] == "-b 16G -e 16G -f 2 -g 1"
    assert env4["DOCTOR_PAIR_ARGS"] == "-b 16G -e 16G -f 2 -g 1"
    # the transport rules the launcher checks under auto: GDRDMA on ND sizes, the catalog's HCA count
    assert env4["DOCTOR_RUN_IF"] == transport_rules(True, SKU.ib_hcas_per_vm)
    assert [r.split("\t")[0] for r in env4["DOCTOR_RUN_IF"].splitlines()] == [
        "allreduce-sockets", "allreduce-no-gdrdma", "allreduce-fewer-hcas", "allreduce-fewer-hcas"]
    assert env4["DOCTOR_RUN_IF"].splitlines()[2].endswith("\t8")


# --- done when: a healthy log has no suspects, and under auto the doctor did not run ---------------
def test_healthy_cluster_under_auto_runs_no_doctor_and_names_no_one(tmp_path, env4):
    r = run(tmp_path, env4, 4)
    assert r.done.returncode == 0, r.done.stderr
    assert len(r.calls) == 1  # the all-nodes run only
    (decision,) = r.named(sections.DOCTOR)
    assert decision.attrs["run"] == "no" and decision.attrs["reason"] == "allreduce-passed"
    assert float(decision.attrs["busbw_gbps"]) == pytest.approx(float(HEALTHY["STUB_ALL_BUSBW"]), abs=0.01)
    assert decision.attrs["pass_gbps"] == env4["DOCTOR_PASS_BUSBW_GBPS"]
    assert not r.named(sections.NODE) and not r.named(sections.PAIR) and not r.named(sections.DOCTOR_END)
    report = r.report()
    assert report["verdict"] == "PASS"
    assert report["suspects"] == []
    assert report["doctor"]["ran"] is False and report["doctor"]["mode"] == "auto"


# --- done when: a log whose pairs show one slow node names that node --------------------------------
@pytest.fixture(scope="module")
def slow_node_2(tmp_path_factory, env4) -> Run:
    """Four nodes, host 2's fabric slow: one launcher run that two tests read (it is the longest here)."""
    return run(tmp_path_factory.mktemp("slow-node-2"), env4, 4, STUB_SLOW_HOSTS=host(2))


def test_one_slow_node_among_four_is_named(slow_node_2):
    r = slow_node_2
    assert r.done.returncode == 0, r.done.stderr
    (decision,) = r.named(sections.DOCTOR)
    assert (decision.attrs["run"], decision.attrs["reason"]) == ("yes", "allreduce-below-pass-line")
    # per node: HCAs, GPUs and a single-node all-reduce on exactly that node's 8 GPUs
    assert {(s.attrs["host"], s.attrs["check"]) for s in r.named(sections.NODE)} == {
        (host(i), c) for i in range(4) for c in ("hca", "gpus", "allreduce")}
    node_runs = [c for c in r.calls[1:] if c[c.index("--host") + 1].count(",") == 0]
    assert sorted(c[c.index("--host") + 1] for c in node_runs) == sorted(f"{host(i)}:8" for i in range(4))
    assert all(c[c.index("-np") + 1] == "8" for c in node_runs)
    # every pair run as the all-nodes run: tagged, the size's map/bind, the job's environment
    # (NCCL_DEBUG=INFO: each run's transport is evidence too)
    all_nodes = r.calls[0]
    assert "NCCL_TOPO_FILE" in forwarded(all_nodes)  # the job mounts ND v5's topology file
    assert not [v for v in forwarded(all_nodes) if v.endswith("_ERE")]  # the launcher's own patterns stay here
    pair_runs = [c for c in r.calls[1:] if c not in node_runs]
    for c in pair_runs:
        assert "--tag-output" in c and forwarded(c) == forwarded(all_nodes)
        assert flag(c, "--map-by") == flag(all_nodes, "--map-by") and flag(c, "--bind-to") == "core"
    # a node's run as Azure's health check runs it (azure_nccl_allreduce.nhc): NUMA binding and
    # NCCL_TOPO_FILE empty (its fix for spurious H100/H200 failures, azurehpc-health-checks#142/#143)
    for c in node_runs:
        assert "--tag-output" in c and (flag(c, "--map-by"), flag(c, "--bind-to")) == ("ppr:8:node", "numa")
        assert forwarded(c) == [v for v in forwarded(all_nodes) if v != "NCCL_TOPO_FILE"] + ["NCCL_TOPO_FILE="]
    # pairs: the planned rounds, N/2 disjoint pairs each, 16 ranks each
    rounds: dict[str, list[tuple[str, ...]]] = {}
    for s in r.named(sections.PAIR):
        rounds.setdefault(s.attrs["round"], []).append(s.hosts())
    assert rounds == {"1": [(host(0), host(3)), (host(1), host(2))], "2": [(host(0), host(2)), (host(1), host(3))],
                      "3": [(host(0), host(1)), (host(2), host(3))]}
    # per-HCA ib_write_bw on at most 2 slow pairs, every IB HCA of the pair
    bw = r.named(sections.HCA_BW)
    assert {s.hosts() for s in bw} == {(host(1), host(2)), (host(0), host(2))}
    assert sorted({s.attrs["hca"] for s in bw}) == [f"mlx5_ib{i}" for i in range(8)]
    (end,) = r.named(sections.DOCTOR_END)
    assert int(end.attrs["elapsed_s"]) <= int(end.attrs["budget_s"]) == 900
    # the markers are the ones verify reads, in order
    names = [s.name for s in r.sections if s.name]
    assert names[:2] == [sections.ALLREDUCE, sections.DOCTOR] and names[-1] == sections.DOCTOR_END
    assert set(names) == {sections.ALLREDUCE, sections.DOCTOR, sections.NODE, sections.PAIR, sections.HCA_BW,
                          sections.DOCTOR_END}
    assert r.done.stdout.splitlines()[0] == sections.marker("allreduce", hosts=[host(i) for i in range(4)])

    report = r.report()
    assert [(s["host"], s["hca"]) for s in report["suspects"]] == [(host(2), None)]
    suspect = report["suspects"][0]
    assert "node common to the slow pairs" in suspect["reason"]
    assert {tuple(p["hosts"]) for p in suspect["evidence"]["slow_pairs"]} == {
        (host(1), host(2)), (host(0), host(2)), (host(2), host(3))}
    half = float(HEALTHY["STUB_PAIR_BUSBW"]) / 2
    assert all(p["busbw_gbps"] == pytest.approx(half, abs=0.01) for p in suspect["evidence"]["slow_pairs"])
    assert report["doctor"]["ran"] is True and report["doctor"]["finished"] is True


# --- done when: a node whose HCA runs at 200 instead of 400 Gb/s is named with that HCA -------------
def test_an_hca_at_200_is_named_with_the_hca(tmp_path, env4):
    bad = {1: {"degraded": {"mlx5_ib3": "200 Gb/sec (2X NDR)"}, "slow_hca": ("mlx5_ib3",)}}
    # ib_write_bw on the first slow pair only (1-2, round 1): the other end is not named from it
    r = run(tmp_path, env4, 4, setup=bad, STUB_SLOW_HOSTS=host(1), DOCTOR_HCA_PAIRS="1")
    assert r.done.returncode == 0, r.done.stderr
    assert {s.hosts() for s in r.named(sections.HCA_BW)} == {(host(1), host(2))}
    report = r.report()
    named = {(s["host"], s["hca"]): s for s in report["suspects"]}
    assert set(named) == {(host(1), None), (host(1), "mlx5_ib3")}
    hca = named[(host(1), "mlx5_ib3")]
    assert "runs at 200 Gb/s, expected 400 (NDR)" in hca["reason"] and hca["verdict"] == "FAIL"
    assert hca["evidence"]["rate"] == "200 Gb/sec (2X NDR)"
    assert hca["evidence"]["ib_write_bw"]["bw_gbits"] == 196.02  # the per-HCA figure joins the evidence
    assert report["verdict"] == "FAIL"  # the worst finding


def test_always_finds_a_degraded_hca_although_the_all_nodes_run_passes(tmp_path, env2):
    bad = {1: {"degraded": {"mlx5_ib6": "200 Gb/sec (4X HDR)"}}}
    r = run(tmp_path, env2, 2, setup=bad, **launcher_stubs.doctor_mode("always", 2))
    assert r.done.returncode == 0, r.done.stderr
    assert r.named(sections.DOCTOR)[0].attrs["reason"] == "mode-always"
    assert not r.named(sections.PAIR) and not r.named(sections.HCA_BW)  # no slow pair to measure
    report = r.report()
    assert [(s["host"], s["hca"]) for s in report["suspects"]] == [(host(1), "mlx5_ib6")]
    assert report["verdict"] == "FAIL"  # the all-nodes run alone would pass: the worst finding wins


def test_two_nodes_the_all_nodes_run_is_the_pair_and_the_hca_listing_picks_the_end(tmp_path, env2):
    bad = {1: {"degraded": {"mlx5_ib5": "200 Gb/sec (2X NDR)"}, "slow_hca": ("mlx5_ib5",)}}
    r = run(tmp_path, env2, 2, setup=bad, STUB_SLOW_HOSTS=host(1))
    assert r.done.returncode == 0, r.done.stderr
    assert not r.named(sections.PAIR)
    assert {s.hosts() for s in r.named(sections.HCA_BW)} == {(host(0), host(1))}
    report = r.report()
    assert [(s["host"], s["hca"]) for s in report["suspects"]] == [(host(1), "mlx5_ib5")]
    assert any("cannot be told apart" in n for n in report["doctor"]["notes"])


# --- when it runs, and for how long -----------------------------------------------------------------
def test_never_runs_no_doctor_even_when_slow(tmp_path, env4):
    r = run(tmp_path, env4, 4, STUB_SLOW_HOSTS=host(0), **launcher_stubs.doctor_mode("never", 4))
    assert len(r.calls) == 1
    assert r.named(sections.DOCTOR)[0].attrs["reason"] == "mode-never"
    assert r.report()["suspects"] == []


def test_a_spent_budget_skips_every_step_and_still_ends(tmp_path, env4):
    r = run(tmp_path, env4, 4, STUB_SLOW_HOSTS=host(0), DOCTOR_SECONDS="0")
    assert r.done.returncode == 0, r.done.stderr
    assert len(r.calls) == 1
    assert [s.attrs["step"] for s in r.named(sections.DOCTOR_SKIP)] == ["node-checks", "pairs-round-1",
                                                                       "pairs-round-2", "pairs-round-3"]
    assert r.named(sections.DOCTOR_END)
    report = r.report()
    assert report["suspects"] == [] and len(report["doctor"]["skipped"]) == 4


def test_a_failed_all_nodes_run_runs_the_doctor_and_keeps_its_exit_status(tmp_path, env2):
    r = run(tmp_path, env2, 2, MPIRUN_EXIT="7", DOCTOR_HCA_PAIRS="0")  # no ib_write_bw: not asserted here
    assert r.done.returncode == 7
    assert r.named(sections.DOCTOR)[0].attrs["reason"] == "allreduce-failed"
    assert r.named(sections.NODE)  # the per-node checks ran


def test_one_at_a_time_finds_the_same_node(tmp_path, env4):
    """DOCTOR_PARALLEL=1: node checks and pairs one after the other (the batches that bound the
    launcher pod's load), and no ib_write_bw (DOCTOR_HCA_PAIRS=0): the same suspect."""
    r = run(tmp_path, env4, 4, STUB_SLOW_HOSTS=host(1), DOCTOR_PARALLEL="1", DOCTOR_HCA_PAIRS="0")
    assert r.done.returncode == 0, r.done.stderr
    assert len(r.named(sections.PAIR)) == 6 and not r.named(sections.HCA_BW)
    assert [(s["host"], s["hca"]) for s in r.report()["suspects"]] == [(host(1), None)]


# --- the transport: NCCL's INFO lines in the all-nodes run and in each pair -------------------------
def nccl_info_lines(section: sections.Section) -> list[str]:
    """NCCL's own INFO lines (not the filter's count line, "[nccl-launcher] NCCL INFO lines: ...")."""
    return [line for line in section.text.splitlines() if " NCCL INFO " in line and not line.startswith("[nccl-")]


def test_the_doctors_runs_keep_one_line_per_host_and_transport_path(slow_node_2):
    r = slow_node_2
    (allreduce,) = r.named(sections.ALLREDUCE)
    pairs = r.named(sections.PAIR)
    assert all(line.startswith("[1,") for line in nccl_info_lines(allreduce))  # --tag-output, untouched
    # the all-nodes run keeps every connection line (4 channels x 4 ring edges x send/receive)...
    assert sum("] via NET/IB/" in line for line in nccl_info_lines(allreduce)) == 32
    for pair in pairs:
        connections = [line.split(" NCCL INFO ")[1].split("] ", 1)[1] for line in nccl_info_lines(pair)
                       if " via NET/" in line]
        # ...a pair's only the distinct ones per host: [send]/[receive] x NET/IB/0, NET/IB/1
        assert len(connections) == 8 and "via P2P/" not in pair.text
        assert sections.pair_run(1, pair.hosts(), pair.text).transport == "NET/IB GDRDMA, 8 HCAs per node"
    report = r.report()
    assert all(p["transport"] == "NET/IB GDRDMA, 8 HCAs per node" for p in report["doctor"]["pairs"])


def test_sockets_on_one_node_run_the_doctor_under_auto_and_name_that_node(tmp_path, env4):
    """The bandwidth would pass; NCCL on host 1 fell back to TCP sockets: the launcher sees it in the
    condensed lines, runs the doctor, and its pair runs name host 1 (its partners used IB)."""
    r = run(tmp_path, env4, 4, STUB_SOCKET_HOSTS=host(1))
    assert r.done.returncode == 0, r.done.stderr
    assert r.named(sections.DOCTOR)[0].attrs["reason"] == "allreduce-sockets"
    report = r.report()
    assert report["verdict"] == "FAIL"
    assert report["reasons"][0].startswith("RDMA was not used")  # the all-nodes verdict's own rule
    (suspect,) = [s for s in report["suspects"] if "sockets" in s["reason"]]
    assert (suspect["host"], suspect["hca"], suspect["verdict"]) == (host(1), None, "FAIL")
    assert {tuple(p["hosts"]) for p in suspect["evidence"]["pairs"]} == {
        (host(1), host(2)), (host(1), host(3)), (host(0), host(1))}
    assert all(p["transport"].startswith("TCP sockets") for p in suspect["evidence"]["pairs"])


def test_no_gpudirect_rdma_on_one_node_runs_the_doctor_and_names_it(tmp_path, env4):
    r = run(tmp_path, env4, 4, STUB_NO_GDR_HOSTS=host(3))
    assert r.named(sections.DOCTOR)[0].attrs["reason"] == "allreduce-no-gdrdma"
    report = r.report()
    assert [(s["host"], s["hca"]) for s in report["suspects"]] == [(host(3), None)]
    assert "without GPUDirect RDMA" in report["suspects"][0]["reason"]


def test_sockets_everywhere_is_a_note_not_four_suspects(tmp_path, env4):
    r = run(tmp_path, env4, 4, STUB_SOCKET_HOSTS=",".join(host(i) for i in range(4)))
    report = r.report()
    assert report["suspects"] == []
    assert any(n.startswith("every node checked (4): NCCL used TCP sockets") for n in report["doctor"]["notes"])


def test_fewer_hcas_opened_runs_the_doctor(tmp_path, env4):
    rules = transport_rules(True, 9)  # the stub's hosts open 8
    r = run(tmp_path, env4, 4, DOCTOR_RUN_IF=rules, DOCTOR_SECONDS="0")  # the decision only
    assert r.named(sections.DOCTOR)[0].attrs["reason"] == "allreduce-fewer-hcas"


def test_the_decision_reads_a_largest_row_split_by_a_glued_nccl_line(tmp_path, env2):
    """NCCL (lazy connection, 2.22+) logs between the largest row's first five columns and the rest:
    the launcher's filter splits them, and the auto decision still reads that row's busbw."""
    slow = float(env2["DOCTOR_PASS_BUSBW_GBPS"]) / 2
    size = 64 << 30  # above the stub's own rows: the largest
    glued = tmp_path / "glued.out"
    glued.write_text(
        f"[1,0]<stdout>: {size:>12d}  {size // 4:>12d}     float     sum      -1{host(0).split('.')[0]}:1000:1001 [0] "
        "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
        f"[1,0]<stdout>:  100000.0  {slow:6.2f}  {slow:6.2f}      0  100000.0  {slow:6.2f}  {slow:6.2f}      0\n")
    r = run(tmp_path, env2, 2, MPIRUN_OUTPUT=str(glued), DOCTOR_SECONDS="0")  # the decision only
    assert r.done.returncode == 0, r.done.stderr
    (decision,) = r.named(sections.DOCTOR)
    assert (decision.attrs["reason"], float(decision.attrs["busbw_gbps"])) == ("allreduce-below-pass-line", slow)


# --- a step cut short by the time budget is skipped, not blamed ------------------------------------
