"""Where the fabric test's workers ran, as the certifier learns it: Volcano deletes a job's unfinished pods
when the launcher's TaskCompleted -> CompleteJob policy ends the job (killJob with PodRetainPhaseSoft, the
same in v1.10 and v1.15), and the workers run sshd until then. The fake API server answers so
(tests/fake_kube_store.py): after the job's final phase only the launcher is left. The certifier keeps what
its wait saw (clusterside/certify_kube.py record_placement); what it never saw it names, never maps silently."""

from __future__ import annotations

import json

from clusterside import certify_kube
from tests.fake_kube_store import FakeApi
from tests.unit.clusterside.test_certify import (
    HOSTS,
    JOB,
    NS,
    POOL,
    QUAR,
    UNCERT,
    WAIT,
    certify_run,
    cluster,
    doctor_log,
    name,
    node,
    node_writes,
    pod,
    volcano_job,
)


def _pods_left(api: FakeApi) -> list[str]:
    return sorted(p.rsplit("/", 1)[1] for p in api.objects if f"/namespaces/{NS}/pods/" in p)


def test_the_workers_are_gone_after_the_run_and_the_certifier_that_waited_still_places_them(tmp_path, capsys):
    """The stack's day-0 run: the certifier waits, sees the workers on their nodes while the job runs, and
    judges by that after Volcano has deleted them: the slow node is quarantined, its peers certified."""
    with cluster([node(i) for i in range(4)], doctor_log(slow=(3,))) as api:
        code, out = certify_run(api, tmp_path, capsys)
        left = _pods_left(api)
    assert left == [f"{JOB}-mpimaster-0"], "the fake answers as Volcano does: only the finished launcher stays"
    assert code == 0 and out["certification"]["unplaced"] is None
    assert api.taints(name(3)) == [POOL, QUAR] and all(api.taints(name(i)) == [POOL] for i in range(3))
    (suspect,) = out["certification"]["suspects"]
    assert suspect["node"] == name(3)


def test_a_finished_job_whose_workers_are_gone_says_which_are_unknown_and_why_and_changes_no_node(tmp_path, capsys):
    """--wait-minutes 0 on a job that has already ended: the workers are gone and no read saw them. The
    result names each one and why, the PASS becomes a WARN, and no node is certified or quarantined."""
    pods = [pod(f"{JOB}-mpimaster-0", "mpimaster", "aks-system-0")] + [pod(h, "mpiworker", name(i))
                                                                     for i, h in enumerate(HOSTS)]
    cms = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": cm, "namespace": NS}, "data": {}}
           for cm in ("fabric-certifier-result", "fabric-certifier-history")]
    with FakeApi(nodes=[node(i) for i in range(4)], pods=pods, jobs=[volcano_job(4, "Completed")], configmaps=cms,
                 logs={f"/api/v1/namespaces/{NS}/pods/{JOB}-mpimaster-0": doctor_log(slow=())}) as api:
        code, out = certify_run(api, tmp_path, capsys, "--wait-minutes", "0")  # (the later flag wins)
        kept = json.loads(api.configmap(NS, "fabric-certifier-result")["data"]["certification.json"])
        writes = node_writes(api)
    cert = out["certification"]
    assert cert["unplaced"]["pods"] == HOSTS and "--wait-minutes 0" in cert["unplaced"]["why"]
    assert "Volcano deletes a job's unfinished pods" in cert["unplaced"]["why"]
    assert out["result"]["verdict"] == "PASS" and cert["verdict"] == "WARN"
    assert any(r.startswith("WARN the node of worker pod(s) " + ", ".join(HOSTS)) for r in cert["reasons"])
    assert kept["unplaced"] == cert["unplaced"], "the result the stack reads says it too"
    assert {d["action"] for d in cert["decisions"]} == {"keep"} and writes == []
    assert all(api.taints(name(i)) == [POOL, UNCERT] for i in range(4))
    assert code == 0


def test_a_worker_seen_on_one_node_and_then_another_is_placed_where_it_was_seen_last():
    """A restarted job's pod keeps its name (`<job>-<task>-<index>`) and may land on another node: the
    newest read wins, and only a pod with a node is kept."""
    placed: dict[str, dict] = {}
    assert certify_kube.record_placement(placed, [pod(HOSTS[0], "mpiworker", name(0))]) == [HOSTS[0]]
    unbound = pod(HOSTS[1], "mpiworker", name(1))
    del unbound["spec"]["nodeName"]
    assert certify_kube.record_placement(placed, [pod(HOSTS[0], "mpiworker", name(2)), unbound]) == []
    assert {k: v["spec"]["nodeName"] for k, v in placed.items()} == {HOSTS[0]: name(2)}
    assert certify_kube.task_pod_names(volcano_job(2), "mpimaster") == HOSTS[:2]


def test_a_job_that_ends_between_two_reads_leaves_its_unseen_workers_named(tmp_path, capsys):
    """The wait reads the job Pending, its workers not bound yet, and next Completed: they were placed, ran
    and went in between. They are named as unknown, with the poll interval; the slow host maps to no node,
    so no node is quarantined (or certified) on a guess."""
    with cluster([node(i) for i in range(4)], doctor_log(slow=(3,))) as api:
        for h in HOSTS:
            worker = api.objects[f"/api/v1/namespaces/{NS}/pods/{h}"]
            del worker["spec"]["nodeName"]
            worker["status"]["phase"] = "Pending"
        api.phases[JOB] = ["Pending", "Completed"]
        code, out = certify_run(api, tmp_path, capsys)
    cert = out["certification"]
    assert cert["unplaced"]["pods"] == HOSTS and f"every {WAIT[3]}s" in cert["unplaced"]["why"], cert["unplaced"]
    assert [s["node"] for s in cert["suspects"]] == [None] and cert["verdict"] == "FAIL"
    assert all(api.taints(name(i)) == [POOL, UNCERT] for i in range(4)) and code == 0
