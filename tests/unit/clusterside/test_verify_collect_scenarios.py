"""`python -m verify collect` in scripted scenarios against the fake Kubernetes API
(tests/fake_kube.py): a stuck fabric test, diagnosed, by the scenario's clock. The facts the diagnosis
reads, against the upstream schemas and rules: tests/unit/clusterside/test_collector_reads.py."""

from __future__ import annotations

import copy
import sys

import pytest

from core import fabric
from tests.fake_kube import (
    ALLOWANCE,
    DRIVER_CONTAINER,
    DRIVER_POD,
    GPU,
    GPU_OPERATOR_NS,
    IMAGE_OF_TEST,
    JOB,
    JOB_KIND,
    JOB_UID,
    MIN,
    NETWORK_OPERATOR_NS,
    NS,
    RDMA,
    T0,
    Cluster,
    at,
    cluster_policy,
    driver_pod,
    event,
    gave_up_lines,
    healthy_operators,
    ib_node,
    job_pods,
    nic_policy,
    nodes,
    pod_group,
    progress_lines,
    run_scenario,
    system_node,
)

# --- scripted scenarios: a stuck fabric test, diagnosed, by the scenario's clock ----------------------
# Each scenario is a timeline (seconds after T0 -> the cluster), the collector starts at T0 with the
# stack's own timeout (NODE_SETUP_BUDGET_MINUTES + the job's 60 min + 5) and polls every 15 s, as the
# stack's step runs it. The job is the one the dev stack renders: the collector reads what it requests
# (nvidia.com/gpu: 8, rdma/shared_ib: 1 per mpiworker) and tolerates from its pod templates.


@pytest.fixture(scope="module")
def stack_job(dev) -> dict:
    from tests.schema_checks import as_api

    return as_api(dev.one(JOB_KIND, "fabric-test-job").inputs)




@pytest.mark.parametrize("ready_minutes_before_start", [40, 120])
def test_rdma_resource_never_advertised(stack_job, monkeypatch, capsys, ready_minutes_before_start):
    """The RDMA device plugin never registers rdma/shared_ib. Volcano's enqueue turns the gang away, so
    there is not a single pod: the nodes' allocatable says why. The wait ends when the allowance,
    counted from the nodes' Ready, has passed: 5 min in when they were Ready 40 min before the
    collector started, at once (the done criterion: within a minute) when they were Ready 2 h before."""
    ready_at = -ready_minutes_before_start * MIN

    def scenario(t: float) -> Cluster:
        overused = event("PodGroup", f"{JOB}-{JOB_UID}", "Unschedulable", "resource in cluster is overused: "
                         f"overused {RDMA}", first=0, last=t, count=int(t // 15) + 1, type_="Normal")
        return Cluster(phase="Pending", pod_group=pod_group("Pending"), events=[overused],
                       nodes=nodes(t, ready_at=ready_at, rdma_from=None),
                       **healthy_operators(nic_policies=[nic_policy(False)]))

    code, out, err, waited, _ = run_scenario(scenario, stack_job, monkeypatch, capsys)
    assert code == 2
    expected = max(0.0, (ready_at + ALLOWANCE) / MIN)  # when the allowance ends, by the scenario's clock
    assert expected <= waited < expected + 1, f"waited {waited:.2f} min"
    (line,) = gave_up_lines(err)
    assert f"{RDMA} is not advertised: 0 of 2 Ready IB-pool nodes" in line and "node-setup allowance" in line
    assert out["verdict"] == "FAIL" and out["gave_up"] in line and out["job_phase"] == "Pending"
    diagnosis = {(d["what"], d["where"]) for d in out["diagnosis"]}
    assert (f"{RDMA} not advertised", f"nodes with label {fabric.IB_POOL_ROLE_LABEL}={fabric.IB_POOL_ROLE}") \
        in diagnosis
    assert ("PodGroup Unschedulable", f"podgroup {NS}/{JOB}-{JOB_UID}") in diagnosis  # Volcano's own words
    assert ("NicClusterPolicy state-RDMA-device-plugin", "nicclusterpolicy nic-cluster-policy") in diagnosis
    # the hint holds for either RDMA driver stack: the plugin waits for the Network Operator's label, which follows
    # the DOCA driver with ofedDriver and the NIC's NFD label without it (rdmaDriver inbox)
    hint = next(d for d in out["diagnosis"] if d["what"] == f"{RDMA} not advertised")["message"]
    assert f"{fabric.MOFED_WAIT_LABEL}=false" in hint and fabric.MELLANOX_NIC_LABEL in hint
    assert "after the DOCA driver" not in hint
    ib_pool = next(d for d in out["diagnosis"] if d["what"] == "IB pool")
    assert ib_pool["message"].startswith(f"2 of 2 Ready, the 2 needed since {at(ready_at)}")  # not the system node
    assert f"{GPU} advertised by 2 of 2 (8 per node); {RDMA} advertised by 0 of 2" in ib_pool["message"]
    assert all(str(d["message"]) in " ".join(out["reasons"]) for d in out["diagnosis"])


def test_gpu_driver_pod_crash_loops(stack_job, monkeypatch, capsys):
    """The GPU Operator's driver container crash-loops, so no node advertises nvidia.com/gpu. During
    the allowance the crash loop is shown as the pending reason; at its end the wait stops, naming the
    resource, and the diagnosis names the pod and the container."""
    ready_at = -40 * MIN

    def scenario(t: float) -> Cluster:
        return Cluster(phase="Pending", pod_group=pod_group("Pending"),
                       nodes=nodes(t, ready_at=ready_at, gpu_from=None),
                       **healthy_operators(cluster_policies=[cluster_policy(False)],
                                           operator_pods={NETWORK_OPERATOR_NS: [],
                                                          GPU_OPERATOR_NS: [driver_pod(True)]}))

    code, out, err, waited, _ = run_scenario(scenario, stack_job, monkeypatch, capsys)
    assert code == 2
    assert 5 <= waited < 6, f"waited {waited:.2f} min"  # the allowance from the nodes' Ready, not from T0
    (line,) = gave_up_lines(err)
    assert f"{GPU} is not advertised" in line and "GPU Operator's device plugin" in line
    crash = next(d for d in out["diagnosis"] if d["what"] == "CrashLoopBackOff")
    assert crash["where"] == f"pod {GPU_OPERATOR_NS}/{DRIVER_POD} container {DRIVER_CONTAINER}"
    assert "restarted 9 times, last exit: Error, exit code 1" in crash["message"]
    assert any(d["what"] == "ClusterPolicy Ready" and "state-driver" in d["message"] for d in out["diagnosis"])
    # shown while it waited, long before it gave up: the first poll already named the crash loop
    first = progress_lines(err)[:8]
    assert any("CrashLoopBackOff" in p and DRIVER_POD in p for p in first)


@pytest.mark.parametrize("failing_since_minutes", [1, -10])
def test_job_image_pull_backs_off(stack_job, monkeypatch, capsys, failing_since_minutes):
    """The test image does not exist. The pods are placed, the kubelet fails to pull and backs off.
    By the events' own record (firstTimestamp), the wait ends IMAGE_PULL_GIVE_UP_MINUTES after the
    first failure: 3 min after it began 1 min in, or at once (within a minute, the done criterion)
    for a collector started when the back-off had lasted 10 min."""
    image = "ghcr.io/coreweave/nccl-tests:no-such-tag"
    since = failing_since_minutes * MIN
    from clusterside.diagnose import IMAGE_PULL_GIVE_UP_MINUTES

    def scenario(t: float) -> Cluster:
        failing = t >= since
        waiting = (("ImagePullBackOff", f'Back-off pulling image "{image}"') if failing else
                   ("ContainerCreating", ""))
        pods = job_pods("Pending", image=image, waiting=waiting)
        events = []
        for pod in pods:
            name_, task = pod["metadata"]["name"], pod["metadata"]["labels"]["volcano.sh/task-spec"]
            events.append(event("Pod", name_, "Pulling", f'Pulling image "{image}"', first=min(0, since),
                                last=max(since, min(t, since + 60)), type_="Normal", container=task))
            if failing:
                attempts = 1 + int((t - since) // 40)
                events.append(event("Pod", name_, "Failed", f'Failed to pull image "{image}": rpc error: code = '
                                    "NotFound desc = failed to pull and unpack image: not found",
                                    first=since, last=t, count=attempts, container=task))
                events.append(event("Pod", name_, "BackOff", f'Back-off pulling image "{image}"', first=since + 10,
                                    last=t, count=attempts, type_="Normal", container=task))
        return Cluster(phase="Pending", pod_group=pod_group("Inqueue"), pods=pods, events=events,
                       nodes=nodes(t, ready_at=-30 * MIN), **healthy_operators())

    code, out, err, waited, _ = run_scenario(scenario, stack_job, monkeypatch, capsys)
    assert code == 2
    expected = max(0.0, failing_since_minutes + IMAGE_PULL_GIVE_UP_MINUTES)
    assert expected <= waited < expected + 1, f"waited {waited:.2f} min"
    (line,) = gave_up_lines(err)
    assert f"image {image} of pod {NS}/{JOB}-mpimaster-0 (container mpimaster) cannot be pulled" in line
    assert f"since {at(since)}" in line and "not found" in line
    pulls = [d for d in out["diagnosis"] if d["what"] == "ImagePullBackOff"]
    assert {d["where"] for d in pulls} == {f"pod {NS}/{JOB}-{p} container {p.rsplit('-', 1)[0]}"
                                           for p in ("mpimaster-0", "mpiworker-0", "mpiworker-1")}
    assert all(image in d["message"] for d in pulls)


def test_pool_taint_not_tolerated(stack_job, monkeypatch, capsys):
    """A job whose pods lack the pool's toleration: the scheduler cannot place them on the IB nodes
    (and the system node has no GPU). The allowance runs from the nodes' Ready; then the wait ends,
    naming the taint and the task."""
    spec = copy.deepcopy(stack_job)
    for task in spec["spec"]["tasks"]:
        task["template"]["spec"].pop("tolerations")
    ready_at = -40 * MIN
    message = (f"0/3 nodes are unavailable: 1 Insufficient {GPU}, 2 node(s) had untolerated taint "
               f"{{{fabric.IB_TAINT_KEY}: {fabric.IB_TAINT_VALUE}}}.")

    def scenario(t: float) -> Cluster:
        pods = job_pods("Pending", unschedulable=message)
        events = [event("Pod", p["metadata"]["name"], "FailedScheduling", message, first=0, last=t) for p in pods]
        return Cluster(phase="Pending", pod_group=pod_group("Inqueue"), pods=pods, events=events,
                       nodes=nodes(t, ready_at=ready_at), **healthy_operators())

    code, out, err, waited, _ = run_scenario(scenario, spec, monkeypatch, capsys)
    assert code == 2
    assert 5 <= waited < 6, f"waited {waited:.2f} min"
    (line,) = gave_up_lines(err)
    assert "the job's mpimaster pods do not tolerate the IB pool's taint: 0 of 2 Ready IB-pool nodes" in line
    assert fabric.IB_TAINT in line
    unschedulable = [d for d in out["diagnosis"] if d["what"] == "Unschedulable"]
    assert len(unschedulable) == 3 and all(d["message"] == message for d in unschedulable)
    assert not [d for d in out["diagnosis"] if d["what"] == "FailedScheduling"]  # the same words, said once
    assert not [d for d in out["diagnosis"] if d["what"].endswith("not advertised")]


def completing(t: float, start: float) -> tuple[str, list[dict], list[tuple[float, str]]]:
    """A run that starts at `start`: pods Running, the launcher writes its rows over a minute (several
    rows per 15-s poll, each read again in the next poll's overlap), the job is Completed 2 minutes in.
    Returns (phase, pods, log)."""
    log = [(start + 30 + 60 * i / len(AZURE_ROWS), line) for i, line in enumerate(AZURE_ROWS)]
    phase = "Completed" if t >= start + 2 * MIN else "Running"
    pods = job_pods("Succeeded" if phase == "Completed" else "Running")
    return phase, pods, log


AZURE_ROWS: list[str] = []


@pytest.fixture
def azure_rows(azure_log, monkeypatch) -> list[str]:
    rows = azure_log.splitlines()
    monkeypatch.setattr(sys.modules[__name__], "AZURE_ROWS", rows)
    return rows


def test_nodes_ready_late_the_allowance_does_not_fire_early(stack_job, azure_rows, monkeypatch, capsys):
    """The nodes are NotReady for the first 20 min (a reboot), the GPUs appear at 35 min and the RDMA
    resource at 50 min: 50 min after the collector started, but only 30 after the nodes' Ready, so
    the allowance still runs. The job then runs, its rows are streamed, and it passes."""
    ready_at, start = 20 * MIN, 50 * MIN

    def scenario(t: float) -> Cluster:
        node_list = nodes(t, ready_at=ready_at, gpu_from=35 * MIN, rdma_from=start)
        if t < start:
            return Cluster(phase="Pending", pod_group=pod_group("Pending"), nodes=node_list,
                           **healthy_operators(nic_policies=[nic_policy(False)]))
        phase, pods, log = completing(t, start)
        return Cluster(phase=phase, pod_group=pod_group("Running"), pods=pods, nodes=node_list, log=log,
                       **healthy_operators())

    code, out, err, waited, _ = run_scenario(scenario, stack_job, monkeypatch, capsys)
    assert code == 0, err
    assert out["verdict"] == "PASS" and out["job_phase"] == "Completed" and out["diagnosis"] == [], out["reasons"]
    assert out["gave_up"] is None
    assert 52 <= waited < 53, f"waited {waited:.2f} min"
    assert not gave_up_lines(err)
    # what it said while it waited: the nodes NotReady, the allowance from their NotReady (5 min before
    # the start), then from their Ready, then running
    lines = progress_lines(err)
    assert any("NodeNotReady" in p and "aks-ib-12345678-vmss000000" in p for p in lines)
    assert any(f"node-setup allowance of 45 min from {at(-5 * MIN)} (node aks-ib-12345678-vmss00000" in p
               and "NotReady) ends" in p for p in lines)
    assert any(f"node-setup allowance of 45 min from {at(ready_at)}" in p for p in lines)
    # the rows as they arrived, each once
    streamed = [line.removeprefix("[launcher] ") for line in err.splitlines() if line.startswith("[launcher]")]
    assert streamed == azure_rows


@pytest.mark.parametrize("not_ready_minutes_before_start, condition", [(50, True), (40, True), (50, False)])
def test_nodes_that_stay_not_ready_end_the_wait(stack_job, monkeypatch, capsys, not_ready_minutes_before_start,
                                                condition):
    """Every GPU node goes NotReady (containerd refuses the toolkit's drop-in and exits; the kubelet
    goes down with it, or reports the runtime down) and stays so. The node-setup allowance runs from
    when they went NotReady (the Ready condition's lastTransitionTime), or from the node's creation
    when it has no Ready condition: at once (within a minute) when that was 50 min before the collector
    started, 5 min in when 40 min before. The give-up names each node and its Ready condition."""
    since = -not_ready_minutes_before_start * MIN
    why = {0: ("Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."),
           1: ("False", "KubeletNotReady", "container runtime is down")}

    def not_ready(i: int) -> dict:
        node = ib_node(i, 0, ready_at=float("inf"))
        node["metadata"]["creationTimestamp"] = at(since)
        status, reason, message = why[i]
        node["status"]["conditions"] = [{"type": "Ready", "status": status, "reason": reason, "message": message,
                                         "lastTransitionTime": at(since)}] if condition else []
        return node

    def scenario(t: float) -> Cluster:
        return Cluster(phase="Pending", pod_group=pod_group("Pending"),
                       nodes=[system_node(), not_ready(0), not_ready(1)],
                       **healthy_operators(cluster_policies=[cluster_policy(False)]))

    code, out, err, waited, _ = run_scenario(scenario, stack_job, monkeypatch, capsys)
    assert code == 2
    expected = max(0.0, (since + ALLOWANCE) / MIN)
    assert expected <= waited < expected + 1, f"waited {waited:.2f} min"
    (line,) = gave_up_lines(err)
    assert out["verdict"] == "FAIL" and out["gave_up"] in line
    assert "0 of 2 IB-pool nodes are Ready, the job needs 2" in line
    for i in (0, 1):
        name_ = f"aks-ib-12345678-vmss00000{i}"
        text = f"Ready={why[i][0]} {why[i][1]}: {why[i][2]}" if condition else "Ready=not reported"
        assert f"{name_} NotReady since {at(since)} ({text})" in line, line
        assert {"what": "NodeNotReady", "where": f"node {name_}", "message": text} in out["diagnosis"]
    assert "node-setup allowance" in line and "containerd" in line and "kubelet" in line
    assert "GPU Operator's container toolkit" in line  # the job wants GPUs: the known cause on them is named


def test_slow_image_pull_that_succeeds(stack_job, azure_rows, monkeypatch, capsys):
    """A 25-minute pull of the test image (a large image, a slow registry). The nodes have been Ready
    for 30 min, so the allowance passes during the pull: a pull in progress is no reason to stop.
    Progress says what it waits for, without a line every poll."""
    start = 25 * MIN

    def scenario(t: float) -> Cluster:
        node_list = nodes(t, ready_at=-30 * MIN)
        if t < start:
            pods = job_pods("Pending", waiting=("ContainerCreating", ""))
            events = [event("Pod", p["metadata"]["name"], "Pulling", f'Pulling image "{IMAGE_OF_TEST}"', first=0,
                            last=0, type_="Normal", container=p["metadata"]["labels"]["volcano.sh/task-spec"])
                      for p in pods]
            return Cluster(phase="Pending", pod_group=pod_group("Inqueue"), pods=pods, events=events,
                           nodes=node_list, **healthy_operators())
        phase, pods, log = completing(t, start)
        return Cluster(phase=phase, pod_group=pod_group("Running"), pods=pods, nodes=node_list, log=log,
                       **healthy_operators())

    code, out, err, waited, _ = run_scenario(scenario, stack_job, monkeypatch, capsys)
    assert code == 0, err
    assert out["verdict"] == "PASS" and out["gave_up"] is None
    assert 27 <= waited < 28, f"waited {waited:.2f} min"
    lines = progress_lines(err)
    assert any(f"Pulling (pod {NS}/{JOB}-mpiworker-0 container mpiworker): image {IMAGE_OF_TEST}, pulling since "
               f"{at(0)}" in p for p in lines)
    # change-driven: 100 polls while pulling, a handful of lines (the pods, the findings, 5-minute heartbeats)
    heartbeats = [p for p in lines if "still waiting after" in p]
    assert 4 <= len(heartbeats) <= 5
    assert all(f"waiting for: Pulling (pod {NS}/{JOB}-mpimaster-0 container mpimaster)" in p for p in heartbeats)
    assert len(lines) < 25


@pytest.mark.parametrize("old_events_name_the_uid", [True, False])
def test_a_rerun_is_not_judged_by_the_old_pods_events(stack_job, azure_rows, monkeypatch, capsys,
                                                      old_events_name_the_uid):
    """A re-run: Volcano names the new pods as it named the old ones (<job>-mpiworker-0), and the old
    pods' events live on for about an hour. The old run's pull failed 35 to 31 min ago (3 attempts,
    then a FailedMount); the new pods start pulling 10 s in, one attempt fails at 30 s (a registry
    hiccup), the retry succeeds and the job passes. Only the new pods' events count: matched on
    involvedObject.uid, or, for an event that names no uid, not older than the pod's creation."""
    image, start = IMAGE_OF_TEST, 3 * MIN
    old_since = -35 * MIN

    def scenario(t: float) -> Cluster:
        node_list = nodes(t, ready_at=-60 * MIN)
        if t >= start:
            phase, pods, log = completing(t, start)
            return Cluster(phase=phase, pod_group=pod_group("Running"), pods=pods, log=log, nodes=node_list,
                           **healthy_operators())
        hiccup = 30 <= t < 2 * MIN
        pods = job_pods("Pending", waiting=("ErrImagePull", "rpc error: code = Unknown desc = i/o timeout")
                        if hiccup else ("ContainerCreating", ""))
        events = []
        for pod in pods:
            name_, new_uid = pod["metadata"]["name"], pod["metadata"]["uid"]
            task = pod["metadata"]["labels"]["volcano.sh/task-spec"]
            old_uid = f"old-{new_uid}" if old_events_name_the_uid else None
            events += [
                event("Pod", name_, "Pulling", f'Pulling image "{image}"', first=old_since, last=-31 * MIN,
                      count=3, type_="Normal", container=task, uid=old_uid),
                event("Pod", name_, "Failed", f'Failed to pull image "{image}": rpc error: code = NotFound desc = '
                      "not found", first=old_since, last=-31 * MIN, count=3, container=task, uid=old_uid),
                event("Pod", name_, "FailedMount", 'MountVolume.SetUp failed for volume "ssh" : secret '
                      f'"{JOB}-ssh" not found', first=-32 * MIN, last=-31 * MIN, uid=old_uid)]
            if t >= 10:
                events.append(event("Pod", name_, "Pulling", f'Pulling image "{image}"', first=10,
                                    last=10 if t < 2 * MIN else 2 * MIN, count=1 if t < 2 * MIN else 2,
                                    type_="Normal", container=task, uid=new_uid))
            if t >= 30:
                events.append(event("Pod", name_, "Failed", f'Failed to pull image "{image}": rpc error: code = '
                                    "Unknown desc = i/o timeout", first=30, last=30, container=task, uid=new_uid))
        return Cluster(phase="Pending", pod_group=pod_group("Inqueue"), pods=pods, events=events, nodes=node_list,
                       **healthy_operators())

    code, out, err, waited, _ = run_scenario(scenario, stack_job, monkeypatch, capsys)
    assert code == 0, err
    assert out["verdict"] == "PASS" and out["gave_up"] is None, out["reasons"]
    assert not gave_up_lines(err)
    lines = progress_lines(err)
    # the new pods' own failure, from its own time; nothing of the old run
    assert any(f"ErrImagePull (pod {NS}/{JOB}-mpiworker-0 container mpiworker): image {image} fails to pull since "
               f"{at(30)}: " in p and "i/o timeout" in p for p in lines), lines
    old_times = (at(old_since), at(-32 * MIN), at(-31 * MIN))
    assert not [p for p in lines if any(t in p for t in old_times) or "FailedMount" in p or "NotFound" in p]
    assert any(f"Pulling (pod {NS}/{JOB}-mpiworker-1 container mpiworker): image {image}, pulling since {at(2 * MIN)}"
               in p for p in lines)


def test_a_failed_job_pod_ends_it_as_today_and_says_which(stack_job, monkeypatch, capsys):
    """A worker is OOM-killed 3 min into the run; Volcano terminates the job (TerminateJob). The log is
    judged as before (FAIL), and the reasons name the pod, the container and its exit."""
    def scenario(t: float) -> Cluster:
        pods = job_pods("Running")
        if t >= 3 * MIN:
            worker = pods[1]["status"]
            worker["phase"] = "Failed"
            worker["containerStatuses"][0]["state"] = {"terminated": {"reason": "OOMKilled", "exitCode": 137}}
        return Cluster(phase="Terminated" if t >= 3.5 * MIN else "Running", pods=pods, pod_group=pod_group("Running"),
                       nodes=nodes(t, ready_at=-60 * MIN), log=[(30, "launcher: waiting for sshd on 2 workers")],
                       **healthy_operators())

    code, out, err, waited, _ = run_scenario(scenario, stack_job, monkeypatch, capsys, "--fail-on-low-bandwidth")
    assert code == 1
    assert 3.5 <= waited < 3.75, f"waited {waited:.2f} min"
    assert out["verdict"] == "FAIL" and out["job_phase"] == "Terminated" and out["gave_up"] is None
    assert {"what": "Terminated", "where": f"pod {NS}/{JOB}-mpiworker-0 container mpiworker",
            "message": "OOMKilled, exit code 137"} in out["diagnosis"]
    assert f"Terminated (pod {NS}/{JOB}-mpiworker-0 container mpiworker): OOMKilled, exit code 137" in out["reasons"]
    assert "[launcher] launcher: waiting for sshd on 2 workers" in err.splitlines()


def test_an_unreadable_object_is_a_finding_not_the_end(stack_job, monkeypatch, capsys):
    """Without read access to nodes (RBAC), the collector still waits and says so; without the nodes'
    Ready time it cannot start the allowance, so only its timeout ends the wait."""
    def scenario(t: float) -> Cluster:
        return Cluster(phase="Pending", pod_group=pod_group("Pending"),
                       nodes=nodes(t, ready_at=-120 * MIN, rdma_from=None), **healthy_operators())

    code, out, err, waited, _ = run_scenario(scenario, stack_job, monkeypatch, capsys, timeout_minutes=6,
                                             forbidden=("/api/v1/nodes",))
    assert code == 2 and 5.5 <= waited <= 6
    assert "timed out" in out["gave_up"]
    assert {"what": "cannot read", "where": f"nodes with label {fabric.IB_POOL_ROLE_LABEL}={fabric.IB_POOL_ROLE}",
            "message": "Kubernetes API answered 403 Forbidden"} in out["diagnosis"]
    assert any("node-setup allowance unknown (the IB pool's nodes could not be read)" in line
               for line in progress_lines(err))


@pytest.mark.parametrize("ready, not_ready_minutes_ago, gives_up", [
    (0, (50, 10), True),  # both are needed: one is past its allowance, so waiting cannot help
    (1, (50, 10), False),  # one more is needed: the one NotReady for 10 min may still come up
    (1, (60, 50), True),  # one more is needed, and both are past their allowance
])
def test_the_not_ready_allowance_waits_while_enough_nodes_may_still_come_up(stack_job, ready, not_ready_minutes_ago,
                                                                             gives_up):
    """The job needs 2 nodes. With fewer Ready, each NotReady node has the allowance from when it went
    NotReady; the wait ends once fewer of them are within it than nodes are missing."""
    from clusterside.diagnose import Diagnoser
    from clusterside.snapshot import Snapshot

    now = T0
    node_list = [ib_node(i, 0, ready_at=-60 * MIN) for i in range(ready)]
    for i, minutes in enumerate(not_ready_minutes_ago, start=ready):
        node_list.append(ib_node(i, 0, ready_at=float("inf"), not_ready_since=-minutes * MIN))
    snap = Snapshot(namespace=NS, job=stack_job, nodes=node_list)
    verdict = Diagnoser(NS, JOB, setup_allowance_seconds=ALLOWANCE).assess(snap, now)
    assert (verdict.give_up is not None) == gives_up, verdict.give_up
    if gives_up:
        assert verdict.give_up.startswith(f"{ready} of {ready + 2} IB-pool nodes are Ready, the job needs 2")
    else:
        assert f"from {at(-10 * MIN)} (node aks-ib-12345678-vmss00000{ready + 1} NotReady) ends" in verdict.allowance
