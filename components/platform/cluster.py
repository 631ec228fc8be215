"""Row 2: resource group, AKS cluster with a small CPU system pool, the user kubeconfig and the
Kubernetes provider that every later component is handed.

The platform-team options (docs/enterprise-deployment.md) shape the cluster here: API server access,
Entra ID with Azure RBAC (the provider then signs in through kubelogin, never a local account), the
identities, and the network profile with your own subnets. Their defaults are today's dev cluster.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_azure_native as azure_native
import pulumi_command as command
import pulumi_kubernetes as k8s
import yaml

from core import fabric
from core.enterprise import IDENTITY_ID, ApiServer, EntraId, Identity, Network

cs = azure_native.containerservice

# Built-in role "Azure Kubernetes Service RBAC Cluster Admin" (learn.microsoft.com/azure/role-based-access-control/
# built-in-roles/containers): with Azure RBAC, what the deploying identity needs to install the operators.
AKS_RBAC_CLUSTER_ADMIN_ROLE = "b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b"
# how long an Azure RBAC assignment may take to reach the API server (clusterside/wait_access.py)
WAIT_ACCESS_MINUTES = 10


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
    # The platform-team options; the defaults are today's dev cluster (public, local accounts, AKS's VNet).
    api_server: ApiServer = ApiServer()
    entra_id: EntraId = EntraId()
    identity: Identity = Identity()
    network: Network = Network()
    production: bool = False  # tags the cluster fabric.PRODUCTION_TAG: the policy pack's guardrails go mandatory
    # False in the Azure part of a split stack: its runner may not reach the API server, and the
    # Kubernetes part makes its own provider (stack/handoff.py).
    kubernetes_provider: bool = True


def decode_kubeconfig(creds: cs.ListManagedClusterUserCredentialsResult) -> str:
    """The first kubeconfig of the credential list, base64-decoded (AKS returns it encoded)."""
    if not creds.kubeconfigs:
        raise ValueError("AKS returned no user kubeconfig for the cluster")
    return base64.b64decode(creds.kubeconfigs[0].value).decode("utf-8")


def with_kubelogin(kubeconfig: str, mode: str) -> str:
    """The kubeconfig with every kubelogin exec user set to sign in with `mode` (what `kubelogin
    convert-kubeconfig -l <mode>` does): AKS hands Entra ID clusters a devicecode login, which a
    non-interactive `pulumi up` cannot answer. Client and tenant ids come from the environment
    (AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_SECRET: Azure/kubelogin
    pkg/internal/env). Refuses a kubeconfig with a static credential: that would be a local account."""
    doc = yaml.safe_load(kubeconfig)
    users = doc.get("users") or []
    for entry in users:
        user = entry.get("user") or {}
        exec_ = user.get("exec")
        if not exec_ or "kubelogin" not in str(exec_.get("command", "")) or set(user) - {"exec"}:
            raise ValueError(f"kubeconfig user {entry.get('name')!r} is not a kubelogin exec credential; an Entra ID "
                             f"cluster with local accounts disabled must not hand out static credentials")
        args = list(exec_.get("args") or [])
        keep = []
        for flag in ("--server-id", "--environment"):
            if flag in args and args.index(flag) + 1 < len(args):
                keep += [flag, args[args.index(flag) + 1]]
        exec_["args"] = ["get-token", "--login", mode, *keep]
    if not users:
        raise ValueError("AKS returned a kubeconfig without users")
    return yaml.safe_dump(doc, sort_keys=False)


def kubernetes_provider(name: str, kubeconfig: pulumi.Input[str], opts: pulumi.ResourceOptions | None = None
                        ) -> k8s.Provider:
    """The one Kubernetes provider of a stack, from the cluster's kubeconfig."""
    return k8s.Provider(
        name,
        k8s.ProviderArgs(
            kubeconfig=kubeconfig,
            # Server-side apply lets the operators own the fields they manage.
            enable_server_side_apply=True,
        ),
        opts=opts,
    )


def api_server_access(api: ApiServer) -> cs.ManagedClusterAPIServerAccessProfileArgs | None:
    """None for the default public API server, so the dev cluster's inputs stay as they were."""
    if not (api.private or api.vnet_integration or api.authorized_ip_ranges):
        return None
    return cs.ManagedClusterAPIServerAccessProfileArgs(
        enable_private_cluster=True if api.private else None,
        private_dns_zone=(api.private_dns_zone or "system") if api.private else None,
        enable_vnet_integration=True if api.vnet_integration else None,
        subnet_id=api.subnet_id,
        authorized_ip_ranges=list(api.authorized_ip_ranges) or None,
    )


def network_profile(net: Network) -> cs.ContainerServiceNetworkProfileArgs:
    cilium = net.dataplane == "cilium"
    return cs.ContainerServiceNetworkProfileArgs(
        network_plugin=net.plugin,
        network_plugin_mode=cs.NetworkPluginMode.OVERLAY if net.plugin_mode == "overlay" else None,
        network_dataplane=net.dataplane,
        # Azure CNI Powered by Cilium enforces network policy with Cilium
        # (learn.microsoft.com/azure/aks/azure-cni-powered-by-cilium).
        network_policy=cs.NetworkPolicy.CILIUM if cilium else None,
        pod_cidr=net.pod_cidr,
        service_cidr=net.service_cidr,
        dns_service_ip=net.dns_service_ip,
        outbound_type=net.outbound_type,
    )


def control_plane_identity(ident: Identity) -> cs.ManagedClusterIdentityArgs:
    """The user-assigned identity of `ident`, else one AKS creates (system-assigned)."""
    if ident.control_plane_identity_id:
        return cs.ManagedClusterIdentityArgs(type=cs.ResourceIdentityType.USER_ASSIGNED,
                                             user_assigned_identities=[ident.control_plane_identity_id])
    return cs.ManagedClusterIdentityArgs(type=cs.ResourceIdentityType.SYSTEM_ASSIGNED)


def kubelet_identity(identity_id: str) -> dict[str, cs.UserAssignedIdentityArgs]:
    """identityProfile.kubeletidentity: AKS wants the identity's client and object ids with its id."""
    group, name = IDENTITY_ID.fullmatch(identity_id).groups()  # type: ignore[union-attr] (checked by the config)
    found = azure_native.managedidentity.get_user_assigned_identity_output(resource_group_name=group,
                                                                           resource_name=name)
    return {"kubeletidentity": cs.UserAssignedIdentityArgs(
        resource_id=identity_id, client_id=found.client_id, object_id=found.principal_id)}


class Cluster(pulumi.ComponentResource):
    """An AKS cluster ready for the InfiniBand pool.

    - a system-assigned identity (or the user-assigned ones of `args.identity`), Kubernetes RBAC
      and the OIDC issuer; with `args.entra_id`, Entra ID with Azure RBAC, local accounts off, the
      deploying identity made cluster admin, and the provider signing in through kubelogin;
    - the API server public (optionally behind authorized ranges) or private (`args.api_server`);
    - the network profile and your own subnets (`args.network`);
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
    auth: str  # how the provider signs in, for the plan and the outputs (nothing secret)
    provider: k8s.Provider | None  # None when args.kubernetes_provider is False
    resource_id: pulumi.Output[str]
    oidc_issuer_url: pulumi.Output[str]
    current_kubernetes_version: pulumi.Output[str]

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:azure:Cluster", name, None, opts)
        entra, ident = args.entra_id, args.identity
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
            identity=control_plane_identity(ident),
            identity_profile=kubelet_identity(ident.kubelet_identity_id) if ident.kubelet_identity_id else None,
            enable_rbac=True,
            aad_profile=cs.ManagedClusterAADProfileArgs(
                managed=True, enable_azure_rbac=True,
                admin_group_object_ids=list(entra.admin_group_object_ids) or None) if entra.enabled else None,
            disable_local_accounts=True if not entra.local_accounts else None,
            api_server_access_profile=api_server_access(args.api_server),
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
                    vnet_subnet_id=args.network.system_subnet_id,
                )
            ],
            network_profile=network_profile(args.network),
            tags={**args.tags, **({fabric.PRODUCTION_TAG: "true"} if args.production else {})},
            opts=protected,
        )
        # Entra ID clusters: the exec form (kubelogin), rewritten to the login mode of this run.
        creds = cs.list_managed_cluster_user_credentials_output(
            resource_group_name=self.resource_group.name,
            resource_name=self.managed_cluster.name,
            format="exec" if entra.enabled else None,
        )
        kubeconfig = creds.apply(decode_kubeconfig)
        if entra.enabled:
            kubeconfig = kubeconfig.apply(lambda text: with_kubelogin(text, entra.kubelogin_mode))
        self.kubeconfig = pulumi.Output.secret(kubeconfig)
        self.auth = (f"Entra ID: kubelogin exec credential (--login {entra.kubelogin_mode})" if entra.enabled
                     else "local account: the clusterUser kubeconfig")
        self.provider = None
        if args.kubernetes_provider:
            # With Azure RBAC the provider's identity (the deployer's) needs a role before anything applies.
            admin = (self._deployer_cluster_admin(name, entra.deployer_principal_type)
                     if entra.enabled and entra.grant_deployer_cluster_admin else None)
            # An Azure RBAC assignment takes effect after a while: wait for it (clusterside/wait_access.py) rather
            # than let the provider's first writes fail with 403
            waited = [admin, self._wait_for_access(name, admin)] if admin else None
            self.provider = kubernetes_provider(f"{name}-k8s", self.kubeconfig, pulumi.ResourceOptions(
                parent=self, depends_on=waited))
        self.resource_id = self.managed_cluster.id
        self.oidc_issuer_url = self.managed_cluster.oidc_issuer_profile.apply(
            lambda p: p.issuer_url if p else "")  # enabled above, so AKS always reports it
        self.current_kubernetes_version = self.managed_cluster.current_kubernetes_version
        self.register_outputs(
            {
                "auth": self.auth,
                "resource_group_name": self.resource_group.name,
                "cluster_name": self.managed_cluster.name,
                "kubeconfig": self.kubeconfig,
                "resource_id": self.resource_id,
                "oidc_issuer_url": self.oidc_issuer_url,
                "current_kubernetes_version": self.current_kubernetes_version,
            }
        )

    def _wait_for_access(self, name: str, admin: pulumi.Resource) -> command.local.Command:
        """`python3 -S -m verify wait-access` with the kubeconfig (as JSON, secret) in its environment:
        done when the deployer may create namespaces, at most WAIT_ACCESS_MINUTES."""
        as_json = self.kubeconfig.apply(lambda text: json.dumps(yaml.safe_load(text)))
        return command.local.Command(
            f"{name}-deployer-access",
            command.local.CommandArgs(
                create=f"python3 -S -m verify wait-access --timeout-minutes {WAIT_ACCESS_MINUTES}",
                environment={"KUBECONFIG_JSON": pulumi.Output.secret(as_json)},
                logging=command.local.Logging.STDERR),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[admin], custom_timeouts=pulumi.CustomTimeouts(
                create=f"{WAIT_ACCESS_MINUTES + 5}m", update=f"{WAIT_ACCESS_MINUTES + 5}m")))

    def _deployer_cluster_admin(self, name: str, principal_type: str) -> azure_native.authorization.RoleAssignment:
        """The identity running `pulumi up` as Azure Kubernetes Service RBAC Cluster Admin on this cluster."""
        me = azure_native.authorization.get_client_config_output()
        return azure_native.authorization.RoleAssignment(
            f"{name}-deployer-admin",
            azure_native.authorization.RoleAssignmentArgs(
                principal_id=me.object_id,
                principal_type=principal_type,  # the SDK would say User for every identity
                role_definition_id=me.subscription_id.apply(
                    lambda sub: f"/subscriptions/{sub}/providers/Microsoft.Authorization/roleDefinitions/"
                                f"{AKS_RBAC_CLUSTER_ADMIN_ROLE}"),
                scope=self.managed_cluster.id,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
