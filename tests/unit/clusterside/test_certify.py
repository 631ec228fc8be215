"""The certifier (`python -m verify certify`) against a fake API server that stores objects and records
every write (tests/fake_kube_store.py): the scenarios of issue 21 and issue 23 item 2. Each runs the real CLI
in this process on a finished 4-node fabric test job whose launcher log is CONSTRUCTED (tests/nccl_logs.py
lines, doctor markers as the launcher prints them; nothing here was measured)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clusterside import certify
from core import catalog, fabric
from tests.fake_kube_store import FakeApi
from tests.nccl_logs import launcher_log
from tests.paths import ROOT
from verify import __main__ as cli
from verify import doctor, sections
from verify.result import FabricResult

NS, JOB = "fabric-test", "nccl-allreduce"
H100 = catalog.lookup("Standard_ND96isr_H100_v5")
GOOD = H100.allreduce_expectation(2).baseline_gbps
SLOW = GOOD / 2  # one rail at half rate drags its pairs down
THRESHOLD = "300"  # fabricTest.thresholdGbps: H100's 2-node line is derived, so an override makes FAIL a FAIL
UNCERT = (fabric.HOLD_TAINT_KEY, fabric.UNCERTIFIED, "NoSchedule")
QUAR = (fabric.FABRIC_TAINT_KEY, fabric.QUARANTINED, "NoSchedule")
POOL = (fabric.IB_TAINT_KEY, fabric.IB_TAINT_VALUE, "NoSchedule")
HOSTS = [f"{JOB}-mpiworker-{i}" for i in range(4)]
# As the stack's day-0 certifier: it waits for the job, and so sees where the workers run before they go.
WAIT = ("--wait-minutes", "1", "--poll-seconds", "0.01")


def doctor_log(n: int = 4, slow: tuple[int, ...] = (3,), *, everyone_slow: bool = False, job: str = JOB) -> str:
    """An all-nodes run and the doctor's planned pairs (verify.doctor.plan_pairs) of Volcano Job `job`: a pair with
    a slow node runs at SLOW, every other at GOOD; `everyone_slow`: every pair at SLOW (a fabric-wide cause)."""
    hosts = [f"{job}-mpiworker-{i}" for i in range(n)]
    out = [sections.marker("allreduce", hosts=hosts), launcher_log(hosts, 8, busbw_gbps=SLOW if slow or everyone_slow
                                                                       else GOOD)]
    if slow or everyone_slow:
        out.append(sections.marker("doctor", mode="auto", run="yes", reason="allreduce-below-pass-line", budget_s=600))
        for r, pairs in enumerate(doctor.plan_pairs(n), start=1):
            for a, b in pairs:
                out.append(sections.marker("pair", round=r, hosts=[f"{hosts[a]}.{job}", f"{hosts[b]}.{job}"]))
                bad = everyone_slow or {a, b} & set(slow)
                out.append(launcher_log([hosts[a], hosts[b]], 8, busbw_gbps=SLOW if bad else GOOD))
        out.append(sections.marker("doctor-end", elapsed_s=300, budget_s=600))
    return "\n".join(out) + "\n"


def node(i: int, taint: str | None = fabric.UNCERTIFIED, *, ours: bool = True, labels: dict | None = None,
         conditions: list | None = None, unschedulable: bool = False, certified: bool = False,
         boot: str = "boot-1", certified_boot: str | None = None, held_boot: str | None = None) -> dict:
    taints = [dict(zip(("key", "value", "effect"), POOL, strict=True))]
    if taint:
        key = fabric.HOLD_TAINT_KEY if taint == fabric.UNCERTIFIED else fabric.FABRIC_TAINT_KEY
        taints.append({"key": key, "value": taint, "effect": "NoSchedule"})
    annotations = {certify.QUARANTINED_BY_ANNOTATION: certify.CERTIFIER} if taint == fabric.QUARANTINED and ours else {}
    conds = [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready"}]
    if certified or certified_boot:
        conds.append({"type": fabric.FABRIC_CONDITION, "status": "True", "reason": "FabricTestPassed", "message": "x"})
    if certified_boot:
        annotations[certify.CERTIFIED_AT_ANNOTATION] = json.dumps(
            {"at": "2026-02-01T00:00:00Z", "run": "day0", "against": [], "boot_id": certified_boot})
    if held_boot:
        annotations[certify.HELD_ANNOTATION] = json.dumps({"at": "2026-02-01T00:00:00Z", "boot_id": held_boot})
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"aks-ib-12345678-vmss00000{i}", "uid": f"uid-node-{i}", "annotations": annotations,
                         "labels": {fabric.IB_POOL_ROLE_LABEL: fabric.IB_POOL_ROLE, fabric.PKEY_LABEL: "0x8001",
                                    fabric.PLACEMENT_GROUP_LABEL: "pg-1", **(labels or {})}},
            "spec": {"providerID": "azure:///subscriptions/0000/resourceGroups/mc_rg/providers/Microsoft.Compute/"
                                   f"virtualMachineScaleSets/aks-ib-12345678-vmss/virtualMachines/{i}",
                     "taints": taints, **({"unschedulable": True} if unschedulable else {})},
            "status": {"conditions": conds + (conditions or []), "nodeInfo": {"bootID": f"{boot}-{i}"}}}


def name(i: int) -> str:
    return f"aks-ib-12345678-vmss00000{i}"


def pod(pod_name: str, task: str, node_name: str, job: str = JOB) -> dict:
    """A pod of the job as Volcano placed it: the launcher has finished (its mpirun ended), a worker runs
    sshd until the job ends (then Volcano deletes it: tests/fake_kube_store.py)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name, "namespace": NS, "creationTimestamp": "2026-03-01T12:00:00Z",
                         "labels": {"volcano.sh/job-name": job, "volcano.sh/task-spec": task}},
            "spec": {"nodeName": node_name, "hostname": pod_name, "subdomain": job,
                     "containers": [{"name": task, "image": "nccl-tests"}]},
            "status": {"phase": "Succeeded" if task == "mpimaster" else "Running"}}


def cluster(nodes: list[dict], log: str, n: int = 4, extra_configmaps: tuple[str, ...] = ()) -> FakeApi:
    pods = [pod(f"{JOB}-mpimaster-0", "mpimaster", "aks-system-0")] + [
        pod(HOSTS[i], "mpiworker", name(i)) for i in range(n)]
    cms = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": cm, "namespace": NS}, "data": {}}
           for cm in ("fabric-certifier-result", "fabric-certifier-history", *extra_configmaps)]
    return FakeApi(nodes=nodes, pods=pods, jobs=[volcano_job(n)], configmaps=cms,
                   phases={JOB: ["Running", "Completed"]},
                   logs={f"/api/v1/namespaces/{NS}/pods/{JOB}-mpimaster-0": log})


def volcano_job(n: int, phase: str = "Running") -> dict:
    """The fabric test job as the certifier reads it: its tasks (Volcano names their pods from them)."""
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": JOB, "namespace": NS},
            "spec": {"minAvailable": n + 1, "tasks": [{"name": "mpimaster", "replicas": 1},
                                                      {"name": "mpiworker", "replicas": n}]},
            "status": {"state": {"phase": phase}}}


def certify_run(api: FakeApi, tmp_path: Path, capsys, *extra: str, n: int = 4) -> tuple[int, dict]:
    kubeconfig = tmp_path / "kubeconfig.json"
    kubeconfig.write_text(api.kubeconfig())
    code = cli.main(["certify", "--kubeconfig", str(kubeconfig), "--namespace", NS, "--job", JOB, "--sku",
                     H100.vm_size, "--nodes", str(n), "--threshold-gbps", THRESHOLD, "--json", *WAIT,
                     "--result-configmap", "fabric-certifier-result", "--history-configmap",
                     "fabric-certifier-history", *extra])
    out = capsys.readouterr().out
    return code, json.loads(out)


def node_writes(api: FakeApi) -> list[str]:
    return [path for method, path, _ in api.writes if "/nodes/" in path]


# --- the scenarios --------------------------------------------------------------------------------
def test_day0_three_good_nodes_lose_uncertified_and_the_slow_one_is_quarantined_with_evidence(tmp_path, capsys):
    with cluster([node(i) for i in range(4)], doctor_log(slow=(3,))) as api:
        code, out = certify_run(api, tmp_path, capsys)
    assert code == 0 and out["certification"]["verdict"] == "FAIL" == out["result"]["verdict"]
    for i in range(3):
        assert api.taints(name(i)) == [POOL], f"{name(i)} keeps only the pool taint"
        assert api.condition(name(i), fabric.FABRIC_CONDITION)["status"] == "True"
        record = json.loads(api.node(name(i))["metadata"]["annotations"][certify.CERTIFIED_AT_ANNOTATION])
        assert {a["peer"] for a in record["against"]} <= {name(j) for j in range(3)} and record["at"]
    assert api.taints(name(3)) == [POOL, QUAR]
    cond = api.condition(name(3), fabric.FABRIC_CONDITION)
    assert cond["status"] == "False" and cond["reason"] == "FabricTestFailed" and "slow" in cond["message"]
    (event,) = [e for e in api.events() if e["reason"] == "FabricQuarantined"]
    assert event["regarding"] == {"apiVersion": "v1", "kind": "Node", "name": name(3), "uid": "uid-node-3"}
    assert event["metadata"]["namespace"] == "default"  # the one namespace the API accepts for a Node's Events
    assert event["type"] == "Warning" and f"{SLOW:.2f}" in event["note"]  # the figures behind it
    result_write = next(i for i, (_, path, _) in enumerate(api.writes) if path.endswith("/fabric-certifier-result"))
    node_or_event = [i for i, (_, path, _) in enumerate(api.writes) if "/nodes/" in path or "/events" in path]
    assert result_write < min(node_or_event), "the verdict is written before any node write"
    # suspects name the node and the VM; the pod host name stays as evidence
    (suspect,) = out["certification"]["suspects"]
    assert (suspect["node"], suspect["vm"], suspect["host"]) == (name(3), "aks-ib-12345678-vmss_3", f"{HOSTS[3]}.{JOB}")
    # the result and the history ring are written where the stack reads them
    kept = api.configmap(NS, "fabric-certifier-result")["data"]
    assert FabricResult.from_json(json.loads(kept["result.json"])).verdict == "FAIL"  # the typed result
    assert json.loads(kept["certification.json"])["suspects"][0]["node"] == name(3)
    history = api.configmap(NS, "fabric-certifier-history")["data"]
    assert json.loads(history[name(3)])[-1]["action"] == "quarantine"


def test_the_breaker_trips_when_the_share_is_exceeded_and_nothing_is_tainted(tmp_path, capsys):
    with cluster([node(i) for i in range(4)], doctor_log(slow=(3,))) as api:
        code, out = certify_run(api, tmp_path, capsys, "--max-quarantine-share", "0.2")
    tripped = out["certification"]["breaker"]
    assert "circuit breaker" in tripped and "nothing is changed" in tripped
    assert node_writes(api) == [], "a tripped breaker changes no node"
    assert all(api.taints(name(i)) == [POOL, UNCERT] for i in range(4))
    assert [e["reason"] for e in api.events()] == ["FabricCircuitBreakerOpen"]


def test_two_slow_nodes_of_four_trip_the_default_breaker():
    nodes = [certify.facts(node(i)) for i in range(4)]
    decisions = [certify.Decision(name(i), None, certify.QUARANTINE, "slow", "FAIL") for i in (2, 3)]
    assert "2 of 4" in certify.breaker(nodes, decisions, certify.Policy())


def test_never_the_last_two_certified_nodes(tmp_path, capsys):
    nodes = [certify.facts(node(i, None, certified=True)) for i in range(2)] + [
        certify.facts(node(i, fabric.QUARANTINED)) for i in (2, 3)]
    decisions = [certify.Decision(name(0), None, certify.QUARANTINE, "slow", "FAIL")]
    assert "leave 1 certified" in certify.breaker(nodes, decisions, certify.Policy(max_quarantine_share=1.0))


def test_fabric_wide_slowness_quarantines_no_one_and_certifies_no_one(tmp_path, capsys):
    with cluster([node(i) for i in range(4)], doctor_log(slow=(), everyone_slow=True)) as api:
        code, out = certify_run(api, tmp_path, capsys)
    assert out["certification"]["verdict"] == "FAIL" and out["certification"]["suspects"] == []
    assert all(api.taints(name(i)) == [POOL, UNCERT] for i in range(4))
    assert not [p for p in node_writes(api) if not p.endswith("/status")] and not node_writes(api)
    assert any("fabric-wide" in n for n in out["certification"]["notes"])


def test_a_persons_cordon_and_quarantine_are_left_alone(tmp_path, capsys):
    nodes = [node(0, unschedulable=True), node(1, fabric.QUARANTINED, ours=False), node(2), node(3)]
    with cluster(nodes, doctor_log(slow=())) as api:  # the whole run PASSes
        code, out = certify_run(api, tmp_path, capsys)
    assert out["certification"]["verdict"] == "PASS"
    assert api.node(name(0))["spec"]["unschedulable"] is True  # the cordon stays
    assert api.taints(name(0)) == [POOL]  # the AKS uncertified taint is the certifier's to lift
    assert api.taints(name(1)) == [POOL, QUAR], "a quarantine the certifier did not set is not removed"
    for _, _path, body in api.writes:
        assert "unschedulable" not in json.dumps(body)


def test_a_quarantined_node_is_released_after_a_pass(tmp_path, capsys):
    nodes = [node(i, None, certified=True) for i in range(3)] + [node(3, fabric.QUARANTINED)]
    with cluster(nodes, doctor_log(slow=())) as api:
        code, out = certify_run(api, tmp_path, capsys)
    assert api.taints(name(3)) == [POOL]
    assert certify.QUARANTINED_BY_ANNOTATION not in api.node(name(3))["metadata"]["annotations"]
    assert api.condition(name(3), fabric.FABRIC_CONDITION)["status"] == "True"
    assert any(e["reason"] == "FabricCertified" and "released" in e["note"] for e in api.events())


def test_a_node_with_an_npd_condition_is_not_certified_and_says_why(tmp_path, capsys):
    npd = {"type": "IBLinkFlapping", "status": "True", "reason": "IBLinkFlapping",
           "message": "mlx5_ib3 port 1 flapped 6 times in 10 min", "lastTransitionTime": "2026-03-01T11:00:00Z"}
    nodes = [node(0, conditions=[npd]), node(1), node(2), node(3)]
    with cluster(nodes, doctor_log(slow=())) as api:
        code, out = certify_run(api, tmp_path, capsys)
    assert api.taints(name(0)) == [POOL, UNCERT], "held: not a known-good peer"
    held = next(d for d in out["certification"]["decisions"] if d["node"] == name(0))
    assert held["action"] == "hold" and "IBLinkFlapping" in held["reason"]
    assert all(api.taints(name(i)) == [POOL] for i in (1, 2, 3))


def test_a_node_on_another_pkey_is_named_before_any_nccl_result_dry_run(tmp_path, capsys):
    nodes = [node(0), node(1), node(2, labels={fabric.PKEY_LABEL: "0x8002"}), node(3)]
    with cluster(nodes, doctor_log(slow=())) as api:
        kubeconfig = tmp_path / "k.json"
        kubeconfig.write_text(api.kubeconfig())
        assert cli.main(["certify", "--kubeconfig", str(kubeconfig), "--namespace", NS, "--json", "--dry-run"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert api.writes == [] and not any("/log" in p for _, p in api.requests), "dry run, no log read"
    cert = out["certification"]
    assert cert["verdict"] == "FAIL" and out["result"] is None
    assert cert["reasons"][0].startswith(f"these nodes cannot reach those: {name(2)} are outside the fabric of")
    assert [s["node"] for s in cert["suspects"]] == [name(2)]
    assert cert["suspects"][0]["evidence"]["groups"]


def test_a_split_pool_names_the_outsider_and_judges_the_other_three(tmp_path, capsys):
    nodes = [node(0), node(1), node(2, labels={fabric.PLACEMENT_GROUP_LABEL: "pg-2"}), node(3)]
    with cluster(nodes, doctor_log(slow=(2,))) as api:  # its pairs across the split are slow
        code, out = certify_run(api, tmp_path, capsys)
    assert out["result"]["reasons"][0].startswith(f"these nodes cannot reach those: {name(2)}")
    assert api.taints(name(2)) == [POOL, QUAR]
    assert all(api.taints(name(i)) == [POOL] for i in (0, 1, 3)), "the other three judged on their own pairs"
    for d in out["certification"]["decisions"]:
        assert name(2) not in {a["peer"] for a in d["evidence"].get("against") or []}


def test_label_mode_writes_conditions_and_labels_but_no_taint(tmp_path, capsys):
    with cluster([node(i) for i in range(4)], doctor_log(slow=(3,))) as api:
        certify_run(api, tmp_path, capsys, "--mode", "label")
    assert all(api.taints(name(i)) == [POOL, UNCERT] for i in range(4))
    assert api.node(name(3))["metadata"]["labels"][fabric.FABRIC_STATE_LABEL] == "quarantined"
    assert api.condition(name(3), fabric.FABRIC_CONDITION)["status"] == "False"


@pytest.mark.parametrize("mode_args", [["--dry-run"], ["--mode", "off"], ["--mode", "off", "--dry-run"]])
def test_dry_run_and_off_change_no_node_and_print_the_decisions(tmp_path, capsys, mode_args):
    """Neither touches a node or the history. Mode off still writes its report, the result ConfigMap the
    stack's fabricVerdict reads (else the verdict of a stack with `certifier.mode: off` stayed PENDING);
    a dry run writes nothing at all."""
    with cluster([node(i) for i in range(4)], doctor_log(slow=(3,))) as api:
        code, out = certify_run(api, tmp_path, capsys, *mode_args)
        kept = api.configmap(NS, "fabric-certifier-result")["data"]
    written = [path for _, path, _ in api.writes]
    planned_taints = any(w.startswith("would set taints of node " + name(3)) for w in out["writes"])
    if "--dry-run" in mode_args:
        assert written == [] and kept == {}
    else:
        assert written == [f"/api/v1/namespaces/{NS}/configmaps/fabric-certifier-result"]
        assert FabricResult.from_json(json.loads(kept["result.json"])).verdict == out["result"]["verdict"]
    assert planned_taints == ("--mode" not in mode_args), "a dry run says what it would write; off plans no node write"
    actions = {d["node"]: d["action"] for d in out["certification"]["decisions"]}
    assert actions == {name(0): "certify", name(1): "certify", name(2): "certify", name(3): "quarantine"}


def test_fail_on_low_bandwidth_exits_1_after_applying(tmp_path, capsys):
    with cluster([node(i) for i in range(4)], doctor_log(slow=(3,))) as api:
        code, out = certify_run(api, tmp_path, capsys, "--fail-on-low-bandwidth")
    assert code == 1 and api.taints(name(3)) == [POOL, QUAR]


def test_a_concurrent_taint_change_fails_the_write_instead_of_overwriting_it(tmp_path, capsys):
    with cluster([node(i) for i in range(4)], doctor_log(slow=(3,))) as api:
        real = api.answer

        def racing(method, path, query, body, content_type):
            if method == "PATCH" and content_type == "application/json-patch+json" and path.endswith(name(0)):
                api.put(path, {**api.objects[path]})  # someone else wrote the node since it was read
            return real(method, path, query, body, content_type)

        api.answer = racing
        kubeconfig = tmp_path / "k.json"
        kubeconfig.write_text(api.kubeconfig())
        code = cli.main(["certify", "--kubeconfig", str(kubeconfig), "--namespace", NS, "--job", JOB, "--sku",
                         H100.vm_size, "--nodes", "4", "--threshold-gbps", THRESHOLD, *WAIT])
    assert code == 2 and "422" in capsys.readouterr().err
    assert api.taints(name(0)) == [POOL, UNCERT]


def test_the_certifier_runs_on_the_standard_library_alone(tmp_path):
    """What the in-cluster pod runs: `python -S` (no site-packages: no kubernetes, no PyYAML)."""
    with cluster([node(i) for i in range(4)], doctor_log(slow=(3,))) as api:
        kubeconfig = tmp_path / "k.json"
        kubeconfig.write_text(api.kubeconfig())
        done = subprocess.run([sys.executable, "-S", "-m", "verify", "certify", "--kubeconfig", str(kubeconfig),
                               "--namespace", NS, "--job", JOB, "--sku", H100.vm_size, "--nodes", "4",
                               "--threshold-gbps", THRESHOLD, "--json", *WAIT], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert api.taints(name(3)) == [POOL, QUAR]


def test_history_is_a_bounded_ring_and_a_node_below_its_own_median_is_flagged():
    records = {name(0): [{"busbw_gbps": GOOD} for _ in range(12)]}
    plan = certify.Plan((certify.Decision(name(0), None, certify.CERTIFY, "passed", "PASS",
                                          {"against": [{"peer": name(1), "busbw_gbps": GOOD * 0.7}]}),), None)
    from clusterside import certify_kube

    ring = json.loads(certify_kube.history_update(records, plan, at="t", run="r", keep=10)[name(0)])
    assert len(ring) == 10 and ring[-1]["busbw_gbps"] == GOOD * 0.7
    (warning,) = certify.relative_warnings(records, plan.decisions)
    assert warning.startswith(name(0)) and "own recent median" in warning


def test_metrics_for_a_pushgateway():
    from clusterside import certify_kube

    nodes = [certify.facts(node(0)), certify.facts(node(1, fabric.QUARANTINED))]
    text = certify_kube.metrics_text(certify.Plan((), "tripped"), nodes, 1.0)
    assert f'aks_infiniband_fabric_node_state{{node="{name(1)}",state="quarantined"}} 1' in text
    assert "aks_infiniband_fabric_breaker_open 1" in text


def test_our_hold_on_a_boot_that_passed_is_lifted_a_reimaged_node_and_a_persons_hold_stay(tmp_path, capsys):
    """The admission loop may hold a node while a run certifies it: the same boot as the recorded
    certification is lifted without a test; a new bootID (re-image, reboot) stays held for a test; a hold
    this certifier did not record (a person's) stays."""
    nodes = [node(0, certified_boot="boot-1-0", held_boot="boot-1-0"),
             node(1, certified_boot="old-boot-1", held_boot="boot-1-1"), node(2, certified_boot="boot-1-2")]
    with FakeApi(nodes=nodes) as api:
        kubeconfig = tmp_path / "k.json"
        kubeconfig.write_text(api.kubeconfig())
        assert cli.main(["certify", "--kubeconfig", str(kubeconfig), "--namespace", NS, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
    assert api.taints(name(0)) == [POOL]
    assert api.taints(name(1)) == [POOL, UNCERT] and api.taints(name(2)) == [POOL, UNCERT]
    lifted = next(d for d in out["certification"]["decisions"] if d["node"] == name(0))
    assert "held on a boot that passed" in lifted["reason"] and lifted["evidence"]["at"] == "2026-02-01T00:00:00Z"


def test_the_pool_taint_of_an_older_release_reads_as_a_hold_and_is_lifted_by_a_pass(tmp_path, capsys):
    """Stacks deployed before the admission loop carry `aks-infiniband.io/fabric=uncertified` from the pool:
    read as held, and lifted like the hold when the node passes (on AKS only once the pool no longer sets it)."""
    nodes = [node(i, taint=None) for i in range(4)]
    for n in nodes:
        n["spec"]["taints"].append({"key": fabric.FABRIC_TAINT_KEY, "value": fabric.UNCERTIFIED,
                                    "effect": "NoSchedule"})
    with cluster(nodes, doctor_log(slow=())) as api:
        code, out = certify_run(api, tmp_path, capsys)
    assert code == 0 and all(api.taints(name(i)) == [POOL] for i in range(4))


# --- the rack's NVLink run (GB200/GB300): judged by the rack figure, no node changed -------------------
GB300 = catalog.lookup("Standard_ND128isr_GB300_v6")
RACK_CM = "fabric-certifier-rack-result"


def rack_run(api: FakeApi, tmp_path: Path, capsys, *extra: str) -> tuple[int, dict | None, str]:
    kubeconfig = tmp_path / "kubeconfig.json"
    kubeconfig.write_text(api.kubeconfig())
    code = cli.main(["certify", "--kubeconfig", str(kubeconfig), "--namespace", NS, "--job", JOB, "--sku",
                     GB300.vm_size, "--nodes", "2", "--json", "--result-configmap", RACK_CM, *WAIT, *extra])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else None, captured.err


def test_the_rack_run_is_judged_by_the_rack_figure_writes_its_result_and_changes_no_node(tmp_path, capsys):
    # 500 GB/s at the largest size: above the IB-only line, below the rack's (the catalog's MNNVL figure)
    log = launcher_log(HOSTS[:2], GB300.gpus_per_vm, busbw_gbps=500.0, hcas=4)
    rack_line = GB300.allreduce_rack.baseline_gbps
    with cluster([node(i) for i in range(2)], log, n=2, extra_configmaps=(RACK_CM,)) as api:
        code, out, _ = rack_run(api, tmp_path, capsys, "--mode", "off", "--rack")
        assert code == 0 and out["result"]["verdict"] == "FAIL" == out["certification"]["verdict"]
        assert out["result"]["threshold_gbps"] < rack_line and out["result"]["threshold_gbps"] > 500.0
        # the verdict's figure on the same log is the IB-only one: it passes
        code, ib, _ = rack_run(api, tmp_path, capsys, "--mode", "off", "--dry-run")  # (its result not kept)
        assert ib["result"]["verdict"] == "PASS" and ib["result"]["threshold_gbps"] < 500.0
    assert node_writes(api) == [] and api.events() == [], "the rack run judges NVLink: no node is touched"
    assert all(api.taints(name(i)) == [POOL, UNCERT] for i in range(2))
    kept = api.configmap(NS, RACK_CM)["data"]  # what the stack's rack outputs read
    assert FabricResult.from_json(json.loads(kept["result.json"])).verdict == "FAIL"
    assert api.configmap(NS, "fabric-certifier-history")["data"] == {}  # a node's history is the fabric's only
    assert api.configmap(NS, "fabric-certifier-result")["data"] == {}  # never the verdict's


@pytest.mark.parametrize("extra, why", [
    (("--rack",), "--rack judges the --job of the rack's NVLink run, not the fabric: it needs --mode off"),
    (("--rack", "--mode", "label"), "it needs --mode off (got label)"),
    (("--rack", "--mode", "off", "--sku", "Standard_ND96isr_H100_v5"),
     "--rack applies to the NCCL all-reduce of a multi-node-NVLink size (GB200, GB300), not Standard_ND96isr_H100_v5"),
    # a kind whose record has no rack run (Kind.rack_run), even on a GB size
    (("--rack", "--mode", "off", "--kind", "p2p"), "--rack applies to the NCCL all-reduce of a multi-node-NVLink"),
], ids=["default-mode", "label", "no-mnnvl", "kind-without-rack-run"])
def test_the_rack_flag_is_refused_where_it_would_certify_or_cannot_apply(tmp_path, capsys, extra, why):
    with cluster([node(i) for i in range(2)], launcher_log(HOSTS[:2], 4), n=2) as api:
        code, _, err = rack_run(api, tmp_path, capsys, *extra)
    assert code == 2 and why in err
    assert api.writes == []


@pytest.mark.parametrize("kind, refused", [("nccl", True), ("p2p", False)])
def test_a_job_of_a_kind_that_spans_the_pool_needs_nodes_and_one_of_a_fixed_pair_does_not(tmp_path, capsys, kind,
                                                                                           refused):
    """Kind.nodes None (the all-reduce spans the pool): `certify --job` must be told how many; a fixed count
    (point to point's two) it knows."""
    kubeconfig = tmp_path / "kubeconfig.json"
    kubeconfig.write_text("{}")  # never read: the arguments are checked first
    code = cli.main(["certify", "--kubeconfig", str(kubeconfig), "--namespace", NS, "--job", JOB, "--kind", kind,
                     "--mode", "off", "--dry-run", "--wait-minutes", "0"])
    err = capsys.readouterr().err
    said = f"--nodes is required with --job and --kind {kind}"
    assert (code == 2 and said in err) if refused else said not in err


def test_the_doctor_judges_each_pair_against_its_tier_from_the_nodes_torsets(tmp_path, capsys):
    """The certifier hands the doctor each worker's torset (the nodes' ib/torset labels, by the host names
    the log's markers use), as the doctor's own interface takes them: the result's figures per tier."""
    torset = {0: "torset-a", 1: "torset-a", 2: "torset-b", 3: "torset-b"}
    nodes = [node(i, labels={fabric.TORSET_LABEL: torset[i]}) for i in range(4)]
    with cluster(nodes, doctor_log(slow=(3,))) as api:
        code, out = certify_run(api, tmp_path, capsys)
    assert code == 0
    tiers = out["result"]["doctor"]["tiers"]
    assert set(tiers) >= {"within-torset", "across-torsets"}, tiers
    with cluster([node(i) for i in range(4)], doctor_log(slow=(3,))) as api:
        assert certify_run(api, tmp_path, capsys)[1]["result"]["doctor"]["tiers"] == {}, "no labels, no tiers"
