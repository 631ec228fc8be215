"""The certifier (`python -m verify certify`) run as its own ServiceAccount (a TokenRequest token and the
RBAC the stack renders, nothing more) against the real API server: kwok nodes created as AKS creates
them (the pool's taints under AKS's rule, e2e/aks_rules.py), and a fabric test Job that Volcano's own
processes admit, expand into pods, gang-schedule and complete (e2e/fabric_run.py, e2e/volcano.py), its
launcher log served by kwok.

The launcher logs are CONSTRUCTED from tests/nccl_logs.py (lines in the formats of real logs; nothing here
was measured), as in tests/unit/clusterside/test_certify.py: no recorded run has four InfiniBand nodes
or a slow one. A real
recorded log is judged on this path in e2e/tests/test_recorded_run.py.
Each scenario's assertions read what the real server kept (taints, conditions, labels, Events).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterside import certify_kube
from clusterside.kube import TASK_SPEC_LABEL
from components.fabric import certifier as certifier_mod
from core import fabric
from e2e import apply, fabric_run, pools
from e2e.cluster import ROOT, kubeconfig
from offline import engine
from tests.unit.clusterside.test_certify import doctor_log

H100 = "Standard_ND96isr_H100_v5"
CONFIG = {**engine.stack_file_config("dev"), "ibPool": {"vmSize": H100, "nodeCount": 4}}
SA = "system:serviceaccount:fabric-certifier:fabric-certifier"
ENV, POLL_SECONDS = fabric_run.CERTIFY_ENV, fabric_run.CERTIFY_POLL_SECONDS  # as its pod runs it
EVENT_DEFECT = ("issue 35 item 1: the certifier posts Node Events in its own namespace; the real API server "
                "answers 422 (involvedObject.namespace must be default for a cluster-scoped object)")
# Kinds the certifier scenarios need from the render: its own objects, the fabric test's, Volcano's CRDs. Not
# the fabric test's Volcano Job: each run creates it (fabric_run.run), so a certifier watching it starts with it.
KINDS = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap",
         "PriorityClass", "CustomResourceDefinition", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}


class World:
    def __init__(self, planes, tmp_path: Path, config: dict = CONFIG):
        self.rendering = engine.render("dev", config=config)
        self.plane, self.facts, names = planes.fresh("dev", config, rendering=self.rendering)
        self.ib = sorted(n for n in names if "-ibpool-" in n)
        self.system = sorted(n for n in names if "-system-" in n)
        self.tmp = tmp_path
        groups, single = apply.stack_objects(self.rendering)
        wanted = [o for o in groups if o["kind"] == "CustomResourceDefinition"] + [
            o for o in single if o["kind"] in KINDS]
        refused = [(apply.label(o), e) for o in wanted if (e := apply.apply_one(self.plane, o))]
        assert not refused, refused
        self.job = next(o for o in single if o["kind"] == "Job" and o["apiVersion"].startswith("batch.volcano.sh"))
        self.job_name = self.job["metadata"]["name"]  # its spec's hash included: the hosts of its runs' logs
        day0 = next(o for o in single if o["kind"] == "Job" and o["apiVersion"] == "batch/v1"
                    and o["metadata"]["namespace"] == "fabric-certifier")
        self.argv = day0["spec"]["template"]["spec"]["containers"][0]["command"][4:]  # after python3 -S -m verify
        self.admission = next(o for o in single if o["kind"] == "Deployment"
                              and o["metadata"]["name"] == certifier_mod.ADMISSION_DEPLOYMENT)

    def kubectl(self, *args: str, **kw):
        return self.plane.kubectl(*args, **kw)

    def finished_run(self, log: str, job: dict | None = None, nodes: list[str] | None = None, **hooks) -> list[dict]:
        """The rendered Job (or `job`) run by Volcano (its scheduler places the pods where the Job's selectors
        send them); its pods as placed while they ran. The log's host `<job>-mpiworker-<i>` is the worker pod
        Volcano put on `self.ib[i]` (or `nodes[i]`), so a scenario's slow index names a node, wherever the pod
        landed. `hooks`: fabric_run.run's `created` and `running`."""
        job, nodes = job or self.job, nodes or self.ib
        return fabric_run.run(self.plane, job, lambda pods: self.as_placed(log, pods, job, nodes),
                              self.tmp / "logs" / job["metadata"]["namespace"], **hooks)

    def as_placed(self, log: str, pods: list[dict], job: dict, nodes: list[str]) -> str:
        on = {p["spec"]["nodeName"]: p["spec"]["hostname"] for p in pods
              if p["metadata"]["labels"][TASK_SPEC_LABEL] == "mpiworker"}
        worker = re.compile(rf"\b{re.escape(job['metadata']['name'])}-mpiworker-(\d+)\b")
        return worker.sub(lambda m: on[nodes[int(m.group(1))]], log)

    def token_kubeconfig(self) -> Path:
        token = self.kubectl("create", "token", "fabric-certifier", "-n", "fabric-certifier").stdout.strip()
        return kubeconfig(self.tmp / "certifier.kubeconfig", self.plane.state / "pki", "fabric-certifier",
                          {"token": token})

    def run_and_certify(self, log: str, *extra: str, running=None, job: dict | None = None,
                        nodes: list[str] | None = None, argv: list[str] | None = None) -> tuple[int, dict, str]:
        """A run of the fabric test (`job` on `nodes`: finished_run) judged as the stack's day-0 certifier
        judges it: its own argv (or `argv`), as its ServiceAccount, with the standard library alone (python
        -S), started once the Job exists and waiting for it, so it sees where the workers run before Volcano
        deletes them (polling every POLL_SECONDS, well inside the launcher's run in
        e2e/kwok-stage-mpirun.yaml). `running`: done while the pods run."""
        command = self.verify_argv(*(argv or self.argv), "--wait-minutes", "3", "--poll-seconds", POLL_SECONDS,
                                   "--threshold-gbps", "300", *extra)
        started: list[subprocess.Popen] = []
        try:
            self.finished_run(log, job, nodes, running=running, created=lambda: started.append(subprocess.Popen(
                command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)))
            stdout, stderr = started[0].communicate(timeout=180)
        finally:
            for proc in started:
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate()
        try:
            out = json.loads(stdout)
        except ValueError:
            out = {}
        assert not out.get("certification", {}).get("unplaced"), (out["certification"]["unplaced"], stderr)
        return started[0].returncode, out, stderr

    def verify_argv(self, *args: str) -> list[str]:
        return [sys.executable, "-S", "-m", "verify", *args, "--kubeconfig", str(self.token_kubeconfig())]

    def admission_argv(self) -> list[str]:
        """The stack's admission Deployment's own argv (after python3 -S -m verify)."""
        return self.admission["spec"]["template"]["spec"]["containers"][0]["command"][4:]

    def admit_once(self) -> subprocess.CompletedProcess:
        return subprocess.run(self.verify_argv(*self.admission_argv(), "--once"), cwd=ROOT, capture_output=True,
                              text=True, timeout=60, env=ENV)

    def node(self, name: str) -> dict:
        return json.loads(self.kubectl("get", "node", name, "-o", "json").stdout)

    def fabric_taints(self, name: str) -> list[str]:
        """The certifier's taints on the node (the hold and the quarantine), by value."""
        return sorted(t.get("value", "") for t in self.node(name)["spec"].get("taints") or []
                      if t["key"] in (fabric.FABRIC_TAINT_KEY, fabric.HOLD_TAINT_KEY))

    def condition(self, name: str) -> dict | None:
        return next((c for c in self.node(name)["status"].get("conditions") or []
                     if c["type"] == fabric.FABRIC_CONDITION), None)

    def events(self) -> list[dict]:
        return json.loads(self.kubectl("get", "events", "-A", "-o", "json").stdout)["items"]


@pytest.fixture
def world(planes, tmp_path):
    return World(planes, tmp_path)


def hosts(world: World) -> list[str]:
    return [f"{world.job['metadata']['name']}-mpiworker-{i}" for i in range(len(world.ib))]


def test_a_dry_run_reads_the_real_run_and_changes_nothing(world):
    done = world.admit_once()
    assert done.returncode == 0, done.stderr
    def own() -> list[dict]:  # the certifier's: Volcano's controller and scheduler post Events of their own
        return [e for e in world.events() if e.get("reportingComponent") == certify_kube.REPORTING_CONTROLLER]
    before = len(own())
    code, out, err = world.run_and_certify(doctor_log(job=world.job_name, slow=(3,)), "--dry-run")
    assert code == 0, err
    actions = {d["node"]: d["action"] for d in out["certification"]["decisions"]}
    assert actions == {world.ib[0]: "certify", world.ib[1]: "certify", world.ib[2]: "certify",
                       world.ib[3]: "quarantine"}
    assert all(world.fabric_taints(n) == [fabric.UNCERTIFIED] for n in world.ib)
    assert len(own()) == before


def test_label_mode_writes_the_condition_label_and_events_the_real_server_accepts(world):
    code, out, err = world.run_and_certify(doctor_log(job=world.job_name, slow=(3,)), "--mode", "label")
    assert code == 0, err
    assert world.node(world.ib[3])["metadata"]["labels"][fabric.FABRIC_STATE_LABEL] == "quarantined"
    assert world.condition(world.ib[3])["status"] == "False"
    (event,) = [e for e in world.events() if e["reason"] == "FabricQuarantined"]
    assert event["involvedObject"]["name"] == world.ib[3] and event["metadata"]["namespace"] == "default"
    assert event["reportingComponent"] == certify_kube.REPORTING_CONTROLLER and event["type"] == "Warning"
    certified = [e for e in world.events() if e["reason"] == "FabricCertified"]
    assert sorted(e["involvedObject"]["name"] for e in certified) == world.ib[:3]
    kept = json.loads(world.kubectl("get", "configmap", "-n", "fabric-certifier", "fabric-certifier-result", "-o",
                                    "json").stdout)["data"]
    assert json.loads(kept["certification.json"])["failed_writes"] == [], "every write was accepted"


def test_day0_the_admission_loop_holds_every_node_and_the_certifier_admits_the_good_ones(world):
    """AKS's pool rule is on (e2e/aks_rules.py): the hold put on through the API may be lifted, where the
    pool-set taint of the old design was refused."""
    assert all(world.fabric_taints(n) == [] for n in world.ib), "the pool sets no hold"
    done = world.admit_once()
    assert done.returncode == 0, done.stderr
    assert all(world.fabric_taints(n) == [fabric.UNCERTIFIED] for n in world.ib)
    held = [e for e in world.events() if e["reason"] == "FabricHeld"]
    assert sorted(e["involvedObject"]["name"] for e in held) == world.ib
    code, out, err = world.run_and_certify(doctor_log(job=world.job_name, slow=(3,)))
    assert code == 0, err
    assert all(world.fabric_taints(n) == [] for n in world.ib[:3])
    assert world.fabric_taints(world.ib[3]) == [fabric.QUARANTINED]
    assert out["certification"]["failed_writes"] == []
    # a second pass holds nothing: each node passed on its boot, or is quarantined
    again = world.admit_once()
    assert again.returncode == 0 and "hold node" not in again.stderr, again.stderr
    # and the pool's own taint is still refused, as AKS refuses it to anyone (here the admin: the
    # certifier's own account is refused it twice, by this rule and by its bounds, in no fixed order)
    pool_taint = f"{fabric.IB_TAINT}-"
    refused = world.kubectl("taint", "node", world.ib[0], pool_taint, check=False)
    assert refused.returncode != 0 and "refused" in refused.stderr, refused.stderr


def test_the_running_loop_holds_a_node_that_joins_later_and_leaves_a_persons_lift_alone(world):
    """A node AKS adds (scale-out, re-image) is held within seconds of joining; a hold a person lifts
    stays lifted."""
    loop = subprocess.Popen(world.verify_argv(*world.admission_argv(), "--interval-seconds", "1"), cwd=ROOT,
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        pool = next(p for p in world.facts.pools if p.name == "ibpool")
        joined = pools.node(world.facts, pool, len(world.ib))
        world.kubectl("create", "-f", "-", input=json.dumps(joined))
        new = joined["metadata"]["name"]
        started = time.monotonic()
        while world.fabric_taints(new) != [fabric.UNCERTIFIED]:
            assert time.monotonic() - started < 20, f"{new} was not held within 20 s"
            time.sleep(0.5)
        world.kubectl("taint", "node", new, f"{fabric.HOLD_TAINT}-")  # a person lifts it (the admin)
        time.sleep(4)  # several passes
        assert world.fabric_taints(new) == [], "a person's lift is not undone"
    finally:
        loop.terminate()
        err = loop.communicate(timeout=30)[1]
    assert "hold node " + new in err


def test_the_certifiers_serviceaccount_can_do_what_it_needs_and_no_more(world):
    """`kubectl auth can-i --list` as the ServiceAccount, per namespace, against the list in this test."""
    def can(namespace: str) -> set[tuple[str, str]]:
        text = world.kubectl("auth", "can-i", "--list", "-n", namespace, as_=SA).stdout
        out = set()
        for line in text.splitlines()[1:]:
            resource, verbs = line.split()[0], line[line.rindex("[") + 1:line.rindex("]")]
            if not resource.startswith("["):  # rows for non-resource URLs start with the URL list
                out |= {(resource, v) for v in verbs.split()}
        return out

    cluster_wide = {("nodes", "get"), ("nodes", "list"), ("nodes", "watch"), ("nodes", "patch"),
                    ("nodes/status", "patch"), ("pods", "get"), ("pods", "list")}
    baseline = can("kube-system") - cluster_wide  # what every authenticated account may (self reviews, discovery)
    fabric_ns = can("fabric-test") - baseline
    own = can("fabric-certifier") - baseline
    assert cluster_wide <= can("kube-system")
    assert can("default") - baseline - cluster_wide == {("events.events.k8s.io", "create")}
    assert fabric_ns - cluster_wide == {("pods/log", "get"), ("jobs.batch.volcano.sh", "get"),
                                        ("jobs.batch.volcano.sh", "list"), ("jobs.batch.volcano.sh", "create"),
                                        ("jobs.batch.volcano.sh", "delete")}
    assert own - cluster_wide == {("configmaps", "get"), ("configmaps", "patch")}
    # nothing beyond that anywhere: no secrets, no pods/exec, no create of pods
    for ns in ("default", "fabric-test", "fabric-certifier", "kube-system"):
        assert world.kubectl("auth", "can-i", "get", "secrets", "-n", ns, as_=SA, check=False).stdout.strip() == "no"
        assert world.kubectl("auth", "can-i", "create", "pods", "-n", ns, as_=SA, check=False).stdout.strip() == "no"


def test_the_api_server_bounds_what_the_certifiers_account_may_create_and_change(world):
    """RBAC lets the account create Volcano Jobs in a privileged namespace and patch any node; the stack's
    ValidatingAdmissionPolicies (components/fabric/certifier_bounds.py) narrow that to re-tests of the test's own
    images and to the certifier's own taints, label and annotations."""
    template = json.loads(json.loads(world.kubectl("get", "configmap", "-n", "fabric-certifier",
                                                   certifier_mod.TEMPLATE_CONFIGMAP, "-o", "json").stdout)
                          ["data"]["job.json"])
    from clusterside import certify_recurring

    good = certify_recurring.retest_job(template, world.ib[:2], "fabric-retest-bounds")
    ns = world.job["metadata"]["namespace"]

    def create(job: dict) -> subprocess.CompletedProcess:
        return world.kubectl("create", "-n", ns, "--dry-run=server", "-f", "-", input=json.dumps(job), as_=SA,
                             check=False)

    assert create(good).returncode == 0, create(good).stderr
    evil = json.loads(json.dumps(good))
    evil["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    evil["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["image"] = "docker.io/library/busybox:1"
    refused = create(evil)
    assert refused.returncode != 0 and "fabric test's own images only" in refused.stderr, refused.stderr
    unlabelled = json.loads(json.dumps(good))
    del unlabelled["metadata"]["labels"]
    assert "re-tests only" in create(unlabelled).stderr
    node = world.ib[0]
    for change, words in ((["label", "node", node, "team=a"], "only its label"),
                          (["cordon", node], "never cordons"),
                          (["taint", "node", node, "other=x:NoSchedule"], "only its own taints")):
        done = world.kubectl(*change, as_=SA, check=False)  # (kubectl cordon exits 0 on a refusal)
        assert words in done.stderr, (change, done.stderr)
    after = world.node(node)
    assert not after["spec"].get("unschedulable") and "team" not in after["metadata"]["labels"]
    assert world.fabric_taints(node) == [] and all(t["key"] != "other" for t in after["spec"].get("taints", []))
    allowed = world.kubectl("label", "node", node, f"{fabric.FABRIC_STATE_LABEL}=uncertified", "--overwrite",
                            as_=SA, check=False)
    assert allowed.returncode == 0, allowed.stderr


def test_a_persons_cordon_and_quarantine_stay_while_the_certifier_admits_and_quarantines(world):
    """What a person did is never undone: a cordoned node is admitted and stays cordoned, a quarantine
    taint without the certifier's annotation stays on a node that passes; the slow node is quarantined."""
    assert world.admit_once().returncode == 0
    world.kubectl("taint", "node", world.ib[1], f"{fabric.FABRIC_TAINT_KEY}={fabric.QUARANTINED}:NoSchedule")
    # the cordon comes while the pods run: Volcano's scheduler places no pod on a cordoned node, so a gang
    # of four workers on four nodes would wait (the Job tolerates the fabric taints, not unschedulable); the
    # certifier reads the nodes again after its wait, seconds later (the launcher's run)
    code, out, err = world.run_and_certify(doctor_log(job=world.job_name, slow=(3,)),
                                           running=lambda: world.kubectl("cordon", world.ib[0]))
    assert code == 0, err
    assert world.node(world.ib[0])["spec"].get("unschedulable") is True and world.fabric_taints(world.ib[0]) == []
    assert world.fabric_taints(world.ib[1]) == [fabric.QUARANTINED], "the person's quarantine stays"
    assert world.fabric_taints(world.ib[3]) == [fabric.QUARANTINED]
    assert world.condition(world.ib[1])["status"] == "True", "it passed: the condition says so"


def test_a_tripped_breaker_leaves_every_node_as_it_was_and_says_why(world):
    """Two slow nodes of four: quarantining both would hold half the pool, over the default share (0.25).
    Nothing is applied (no hold lifted, none quarantined); each node it would have quarantined gets a
    Warning Event that the real server accepts, and the result names the breaker."""
    assert world.admit_once().returncode == 0
    code, out, err = world.run_and_certify(doctor_log(job=world.job_name, slow=(2, 3)))
    assert out.get("certification", {}).get("breaker", "").startswith("circuit breaker"), (code, err)
    assert all(world.fabric_taints(n) == [fabric.UNCERTIFIED] for n in world.ib), "every hold stays"
    tripped = [e for e in world.events() if e["reason"] == "FabricCircuitBreakerOpen"]
    assert sorted(e["involvedObject"]["name"] for e in tripped) == world.ib[2:]
    assert {e["metadata"]["namespace"] for e in tripped} == {"default"}
    assert out["certification"]["failed_writes"] == []


def test_a_node_the_certifier_quarantined_is_released_when_it_passes(world):
    """Day 0 quarantines the slow node (its own taint, with its annotation); the next run finds it good and
    takes the taint off again, as its bounds allow for its own taint."""
    assert world.admit_once().returncode == 0
    assert world.run_and_certify(doctor_log(job=world.job_name, slow=(3,)))[0] == 0
    assert world.fabric_taints(world.ib[3]) == [fabric.QUARANTINED]
    fabric_run.remove(world.plane, world.job)  # another run: the last one's Job and served log removed first
    code, out, err = world.run_and_certify(doctor_log(job=world.job_name, slow=()))
    assert code == 0, err
    assert all(world.fabric_taints(n) == [] for n in world.ib), [world.fabric_taints(n) for n in world.ib]
    assert world.condition(world.ib[3])["status"] == "True"
    assert out["certification"]["failed_writes"] == []


def test_fabric_wide_slowness_quarantines_no_one_and_certifies_no_one(world):
    """Every pair slow: a cause the whole fabric shares, not a node's. No node is quarantined (the breaker
    is not what stops it) and none is admitted: every hold stays, and the run says why."""
    assert world.admit_once().returncode == 0
    code, out, err = world.run_and_certify(doctor_log(job=world.job_name, slow=(), everyone_slow=True))
    cert = out.get("certification", {})
    assert cert.get("verdict") == "FAIL" and cert["suspects"] == [] and not cert["breaker"], (code, err)
    assert any("fabric-wide" in n for n in cert["notes"])
    assert all(world.fabric_taints(n) == [fabric.UNCERTIFIED] for n in world.ib)


def test_a_node_with_a_node_problem_detector_condition_stays_held(world):
    """A node whose Node Problem Detector condition (here IBLinkFlapping, as AKS's NPD reports it) is True
    is not admitted, whatever the run says; its peers are. The condition is written to the node's status
    as NPD writes it, and the certifier reads it back from the real server."""
    assert world.admit_once().returncode == 0
    npd = {"type": "IBLinkFlapping", "status": "True", "reason": "IBLinkFlapping",
           "message": "mlx5_ib3 port 1 flapped 6 times in 10 min",
           "lastHeartbeatTime": "2026-12-01T00:00:00Z", "lastTransitionTime": "2026-12-01T00:00:00Z"}
    world.kubectl("patch", "node", world.ib[0], "--subresource=status", "--type=strategic",
                  "-p", json.dumps({"status": {"conditions": [npd]}}))
    code, out, err = world.run_and_certify(doctor_log(job=world.job_name, slow=()))
    assert code == 0, err
    held = next(d for d in out["certification"]["decisions"] if d["node"] == world.ib[0])
    assert held["action"] == "hold" and "IBLinkFlapping" in held["reason"], held
    assert world.fabric_taints(world.ib[0]) == [fabric.UNCERTIFIED]
    assert all(world.fabric_taints(n) == [] for n in world.ib[1:])


def test_the_certifiers_status_writes_and_deletes_are_bounded_too(world):
    """Issue 52 item 6: RBAC lets the account patch nodes/status and delete any Volcano Job in the fabric
    test's namespace; the policies keep it to its own condition and its own re-tests."""
    from clusterside.kube_api import STRATEGIC_MERGE, ApiError, connect

    node = world.ib[0]
    api = connect(str(world.token_kubeconfig()))  # the certifier's own client and token: PATCH, no GET first

    def status(conditions: list[dict] | None = None, extra: dict | None = None) -> str | None:
        """None when the API server took the write, else its answer."""
        body = {"status": {**({"conditions": conditions} if conditions else {}), **(extra or {})}}
        try:
            api.patch(f"/api/v1/nodes/{node}/status", body, STRATEGIC_MERGE)
        except ApiError as exc:
            return str(exc)
        return None

    at = "2026-12-01T00:00:00Z"
    ours = {"type": fabric.FABRIC_CONDITION, "status": "True", "reason": "FabricTestPassed", "message": "ok",
            "lastHeartbeatTime": at, "lastTransitionTime": at}
    assert status([ours]) is None
    ready = {"type": "Ready", "status": "False", "reason": "Forged", "message": "x", "lastHeartbeatTime": at,
             "lastTransitionTime": at}
    refused = status([ready])
    assert refused and f"only its node condition {fabric.FABRIC_CONDITION}" in refused, refused
    refused = status(extra={"allocatable": {"nvidia.com/gpu": "64"}})
    assert refused and "no node status but its condition" in refused, refused
    assert next(c for c in world.node(node)["status"]["conditions"] if c["type"] == "Ready")["reason"] != "Forged"

    template = json.loads(json.loads(world.kubectl("get", "configmap", "-n", "fabric-certifier",
                                                   certifier_mod.TEMPLATE_CONFIGMAP, "-o", "json").stdout)
                          ["data"]["job.json"])
    from clusterside import certify_recurring

    ns = world.job["metadata"]["namespace"]
    retest = certify_recurring.retest_job(template, world.ib[:2], "fabric-retest-delete")
    other = json.loads(json.dumps(retest))
    other["metadata"] = {"name": "someone-elses-job"}
    for job in (retest, other):  # created by the admin, whom the policies do not match
        world.kubectl("create", "-n", ns, "-f", "-", input=json.dumps(job))

    def delete(name: str) -> subprocess.CompletedProcess:
        return world.kubectl("delete", "jobs.batch.volcano.sh", name, "-n", ns, "--dry-run=server", as_=SA,
                             check=False)

    refused = delete("someone-elses-job")
    assert refused.returncode != 0 and "deletes its own re-tests only" in refused.stderr, refused.stderr
    allowed = delete("fabric-retest-delete")
    assert allowed.returncode == 0, allowed.stderr


def test_the_topology_labelers_account_may_write_its_labels_and_nothing_else(world):
    """Issue 52 item 6: the labeler's RBAC lets it patch any node field, the hold taint included; its
    policy (components/platform/topology_labeler.py) keeps it to its labels and its annotation. Its own
    request, a PATCH with its own token (it may not even GET a node)."""
    from clusterside.kube_api import JSON_PATCH, MERGE_PATCH, ApiError, connect
    from components.platform import topology_labeler

    token = world.kubectl("create", "token", topology_labeler.NAME, "-n", topology_labeler.NAMESPACE).stdout.strip()
    api = connect(str(kubeconfig(world.tmp / "labeler.kubeconfig", world.plane.state / "pki", topology_labeler.NAME,
                                 {"token": token})))
    node = world.ib[0]
    assert world.admit_once().returncode == 0
    assert world.fabric_taints(node) == [fabric.UNCERTIFIED]

    def write(body, content_type: str = MERGE_PATCH) -> str | None:
        try:
            api.patch(f"/api/v1/nodes/{node}", body, content_type)
        except ApiError as exc:
            return str(exc)
        return None

    assert write({"metadata": {"labels": {fabric.TORSET_LABEL: "torset-01"},
                               "annotations": {fabric.HCA_GUIDS_ANNOTATION: "0x1,0x2"}}}) is None
    kept = [t for t in world.node(node)["spec"]["taints"] if t["key"] != fabric.HOLD_TAINT_KEY]
    for body, content_type, words in (({"metadata": {"labels": {"team": "a"}}}, MERGE_PATCH, "only its labels"),
                                      ({"metadata": {"annotations": {"other": "x"}}}, MERGE_PATCH,
                                       "only its annotation"),
                                      ([{"op": "replace", "path": "/spec/taints", "value": kept}], JSON_PATCH,
                                       "changes no taint")):
        refused = write(body, content_type)
        assert refused and words in refused, (body, refused)
    after = world.node(node)
    assert after["metadata"]["labels"][fabric.TORSET_LABEL] == "torset-01" and "team" not in after["metadata"]["labels"]
    assert world.fabric_taints(node) == [fabric.UNCERTIFIED], "the hold stays"


def test_on_a_dra_stack_the_certifiers_account_reads_published_gpus_by_driver(planes, tmp_path):
    """Issue 52 item 1 on the real server: the field selector on spec.driver is one the API serves for
    ResourceSlices, and the ClusterRole's one added rule is enough for the loop's read (its own client and
    token); a slice of another driver, or with no device, publishes no GPU."""
    from clusterside import certify_admit
    from clusterside.kube_api import connect
    from core import dra

    world = World(planes, tmp_path, {**CONFIG, "rdmaMode": "dra"})
    assert "--dra-gpus" in world.admission_argv()

    def published(i: int, driver: str, devices: int) -> dict:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": f"{world.ib[i]}-{driver}"},
                "spec": {"driver": driver, "nodeName": world.ib[i],
                         "pool": {"name": world.ib[i], "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": f"gpu-{d}"} for d in range(devices)]}}

    for s in (published(0, dra.GPU_DRIVER, 4), published(1, dra.GPU_DRIVER, 0), published(2, dra.NIC_DRIVER, 8)):
        world.kubectl("create", "-f", "-", input=json.dumps(s))
    api = connect(str(world.token_kubeconfig()))
    assert certify_admit.gpu_slice_nodes(api) == {world.ib[0]}


def test_the_alert_objects_pass_the_real_api_server_with_the_prometheus_operators_crds(planes, tmp_path):
    """Issue 52 item 8: the PrometheusRule and PodMonitor that `alerts.enabled` renders, created (server-side
    dry run) against the operator's own CRDs at v0.93.0, as a cluster with the operator has them."""
    world = World(planes, tmp_path)
    crds = ROOT / "tests" / "data" / "crds"
    for crd in sorted(crds.glob("monitoring.coreos.com_*.yaml")):
        world.kubectl("apply", "--server-side", "-f", str(crd))
    world.kubectl("wait", "--for=condition=Established", "crd/prometheusrules.monitoring.coreos.com",
                  "crd/podmonitors.monitoring.coreos.com", "--timeout=60s")
    rendering = engine.render("dev", config={**CONFIG, "alerts": {"enabled": True}})
    _, single = apply.stack_objects(rendering)
    made = [o for o in single if o["apiVersion"] == "monitoring.coreos.com/v1"]
    assert sorted(o["kind"] for o in made) == ["PodMonitor", "PrometheusRule"]
    for o in made:
        done = world.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(o), check=False)
        assert done.returncode == 0, (o["kind"], done.stderr)
    broken = json.loads(json.dumps(next(o for o in made if o["kind"] == "PrometheusRule")))
    broken["spec"]["groups"][0]["rules"][0]["for"] = "two hours"
    refused = world.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(broken), check=False)
    assert refused.returncode != 0 and "for" in refused.stderr, refused.stderr
