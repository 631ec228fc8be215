"""The recurring certification on idle capacity (`python -m verify certify --recurring`,
clusterside/certify_recurring.py) against the fake API server that stores objects (tests/fake_kube_store.py): a
new node admitted against idle certified peers at the lowest priority, a dry run, nothing idle, DRA claims as
busy, a stale re-test replaced, the metrics pushed. The re-test's Job is built from the dev stack's own fabric
test Job (one render per session). The certifier's day-0 scenarios and its helpers:
tests/unit/clusterside/test_certify.py."""

from __future__ import annotations

import json

from clusterside import certify
from core import fabric
from tests.fake_kube_store import FakeApi
from tests.unit.clusterside.test_certify import (
    H100,
    JOB,
    NS,
    POOL,
    THRESHOLD,
    certify_run,
    cluster,
    doctor_log,
    name,
    node,
    node_writes,
    pod,
)
from verify import __main__ as cli
from verify import doctor


def retest_template(max_nodes: int = 4) -> dict:
    """The day-0 job's template as components/fabric/nccl_job.py's retest_template writes it (the dev stack's)."""
    from conftest import rendered

    spec = rendered().one("kubernetes:batch.volcano.sh/v1alpha1:Job", "fabric-test-job").inputs["spec"]
    env = {str(n): {"NODES": str(n), "DOCTOR": "always", "DOCTOR_PAIR_ROUNDS": doctor.rounds_env(doctor.plan_pairs(n))}
           for n in range(2, max_nodes + 1)}
    return {"spec": spec, "env_by_nodes": env, "sku": H100.vm_size, "threshold_gbps": float(THRESHOLD),
            "deadline_minutes": 75}


def gpu_pod(node_name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "training-0", "namespace": "team-a", "labels": {}},
            "spec": {"nodeName": node_name,
                     "containers": [{"name": "t", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]},
            "status": {"phase": "Running"}}


def run_retest(slow: tuple[int, ...] = ()):
    """What a created re-test job leaves: a launcher and one worker per pinned node (in the affinity's
    order), and a doctor log over those workers with the `slow` of them (indices into that order)."""
    created = []

    def run(job: dict):
        created.append(job)
        jname = job["metadata"]["name"]
        (worker,) = [t for t in job["spec"]["tasks"] if t["name"] == "mpiworker"]
        pinned = worker["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
        pods = [{**pod(f"{jname}-mpimaster-0", "mpimaster", "aks-system-0")}] + [
            pod(f"{jname}-mpiworker-{i}", "mpiworker", n) for i, n in enumerate(pinned)]
        for p in pods:
            p["metadata"]["labels"]["volcano.sh/job-name"] = jname
        log = doctor_log(n=len(pinned), slow=slow).replace(f"{JOB}-mpiworker-", f"{jname}-mpiworker-")
        return pods, log
    return created, run


def test_a_new_node_is_admitted_against_idle_certified_peers_at_the_lowest_priority(tmp_path, capsys):
    template = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fabric-certifier-template",
                                                                      "namespace": NS},
                "data": {"job.json": json.dumps(retest_template())}}
    created, run = run_retest()
    nodes = [node(0, None, certified=True), node(1, None, certified=True), node(2, None, certified=True), node(3)]
    with FakeApi(nodes=nodes, pods=[gpu_pod(name(2))], configmaps=[template], run_job=run) as api:
        kubeconfig = tmp_path / "k.json"
        kubeconfig.write_text(api.kubeconfig())
        code = cli.main(["certify", "--recurring", "--kubeconfig", str(kubeconfig), "--namespace", NS,
                         "--poll-seconds", "0.01", "--json"])
        out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    (job,) = created
    (worker,) = [t for t in job["spec"]["tasks"] if t["name"] == "mpiworker"]
    values = worker["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
    assert values == [name(3), name(0), name(1)], "the new node and its idle certified peers; the busy one is left"
    assert worker["replicas"] == 3 and job["spec"]["minAvailable"] == 4
    assert job["spec"]["priorityClassName"] == worker["template"]["spec"]["priorityClassName"] == "aks-infiniband-idle"
    (launcher,) = [t for t in job["spec"]["tasks"] if t["name"] == "mpimaster"]
    env = {e["name"]: e.get("value") for e in launcher["template"]["spec"]["containers"][0]["env"]}
    assert (env["NODES"], env["DOCTOR"]) == ("3", "always")  # the launcher's inputs for three nodes
    assert api.taints(name(3)) == [POOL], "admitted"
    assert api.condition(name(3), fabric.FABRIC_CONDITION)["status"] == "True"
    assert node_writes(api) and not [p for p in node_writes(api) if name(2) in p], "the busy node is not touched"


def test_a_recurring_dry_run_says_which_job_it_would_create_and_creates_none(tmp_path, capsys):
    template = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fabric-certifier-template",
                                                                      "namespace": NS},
                "data": {"job.json": json.dumps(retest_template())}}
    created, run = run_retest()
    with FakeApi(nodes=[node(0, None, certified=True), node(1)], configmaps=[template], run_job=run) as api:
        kubeconfig = tmp_path / "k.json"
        kubeconfig.write_text(api.kubeconfig())
        assert cli.main(["certify", "--recurring", "--dry-run", "--kubeconfig", str(kubeconfig), "--namespace", NS,
                         "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
    assert created == [] and api.writes == []
    assert out["writes"][0].startswith(f"would create Volcano job {NS}/fabric-retest-")


def test_nothing_idle_nothing_created():
    from clusterside import certify_recurring

    nodes = [certify.facts(node(0)), certify.facts(node(1, None, certified=True))]
    busy = certify_recurring.busy_nodes([gpu_pod(name(1))])
    assert busy == {name(1): "team-a/training-0"}
    under_test, peers = certify_recurring.idle_nodes(nodes, busy, certify.membership(nodes))
    assert (under_test, peers) == ([name(0)], []), "one node alone cannot be paired: the run creates nothing"


def test_a_pod_whose_devices_are_dra_claims_makes_its_node_busy():
    """With DRA a pod asks for its GPUs and HCAs through spec.resourceClaims, and its containers request no
    extended resource: it is busy all the same."""
    from clusterside import certify_recurring

    claimed = {**gpu_pod(name(1)), "spec": {"nodeName": name(1), "resourceClaims": [
        {"name": "gpus", "resourceClaimTemplateName": "gpu-claim"}], "containers": [{"name": "t"}]}}
    assert certify_recurring.busy_nodes([claimed]) == {name(1): "team-a/training-0"}
    assert certify_recurring.busy_nodes([{**claimed, "status": {"phase": "Succeeded"}}]) == {}


def test_a_stale_re_test_is_deleted_and_no_longer_blocks_the_next_run(tmp_path, capsys):
    """A re-test left Pending (its run ended before it could be scheduled) is older than any run may take:
    the next run deletes it instead of doing nothing forever; a recent unfinished one still blocks."""
    from clusterside import certify_recurring

    template = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fabric-certifier-template",
                                                                      "namespace": NS},
                "data": {"job.json": json.dumps(retest_template())}}
    stale = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {
        "name": "fabric-retest-old", "namespace": NS, "labels": {certify_recurring.RETEST_LABEL: "true"},
        "creationTimestamp": "2026-01-01T00:00:00Z"}, "status": {"state": {"phase": "Pending"}}}
    created, run = run_retest()
    nodes = [node(0, None, certified=True), node(1, None, certified=True), node(2)]
    with FakeApi(nodes=nodes, jobs=[stale], configmaps=[template], run_job=run) as api:
        kubeconfig = tmp_path / "k.json"
        kubeconfig.write_text(api.kubeconfig())
        code = cli.main(["certify", "--recurring", "--kubeconfig", str(kubeconfig), "--namespace", NS,
                         "--poll-seconds", "0.01", "--json"])
        err = capsys.readouterr().err
    assert code == 0, err
    assert ("DELETE", f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NS}/jobs/fabric-retest-old") in [
        (m, p) for m, p, _ in api.writes]
    assert len(created) == 1, "and the run goes on"
    recent = {**stale, "metadata": {**stale["metadata"], "creationTimestamp": "2999-01-01T00:00:00Z"}}
    assert certify_recurring.stale_retests([recent, stale], now=1.8e9, max_minutes=100) == ["fabric-retest-old"]


def test_each_run_pushes_its_metrics_to_a_pushgateway(tmp_path, capsys):
    with cluster([node(i) for i in range(4)], doctor_log(slow=(3,))) as api:
        host, port = api.server.server_address[:2]
        certify_run(api, tmp_path, capsys, "--pushgateway", f"http://{host}:{port}")
    ((path, text),) = api.pushed
    assert path == "/metrics/job/fabric-certifier"
    assert f'aks_infiniband_fabric_node_state{{node="{name(3)}",state="quarantined"}} 1' in text  # as left
    assert f'aks_infiniband_fabric_node_state{{node="{name(0)}",state="certified"}} 1' in text
    assert "aks_infiniband_fabric_breaker_open 0" in text and "aks_infiniband_fabric_pair_busbw_gbps{" in text


def test_a_pools_run_pushes_to_its_own_group_so_pools_never_erase_each_other(tmp_path, capsys):
    """Several IB pools: a Pushgateway PUT replaces its whole group, so each pool's run pushes to
    /metrics/job/fabric-certifier/pool/<pool>, whose grouping label the gateway puts on every series."""
    pool = {fabric.AGENT_POOL_LABEL: "gpua"}
    with cluster([node(i, labels=pool) for i in range(4)], doctor_log(slow=(3,))) as api:
        host, port = api.server.server_address[:2]
        certify_run(api, tmp_path, capsys, "--pushgateway", f"http://{host}:{port}", "--pool", "gpua")
    ((path, text),) = api.pushed
    assert path == "/metrics/job/fabric-certifier/pool/gpua"
    assert f'aks_infiniband_fabric_node_state{{node="{name(3)}",state="quarantined"}} 1' in text


def test_on_an_inbox_pool_a_node_whose_run_shows_no_dmabuf_is_not_admitted(tmp_path, capsys):
    """The same healthy re-test as above (GDRDMA everywhere, fast pairs), on a pool whose template names the
    node image's own RDMA drivers (rdma_driver inbox, components/fabric/nccl_job.py retest_template): its log
    has no NCCL DMA-BUF line, so nothing shows GPUDirect over DMA-BUF and the new node stays held."""
    template = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fabric-certifier-template",
                                                                      "namespace": NS},
                "data": {"job.json": json.dumps({**retest_template(), "rdma_driver": "inbox"})}}
    created, run = run_retest()
    nodes = [node(0, None, certified=True), node(1, None, certified=True), node(2, None, certified=True), node(3)]
    with FakeApi(nodes=nodes, pods=[gpu_pod(name(2))], configmaps=[template], run_job=run) as api:
        kubeconfig = tmp_path / "k.json"
        kubeconfig.write_text(api.kubeconfig())
        cli.main(["certify", "--recurring", "--kubeconfig", str(kubeconfig), "--namespace", NS,
                  "--poll-seconds", "0.01", "--json"])
        out = json.loads(capsys.readouterr().out)
    assert created and out["result"]["verdict"] == "FAIL"
    assert any("GPUDirect over DMA-BUF not shown" in r for r in out["result"]["reasons"])
    assert api.taints(name(3)) != [POOL], "not admitted"
    assert (api.condition(name(3), fabric.FABRIC_CONDITION) or {}).get("status") != "True"


def test_a_recurring_run_that_trips_the_breaker_fails_its_job_and_says_why(tmp_path, capsys):
    """Issue 52 item 8: the CronJob's Job is what monitoring sees (kube-state-metrics' failed Jobs, the
    CronJob's lastSuccessfulTime). A tripped breaker changed nothing and needs a person: it must not exit 0."""
    template = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fabric-certifier-template",
                                                                      "namespace": NS},
                "data": {"job.json": json.dumps(retest_template())}}
    outcomes = {}
    for slow in ((3,), (2, 3)):
        created, run = run_retest(slow=slow)
        with FakeApi(nodes=[node(i, None, certified=True) for i in range(4)], configmaps=[template],
                     run_job=run) as api:
            kubeconfig = tmp_path / "k.json"
            kubeconfig.write_text(api.kubeconfig())
            code = cli.main(["certify", "--recurring", "--kubeconfig", str(kubeconfig), "--namespace", NS,
                             "--poll-seconds", "0.01", "--json"])
            captured = capsys.readouterr()
            outcomes[slow] = (code, json.loads(captured.out)["certification"]["breaker"], captured.err)
    assert outcomes[(3,)][:2] == (0, None), "one slow node of four is quarantined: the run did its job"
    code, breaker, err = outcomes[(2, 3)]
    assert breaker and breaker.startswith("circuit breaker")
    assert code == 1 and f"BREAKER: {breaker}" in err, (code, err)


def test_re_tests_of_the_cronjob_and_of_the_admission_loop_cannot_share_a_name():
    """Issue 52 item 4: both made `fabric-retest-YYYYMMDDHHMM`, so two in one minute collided (409). The name
    says who made it and carries the second: each maker runs one at a time."""
    from clusterside import certify_admit, certify_recurring

    args = cli.build_parser().parse_args(["certify", "--admit", "--namespace", NS])
    cron = certify_recurring.retest_name(cli.build_parser().parse_args(["certify", "--recurring", "--namespace", NS]),
                                         at=1.8e9)
    loop = certify_recurring.retest_name(certify_admit.recurring_args(args), at=1.8e9)
    assert cron != loop and cron.startswith("fabric-retest-cron-") and loop.startswith("fabric-retest-admit-")
    assert certify_recurring.retest_name(certify_admit.recurring_args(args), at=1.8e9 + 1) != loop
    assert len(cron) <= 63 and len(loop) <= 63  # a Service of the same name (Volcano's svc plugin): a DNS label
