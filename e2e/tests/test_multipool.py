"""The stack of several IB pools (Pulumi.multipool.yaml: ND H100 v5 x2, ND H200 v5 x4, HBv4 x2) on the real
control plane: each pool's nodes created as AKS creates them (e2e/pools.py, with their agent pool's label),
the certifier's objects as the stack renders them, and each pool's certifier run as its ServiceAccount with
the stack's own argv (`--pool`). Each pool is its own fabric: its loop holds its own nodes, its verdict
quarantines or admits its own, its re-test pairs its own; and scale to zero: a node back alone waits for a
peer with Events the real server keeps, and is re-tested once one joins.

The launcher logs are CONSTRUCTED from tests/nccl_logs.py (as in e2e/tests/test_certifier.py): nothing here
was measured."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from clusterside import certify_recurring
from core import fabric
from e2e import apply, pools, volcano
from e2e.cluster import ROOT
from e2e.tests.test_certifier import ENV, KINDS, World
from offline import engine
from tests.unit.clusterside.test_certify import doctor_log

STACK = "multipool"
CONFIG = engine.stack_file_config(STACK)
GPU_POOLS = ("h100", "h200")


def _flag(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


class Pools(World):
    """World (e2e/tests/test_certifier.py) for several pools: each pool's nodes, fabric test Job, day-0 argv
    and admission argv, by pool name."""

    def __init__(self, planes, tmp_path: Path, config: dict = CONFIG):  # noqa: PLW0231 (World's is the dev stack's)
        self.rendering = engine.render(STACK, config=config)
        self.plane, self.facts, names = planes.fresh(STACK, config)
        self.tmp = tmp_path
        self.nodes = {p.name: sorted(n for n in names if f"-{p.name}-" in n) for p in self.facts.pools}
        self.system = self.nodes["system"]
        groups, single = apply.stack_objects(self.rendering)
        wanted = [o for o in groups if o["kind"] == "CustomResourceDefinition"] + [
            o for o in single if o["kind"] in KINDS | {"Queue"}]
        refused = [(apply.label(o), e) for o in wanted if (e := apply.apply_one(self.plane, o))]
        assert not refused, refused
        for queue in (o for o in wanted if o["kind"] == "Queue"):  # each pool's Job goes to its pool's queue
            volcano.wait_open(self.plane, queue["metadata"]["name"], "the stack's queue of a pool")
        self.jobs = {o["metadata"]["namespace"].removeprefix("fabric-test-"): o for o in single
                     if o["kind"] == "Job" and o["apiVersion"].startswith("batch.volcano.sh")}
        day0 = [o["spec"]["template"]["spec"]["containers"][0]["command"][4:] for o in single
                if o["kind"] == "Job" and o["apiVersion"] == "batch/v1"
                and o["metadata"]["namespace"] == "fabric-certifier"]
        self.day0 = {_flag(a, "--pool"): a for a in day0}
        self.admissions = {_flag(a, "--pool"): a for a in (
            o["spec"]["template"]["spec"]["containers"][0]["command"][4:] for o in single
            if o["kind"] == "Deployment" and o["metadata"]["namespace"] == "fabric-certifier")}

    def admit_pool(self, pool: str, *extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(self.verify_argv(*self.admissions[pool], "--once", *extra), cwd=ROOT,
                              capture_output=True, text=True, timeout=60, env=ENV)

    def run_and_certify_pool(self, pool: str, log: str) -> tuple[int, dict, str]:
        """Pool `pool`'s fabric test run by Volcano and judged by its own day-0 certifier (`--pool`), as
        World.run_and_certify does for one pool: the log's `<job>-mpiworker-<i>` is the worker on that pool's
        i-th node."""
        return self.run_and_certify(log, job=self.jobs[pool], nodes=self.nodes[pool], argv=self.day0[pool])


@pytest.fixture
def world(planes, tmp_path):
    return Pools(planes, tmp_path)


def test_each_pools_nodes_are_created_with_their_agent_pool_and_each_loop_holds_only_its_own(world):
    assert {p: len(n) for p, n in world.nodes.items() if p != "system"} == {"h100": 2, "h200": 4, "hb": 2}
    for pool in ("h100", "h200", "hb"):
        labels = [world.node(n)["metadata"]["labels"][fabric.AGENT_POOL_LABEL] for n in world.nodes[pool]]
        assert labels == [pool] * len(labels)
    assert set(world.admissions) == set(GPU_POOLS), "the HB pool's test has no re-test, so no admission loop"
    done = world.admit_pool("h100")
    assert done.returncode == 0, done.stderr
    assert all(world.fabric_taints(n) == [fabric.UNCERTIFIED] for n in world.nodes["h100"])
    assert all(world.fabric_taints(n) == [] for n in world.nodes["h200"] + world.nodes["hb"]), "not h100's"


def test_a_slow_node_in_one_pool_is_quarantined_while_the_other_pools_nodes_are_admitted(world):
    for pool in GPU_POOLS:
        assert world.admit_pool(pool).returncode == 0
    h100, h200 = world.nodes["h100"], world.nodes["h200"]
    job = {pool: world.jobs[pool]["metadata"]["name"] for pool in GPU_POOLS}  # the logs' hosts are its workers
    code, out, err = world.run_and_certify_pool("h200", doctor_log(n=4, slow=(3,), job=job["h200"]))
    assert code == 0, err
    assert world.fabric_taints(h200[3]) == [fabric.QUARANTINED]
    assert all(world.fabric_taints(n) == [] for n in h200[:3])
    assert all(world.fabric_taints(n) == [fabric.UNCERTIFIED] for n in h100), "h200's verdict leaves h100 alone"
    assert {d["node"] for d in out["certification"]["decisions"]} <= set(h200)
    code, out, err = world.run_and_certify_pool("h100", doctor_log(n=2, slow=(), job=job["h100"]))
    assert code == 0, err
    assert all(world.fabric_taints(n) == [] for n in h100)
    assert world.fabric_taints(h200[3]) == [fabric.QUARANTINED], "h100's pass releases nothing of h200's"
    for pool in GPU_POOLS:  # each verdict in its own pool's result
        kept = json.loads(world.kubectl("get", "configmap", "-n", "fabric-certifier",
                                        f"fabric-certifier-result-{pool}", "-o", "json").stdout)["data"]
        assert json.loads(kept["certification.json"])["failed_writes"] == []


def test_a_node_of_one_pool_is_never_tested_against_another_pools(world):
    """Every GPU node held: pool h100's re-test (its recurring run, dry) pairs h100's nodes only, though h200's
    held nodes are idle too."""
    for pool in GPU_POOLS:
        assert world.admit_pool(pool).returncode == 0
    argv = [*world.admissions["h100"]]
    argv[argv.index("--admit")] = "--recurring"
    done = subprocess.run(world.verify_argv(*argv, "--dry-run"), cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env=ENV)
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if "re-test " in x]
    assert all(n in line for n in world.nodes["h100"]) and not any(n in line for n in world.nodes["h200"]), line


def test_scale_to_zero_a_node_back_alone_waits_for_a_peer_and_is_re_tested_once_one_joins(world):
    """Pool h100 scaled to zero, then one node back: held, a FabricWaitingForPeer Event, at the bound a
    FabricNoPeer Warning (the real server keeps both); its peer joins and the loop starts one re-test of
    both, pinned to them. Never admitted untested meanwhile."""
    pool = next(p for p in world.facts.pools if p.name == "h100")
    lone, peer = world.nodes["h100"]
    world.kubectl("delete", "node", peer, "--wait=true")
    loop = subprocess.Popen(world.verify_argv(*world.admissions["h100"], "--interval-seconds", "1",
                                              "--peer-wait-minutes", "0.05"),
                            cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def reasons() -> set[str]:
            return {e["reason"] for e in world.events() if e["involvedObject"]["name"] == lone}

        started = time.monotonic()
        while not {"FabricHeld", "FabricWaitingForPeer", "FabricNoPeer"} <= reasons():
            assert time.monotonic() - started < 30, f"no peer Events for {lone} within 30 s: {reasons()}"
            time.sleep(0.5)
        assert world.fabric_taints(lone) == [fabric.UNCERTIFIED], "still held"
        world.kubectl("create", "-f", "-", input=json.dumps(pools.node(world.facts, pool, 1)))
        ns = world.jobs["h100"]["metadata"]["namespace"]
        selector = f"{certify_recurring.RETEST_LABEL}=true"
        listed = ("get", "jobs.batch.volcano.sh", "-n", ns, "-l", selector, "-o", "json")
        started = time.monotonic()
        while not (retests := json.loads(world.kubectl(*listed).stdout)["items"]):
            assert time.monotonic() - started < 30, "no re-test within 30 s of the peer joining"
            time.sleep(0.5)
    finally:
        loop.terminate()
        err = loop.communicate(timeout=30)[1]
    (job,) = retests
    (worker,) = [t for t in job["spec"]["tasks"] if t["name"] == "mpiworker"]
    pinned = worker["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert sorted(pinned["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]) == sorted([lone, peer]), err
    (warning,) = [e for e in world.events() if e["reason"] == "FabricNoPeer"]
    assert warning["type"] == "Warning" and "never admitted untested" in warning["message"]
