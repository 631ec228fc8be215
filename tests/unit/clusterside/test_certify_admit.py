"""The admission loop (`python -m verify certify --admit`, clusterside/certify_admit.py) against the fake API
server (tests/fake_kube_store.py): every new boot of an IB node is held through the API, nothing a person
did is undone, and held nodes that can run a test are re-tested. The real server's answer to the same
writes, under AKS's pool rule, is e2e/tests/test_certifier.py's."""

from __future__ import annotations

import json
import re

from clusterside import certify, certify_admit, certify_cli
from clusterside.kube_api import connect
from core import dra, fabric
from tests.fake_kube_store import FakeApi
from tests.unit.clusterside.test_certify import NS, POOL, UNCERT, name, node
from tests.unit.clusterside.test_certify_recurring import retest_template, run_retest
from verify import __main__ as cli


def ready(n: dict, gpus: str = "8") -> dict:
    n["status"]["allocatable"] = {fabric.GPU_RESOURCE: gpus}
    return n


def admit(api: FakeApi, tmp_path, capsys, *extra: str) -> tuple[int, str]:
    kubeconfig = tmp_path / "k.json"
    kubeconfig.write_text(api.kubeconfig())
    code = cli.main(["certify", "--admit", "--once", "--kubeconfig", str(kubeconfig), "--namespace", NS, *extra])
    return code, capsys.readouterr().err


def test_a_new_boot_is_held_in_one_write_with_its_evidence(tmp_path, capsys):
    nodes = [node(0, None), node(1, None, certified_boot="boot-1-1"), node(2, None, certified_boot="old-boot")]
    with FakeApi(nodes=nodes) as api:
        code, err = admit(api, tmp_path, capsys)
        held = api.node(name(0))
    assert code == 0, err
    assert api.taints(name(0)) == [POOL, UNCERT] and api.taints(name(2)) == [POOL, UNCERT]
    assert api.taints(name(1)) == [POOL], "passed on the boot it runs: not held"
    assert held["metadata"]["labels"][fabric.FABRIC_STATE_LABEL] == fabric.UNCERTIFIED
    assert json.loads(held["metadata"]["annotations"][certify.HELD_ANNOTATION])["boot_id"] == "boot-1-0"
    hold_writes = [(m, p) for m, p, _ in api.writes if p == f"/api/v1/nodes/{name(0)}"]
    assert hold_writes == [("PATCH", f"/api/v1/nodes/{name(0)}")], "taint, label and record in one write"
    (event,) = [e for e in api.events() if e["regarding"]["name"] == name(2)]
    assert event["reason"] == "FabricHeld" and "the last certification was of boot old-boot" in event["note"]
    assert "hold node" in err


def test_a_hold_a_person_lifted_stays_lifted_and_our_hold_on_a_passed_boot_is_lifted(tmp_path, capsys):
    nodes = [node(0, None, held_boot="boot-1-0"),  # held once on this boot, lifted since: by a person
             node(1, certified_boot="boot-1-1", held_boot="boot-1-1")]  # held while a run certified it
    with FakeApi(nodes=nodes) as api:
        code, err = admit(api, tmp_path, capsys)
    assert code == 0, err
    assert api.taints(name(0)) == [POOL] and api.taints(name(1)) == [POOL]
    assert not [p for _, p, _ in api.writes if name(0) in p], "a person's decision is not undone"


def test_label_mode_holds_by_label_only_and_a_dry_run_writes_nothing(tmp_path, capsys):
    with FakeApi(nodes=[node(0, None)]) as api:
        code, err = admit(api, tmp_path, capsys, "--mode", "label")
        assert code == 0 and api.taints(name(0)) == [POOL]
        assert api.node(name(0))["metadata"]["labels"][fabric.FABRIC_STATE_LABEL] == fabric.UNCERTIFIED
    with FakeApi(nodes=[node(0, None)]) as api:
        code, err = admit(api, tmp_path, capsys, "--dry-run")
        assert code == 0 and api.writes == [] and "would hold node" in err


def test_a_refused_hold_exits_2_and_the_other_nodes_are_held(tmp_path, capsys):
    with FakeApi(nodes=[node(0, None), node(1, None)]) as api:
        api.refuse = {f"/api/v1/nodes/{name(0)}": (403, 'nodes "x" is forbidden')}
        code, err = admit(api, tmp_path, capsys)
        assert code == 2 and "forbidden" in err
        assert api.taints(name(1)) == [POOL, UNCERT]


def test_admit_refuses_what_it_cannot_do(tmp_path, capsys):
    with FakeApi(nodes=[node(0, None)]) as api:
        for extra in (["--mode", "off"], ["--recurring"], ["--interval-seconds", "0"]):
            code, err = admit(api, tmp_path, capsys, *extra)
            assert code == 2 and err.startswith("error: --") and len(err.strip().splitlines()) == 1, err
        assert api.writes == []


def test_held_nodes_that_can_run_a_test_are_re_tested_once_within_the_back_off():
    nodes = [ready(node(0, None, certified=True)), ready(node(1)), node(2), ready(node(3), gpus="0")]
    assert certify_admit.due(nodes, {}, now=1000.0, retest_after_seconds=60) == [name(1)]
    assert certify_admit.due(nodes, {name(1): 990.0}, now=1000.0, retest_after_seconds=60) == []
    assert certify_admit.due(nodes, {name(1): 900.0}, now=1000.0, retest_after_seconds=60) == [name(1)]


def test_the_loop_starts_one_re_test_for_held_ready_nodes_and_it_admits_them(tmp_path, capsys):
    """Two passes: the first holds the new node and, once it can run a test, starts the recurring run on it
    and its idle certified peers (the real `--recurring` path, the fake runs the job at once)."""
    template = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fabric-certifier-template",
                                                                      "namespace": NS},
                "data": {"job.json": json.dumps(retest_template())}}
    created, run = run_retest()
    nodes = [ready(node(i, None, certified_boot=f"boot-1-{i}")) for i in range(3)] + [ready(node(3, None))]
    with FakeApi(nodes=nodes, configmaps=[template], run_job=run) as api:
        kubeconfig = tmp_path / "k.json"
        kubeconfig.write_text(api.kubeconfig())
        args = cli.build_parser().parse_args(["certify", "--admit", "--kubeconfig", str(kubeconfig), "--namespace",
                                              NS, "--poll-seconds", "0.01", "--json"])
        code = certify_admit.loop(connect(str(kubeconfig)), args, certify.Policy(mode="taint"), certify_cli.run,
                                  sleep=lambda s: None, passes=2)
        capsys.readouterr()
    assert code == 0
    assert len(created) == 1, "one re-test, not one per pass"
    assert api.taints(name(3)) == [POOL], "held, re-tested, admitted"
    assert api.condition(name(3), fabric.FABRIC_CONDITION)["status"] == "True"


def gpu_slice(i: int, driver: str = dra.GPU_DRIVER, devices: int = 4) -> dict:
    """A ResourceSlice as a DRA kubelet plugin publishes it for its node (the GB300 sample in
    reference/examples/dranet-aks/examples/azure_aks_examples/gb300/resourceslice-gpu.yaml, cut down)."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{name(i)}-{driver}-x{i}"},
            "spec": {"driver": driver, "nodeName": name(i), "pool": {"name": name(i), "generation": 1,
                                                                     "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{d}"} for d in range(devices)]}}


def test_on_dra_stacks_a_held_node_is_testable_once_its_gpu_slices_are_published(tmp_path):
    """With DRA GPUs the device plugin is off and nvidia.com/gpu never becomes allocatable: the node is
    testable when the NVIDIA DRA driver has published its GPUs (issue 52 item 1)."""
    nodes = [node(i) for i in range(4)]  # held, Ready, no GPU allocatable
    slices = [gpu_slice(1), gpu_slice(2, devices=0), gpu_slice(3, driver=dra.NIC_DRIVER)]
    with FakeApi(nodes=nodes, slices=slices) as api:
        kubeconfig = tmp_path / "k.json"
        kubeconfig.write_text(api.kubeconfig())
        published = certify_admit.gpu_slice_nodes(connect(str(kubeconfig)))
        asked = [p for m, p in api.requests if "resourceslices" in p]
    assert published == {name(1)}, "a slice with no device, or another driver's, publishes no GPU"
    assert asked == ["/apis/resource.k8s.io/v1/resourceslices"]
    assert certify_admit.due(nodes, {}, now=1000.0, retest_after_seconds=60) == []
    assert certify_admit.due(nodes, {}, now=1000.0, retest_after_seconds=60, gpu_nodes=published) == [name(1)]


def test_the_loop_with_dra_gpus_re_tests_a_held_node_whose_gpus_are_published(tmp_path, capsys):
    template = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fabric-certifier-template",
                                                                      "namespace": NS},
                "data": {"job.json": json.dumps(retest_template())}}
    created, run = run_retest()
    nodes = [node(i, None, certified_boot=f"boot-1-{i}") for i in range(3)] + [node(3, None)]
    with FakeApi(nodes=nodes, configmaps=[template], run_job=run, slices=[gpu_slice(i) for i in range(4)]) as api:
        kubeconfig = tmp_path / "k.json"
        kubeconfig.write_text(api.kubeconfig())
        argv = ["certify", "--admit", "--kubeconfig", str(kubeconfig), "--namespace", NS, "--poll-seconds", "0.01",
                "--json"]
        for extra, expected in (([], 0), (["--dra-gpus"], 1)):
            args = cli.build_parser().parse_args(argv + extra)
            before = len(api.requests)
            certify_admit.loop(connect(str(kubeconfig)), args, certify.Policy(mode="taint"), certify_cli.run,
                               sleep=lambda s: None, passes=2)
            assert len(created) == expected, (extra, created)
            read = [p for _, p in api.requests[before:] if "resourceslices" in p]
            assert bool(read) == bool(extra), "the slices are read with --dra-gpus only"
        capsys.readouterr()
    assert api.taints(name(3)) == [POOL], "held, re-tested on its published GPUs, admitted"


def test_with_several_pools_each_loop_holds_and_sees_only_its_own_pools_nodes(tmp_path, capsys):
    """A stack of several IB pools runs one admission loop per pool (`--pool`): a new boot of pool b is not
    the loop of pool a's to hold, and pool a's nodes are all it reads (its peers, its breaker)."""
    nodes = [node(0, None), node(1, None), node(2, certified_boot="boot-1-2")]
    for n, pool in zip(nodes, ("a", "b", "a"), strict=True):
        n["metadata"]["labels"][fabric.AGENT_POOL_LABEL] = pool
    with FakeApi(nodes=nodes) as api:
        code, err = admit(api, tmp_path, capsys, "--pool", "a")
    assert code == 0, err
    assert api.taints(name(0)) == [POOL, UNCERT], "pool a's new boot: held"
    assert api.taints(name(1)) == [POOL] and not [p for _, p, _ in api.writes if name(1) in p], "pool b's: not a's"


def _loop(api: FakeApi, tmp_path, *extra: str, passes: int, clock) -> tuple[int, list]:
    """The admission loop for `passes` passes on `clock` (a list of epoch seconds, one per read), re-tests by
    the real `--recurring` path."""
    kubeconfig = tmp_path / "k.json"
    kubeconfig.write_text(api.kubeconfig())
    args = cli.build_parser().parse_args(["certify", "--admit", "--kubeconfig", str(kubeconfig), "--namespace", NS,
                                          "--poll-seconds", "0.01", "--json", *extra])
    times = iter(clock)
    last = [0.0]

    def now() -> float:
        last[0] = next(times, last[0])
        return last[0]

    code = certify_admit.loop(connect(str(kubeconfig)), args, certify.Policy(mode="taint"), certify_cli.run,
                              sleep=lambda s: None, passes=passes, clock=now)
    return code, api.events()


def _template() -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fabric-certifier-template", "namespace": NS},
            "data": {"job.json": json.dumps(retest_template())}}


def test_scale_to_zero_nodes_that_join_together_are_certified_against_each_other_in_one_run(tmp_path, capsys):
    """A pool back from zero: two new boots, no certified node. One re-test runs on both, and both pass."""
    created, run = run_retest()
    nodes = [ready(node(0, None)), ready(node(1, None))]
    with FakeApi(nodes=nodes, configmaps=[_template()], run_job=run) as api:
        code, events = _loop(api, tmp_path, passes=2, clock=[1000.0] * 20)
        capsys.readouterr()
    assert code == 0 and len(created) == 1
    (job,) = created
    (worker,) = [t for t in job["spec"]["tasks"] if t["name"] == "mpiworker"]
    pinned = worker["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert pinned["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [name(0), name(1)]
    assert api.taints(name(0)) == [POOL] and api.taints(name(1)) == [POOL], "tested together, both admitted"
    assert not [e for e in events if e["reason"] in ("FabricWaitingForPeer", "FabricNoPeer")]


def test_scale_to_zero_a_node_back_alone_waits_for_a_peer_is_reported_at_the_bound_and_never_admitted(
        tmp_path, capsys):
    """One new boot, no other node: held, an Event says it waits for a peer (once), no test is started; past
    --peer-wait-minutes a Warning says so (once), not before; it is still held."""
    # the hold is written at t=1000 (the first pass); the later passes run at up to +17 minutes
    clock = [1000.0, 1000.0, 1060.0, 1600.0, 1960.0, 2020.0, 2020.0, 2020.0]
    for bound, warned in (("15", True), ("60", False)):
        created, run = run_retest()
        with FakeApi(nodes=[ready(node(0, None))], configmaps=[_template()], run_job=run) as api:
            code, events = _loop(api, tmp_path, "--peer-wait-minutes", bound, passes=5, clock=clock)
            capsys.readouterr()
        assert code == 0 and created == [], "no run with one node: never admitted untested"
        assert api.taints(name(0)) == [POOL, UNCERT]
        said = [(e["type"], e["reason"]) for e in events if e["regarding"]["name"] == name(0)]
        assert said == [("Normal", "FabricHeld"), ("Normal", "FabricWaitingForPeer"),
                        *([("Warning", "FabricNoPeer")] if warned else [])]
        for warning in [e for e in events if e["reason"] == "FabricNoPeer"]:
            waited = int(re.search(r"for (\d+) min \(certifier.peerWaitMinutes: 15\)", warning["note"])[1])
            assert waited >= 15 and "still held, never admitted untested" in warning["note"]


def test_a_node_waiting_for_a_peer_is_tested_as_soon_as_one_joins(tmp_path, capsys):
    """The lone node's peer comes up later (the autoscaler's second node): the next pass tests both."""
    created, run = run_retest()
    with FakeApi(nodes=[ready(node(0, None))], configmaps=[_template()], run_job=run) as api:
        code, events = _loop(api, tmp_path, passes=1, clock=[1000.0] * 5)
        assert created == [] and [e["reason"] for e in events][-1] == "FabricWaitingForPeer"
        api.put(f"/api/v1/nodes/{name(1)}", ready(node(1, None)))
        code, _ = _loop(api, tmp_path, passes=2, clock=[1100.0] * 20)
        capsys.readouterr()
    assert code == 0 and len(created) == 1
    assert api.taints(name(0)) == [POOL] and api.taints(name(1)) == [POOL]


def test_peer_waits_counts_idle_certified_and_joining_nodes_as_peers_and_busy_or_cordoned_ones_not():
    alone, certified = ready(node(0, None)), ready(node(1, None, certified_boot="boot-1-1"))
    assert certify_admit.peer_waits([alone, certified], busy={}) == []
    assert certify_admit.peer_waits([alone, certified], busy={name(1): "team/train-0"}) == [alone]
    assert certify_admit.peer_waits([alone, ready(node(2, None, unschedulable=True))], busy={}) == [alone]
    assert certify_admit.peer_waits([alone, ready(node(3, None))], busy={}) == []
