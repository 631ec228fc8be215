"""The Kubernetes half on a cluster that already exists (`existingCluster`, docs/existing-cluster.md): its one
Kubernetes provider from the configured kubeconfig and context, and, at `up`, the IB pool checked against the
configuration before anything is declared.

Another team's cluster carries none of this stack's labels: the IB pool is found by AKS's own node label
`kubernetes.azure.com/agentpool=<ibPool.name>`, and its nodes' `node.kubernetes.io/instance-type` and number
must be what ibPool says (the fabric test's size, GPUs and thresholds are read from it). A pool that
disagrees is named at once, not after the certify deadline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from clusterside import kube_api
from core import fabric
from stack.handoff import ClusterHandle
from stack_config import PROJECT, StackConfig

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"  # set by the cloud provider on every AKS node


def handle(cfg: StackConfig) -> ClusterHandle:
    """The stack's one Kubernetes provider, on the existing cluster. Without a kubeconfig the provider reads
    KUBECONFIG (else ~/.kube/config) as kubectl does; an inline kubeconfig is kept secret."""
    ec = cfg.existing_cluster
    assert ec is not None
    kubeconfig: pulumi.Input[str] | None = None
    if ec.kubeconfig is not None:
        kubeconfig = pulumi.Output.secret(ec.kubeconfig) if ec.inline else ec.kubeconfig
    provider = k8s.Provider("cluster-k8s", k8s.ProviderArgs(
        kubeconfig=kubeconfig, context=ec.context,
        enable_server_side_apply=True,  # as the stack's own cluster's provider (components/platform/cluster.py)
    ))
    return ClusterHandle(provider=provider, resource_group_name=cfg.resource_group_name,
                         cluster_name=cfg.cluster_name)


def credentials(cfg: StackConfig) -> kube_api.Credentials:
    """The credentials the provider uses, read as kubectl reads them (clusterside/kube_api.py)."""
    ec = cfg.existing_cluster
    assert ec is not None
    if ec.kubeconfig is None:
        return kube_api.default_kubeconfig(context=ec.context)
    if ec.inline:
        import yaml
        return kube_api.from_kubeconfig_data(yaml.safe_load(ec.kubeconfig), "existingCluster.kubeconfig (inline)",
                                             allow_exec=True, context=ec.context)
    return kube_api.from_kubeconfig(ec.kubeconfig, allow_exec=True, context=ec.context)


def pool_problems(cfg: StackConfig, nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """What of ibPool the pool's nodes (those with AKS's agentpool label) contradict: one line per key."""
    pool, prefix = cfg.ib_pool, f"{PROJECT}:ibPool"
    if not nodes:
        return [f"{prefix}.name: got {pool.name!r}; the cluster has no node with {fabric.AGENT_POOL_LABEL}="
                f"{pool.name} (the name of an existing agent pool of InfiniBand VMs is expected)"]
    out = []
    sizes = {}
    for node in nodes:
        size = ((node.get("metadata") or {}).get("labels") or {}).get(INSTANCE_TYPE_LABEL)
        sizes.setdefault(size, []).append((node.get("metadata") or {}).get("name"))
    others = {s: names for s, names in sizes.items() if (s or "").lower() != pool.vm_size.lower()}
    if others:
        seen = "; ".join(f"{s or 'no ' + INSTANCE_TYPE_LABEL}: {', '.join(sorted(map(str, n)))}"
                         for s, n in sorted(others.items(), key=lambda x: str(x[0])))
        out.append(f"{prefix}.vmSize: got {pool.vm_size!r}; pool {pool.name} has nodes of another size ({seen})")
    if len(nodes) != pool.node_count:
        out.append(f"{prefix}.nodeCount: got {pool.node_count}; pool {pool.name} has {len(nodes)} node"
                   f"{'s' if len(nodes) != 1 else ''}")
    return out


def check_pool(cfg: StackConfig) -> None:
    """At `up` (not at a preview, which must not need the cluster's nodes): stop with one line per key the
    pool contradicts, or with what kept the nodes from being read, before any resource is declared."""
    if pulumi.runtime.is_dry_run():
        return
    try:
        api = kube_api.Api(credentials(cfg))
        listed = api.get("/api/v1/nodes", labelSelector=f"{fabric.AGENT_POOL_LABEL}={cfg.ib_pool.name}")
    except kube_api.ApiError as exc:
        raise pulumi.RunError(f"existingCluster: cannot read the nodes of pool {cfg.ib_pool.name}: {exc} "
                              "(nothing was changed)") from None
    problems = pool_problems(cfg, listed.get("items") or [])
    if problems:
        lines = "\n  ".join(problems)
        raise pulumi.RunError(f"the existing cluster's IB pool disagrees with the configuration (nothing was "
                              f"changed):\n  {lines}")
