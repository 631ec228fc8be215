"""What the Kubernetes half needs of the cluster, in one stack or across two.

In one stack it is the Cluster and IbNodePool just declared; in the split it is the Azure stack's
outputs named in `OUTPUTS`, read through a `pulumi.StackReference` (kubeconfig stays secret there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.platform.cluster import kubernetes_provider, with_kubelogin
from stack_config import StackConfig

# The Azure half's stack outputs that the Kubernetes half reads: the contract between the two stacks.
OUTPUTS = ("resourceGroupName", "clusterName", "kubeconfig")


@dataclass(frozen=True)
class ClusterHandle:
    provider: k8s.Provider  # the stack's one Kubernetes provider
    resource_group_name: pulumi.Input[str]  # where the collector fetches credentials (not secret)
    cluster_name: pulumi.Input[str]
    # What the fabric test waits for besides the operators: the IB pool in one stack; nothing in the
    # split, where the Azure stack has finished before the Kubernetes stack starts.
    pool: Sequence[pulumi.Resource] = ()


def from_stack_reference(cfg: StackConfig) -> ClusterHandle:
    """The cluster of the Azure stack `cfg.azure_stack`, and a provider that signs in with this
    stack's own kubelogin mode (the runner inside the network is not the laptop that ran the Azure half)."""
    ref = pulumi.StackReference("azure-stack", stack_name=cfg.azure_stack)
    kubeconfig = ref.require_output("kubeconfig")
    if cfg.entra_id.enabled:
        kubeconfig = kubeconfig.apply(lambda text: with_kubelogin(text, cfg.entra_id.kubelogin_mode))
    return ClusterHandle(
        provider=kubernetes_provider("cluster-k8s", pulumi.Output.secret(kubeconfig)),
        resource_group_name=ref.require_output("resourceGroupName"),
        cluster_name=ref.require_output("clusterName"),
    )
