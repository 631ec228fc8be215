"""Several IB pools, each its own fabric: a Volcano queue per pool that keeps every pod of its jobs on that
pool's nodes, so a gang job never spans two pools (docs/configuration.md#each-pool-is-its-own-fabric).

How (volcano-sh/volcano v1.15.1, 0a56ed3): the scheduler's `nodegroup` plugin reads a node's group from its
`volcano.sh/nodegroup-name` label, which every node of a pool carries with the pool's name (the AgentPool's
nodeLabels: components/platform/ib_node_pool.py). Each pool's queue `ib-<pool>` names that group in
`spec.affinity.nodeGroupAffinity.requiredDuringSchedulingIgnoredDuringExecution`, and the plugin's predicate
refuses a node of any other group (pkg/scheduler/plugins/nodegroup/nodegroup.go;
docs/user-guide/how_to_use_nodegroup_plugin.md). It also refuses a labelled node to a queue with no affinity,
such as `default`: an IB node takes Volcano jobs of its pool's queue only. `strict: false` keeps an unlabelled
node (the system pool) open to queues with no affinity, as it was; the plugin's default, strict, would close it.

HyperNodes are not what keeps a job in its pool: only a job that asks for network topology reads them. They
stay as discovered from the topology labels (components/platform/volcano_topology.py); a placement group, their
top tier, belongs to one scale set, so one pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from components.platform import volcano_topology
from core import fabric

PLUGIN = "nodegroup"
QUEUE_API_VERSION = "scheduling.volcano.sh/v1beta1"
WAIT_FOR, OPEN = "pulumi.com/waitFor", "jsonpath={.status.state}=Open"


def scheduler_conf(conf: str) -> str:
    """The scheduler configuration with the nodegroup plugin, non-strict, in its last tier (beside `predicates`,
    where the user guide puts it)."""
    parsed = yaml.safe_load(conf)
    plugins = parsed["tiers"][-1]["plugins"]
    if not any(p.get("name") == PLUGIN for p in plugins):
        plugins.append({"name": PLUGIN, "arguments": {"strict": False}})
    return yaml.safe_dump(parsed, sort_keys=False)


def configure(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The manifest's objects (after volcano_topology.configure) with the nodegroup plugin in the scheduler's
    ConfigMap; every other object as it was."""
    name, key = volcano_topology.SCHEDULER_CONFIGMAP, volcano_topology.SCHEDULER_KEY
    return [{**obj, "data": {**obj["data"], key: scheduler_conf(obj["data"][key])}}
            if obj.get("kind") == "ConfigMap" and (obj.get("metadata") or {}).get("name") == name else obj
            for obj in objects]


def queue(pool: str) -> dict[str, Any]:
    """Pool `pool`'s queue: its jobs on its nodes only. Weight 1 as Volcano's `default` queue; no capability
    (the pool's size bounds it); reclaimable as Volcano's default. `pulumi up` waits until the queue controller
    has opened it: the webhook refuses a Job in a queue whose state is not Open (pkg/webhooks/admission/jobs/
    validate/admit_job.go), and the pool's fabric test is created next (the provider's waitFor annotation,
    pulumi/pulumi-kubernetes#3134)."""
    return {"apiVersion": QUEUE_API_VERSION, "kind": "Queue",
            "metadata": {"name": fabric.pool_queue(pool), "annotations": {WAIT_FOR: OPEN}},
            "spec": {"weight": 1, "affinity": {"nodeGroupAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [pool]}}}}


def queues(pools: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each pool's queue, by pool, with several pools; none with one (its jobs stay in `default`, as always)."""
    return {p: queue(p) for p in pools} if len(pools) > 1 else {}
