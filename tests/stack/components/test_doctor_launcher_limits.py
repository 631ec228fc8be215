"""The fabric doctor's launcher at its limits, offline (tests/doctor_launcher_runs.py): steps the time budget
cuts short or skips, ib_write_bw's runs on the HCAs, a round stopped by a signal, and the inputs the
launcher takes from the job (none of its own), with the script the stack deploys."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import dev_kubernetes_half

from components.fabric import mpi_job, nccl_job
from tests import launcher_stubs
from tests.doctor_launcher_runs import (
    HEALTHY,
    LAUNCHER,
    SKU,
    Run,
    host,
    launcher_env,
    run,
)
from tests.paths import TESTS
from verify import sections


@pytest.fixture(scope="module")
def env4() -> dict[str, str]:
    return launcher_env(4)


@pytest.fixture(scope="module")
def env2() -> dict[str, str]:
    return launcher_env(2)


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


# Every input the job sets (components/fabric/nccl_job.py): none has a default in the script.
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
