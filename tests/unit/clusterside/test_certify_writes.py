"""The certifier's writes when the server refuses some (tests/fake_kube_store.py `refuse`, as RBAC or AKS's
rules answer): the verdict is written first and never hidden by a side effect."""

from __future__ import annotations

import json

from tests.unit.clusterside.test_certify import NS, POOL, QUAR, UNCERT, certify_run, cluster, doctor_log, name, node


def test_a_refused_event_or_condition_never_hides_the_verdict_and_is_counted(tmp_path, capsys):
    """Events and conditions are side effects: refused (here a 403, as RBAC answers), the run still
    exits by its verdict, the taints are still written, and the result counts what failed."""
    with cluster([node(i) for i in range(4)], doctor_log(slow=(3,))) as api:
        api.refuse = {"/apis/events.k8s.io/": (403, "events.events.k8s.io is forbidden"),
                      f"/api/v1/nodes/{name(0)}/status": (403, "nodes \"x\" is forbidden: nodes/status")}
        code, out = certify_run(api, tmp_path, capsys)
        kept = json.loads(api.configmap(NS, "fabric-certifier-result")["data"]["certification.json"])
    assert code == 0 and out["certification"]["verdict"] == "FAIL"
    assert api.taints(name(0)) == [POOL] and api.taints(name(3)) == [POOL, QUAR], "the taints are still written"
    failed = kept["failed_writes"]
    assert len([f for f in failed if "Event" in f["write"]]) == 4 and all(f["best_effort"] for f in failed)
    assert any("condition" in f["write"] and "forbidden" in f["error"] for f in failed)


def test_a_refused_taint_write_exits_2_after_the_verdict_is_written(tmp_path, capsys):
    """A taint write is not a side effect: refused (as AKS refuses a pool taint), that node is left as it
    was, its later writes are skipped, the others go on, and the run exits 2 with the verdict kept."""
    with cluster([node(i) for i in range(4)], doctor_log(slow=(3,))) as api:
        api.refuse = {f"/api/v1/nodes/{name(1)}": (422, "admission webhook denied the request")}
        code, out = certify_run(api, tmp_path, capsys)
        kept = json.loads(api.configmap(NS, "fabric-certifier-result")["data"]["certification.json"])
    assert code == 2 and kept["verdict"] == "FAIL"
    assert api.taints(name(1)) == [POOL, UNCERT] and api.taints(name(0)) == [POOL]
    (failed,) = kept["failed_writes"]
    assert failed["write"].startswith(f"set taints of node {name(1)}") and "denied" in failed["error"]
    assert not failed["best_effort"]
