"""What the Kubernetes half needs of the cluster, in one stack or across two.

In one stack it is the Cluster and IbNodePool just declared; in the split it is the Azure stack's
outputs named in `OUTPUTS`, read through a `pulumi.StackReference` (kubeconfig stays secret there).
The split checks the Azure stack's pool against this stack's before the provider exists (`pool_problem`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.platform.cluster import kubernetes_provider, with_kubelogin
from stack_config import StackConfig

# The Azure half's stack outputs that the Kubernetes half reads: the contract between the two stacks.
# vmSize and nodeCount size the fabric test: a job for nodes the pool lacks stays Pending. A stack of several
# pools exports them per pool instead, in POOLS_OUTPUT (`ibPools`: name -> vmSize, nodeCount, ...).
OUTPUTS = ("resourceGroupName", "clusterName", "kubeconfig", "vmSize", "nodeCount")
POOLS_OUTPUT = "ibPools"


@dataclass(frozen=True)
class ClusterHandle:
    provider: k8s.Provider  # the stack's one Kubernetes provider
    resource_group_name: pulumi.Input[str]  # where the collector fetches credentials (not secret)
    cluster_name: pulumi.Input[str]
    # What each pool's fabric test waits for besides the operators, by pool name: its AgentPool in one stack;
    # nothing in the split, where the Azure stack has finished before the Kubernetes stack starts.
    pools: Mapping[str, Sequence[pulumi.Resource]] = field(default_factory=dict)

    def pool(self, name: str) -> Sequence[pulumi.Resource]:
        """What the fabric test of pool `name` waits for (nothing in the split)."""
        return self.pools.get(name, ())


def pool_problem(vm_size: str, node_count: int, deployed_vm_size: Any, deployed_node_count: Any,
                 azure_stack: str, key: str = "ibPool") -> str | None:
    """One pool of this stack against the one the Azure stack deployed (its outputs), as one line naming
    the key, or None when they agree. Sizes compare without case (Azure's names are case-insensitive)."""
    prefix = f"aks-infiniband:{key}"
    fix = "set the same pool in both stack files: the fabric test would wait for nodes that do not exist"
    if str(deployed_vm_size).lower() != vm_size.lower():
        return (f"{prefix}.vmSize: got {vm_size!r}; the Azure stack {azure_stack} deployed "
                f"{deployed_vm_size!r}: {fix}")
    if not isinstance(deployed_node_count, (int, float)) or deployed_node_count != node_count:
        # a number comes back from a stack's outputs as a float (JSON): shown as the integer it is
        whole = isinstance(deployed_node_count, float) and deployed_node_count.is_integer()
        shown = int(deployed_node_count) if whole else deployed_node_count
        return f"{prefix}.nodeCount: got {node_count}; the Azure stack {azure_stack} deployed {shown}: {fix}"
    return None


def pools_problem(cfg: StackConfig, deployed: Any) -> str | None:
    """Several pools against those the Azure stack deployed (its `ibPools` output), as one line naming the first
    pool that differs or is missing, or None when every pool agrees."""
    deployed = deployed if isinstance(deployed, dict) else {}
    for pool in cfg.ib_pools:
        key = f"ibPools.{pool.name}"
        theirs = deployed.get(pool.name)
        if not isinstance(theirs, dict):
            return (f"aks-infiniband:{key}: the Azure stack {cfg.azure_stack} deployed no pool {pool.name!r} "
                    f"(it has {', '.join(sorted(deployed)) or 'none'}): set the same pools in both stack files")
        problem = pool_problem(pool.vm_size, pool.node_count, theirs.get("vmSize"), theirs.get("nodeCount"),
                               cfg.azure_stack or "", key=key)
        if problem:
            return problem
    return None


def _checked(cfg: StackConfig, deployed: list[Any]) -> None:
    """Raised in an apply, a RunError is what `pulumi up` prints as one line (the language host,
    pulumi/sdk python/cmd/pulumi-language-python-exec, reports RunError without a traceback)."""
    if len(cfg.ib_pools) == 1:
        problem = pool_problem(cfg.sku.vm_size, cfg.ib_pool.node_count, deployed[0], deployed[1],
                               cfg.azure_stack or "")
    else:
        problem = pools_problem(cfg, deployed[0])
    if problem:
        raise pulumi.RunError(problem)


def from_stack_reference(cfg: StackConfig) -> ClusterHandle:
    """The cluster of the Azure stack `cfg.azure_stack`, and a provider that signs in with this
    stack's own kubelogin mode (the runner inside the network is not the laptop that ran the Azure half)."""
    ref = pulumi.StackReference("azure-stack", stack_name=cfg.azure_stack)
    # The provider waits for the pool check, so a mismatch stops the half before anything is applied.
    read = ([ref.require_output("vmSize"), ref.require_output("nodeCount")] if len(cfg.ib_pools) == 1
            else [ref.require_output(POOLS_OUTPUT)])
    check = pulumi.Output.all(*read).apply(lambda deployed: _checked(cfg, deployed))
    kubeconfig = pulumi.Output.all(ref.require_output("kubeconfig"), check).apply(lambda both: both[0])
    if cfg.entra_id.enabled:
        kubeconfig = kubeconfig.apply(lambda text: with_kubelogin(text, cfg.entra_id.kubelogin_mode))
    return ClusterHandle(
        provider=kubernetes_provider("cluster-k8s", pulumi.Output.secret(kubeconfig)),
        resource_group_name=ref.require_output("resourceGroupName"),
        cluster_name=ref.require_output("clusterName"),
    )
