"""The stack of several InfiniBand pools (Pulumi.multipool.yaml: ND H100 v5, ND H200 v5 and HBv4), each its own
fabric: its own AgentPool, its own fabric test of its size's kind, run on its own nodes only, judged by its own
certify Job into its own result, certified within itself, and reported in maps keyed by pool name."""

from __future__ import annotations

import json

import pytest
from conftest import rendered

from components.fabric import certifier as certifier_mod
from core import fabric
from offline import engine

POOL_TYPE = "azure-native:containerservice:AgentPool"
JOB_TYPE = "kubernetes:batch.volcano.sh/v1alpha1:Job"
CERTIFY_TYPE = "kubernetes:batch/v1:Job"
POOLS = {"h100": "Standard_ND96isr_H100_v5", "h200": "Standard_ND96isr_H200_v5", "hb": "Standard_HB176rs_v4"}


@pytest.fixture(scope="module")
def multipool() -> engine.Rendering:
    return rendered("multipool")


def _flag(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def _certify_argvs(r: engine.Rendering) -> list[list[str]]:
    jobs = [j for j in r.of_type(CERTIFY_TYPE) if j.name.endswith("-certify")]
    return [j.inputs["spec"]["template"]["spec"]["containers"][0]["command"] for j in jobs]


def test_each_pool_is_its_own_agent_pool_of_its_size(multipool):
    pools = {p.inputs["agentPoolName"]: p for p in multipool.of_type(POOL_TYPE)}
    assert {name: p.inputs["vmSize"] for name, p in pools.items()} == POOLS
    assert {name: p.name for name, p in pools.items()} == {n: f"ib-{n}-pool" for n in POOLS}
    assert multipool.outputs["ibPools"]["h200"]["nodeCount"] == 4 and "vmSize" not in multipool.outputs


def test_each_pools_test_is_its_kind_and_stays_on_its_own_nodes(multipool):
    jobs = {j.inputs["metadata"]["namespace"]: j for j in multipool.of_type(JOB_TYPE)}
    assert {ns: j.inputs["metadata"]["labels"]["app.kubernetes.io/name"] for ns, j in jobs.items()} == {
        "fabric-test-h100": "nccl-allreduce", "fabric-test-h200": "nccl-allreduce", "fabric-test-hb": "p2p"}
    for pool in POOLS:
        for task in jobs[f"fabric-test-{pool}"].inputs["spec"]["tasks"]:
            selector = task["template"]["spec"]["nodeSelector"]
            assert selector == {fabric.IB_POOL_ROLE_LABEL: fabric.IB_POOL_ROLE, fabric.AGENT_POOL_LABEL: pool}
    workers = {ns: next(t["replicas"] for t in j.inputs["spec"]["tasks"] if t["name"] == "mpiworker")
               for ns, j in jobs.items()}
    assert workers == {"fabric-test-h100": 2, "fabric-test-h200": 4, "fabric-test-hb": 2}


def test_each_pool_is_judged_and_certified_within_itself(multipool):
    argvs = _certify_argvs(multipool)
    by_pool = {_flag(a, "--pool"): a for a in argvs}
    assert set(by_pool) == set(POOLS) and len(argvs) == 3
    for pool, argv in by_pool.items():
        assert _flag(argv, "--namespace") == f"fabric-test-{pool}"
        assert _flag(argv, "--sku") == POOLS[pool]
        assert _flag(argv, "--result-configmap") == f"{certifier_mod.RESULT_CONFIGMAP}-{pool}"
        assert _flag(argv, "--history-configmap") == f"{certifier_mod.HISTORY_CONFIGMAP}-{pool}"
    # the admission loop and the recurring run of each pool whose kind re-tests (the GPU pools), for that pool
    loops = [d.inputs["spec"]["template"]["spec"]["containers"][0]["command"]
             for d in multipool.of_type("kubernetes:apps/v1:Deployment") if d.name.startswith("certifier-admission")]
    assert sorted(_flag(a, "--pool") for a in loops) == ["h100", "h200"]
    assert all(_flag(a, "--template-configmap") == f"{certifier_mod.TEMPLATE_CONFIGMAP}-{_flag(a, '--pool')}"
               for a in loops)
    own = multipool.one("kubernetes:rbac.authorization.k8s.io/v1:Role", "certifier-own")
    names = set(own.inputs["rules"][0]["resourceNames"])
    assert {f"{certifier_mod.RESULT_CONFIGMAP}-{p}" for p in POOLS} <= names


def test_the_outputs_are_maps_keyed_by_pool_and_the_verdict_the_worst(multipool):
    out = multipool.outputs
    assert out["fabricVerdictByPool"] == dict.fromkeys(POOLS, "PENDING") and out["fabricVerdict"] == "PENDING"
    assert set(out["allReduceBusBwAtMaxSizeGbpsByPool"]) == {"h100", "h200"}  # the GPU pools' figure
    assert set(out["p2pBandwidthAtMaxSizeGbitsByPool"]) == {"hb"}


def test_a_pool_of_one_stack_keeps_its_names(dev):
    """Control: the one-pool stack has no pool in any name or selector (tests/golden/urns holds every URN)."""
    (job,) = dev.of_type(JOB_TYPE)
    assert job.inputs["metadata"]["namespace"] == "fabric-test"
    tasks = job.inputs["spec"]["tasks"]
    assert all(fabric.AGENT_POOL_LABEL not in t["template"]["spec"]["nodeSelector"] for t in tasks)
    assert all("--pool" not in a for a in _certify_argvs(dev)) and "fabricVerdictByPool" not in dev.outputs


@pytest.mark.parametrize(("verdicts", "worst"), [
    (["PASS", "PASS"], "PASS"), (["PASS", "WARN"], "WARN"), (["PASS", "PENDING"], "PENDING"),
    (["WARN", "UNKNOWN"], "UNKNOWN"), (["UNKNOWN", "FAIL", "PASS"], "FAIL")])
def test_the_stacks_verdict_is_its_worst_pools(verdicts, worst):
    from stack.fabric_outputs import worst as stack_worst

    assert stack_worst(verdicts) == worst


def test_a_peer_wait_other_than_the_default_reaches_the_admission_loop():
    from conftest import dev_config

    r = rendered("dev", dev_config(ibPool={"minNodeCount": 0}, certifier={"peerWaitMinutes": 40}))
    (loop,) = [d for d in r.of_type("kubernetes:apps/v1:Deployment") if d.name == "certifier-admission"]
    argv = loop.inputs["spec"]["template"]["spec"]["containers"][0]["command"]
    assert _flag(argv, "--peer-wait-minutes") == "40"
    assert r.one(POOL_TYPE).inputs["minCount"] == 0


def test_the_offline_plan_shows_each_pools_test_and_its_first_result(multipool):
    from offline import schedule, synth

    by_pool = synth.fabric_test_plans_by_pool(multipool)
    assert {p: t.name for p, t in by_pool.items()} == {"h100": "NCCL all-reduce", "h200": "NCCL all-reduce",
                                                         "hb": "osu_bw point-to-point"}
    assert "4 × Standard_ND96isr_H200_v5 (32 GPUs)" in dict(by_pool["h200"].rows)["test"]
    plan = synth.plan_md(multipool, schedule.build_timeline(multipool), {}, synth.fabric_test_plan(multipool), by_pool)
    for pool, step in (("h100", "fabric-test-h100-job/runs"), ("h200", "fabric-test-h200-job/runs"),
                       ("hb", "fabric-test-p2p-hb-job/runs")):
        assert f"## Pool `{pool}`: its fabric test" in plan and f"| `{pool}` | `{step}` |" in plan
    assert synth.fabric_test_plans_by_pool(rendered("dev")) == {}  # one pool: the plan as it was


def test_a_split_stack_checks_each_pool_against_the_azure_stacks():
    from stack import handoff
    from tests.unit.stack_config.test_pools import H100, HB, pools

    cfg = pools(h100={"vmSize": H100, "nodeCount": 2}, hb={"vmSize": HB, "nodeCount": 2})
    cfg = type(cfg)(**{**cfg.__dict__, "azure_stack": "org/aks-infiniband/azure"})
    same = {"h100": {"vmSize": H100, "nodeCount": 2.0}, "hb": {"vmSize": HB.lower(), "nodeCount": 2}}
    assert handoff.pools_problem(cfg, same) is None
    assert handoff.pools_problem(cfg, {**same, "hb": {"vmSize": HB, "nodeCount": 3}}) == (
        "aks-infiniband:ibPools.hb.nodeCount: got 2; the Azure stack org/aks-infiniband/azure deployed 3: set the "
        "same pool in both stack files: the fabric test would wait for nodes that do not exist")
    assert handoff.pools_problem(cfg, {"h100": same["h100"]}).startswith(
        "aks-infiniband:ibPools.hb: the Azure stack org/aks-infiniband/azure deployed no pool 'hb' (it has h100)")


QUEUE_TYPE = "kubernetes:scheduling.volcano.sh/v1beta1:Queue"


def _scheduler_conf(r: engine.Rendering) -> dict:
    """The scheduler configuration in the applied Volcano manifest (its ConfigMap's document only is parsed)."""
    import yaml

    from components.platform import volcano_topology

    text = r.one("kubernetes:yaml/v2:ConfigGroup", "volcano-manifest").inputs["yaml"]
    docs = [yaml.safe_load(d) for d in text.split("\n---\n") if "kind: ConfigMap\n" in d
            and f"name: {volcano_topology.SCHEDULER_CONFIGMAP}\n" in d]
    (conf,) = [d for d in docs if d and d["kind"] == "ConfigMap"]
    return yaml.safe_load(conf["data"][volcano_topology.SCHEDULER_KEY])


def test_a_gang_job_in_a_pools_queue_can_only_be_placed_on_that_pools_nodes(multipool):
    """Each pool's queue ib-<pool> requires the node group <pool>, which only that pool's nodes carry (the
    AgentPool's nodeLabels), and the scheduler runs the nodegroup plugin non-strict: v1.15.1's predicate admits a
    labelled node only to a queue whose affinity names its group, and an unlabelled one (the system pool) only to
    a queue with none (pkg/scheduler/plugins/nodegroup/nodegroup.go). So every pod of a job in h100's queue lands
    on h100's nodes, and `default`'s jobs on no IB node."""
    groups = {p.inputs["agentPoolName"]: p.inputs["nodeLabels"].get(fabric.VOLCANO_NODEGROUP_LABEL)
              for p in multipool.of_type(POOL_TYPE)}
    assert groups == {p: p for p in POOLS}
    queues = {q.inputs["metadata"]["name"]: q.inputs["spec"] for q in multipool.of_type(QUEUE_TYPE)}
    assert set(queues) == {f"ib-{p}" for p in POOLS}

    def admits(queue: dict | None, group: str | None) -> bool:  # the predicate, strict: false
        required = ((queue or {}).get("affinity") or {}).get("nodeGroupAffinity", {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution") or []
        return group in required if group is not None else not required

    for queue_name, spec in queues.items():
        assert [p for p, g in groups.items() if admits(spec, g)] == [queue_name.removeprefix("ib-")]
        assert not admits(spec, None), "a pool's queue never reaches the system pool"
    assert not any(admits(None, g) for g in groups.values()) and admits(None, None), "default: the system pool only"
    (plugin,) = [p for p in _scheduler_conf(multipool)["tiers"][-1]["plugins"] if p["name"] == "nodegroup"]
    assert plugin["arguments"] == {"strict": False}


def test_each_pools_test_and_re_test_run_in_its_queue_which_is_open_before_them(multipool):
    jobs = {j.inputs["metadata"]["namespace"]: j for j in multipool.of_type(JOB_TYPE)}
    assert {ns: j.inputs["spec"]["queue"] for ns, j in jobs.items()} == {
        f"fabric-test-{p}": f"ib-{p}" for p in POOLS}
    for pool in ("h100", "h200"):  # the certifier's re-tests are the template's spec
        template = multipool.one("kubernetes:core/v1:ConfigMap", f"certifier-template-{pool}")
        assert json.loads(template.inputs["data"]["job.json"])["spec"]["queue"] == f"ib-{pool}"
    for pool in POOLS:
        queue = multipool.one(QUEUE_TYPE, f"volcano-queue-{pool}")
        assert multipool.depends_on(jobs[f"fabric-test-{pool}"], queue), "the webhook refuses a Job of a missing queue"
        # the webhook also refuses one of a queue not yet Open: `pulumi up` waits for the controller to open it
        assert queue.inputs["metadata"]["annotations"] == {"pulumi.com/waitFor": "jsonpath={.status.state}=Open"}


def test_the_queues_and_jobs_pass_volcanos_crds(multipool, reference):
    from tests import schema_checks as sc
    from tests.schema_checks import pinned_name

    crds = reference / "crds"
    for queue in multipool.of_type(QUEUE_TYPE):
        obj = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", **queue.inputs}
        assert sc.crd_errors(obj, crds / pinned_name("scheduling.volcano.sh_queues", "volcano")) == []
    broken = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", **queue.inputs,
              "spec": {"affinity": {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": "h100"}}}}
    assert sc.crd_errors(broken, crds / pinned_name("scheduling.volcano.sh_queues", "volcano")), "a list, not a name"
    for job in multipool.of_type(JOB_TYPE):
        obj = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", **job.inputs}
        assert sc.crd_errors(obj, crds / pinned_name("batch.volcano.sh_jobs", "volcano")) == []


def test_a_pool_of_one_stack_has_no_queue_of_its_own_and_no_node_group(dev):
    """Control: the one-pool stack's job stays in Volcano's default queue, as always, and its scheduler has no
    nodegroup plugin (a labelled node would refuse the default queue)."""
    (job,) = dev.of_type(JOB_TYPE)
    assert job.inputs["spec"]["queue"] == "default" and not dev.of_type(QUEUE_TYPE)
    assert fabric.VOLCANO_NODEGROUP_LABEL not in dev.one(POOL_TYPE).inputs["nodeLabels"]
    assert not any(p["name"] == "nodegroup" for t in _scheduler_conf(dev)["tiers"] for p in t["plugins"])


def _identity(r: engine.Resource) -> tuple | None:
    """What a resource is outside Pulumi's state: an AgentPool by its agent pool name, a Kubernetes object by its
    type, namespace and name; None for components and reads (nothing to create or delete)."""
    if not r.custom or r.read:
        return None
    if r.type == POOL_TYPE:
        return r.type, r.inputs["agentPoolName"]
    meta = r.inputs.get("metadata")
    return (r.type, meta.get("namespace"), meta.get("name")) if isinstance(meta, dict) and meta.get("name") else None


def _moved(moved: bool) -> tuple[engine.Rendering, engine.Rendering]:
    """The same stack before (ibPool h100) and after adding h200 (ibPools, h100 marked movedFromIbPool or not)."""
    base = {k: v for k, v in engine.stack_file_config("multipool").items() if not k.endswith(":ibPools")}
    h100 = {"vmSize": POOLS["h100"], "nodeCount": 2}
    before = rendered("multipool", {**base, "aks-infiniband:ibPool": {"name": "h100", **h100}})
    after = rendered("multipool", {**base, "aks-infiniband:ibPools": {
        "h100": {**h100, **({"movedFromIbPool": True} if moved else {})}, "h200": {"vmSize": POOLS["h200"],
                                                                                    "nodeCount": 4}}})
    return before, after


def _answers(r: engine.Resource) -> set[str]:
    """The URNs a resource answers to: its own and each alias's, as the engine spells an alias spec (a field it
    leaves out is the resource's own; the parent's name is not in a URN, only its type chain)."""
    head, qualified, _ = r.urn.rsplit("::", 2)  # urn:pulumi:<stack>::<project>, <parent types>$<type>, <name>
    chain = qualified.rsplit("$", 1)[0] + "$" if "$" in qualified else ""
    assert not any({"parentUrn", "urn"} & set(a) for a in r.aliases), r.aliases
    return {r.urn} | {f"{head}::{chain}{a.get('type', r.type)}::{a.get('name', r.name)}" for a in r.aliases}


def test_adding_a_pool_renames_the_moved_pools_agent_pool_and_replaces_nothing_that_keeps_its_identity():
    """ibPool h100 becomes ibPools.h100 (movedFromIbPool) beside h200. Every object of the one-pool stack that the
    two-pool stack still has under the same identity (the AgentPool h100, and any Kubernetes object of the same
    kind, namespace and name) is found at its old URN or through an alias that spells that URN: Pulumi renames it
    in its state and updates it, where without the alias it would create the new one and delete the old, which
    for the AgentPool deletes the pool. The objects whose Kubernetes name moves (fabric-test -> fabric-test-h100)
    are new objects either way."""
    before, after = _moved(True)
    old_urns = {r.urn for r in before.resources}
    answers = {r.urn: _answers(r) for r in after.resources}
    kept = {_identity(r): r for r in after.resources if _identity(r)}
    renamed = []
    for old in before.resources:
        new = kept.get(_identity(old)) if _identity(old) else None
        if new is not None:
            assert old.urn in answers[new.urn], f"{old.urn} would be deleted while {new.urn} is created"
            renamed += [old.name] if new.urn != old.urn else []
    assert renamed == ["ib-pool"], renamed  # the AgentPool: the one object that keeps its identity and moves
    component = after.one("aks-infiniband:azure:IbNodePool", "ib-h100")
    assert answers[component.urn] & old_urns, "and its parent, the IbNodePool component"
    assert not any("name" in a for r in after.resources if "h200" in r.name for a in r.aliases), "h200 has no past"
    # the update itself: what the AgentPool gains is its Volcano node group (AKS updates node labels in place)
    old_pool, new_pool = before.one(POOL_TYPE), after.one(POOL_TYPE, "ib-h100-pool")
    changed = {k for k in {*old_pool.inputs, *new_pool.inputs} if old_pool.inputs.get(k) != new_pool.inputs.get(k)}
    assert changed == {"nodeLabels"}
    assert new_pool.inputs["nodeLabels"] == {**old_pool.inputs["nodeLabels"], fabric.VOLCANO_NODEGROUP_LABEL: "h100"}


def test_without_the_key_the_pool_would_be_replaced_and_the_key_is_one_entrys():
    """Control: without movedFromIbPool nothing answers to the one-pool AgentPool's URN (a delete of the pool);
    the program cannot tell which entry was ibPool, so the key says it, on one entry at most."""
    before, after = _moved(False)
    assert before.one(POOL_TYPE).urn not in {r.urn for r in after.resources}
    assert before.one(POOL_TYPE).urn not in set().union(*map(_answers, after.resources))
    from tests.unit.stack_config.test_pools import problems

    moved = {"nodeCount": 2, "movedFromIbPool": True}
    (line,) = problems(ibPool=None, ibPools={"h100": {"vmSize": POOLS["h100"], **moved},
                                             "h200": {"vmSize": POOLS["h200"], **moved}})
    assert line == ("aks-infiniband:ibPools: got movedFromIbPool on h100, h200; only the pool that was ibPool answers "
                    "to its names: set it on that one entry (keyed by ibPool.name)")
    lone = rendered("multipool", {**{k: v for k, v in engine.stack_file_config("multipool").items()
                                     if not k.endswith(":ibPools")},
                                  "aks-infiniband:ibPools": {"h100": {"vmSize": POOLS["h100"], "nodeCount": 2,
                                                                      "movedFromIbPool": True}}})
    assert lone.one(POOL_TYPE).urn == before.one(POOL_TYPE).urn, "one pool: its names"
    assert not any("name" in a for a in lone.one(POOL_TYPE).aliases)
