"""Volcano's own processes (v1.10.0, e2e/volcano.py) drive the stack's fabric test Job on the real API server:
its webhook refuses what Volcano refuses, its scheduler places pods where the Job's selectors send them and
only as a whole gang, its controller's `ssh` and `svc` plugins make their objects for the Job and remove
them after it, and the certifier's re-test Job is admitted and scheduled on the nodes it names. What v1.10
cannot show of the stack's v1.15.1 (topology-aware placement, HyperNodes, DRA, 1.15-only fields) is said in
docs/real-control-plane.md, not tested here."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from clusterside import certify_recurring
from components.fabric import certifier as certifier_mod
from e2e import fabric_run, volcano
from e2e.cluster import wait
from e2e.tests.test_certifier import SA, World
from tests.unit.clusterside.test_certify import doctor_log


@pytest.fixture
def world(planes, tmp_path):
    return World(planes, tmp_path)


def variant(world: World, name: str, workers: int, min_available: int) -> dict:
    """The rendered Job under another name, with `workers` workers and `minAvailable`."""
    job = json.loads(json.dumps(world.job))
    job["metadata"]["name"] = name
    next(t for t in job["spec"]["tasks"] if t["name"] == "mpiworker")["replicas"] = workers
    job["spec"]["minAvailable"] = min_available
    return job


def plugin_objects(world: World, job: str) -> dict[str, bool]:
    """Whether each object Volcano's `ssh` and `svc` plugins make for `job` exists (their names:
    pkg/controllers/job/plugins/ssh/ssh.go secretName, svc/svc.go cmName and the Service)."""
    ns = world.job["metadata"]["namespace"]
    return {what: world.kubectl("get", what, "-n", ns, check=False).returncode == 0
            for what in (f"secret/{job}-ssh", f"configmap/{job}-svc", f"service/{job}")}


def test_the_processes_are_volcanos_own_and_run_as_the_manifests_accounts(world):
    for name in volcano.PROCESSES:
        assert world.plane.alive(name), name
    for program, account in volcano.ACCOUNTS.items():
        text = (world.plane.state / f"{program}.kubeconfig").read_text()
        assert '"token"' in text and "client-certificate" not in text, program
        own = world.plane.state / f"{program}.kubeconfig"
        who = subprocess.run([str(world.plane.bin / "kubectl"), f"--kubeconfig={own}", "auth", "whoami", "-o", "json"],
                             capture_output=True, text=True, check=True)
        assert json.loads(who.stdout)["status"]["userInfo"]["username"] == \
            f"system:serviceaccount:{volcano.NAMESPACE}:{account}"
    queue = json.loads(world.kubectl("get", "queues.scheduling.volcano.sh", "default", "-o", "json").stdout)
    assert queue["status"]["state"] == "Open"
    # the manifest's webhook configurations are as declared (caBundle aside), the stand-in's paths included
    hooks = world.kubectl("get", "validatingwebhookconfigurations", "-o", "json").stdout
    names = {h["metadata"]["name"] for h in json.loads(hooks)["items"]}
    assert {"volcano-admission-service-jobs-validate", "volcano-admission-service-podgroups-validate"} <= names


def test_the_webhook_refuses_a_job_whose_gang_is_larger_than_its_replicas(world):
    bad = variant(world, "too-large-gang", workers=len(world.ib), min_available=len(world.ib) + 5)
    done = world.kubectl("create", "-f", "-", input=json.dumps(bad), check=False)
    assert done.returncode != 0
    # pkg/webhooks/admission/jobs/validate/admit_job.go of v1.10.0
    assert "admission webhook \"validatejob.volcano.sh\" denied the request" in done.stderr, done.stderr
    assert "job 'minAvailable' should not be greater than total replicas in tasks" in done.stderr, done.stderr
    assert world.kubectl("get", "jobs.batch.volcano.sh", "too-large-gang", "-n", bad["metadata"]["namespace"],
                         check=False).returncode != 0


def test_the_rendered_job_runs_as_one_gang_on_the_ib_nodes_and_its_plugin_objects_go_with_it(world):
    name = world.job["metadata"]["name"]
    during: dict[str, bool] = {}
    pods = world.finished_run(doctor_log(slow=(), job=name), running=lambda: during.update(plugin_objects(world, name)))
    assert during and all(during.values()), f"the plugins' objects while the Job runs: {during}"
    by_task: dict[str, list[dict]] = {}
    for p in pods:
        by_task.setdefault(p["metadata"]["labels"]["volcano.sh/task-spec"], []).append(p)
    workers, (launcher,) = by_task["mpiworker"], by_task["mpimaster"]
    # the Job's nodeSelector sends the launcher to the IB pool as well; one worker per IB node
    assert launcher["spec"]["nodeName"] in world.ib
    assert sorted(p["spec"]["nodeName"] for p in workers) == world.ib
    ns = world.job["metadata"]["namespace"]
    uid = json.loads(world.kubectl("get", "jobs.batch.volcano.sh", name, "-n", ns, "-o", "json").stdout
                     )["metadata"]["uid"]
    for p in pods:  # what Volcano's controller and its svc plugin set on each pod
        assert p["spec"]["schedulerName"] == "volcano" and p["spec"]["subdomain"] == name
        assert p["spec"]["hostname"] == p["metadata"]["name"]
        assert p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == f"{name}-{uid}"  # v1.10's PodGroup
        env = {e["name"] for c in p["spec"]["containers"] for e in c.get("env") or []}
        assert {"VC_MPIWORKER_HOSTS", "VC_MPIMASTER_HOSTS"} <= env, sorted(env)
    # the launcher ended (exit 0: e2e/kwok-stage-mpirun.yaml) and CompleteJob's killJob deleted the workers,
    # which ran until then (PodRetainPhaseSoft): what clusterside/certify_kube.py record_placement is for
    wait("Volcano's controller to delete the workers", lambda: [
        p["metadata"]["name"] for p in fabric_run.pods(world.plane, world.job)] == [launcher["metadata"]["name"]], 30)
    (left,) = fabric_run.pods(world.plane, world.job)
    assert left["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    # the Job is over: the controller's killJob has run the plugins' OnJobDelete
    assert plugin_objects(world, name) == dict.fromkeys(plugin_objects(world, name), False)
    # and its PodGroup (killJob deletes it once the Job completes: read after the run, it may be gone already)
    wait(f"Volcano's controller to delete the PodGroup {name}-{uid}", lambda: world.kubectl(
        "get", "podgroups.scheduling.volcano.sh", f"{name}-{uid}", "-n", ns, check=False).returncode != 0, 30)


def test_a_job_asking_for_more_gpu_nodes_than_exist_stays_pending_with_no_pod_bound(world):
    """Gang scheduling: twice the IB nodes' worth of workers; nothing is bound, not even the pods that
    would fit. Meanwhile the plugins' objects exist for it; deleted, they are gone."""
    job = variant(world, "too-many-nodes", workers=2 * len(world.ib), min_available=2 * len(world.ib) + 1)
    world.kubectl("create", "-f", "-", input=json.dumps(job))
    ns = job["metadata"]["namespace"]
    deadline = time.monotonic() + 15  # fifteen scheduling cycles (--schedule-period=1s)
    while time.monotonic() < deadline:
        bound = [p["metadata"]["name"] for p in fabric_run.pods(world.plane, job) if p["spec"].get("nodeName")]
        assert bound == [], bound
        time.sleep(1)
    state = fabric_run.job_state(world.plane, job)["status"]["state"]["phase"]
    assert state == "Pending", state
    (group,) = json.loads(world.kubectl("get", "podgroups.scheduling.volcano.sh", "-n", ns, "-o", "json").stdout
                          )["items"]
    assert group["status"]["phase"] in ("Pending", "Inqueue"), group["status"]
    assert plugin_objects(world, "too-many-nodes") == dict.fromkeys(plugin_objects(world, "too-many-nodes"), True)
    fabric_run.remove(world.plane, job)
    assert not any(plugin_objects(world, "too-many-nodes").values())


def test_the_certifiers_retest_job_is_admitted_and_scheduled_on_the_nodes_it_names(world):
    """The re-test Job the recurring certifier makes from its CronJob's template (the ConfigMap the stack
    renders), created as the certifier's ServiceAccount: Volcano's webhook admits it and its scheduler
    puts the workers on the two nodes it names, and only there."""
    template = json.loads(json.loads(world.kubectl("get", "configmap", "-n", "fabric-certifier",
                                                   certifier_mod.TEMPLATE_CONFIGMAP, "-o", "json").stdout)
                          ["data"]["job.json"])
    nodes = world.ib[1:3]
    job = certify_recurring.retest_job(template, nodes, "fabric-retest-e2e")
    job["metadata"]["namespace"] = world.job["metadata"]["namespace"]
    done = world.kubectl("create", "-f", "-", input=json.dumps(job), as_=SA, check=False)
    assert done.returncode == 0, done.stderr
    pods = fabric_run.run(world.plane, job, "", world.tmp / "logs")  # its log is not what is tested here
    workers = sorted(p["spec"]["nodeName"] for p in pods
                     if p["metadata"]["labels"]["volcano.sh/task-spec"] == "mpiworker")
    assert workers == sorted(nodes)
    assert all(p["spec"]["priorityClassName"] == certify_recurring.PRIORITY_CLASS for p in pods)
