"""The facts the collector's diagnosis reads (clusterside/kube.py, snapshot.py, diagnose_pool.py), against
the upstream schemas and rules: the operators' and Volcano's CRDs of the pinned releases, Kubernetes'
toleration rules, API timestamps."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterside import collect, kube
from core import fabric
from tests.fake_kube import GPU, JOB_KIND, MIN, RDMA, T0
from tests.schema_checks import as_api, load_yaml, pinned_name


@pytest.fixture(scope="module")
def stack_job(dev) -> dict:
    """The fabric test's Volcano Job as the dev stack renders it."""
    return as_api(dev.one(JOB_KIND, "fabric-test-job").inputs)


def _crd(reference: Path, name: str) -> dict:
    text = (reference / "crds" / name).read_text()
    return load_yaml(text)


def _status(crd: dict, version: str) -> dict:
    found = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    return found["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]


def test_the_custom_resources_read_match_their_crds(reference):
    """Group, version, plural, scope and every status field the diagnosis reads, per CRD."""
    cases = [
        (pinned_name("mellanox.com_nicclusterpolicies", "networkOperator"), kube.NIC_POLICY_GROUP,
         kube.NIC_POLICY_VERSION, kube.NIC_POLICY_PLURAL, "Cluster"),
        (pinned_name("nvidia.com_clusterpolicies", "gpuOperator"), kube.CLUSTER_POLICY_GROUP,
         kube.CLUSTER_POLICY_VERSION, kube.CLUSTER_POLICY_PLURAL, "Cluster"),
        (pinned_name("scheduling.volcano.sh_podgroups", "volcano"), kube.PODGROUP_GROUP, kube.PODGROUP_VERSION,
         kube.PODGROUP_PLURAL, "Namespaced"),
    ]
    for file, group, version, plural, scope in cases:
        crd = _crd(reference, file)
        assert (crd["spec"]["group"], crd["spec"]["names"]["plural"], crd["spec"]["scope"]) == (group, plural, scope)
        assert version in [v["name"] for v in crd["spec"]["versions"]]
    nic = _status(_crd(reference, cases[0][0]), kube.NIC_POLICY_VERSION)
    assert kube.READY_STATE in nic["state"]["enum"] and "reason" in nic
    applied = nic["appliedStates"]["items"]["properties"]
    assert {"name", "state", "message"} <= set(applied) and {"notReady", "error"} <= set(applied["state"]["enum"])
    gpu = _status(_crd(reference, cases[1][0]), kube.CLUSTER_POLICY_VERSION)
    assert kube.READY_STATE in gpu["state"]["enum"] and gpu["namespace"]["type"] == "string"
    assert {"type", "status", "reason", "message"} <= set(gpu["conditions"]["items"]["properties"])
    pg = _status(_crd(reference, cases[2][0]), kube.PODGROUP_VERSION)
    assert "Pending" in pg["phase"]["enum"]
    assert {"type", "status", "reason", "message", "lastTransitionTime"} <= set(pg["conditions"]["items"]["properties"])


def test_the_job_tasks_the_collector_reads_match_the_volcano_crd(reference, stack_job):
    from clusterside.snapshot import tasks_of

    crd = _crd(reference, pinned_name("batch.volcano.sh_jobs", "volcano"))
    version = next(v for v in crd["spec"]["versions"] if v["name"] == collect.VOLCANO_VERSION)
    task = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["tasks"]["items"]["properties"]
    assert {"name", "replicas", "template"} <= set(task)
    # what the collector reads from the stack's own job: the RDMA resource and every GPU per worker
    tasks = {t.name: t for t in tasks_of(stack_job)}
    assert tasks["mpiworker"].devices == {GPU: 8, RDMA: 1} and tasks["mpiworker"].replicas == 2
    assert tasks["mpimaster"].devices == {} and tasks["mpimaster"].tolerations == tuple(fabric.fabric_tolerations())


@pytest.mark.parametrize("toleration, tolerated", [
    (fabric.toleration(), True),
    ({"key": fabric.IB_TAINT_KEY, "operator": "Exists"}, True),
    ({"operator": "Exists"}, True),  # no key, Exists: every taint
    ({"key": fabric.IB_TAINT_KEY, "operator": "Equal", "value": "false", "effect": "NoSchedule"}, False),
    ({"key": fabric.IB_TAINT_KEY, "operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": fabric.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}, False),
])
def test_tolerations_follow_kubernetes_rules(toleration, tolerated):
    from clusterside.diagnose_pool import _tolerates

    taint = {"key": fabric.IB_TAINT_KEY, "value": fabric.IB_TAINT_VALUE, "effect": fabric.IB_TAINT_EFFECT}
    assert _tolerates(toleration, taint) is tolerated


def test_api_timestamps_order_exactly():
    """Log timestamps trim trailing zeros (RFC 3339 nano): .1 is later than .09, earlier than .12."""
    a, b, c = (kube.time_ns(f"2026-03-01T12:00:00.{f}Z") for f in ("09", "1", "12"))
    assert a < b < c and c - b == 20_000_000
    assert kube.epoch("2026-03-01T12:00:00Z") == T0 == kube.epoch("2026-03-01T13:00:00+01:00")
    assert kube.iso(T0) == "2026-03-01T12:00:00Z" and kube.time_ns("yesterday") is None


def test_durations_read_as_whole_minutes_or_seconds():
    """One helper for the collector's and the diagnosis' messages: under a minute in seconds."""
    assert [kube.duration(s) for s in (0, 45, 59.4, 60, 89, 91, 45 * MIN)] == \
        ["0s", "45s", "59s", "1 min", "1 min", "2 min", "45 min"]
