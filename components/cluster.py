"""Row 2: resource group, AKS cluster with a small CPU system pool, the user kubeconfig and the
Kubernetes provider that every later component is handed."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_azure_native as azure_native
import pulumi_kubernetes as k8s

from core import fabric

cs = azure_native.containerservice


@dataclass(frozen=True)
class ClusterArgs:
    resource_group_name: str
    cluster_name: str
    location: str
    kubernetes_version: str
    system_pool_vm_size: str
    system_pool_node_count: int
    tags: Mapping[str, str]
    protect: bool


def decode_kubeconfig(creds: cs.ListManagedClusterUserCredentialsResult) -> str:
    """The first kubeconfig of the credential list, base64-decoded (AKS returns it encoded)."""
    if not creds.kubeconfigs:
        raise ValueError("AKS returned no user kubeconfig for the cluster")
    return base64.b64decode(creds.kubeconfigs[0].value).decode("utf-8")


class Cluster(pulumi.ComponentResource):
    """An AKS cluster ready for the InfiniBand pool.

    - a system-assigned identity, Kubernetes RBAC and the OIDC issuer;
    - the Kubernetes version pinned (MAJOR.MINOR lets AKS pick the newest patch);
    - a system pool of small CPU VMs, left untainted because the operators' controllers and
      Volcano's scheduler run there, off the expensive InfiniBand nodes;
    - no public IPs on nodes.

    `kubeconfig` is a secret output; `provider` is the one Kubernetes provider of the stack.
    `resource_id`, `oidc_issuer_url` (for workload identity federation) and
    `current_kubernetes_version` (the patch AKS chose for the pinned MAJOR.MINOR) are what modules
    built on the cluster ask for.
    """

    resource_group: azure_native.resources.ResourceGroup
    managed_cluster: cs.ManagedCluster
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    resource_id: pulumi.Output[str]
    oidc_issuer_url: pulumi.Output[str]
    current_kubernetes_version: pulumi.Output[str]

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:azure:Cluster", name, None, opts)
        protected = pulumi.ResourceOptions(parent=self, protect=args.protect)
        self.resource_group = azure_native.resources.ResourceGroup(
            f"{name}-rg",
            azure_native.resources.ResourceGroupArgs(
                resource_group_name=args.resource_group_name,
                location=args.location,
                tags=dict(args.tags),
            ),
            opts=protected,
        )
        self.managed_cluster = cs.ManagedCluster(
            f"{name}-aks",
            # keyword form: the typed Args class clashes with the resource-name parameter (both resource_name)
            resource_group_name=self.resource_group.name,
            resource_name_=args.cluster_name,
            location=args.location,
            dns_prefix=args.cluster_name,
            kubernetes_version=args.kubernetes_version,
            identity=cs.ManagedClusterIdentityArgs(type=cs.ResourceIdentityType.SYSTEM_ASSIGNED),
            enable_rbac=True,
            oidc_issuer_profile=cs.ManagedClusterOIDCIssuerProfileArgs(enabled=True),
            agent_pool_profiles=[
                cs.ManagedClusterAgentPoolProfileArgs(
                    name=fabric.SYSTEM_POOL_NAME,
                    mode=cs.AgentPoolMode.SYSTEM,
                    vm_size=args.system_pool_vm_size,
                    count=args.system_pool_node_count,
                    os_type=cs.OSType.LINUX,
                    os_sku=cs.OSSKU.UBUNTU,
                    type=cs.AgentPoolType.VIRTUAL_MACHINE_SCALE_SETS,
                    enable_node_public_ip=False,
                )
            ],
            network_profile=cs.ContainerServiceNetworkProfileArgs(
                network_plugin=cs.NetworkPlugin.AZURE,
                network_plugin_mode=cs.NetworkPluginMode.OVERLAY,
            ),
            tags=dict(args.tags),
            opts=protected,
        )
        creds = cs.list_managed_cluster_user_credentials_output(
            resource_group_name=self.resource_group.name,
            resource_name=self.managed_cluster.name,
        )
        self.kubeconfig = pulumi.Output.secret(creds.apply(decode_kubeconfig))
        self.provider = k8s.Provider(
            f"{name}-k8s",
            k8s.ProviderArgs(
                kubeconfig=self.kubeconfig,
                # Server-side apply lets the operators own the fields they manage.
                enable_server_side_apply=True,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.resource_id = self.managed_cluster.id
        self.oidc_issuer_url = self.managed_cluster.oidc_issuer_profile.apply(
            lambda p: p.issuer_url if p else "")  # enabled above, so AKS always reports it
        self.current_kubernetes_version = self.managed_cluster.current_kubernetes_version
        self.register_outputs(
            {
                "resource_group_name": self.resource_group.name,
                "cluster_name": self.managed_cluster.name,
                "kubeconfig": self.kubeconfig,
                "resource_id": self.resource_id,
                "oidc_issuer_url": self.oidc_issuer_url,
                "current_kubernetes_version": self.current_kubernetes_version,
            }
        )
