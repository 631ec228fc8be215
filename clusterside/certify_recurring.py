"""`python -m verify certify --recurring` (the stack's CronJob): re-certify IB nodes that run no GPU or RDMA
work, at the lowest priority, with the same verdict engine as day 0.

Which of Volcano's preemption or "not starting on busy nodes": the second. The Volcano the stack installs
(v1.15.1's installer) runs the actions `enqueue, allocate, backfill`, no `preempt`, so nothing would evict
a running re-test for a real job; instead the re-test only ever lands on nodes that were idle when it
started (`idle_nodes`: no running or pending pod asks for `nvidia.com/gpu` or `rdma/*`), pinned there by
node affinity, under the lowest PriorityClass (value below 0, preemptionPolicy Never), so that a pod of
the default scheduler may preempt it and Volcano's `priority` plugin orders every real job before it.

The re-test is the day-0 job's own spec (components/fabric/nccl_job.py `retest_template`, in a ConfigMap) for n
nodes: NODES and the doctor's inputs for n, the doctor always on. Its pairs are the doctor's circle-method
rounds, which tell up to two bad nodes apart from good ones whatever the placement (verify/doctor.py); so
admitting k nodes with p certified idle peers costs one run whose length does not grow with k while
k <= p + 1 (docs/fabric-certifier.md gives the minutes).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from clusterside import certify, kube
from clusterside.kube import VOLCANO_GROUP, VOLCANO_PLURAL, VOLCANO_VERSION
from clusterside.kube_api import Api, ApiError
from core import fabric

PRIORITY_CLASS = "aks-infiniband-idle"  # components/fabric/certifier.py creates it
RETEST_LABEL = "aks-infiniband.io/fabric-retest"
BUSY_RESOURCES = ("nvidia.com/gpu", f"{fabric.RDMA_RESOURCE_PREFIX}/")
WAIT_MARGIN_MINUTES = 15  # image pull and gang scheduling before the pods' own deadline starts
JUDGE_MARGIN_MINUTES = 10  # reading the log, judging and writing, after the wait


def run_minutes(template: Mapping[str, Any]) -> int:
    """How long one recurring run may take: the wait for its re-test, and the judgement after it. The
    CronJob's activeDeadlineSeconds is sized from it (components/fabric/certifier.py), and a re-test older than
    it is stale (stale_retests)."""
    return int(template["deadline_minutes"]) + WAIT_MARGIN_MINUTES + JUDGE_MARGIN_MINUTES


def stale_retests(jobs: Sequence[Mapping[str, Any]], now: float, max_minutes: float) -> list[str]:
    """Unfinished re-tests created more than `max_minutes` ago (one left Pending by a run that ended):
    they would block every later run, so the next run deletes them."""
    out = []
    for j in jobs:
        if kube.get(j, "status", "state", "phase") in ("Completed", "Failed", "Aborted", "Terminated"):
            continue
        created = kube.epoch(kube.get(j, "metadata", "creationTimestamp"))
        if created is not None and now - created > max_minutes * 60:
            out.append(kube.name(j))
    return out
MAX_PEERS = 3  # certified peers beside the nodes under test: the doctor's partners per node


def _say(message: str) -> None:
    print(f"[verify certify] {message}", file=sys.stderr, flush=True)


def retest_name(args: argparse.Namespace, at: float) -> str:
    """`fabric-retest-<maker>-<UTC second>`: the CronJob (`cron`) and the admission loop (`admit`) each run one
    re-test at a time, so their names cannot collide (both once made `fabric-retest-<minute>`: a 409)."""
    maker = "admit" if getattr(args, "retest_by_admission", False) else "cron"
    return f"fabric-retest-{maker}-{time.strftime('%Y%m%d%H%M%S', time.gmtime(at))}"


def busy_nodes(pods: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Node -> the pod that makes it busy: not finished, and asks for a GPU or an RDMA device, as an
    extended resource or through DRA ResourceClaims (spec.resourceClaims: with DRA a pod's devices are
    claims, and its containers request no extended resource at all)."""
    out = {}
    for pod in pods:
        node = kube.get(pod, "spec", "nodeName")
        if not node or kube.get(pod, "status", "phase") in ("Succeeded", "Failed"):
            continue
        if kube.get(pod, "spec", "resourceClaims"):
            out.setdefault(str(node), f"{kube.get(pod, 'metadata', 'namespace')}/{kube.name(pod)}")
            continue
        for c in kube.get(pod, "spec", "containers") or []:
            asks = {**(kube.get(c, "resources", "requests") or {}), **(kube.get(c, "resources", "limits") or {})}
            if any(r.startswith(BUSY_RESOURCES) for r in asks):
                out.setdefault(str(node), f"{kube.get(pod, 'metadata', 'namespace')}/{kube.name(pod)}")
    return out


def idle_nodes(nodes: Sequence[certify.NodeFacts], busy: Mapping[str, str], member: certify.Membership
               ) -> tuple[list[str], list[str]]:
    """(nodes to test, certified peers to test them against). Under test: the held (uncertified), those
    not yet passed on the boot they run (a new node not held yet) and the certifier's quarantined idle
    nodes; where there are none, every idle certified node (re-certification).
    Never: a busy or cordoned node, one outside the fabric, one with an NPD problem (held as it is)."""
    usable = [n for n in nodes if n.name not in busy and not n.cordoned and not n.problems
              and (not member.reason or n.name in member.fabric)]
    held = [n.name for n in usable if n.state == fabric.UNCERTIFIED or n.awaiting
            or (n.state == fabric.QUARANTINED and n.ours)]
    certified = [n.name for n in usable if n.state == "certified" and not n.awaiting]
    if held:
        return held, certified[:max(MAX_PEERS, 2 - len(held))]
    return certified, []


def retest_job(template: Mapping[str, Any], nodes: Sequence[str], name: str) -> dict[str, Any]:
    """The day-0 job's spec for these nodes: n workers pinned to them, lowest priority, the launcher's
    inputs for n (template["env_by_nodes"]), labelled as a re-test."""
    n = len(nodes)
    env = template["env_by_nodes"][str(n)]
    spec = copy.deepcopy(template["spec"])
    spec["minAvailable"] = sum(t.get("replicas", 1) for t in spec["tasks"] if t["name"] != "mpiworker") + n
    spec["priorityClassName"] = PRIORITY_CLASS
    for task in spec["tasks"]:
        pod = task["template"]["spec"]
        pod["priorityClassName"] = PRIORITY_CLASS
        if task["name"] == "mpiworker":
            task["replicas"] = n
            pinned = {"key": "kubernetes.io/hostname", "operator": "In", "values": list(nodes)}
            pod["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [pinned]}]}}}
        for c in pod.get("containers", []):
            c["env"] = [{"name": e["name"], "value": env[e["name"]]} if e.get("name") in env else e
                        for e in c.get("env") or []]
    return {"apiVersion": f"{VOLCANO_GROUP}/{VOLCANO_VERSION}", "kind": "Job",
            "metadata": {"name": name, "labels": {RETEST_LABEL: "true", "app.kubernetes.io/part-of": "aks-infiniband"}},
            "spec": spec}


def launch(api: Api, args: argparse.Namespace, nodes: Sequence[Mapping[str, Any]], member: certify.Membership,
           writer) -> tuple[str | None, int | None]:
    """Create the re-test job on idle nodes (in dry run: say which); (its name, n), or (None, None) when
    there is nothing idle to certify. Sets args.sku, threshold and wait for the judgement that follows."""
    home = args.certifier_namespace or args.namespace
    try:
        data = kube.get(api.get(f"/api/v1/namespaces/{home}/configmaps/{args.template_configmap}"), "data") or {}
        template = json.loads(data["job.json"])
    except (KeyError, ValueError) as exc:
        raise ApiError(f"ConfigMap {home}/{args.template_configmap} holds no re-test template ({exc})") from None
    facts = [certify.facts(n) for n in nodes]
    busy = busy_nodes(kube.items(api.get("/api/v1/pods")))
    under_test, peers = idle_nodes(facts, busy, member)
    chosen = (under_test + peers)[:max(int(k) for k in template["env_by_nodes"])]
    if len(chosen) < 2:
        _say(f"nothing to certify: {len(chosen)} idle IB node(s) usable (busy: {', '.join(sorted(busy)) or 'none'})")
        return None, None
    jobs_path = f"/apis/{VOLCANO_GROUP}/{VOLCANO_VERSION}/namespaces/{args.namespace}/{VOLCANO_PLURAL}"
    running = kube.items(api.get(jobs_path, labelSelector=f"{RETEST_LABEL}=true"))
    stale = stale_retests(running, time.time(), run_minutes(template))
    for name in stale:
        _say(f"re-test {args.namespace}/{name} is older than a run may take ({run_minutes(template)} min) and "
             "has not finished: deleting it")
        writer.delete_job(args.namespace, name)
    running = [j for j in running if kube.name(j) not in stale]
    if any(kube.get(j, "status", "state", "phase") not in ("Completed", "Failed", "Aborted", "Terminated")
           for j in running):
        _say("a re-test job is still running: this run does nothing")
        return None, None
    name = retest_name(args, time.time())
    job = retest_job(template, chosen, name)
    _say(f"re-test {', '.join(under_test)}" + (f" against certified {', '.join(peers)}" if peers else "")
         + f" as {args.namespace}/{name}")
    writer.create_job(args.namespace, job)
    args.sku = args.sku or template["sku"]
    args.rdma_driver = args.rdma_driver or template.get("rdma_driver")  # absent: verify's default (doca)
    if args.threshold_gbps is None:
        args.threshold_gbps = template.get("threshold_gbps")
    args.wait_minutes = args.wait_minutes or template["deadline_minutes"] + WAIT_MARGIN_MINUTES
    return (None if writer.dry_run else name), len(chosen)
