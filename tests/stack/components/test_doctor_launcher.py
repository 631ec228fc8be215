"""The fabric doctor end to end, offline: the launcher (scripts/nccl-launcher.sh) with the job's own
environment on a fake cluster (tests/launcher_stubs.py), then `python -m verify report` on its
stdout. Asserts what the launcher ran (which mpirun, on which hosts, in which rounds) and who the
report names."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import dev_kubernetes_half

from components import mpi_job, nccl_job
from core import catalog, defaults
from tests import launcher_stubs
from tests.paths import ROOT, TESTS
from verify import sections
from verify.__main__ import main as verify_main
from verify.launcher_env import transport_rules
from verify.verdict import pass_line_gbps

LAUNCHER = ROOT / "scripts" / "nccl-launcher.sh"
H100 = "Standard_ND96isr_H100_v5"
SKU = catalog.lookup(H100)
# what the stub mpirun measures on a healthy fabric: the catalog's baselines (tests/launcher_stubs.py)
HEALTHY = {"STUB_ALL_BUSBW": f"{SKU.allreduce_expectation(4).baseline_gbps}",
           "STUB_PAIR_BUSBW": f"{SKU.allreduce_expectation(2).baseline_gbps}",
           "STUB_NODE_BUSBW": f"{SKU.allreduce_1_node.threshold_gbps + 10}"}
JOB = "kubernetes:batch.volcano.sh/v1alpha1:Job"


def launcher_env(nodes: int) -> dict[str, str]:
    """The launcher container's environment, from the Kubernetes half of the stack (which declares the
    job exactly as the whole stack does: tests/stack/test_stack_parts.py); two nodes is the dev stack."""
    stack = dev_kubernetes_half(ibPool={"vmSize": H100, "nodeCount": nodes})
    (job,) = [r for r in stack.resources if r.type == JOB]
    master = next(t for t in job.inputs["spec"]["tasks"] if t["name"] == "mpimaster")
    return {e["name"]: e["value"] for e in master["template"]["spec"]["containers"][0]["env"]}


@pytest.fixture(scope="module")
def env4() -> dict[str, str]:
    return launcher_env(4)


@pytest.fixture(scope="module")
def env2() -> dict[str, str]:
    return launcher_env(2)


def forwarded(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == "-x"]


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def host(i: int) -> str:
    return f"nccl-allreduce-mpiworker-{i}.nccl-allreduce"


class Run:
    def __init__(self, root: Path, done: subprocess.CompletedProcess, nodes: int):
        self.root, self.done, self.nodes = root, done, nodes
        self.sections = sections.split(done.stdout)

    @property
    def calls(self) -> list[list[str]]:
        return launcher_stubs.calls(self.root)

    def named(self, name: str) -> list[sections.Section]:
        return [s for s in self.sections if s.name == name]

    def report(self) -> dict:
        log = self.root / "launcher.log"
        log.write_text(self.done.stdout + self.done.stderr)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert verify_main(["report", str(log), "--sku", H100, "--nodes", str(self.nodes), "--json"]) == 0
        return json.loads(out.getvalue())


def run(tmp_path: Path, env: dict[str, str], nodes: int, setup=None, **extra: str) -> Run:
    root = launcher_stubs.install(tmp_path, fake_timeout="STUB_TIMEOUT_ON" in extra)
    for i in range(nodes):
        launcher_stubs.add_node(root, host(i), **((setup or {}).get(i, {})))
    hostfile = root / "mpiworker.host"
    hostfile.write_text("".join(host(i) + "\n" for i in range(nodes)))
    run_env = launcher_stubs.env_for(root, env, hostfile, **{**HEALTHY, **extra})
    done = subprocess.run(["bash", str(LAUNCHER)], env=run_env, capture_output=True, text=True, timeout=120)
    return Run(root, done, nodes)


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
def test_steps_killed_by_the_budget_are_skipped_steps_not_suspects(tmp_path, env4):
    """`timeout` ends a node's all-reduce, its HCA listing and a pair with status 124: the report
    records skipped steps and names only the slow node (before: "no result rows", a FAIL suspect,
    and a slow pair)."""
    cut = [f"--host {host(1)}:8 -x", f"{host(3)} for p in", f"--host {host(0)}:8,{host(3)}:8 "]
    r = run(tmp_path, env4, 4, STUB_SLOW_HOSTS=host(2), STUB_TIMEOUT_ON="|".join(cut), DOCTOR_HCA_PAIRS="0")
    assert r.done.returncode == 0, r.done.stderr
    skipped = {(s.attrs["step"], s.attrs.get("host") or s.attrs.get("hosts"), s.attrs.get("check"))
               for s in r.named(sections.DOCTOR_SKIP)}
    assert skipped == {("node", host(1), "allreduce"), ("node", host(3), "hca"),
                       ("pair", f"{host(0)},{host(3)}", None)}
    assert all(s.attrs["reason"] == "time-budget" for s in r.named(sections.DOCTOR_SKIP))
    # what each step printed before `timeout` ended it follows its marker
    assert all("partial output, then killed" in s.text for s in r.named(sections.DOCTOR_SKIP))
    report = r.report()
    assert [(s["host"], s["hca"]) for s in report["suspects"]] == [(host(2), None)]
    assert len(report["doctor"]["skipped"]) == 3 and not report["doctor"]["notes"]


def test_an_hca_cut_short_by_the_budget_is_skipped_one_at_its_own_limit_fails(tmp_path, env2):
    bad = {1: {"slow_hca": ("mlx5_ib2",)}}
    budget = run(tmp_path / "budget", env2, 2, setup=bad, STUB_SLOW_HOSTS=host(1), STUB_TIMEOUT_ON="-d mlx5_ib5 ",
                 PERFTEST_SECONDS="100000")  # every limit is then what is left of the budget
    assert [(s.attrs["step"], s.attrs["hca"]) for s in budget.named(sections.DOCTOR_SKIP)] == [("hca-bw", "mlx5_ib5")]
    assert ("mlx5_ib5" not in {s["hca"] for s in budget.report()["suspects"]})
    own = run(tmp_path / "own", env2, 2, setup=bad, STUB_SLOW_HOSTS=host(1), STUB_TIMEOUT_ON="-d mlx5_ib5 ")
    assert not own.named(sections.DOCTOR_SKIP)
    assert "mlx5_ib5" in {s["hca"] for s in own.report()["suspects"]}  # 60 s for one HCA is its failure


def test_a_spent_budget_on_two_nodes_skips_the_hcas_too_and_keeps_the_exit_status(tmp_path, env2):
    """Two nodes: the all-nodes run is the slow pair, but the node checks that list its HCAs were
    skipped: nothing to measure, and the launcher still exits with mpirun's status."""
    r = run(tmp_path, env2, 2, STUB_SLOW_HOSTS=host(1), DOCTOR_SECONDS="0")
    assert r.done.returncode == 0, r.done.stderr
    assert [s.attrs["step"] for s in r.named(sections.DOCTOR_SKIP)] == ["node-checks", "hca-bw"]
    assert r.named(sections.DOCTOR_END)


# --- per-HCA ib_write_bw as Azure's health checks measure their gates -------------------------------
def bw_calls(r: Run) -> list[tuple[str, list[str]]]:
    lines = (r.root / "ib_write_bw.calls").read_text().splitlines()
    return [(line.split("\t")[0], line.split("\t")[1].split()) for line in lines]


def test_ib_write_bw_from_gpu_memory_on_the_hcas_numa_node_with_azures_flags(tmp_path, env2):
    """ND H100 v5's gate (check_ib_bw_gdr 380) is GPU memory: azure_ib_write_bw_gdr.nhc's flags and
    --use_cuda=<the HCA's index>, bound to the HCA's NUMA node; a slow HCA is a FAIL suspect."""
    assert env2["PERFTEST_MEMORY"] == SKU.p2p.gate_memory == "cuda"
    setup = {i: {"numa_node": 0, **({"slow_hca": ("mlx5_ib2",)} if i == 1 else {})} for i in range(2)}
    r = run(tmp_path, env2, 2, setup=setup, STUB_SLOW_HOSTS=host(1))
    calls = bw_calls(r)
    assert len(calls) == 16  # a server and a client per HCA
    for _, argv in calls:
        dev = argv[argv.index("-d") + 1]
        assert argv[argv.index("-s") + 1] == "8388608"
        assert {"-x", "-F", "--report_gbits", "--perform_warm_up"} <= set(argv) and "-q" not in argv
        assert f"--use_cuda={int(dev.removeprefix('mlx5_ib'))}" in argv  # mlx5_ib0..7 in name order
    sections_bw = r.named(sections.HCA_BW)
    assert {s.attrs["memory"] for s in sections_bw} == {"cuda"}
    assert {b["memory"] for b in r.report()["doctor"]["hca_bw"]} == {"cuda"}
    cpus = Path("/sys/devices/system/node/node0/cpulist")
    if cpus.exists():  # the worker bound ib_write_bw to the HCA's NUMA node, and said how
        bound = {"numactl -N 0 -m 0", f"taskset -c {cpus.read_text().strip()}"}
        assert all(any(f"NUMA node 0, binding: {b}" in s.text for b in bound) for s in sections_bw)
    slow = [s for s in r.report()["suspects"] if s["hca"] == "mlx5_ib2"]  # on both ends: two nodes
    assert slow and all(s["verdict"] == "FAIL" and s["evidence"]["memory"] == s["evidence"]["gate_memory"] == "cuda"
                        for s in slow)


def test_ib_write_bw_from_host_memory_is_judged_against_the_gdr_gate_as_a_warning(tmp_path, env2):
    """Host memory (PERFTEST_MEMORY=host): azure_ib_write_bw_non_gdr.nhc's flags; Azure publishes no
    host-memory gate for ND sizes, so below the GDR gate is a WARN suspect, not a FAIL."""
    r = run(tmp_path, env2, 2, setup={1: {"slow_hca": ("mlx5_ib2",)}}, STUB_SLOW_HOSTS=host(1),
            PERFTEST_MEMORY="host", PERFTEST_ARGS=nccl_job.PERFTEST_ARGS["host"])
    for _, argv in bw_calls(r):
        assert argv[argv.index("-s") + 1] == "1048576" and argv[argv.index("-D") + 1] == "10"
        assert argv[argv.index("-q") + 1] == "2" and "--perform_warm_up" in argv
        assert not any(a.startswith("--use_cuda") for a in argv)
    slow = [s for s in r.report()["suspects"] if s["hca"] == "mlx5_ib2"]
    assert slow and all(s["verdict"] == "WARN" and "none is published from host memory" in s["reason"] for s in slow)


# --- a step cut short keeps what it printed ---------------------------------------------------------
def test_a_round_stopped_by_a_signal_keeps_every_line_its_steps_printed(tmp_path, env4):
    """SIGTERM (the pods' deadline) while a pair of round 1 runs: the sections printed before stay,
    the other pair of that round is printed as it ended, and the running pair's lines so far follow
    a doctor-skip marker (reason=killed); the report names no one from it and says it did not
    finish. Before, a round's output reached the log only when the whole round had ended."""
    nodes = 4
    root = launcher_stubs.install(tmp_path)
    for i in range(nodes):
        launcher_stubs.add_node(root, host(i))
    hostfile = root / "mpiworker.host"
    hostfile.write_text("".join(host(i) + "\n" for i in range(nodes)))
    stuck = f"--host {host(0)}:8,{host(3)}:8 "  # round 1's first pair (0-3 1-2)
    run_env = launcher_stubs.env_for(root, env4, hostfile, **HEALTHY, STUB_SLOW_HOSTS=host(2),
                                     **launcher_stubs.doctor_mode("always", 4), STUB_HANG_ON=stuck,
                                     STUB_HANG_SECONDS="60")
    out, err = root / "launcher.stdout", root / "launcher.stderr"
    # its own process group, so that the stuck stub it leaves behind is ended with it below
    with out.open("w") as o, err.open("w") as e:
        launcher = subprocess.Popen(["bash", str(LAUNCHER)], env=run_env, stdout=o, stderr=e, start_new_session=True)
    try:
        # the stub says when the stuck pair is running, and its lines so far have passed the launcher's
        # filter into the pair's output when they are in that file; the round's other pair has ended when
        # its status file is there too (the launcher's work directory, root/tmp: launcher_stubs.env_for)
        def ready() -> bool:
            work = root / "tmp"
            printed = [f.read_text() for f in work.glob("*/pair.1.0-3")]
            return ((root / "hanging").exists() and any("Using network IB" in text for text in printed)
                    and bool(list(work.glob("*/pair.1.1-2.status"))))

        deadline = time.monotonic() + 60
        while not ready():
            assert launcher.poll() is None and time.monotonic() < deadline, "the round did not reach its stuck pair"
            time.sleep(0.02)
        launcher.send_signal(signal.SIGTERM)
        launcher.wait(timeout=60)
    finally:
        # the launcher's group, and the stuck stub's (coreutils timeout puts its command in a group of its own)
        stub = (root / "hanging").read_text().split() if (root / "hanging").exists() else []
        for group in [launcher.pid, *(os.getpgid(int(p)) for p in stub if Path(f"/proc/{p}").exists())]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        launcher.wait()
    stdout, stderr = out.read_text(), err.read_text()
    assert launcher.returncode == 143, stderr
    r = Run(root, subprocess.CompletedProcess(launcher.args, launcher.returncode, stdout, stderr), nodes)
    assert len(r.named(sections.NODE)) == 3 * nodes  # printed before the round
    (other,) = r.named(sections.PAIR)  # the round's other pair, which ended
    assert other.hosts() == (host(1), host(2)) and other.attrs["round"] == "1"
    (killed,) = r.named(sections.DOCTOR_SKIP)
    assert killed.attrs == {"step": "pair", "round": "1", "hosts": f"{host(0)},{host(3)}", "reason": "killed"}
    assert "NET/IB : Using" in killed.text and "Using network IB" in killed.text  # what it printed so far
    assert not r.named(sections.DOCTOR_END)
    report = r.report()
    assert report["doctor"]["finished"] is False
    assert {(s["step"], s["reason"]) for s in report["doctor"]["skipped"]} == {("pair", "killed")}
    assert host(0) not in {s["host"] for s in report["suspects"]} and host(3) not in {
        s["host"] for s in report["suspects"]}
    assert any("did not finish" in reason for reason in report["reasons"])


# --- one source per setting -------------------------------------------------------------------------
def test_the_sshd_wait_has_one_source(tmp_path, env4):
    assert env4["SSH_WAIT_SECONDS"] == str(mpi_job.SSH_WAIT_SECONDS)
    for script in (LAUNCHER.read_text(), (LAUNCHER.parent / "p2p-launcher.sh").read_text()):
        assert not re.search(r"SSH_WAIT_SECONDS:-[0-9]", script)  # no default of its own
    env = {k: v for k, v in env4.items() if k != "SSH_WAIT_SECONDS"}
    r = run(tmp_path, env, 4)
    assert r.done.returncode == 2 and "SSH_WAIT_SECONDS is not set" in r.done.stderr
    assert not (tmp_path / "mpirun.calls").exists()


# Every input the job sets (components/nccl_job.py): none has a default in the script.
REQUIRED = ("ALL_REDUCE_BIN", "HOSTFILE", "MPI_HOME", "MPI_MAP_BIND", "SSH_POLL_SECONDS", "POD_IFNAME",
            "LAUNCHER_NCCL_LOG", "DOCTOR", "DOCTOR_RUN", "DOCTOR_RUN_REASON", "DOCTOR_SECONDS",
            "DOCTOR_PASS_BUSBW_GBPS")
# Read only when the doctor may run (DOCTOR_RUN yes or by-result), then required too.
REQUIRED_BY_THE_DOCTOR = (
    "DOCTOR_RUN_IF", "DOCTOR_PAIR_ROUNDS", "DOCTOR_ALLREDUCE_PAIR", "DOCTOR_PAIR_ARGS", "DOCTOR_NODE_ARGS",
    "DOCTOR_NODE_MAP_BIND", "DOCTOR_NODE_ENV",
    "DOCTOR_PAIR_SLOW_BELOW_GBPS", "DOCTOR_HCA_PAIRS", "DOCTOR_PARALLEL", "PERFTEST_MEMORY", "PERFTEST_ARGS",
    "PERFTEST_SECONDS", "PERFTEST_START_SECONDS", "HCA_PORT_ERE", "HCA_LINK_LAYER_ERE")


def test_the_launchers_have_no_defaults_of_their_own(env4):
    """Every value a launcher reads is the job's: no `${VAR:-default}` or `${VAR-default}` of an input."""
    for script in (LAUNCHER.read_text(), (LAUNCHER.parent / "p2p-launcher.sh").read_text()):
        assert re.findall(r"\$\{[A-Z][A-Z0-9_]*:?-[^}]", script) == []
    assert set(REQUIRED) | set(REQUIRED_BY_THE_DOCTOR) <= set(env4)


@pytest.mark.parametrize("name", [*REQUIRED, *REQUIRED_BY_THE_DOCTOR])
def test_a_missing_input_stops_the_launcher_with_one_line(tmp_path, env4, name):
    root = launcher_stubs.install(tmp_path)
    hostfile = root / "mpiworker.host"
    hostfile.write_text("".join(host(i) + "\n" for i in range(4)))
    run_env = launcher_stubs.env_for(root, env4, hostfile)  # which sets a few for the fake cluster
    del run_env[name]
    done = subprocess.run(["bash", str(LAUNCHER)], env=run_env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and f"error: {name} is not set" in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1 and not (root / "mpirun.calls").exists()


def test_a_doctor_that_never_runs_needs_none_of_its_plan(tmp_path, env4):
    never = {k: v for k, v in env4.items() if k not in REQUIRED_BY_THE_DOCTOR}
    r = run(tmp_path, {**never, **launcher_stubs.doctor_mode("never", 4)}, 4)
    assert r.done.returncode == 0, r.done.stderr
    assert r.named(sections.DOCTOR)[0].attrs["run"] == "no"


def test_the_golden_render_names_the_script_by_its_hash_and_the_stack_deploys_its_text():
    """offline/script_refs.py: the render (and so tests/golden/dev) carries a reference with the
    script's sha256, not its text; the ConfigMap the stack declares carries the text."""
    golden = TESTS / "golden" / "dev" / "manifests"
    text = (golden / "configmap.fabric-test.nccl-allreduce-launcher.yaml").read_text()
    digest = hashlib.sha256(LAUNCHER.read_bytes()).hexdigest()
    assert f"scripts/nccl-launcher.sh ({LAUNCHER.stat().st_size} bytes, sha256 {digest})" in text
    assert "condense_nccl_log" not in text and len(text.splitlines()) < 12
    stack = dev_kubernetes_half()  # the ConfigMap: the Kubernetes half's, as env2's
    (cm,) = [r for r in stack.resources if r.type == "kubernetes:core/v1:ConfigMap" and "launcher" in r.name]
    assert cm.inputs["data"]["launcher.sh"] == LAUNCHER.read_text()
