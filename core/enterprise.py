"""The platform-team options (docs/enterprise-deployment.md), in one place: the checks of their keys
(CIDRs, Azure resource ids, stack names), the rules that span them, and their typed records.

Each check returns None when the value is fine, else what is allowed (the engine's contract). The
cross-key rules name the key that was set, so a refusal points at the line a person wrote.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core import fabric
from core.shown import shown

MAX_TAGS = 50  # Azure's limit of tags on a resource (Azure Resource Manager, "Tag resources": limitations)
# The split of the program into an Azure stack and a Kubernetes stack (stack/).
STACK_PARTS = ("all", "azure", "kubernetes")
KUBELOGIN_MODES = ("azurecli", "workloadidentity", "spn", "msi")  # kubelogin get-token --login <mode>
PRINCIPAL_TYPES = ("User", "ServicePrincipal")  # of the identity that runs `pulumi up`
# What each login mode signs in as (ARM's principalType of a managed identity is ServicePrincipal);
# `azurecli` is whoever ran `az login`: a person unless deployerPrincipalType says otherwise.
LOGIN_PRINCIPAL = {"azurecli": None, "workloadidentity": "ServicePrincipal", "spn": "ServicePrincipal",
                   "msi": "ServicePrincipal"}


def principal_type(kubelogin_mode: str, given: str | None) -> str:
    """The deployer's principalType: the one its login mode implies, else the one given, else User."""
    return LOGIN_PRINCIPAL.get(kubelogin_mode) or given or "User"


def principal_problem(kubelogin_mode: str, given: str | None) -> str | None:
    """A deployerPrincipalType that contradicts its login mode (ARM rejects the assignment), else None."""
    implied = LOGIN_PRINCIPAL.get(kubelogin_mode)
    if given and implied and given != implied:
        return (f"entraId.deployerPrincipalType: got {shown(given)} with entraId.kubeloginMode: {kubelogin_mode}, "
                f"which "
                f"signs in as a {implied}; ARM refuses a role assignment of the wrong type: set {implied} or remove it")
    return None
# azure is Azure CNI Overlay. Not offered: kubenet (retired in 2028) and Azure CNI node-subnet mode (the
# pinned SDK sends its podCidr default, 10.244.0.0/16, with every network profile).
NETWORK_PLUGINS = ("azure", "none")  # none: bring your own CNI
DATAPLANES = ("azure", "cilium")
OUTBOUND_TYPES = ("loadBalancer", "userDefinedRouting", "managedNATGateway", "userAssignedNATGateway")
OUTBOUND_NEEDS_OWN_SUBNETS = ("userDefinedRouting", "userAssignedNATGateway")
# AKS's own defaults when the keys are unset (learn.microsoft.com/azure/aks/azure-cni-overlay).
AKS_DEFAULT_POD_CIDR = "10.244.0.0/16"
AKS_DEFAULT_SERVICE_CIDR = "10.0.0.0/16"
# Ranges AKS refuses for the service (and overlay pod) CIDR: link-local, two Docker/AKS-internal
# ranges and TEST-NET-1 (learn.microsoft.com/azure/aks/azure-cni-overlay, "IP address planning").
AKS_RESERVED = tuple(ipaddress.ip_network(n) for n in
                     ("169.254.0.0/16", "172.30.0.0/16", "172.31.0.0/16", "192.0.2.0/24"))
MAX_AUTHORIZED_RANGES = 200  # AKS's limit on apiServerAccessProfile.authorizedIPRanges

_NAME = r"[^/\s]+"
SUBNET_ID = re.compile(rf"/subscriptions/[0-9a-fA-F-]{{36}}/resourceGroups/{_NAME}/providers/Microsoft\.Network/"
                       rf"virtualNetworks/({_NAME})/subnets/{_NAME}", re.IGNORECASE)
IDENTITY_ID = re.compile(rf"/subscriptions/[0-9a-fA-F-]{{36}}/resourceGroups/({_NAME})/providers/"
                         rf"Microsoft\.ManagedIdentity/userAssignedIdentities/({_NAME})", re.IGNORECASE)
DNS_ZONE_ID = re.compile(rf"/subscriptions/[0-9a-fA-F-]{{36}}/resourceGroups/{_NAME}/providers/Microsoft\.Network/"
                         rf"privateDnsZones/(?:[a-z0-9-]+\.)?privatelink\.[a-z0-9]+\.azmk8s\.io", re.IGNORECASE)
GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
STACK_NAME = re.compile(r"[A-Za-z0-9][-\w.]*/[A-Za-z0-9][-\w.]*/[A-Za-z0-9][-\w.]*")

SUBNET_SHAPE = ("a subnet resource id: /subscriptions/<subscription id>/resourceGroups/<group>/providers/"
                "Microsoft.Network/virtualNetworks/<vnet>/subnets/<subnet>")


# --- checks of one value ----------------------------------------------------------------------
def _network(v: Any) -> ipaddress.IPv4Network | None:
    if not isinstance(v, str) or not re.fullmatch(r"[0-9./]+", v):
        return None
    try:
        net = ipaddress.ip_network(v, strict=True)
    except ValueError:
        return None
    return net if isinstance(net, ipaddress.IPv4Network) and "/" in v else None


def cidr(v: Any) -> str | None:
    """A private range for pods or services: IPv4 CIDR, host bits zero, not one AKS reserves."""
    net = _network(v)
    if net is None:
        return "an IPv4 range in CIDR notation with its host bits zero, e.g. 10.244.0.0/16"
    if net.prefixlen > 28 or net.prefixlen < 8:
        return "a CIDR from /8 to /28"
    clash = next((r for r in AKS_RESERVED if net.overlaps(r)), None)
    if clash:
        return f"a range outside {clash}, which AKS reserves (169.254.0.0/16, 172.30.0.0/16, 172.31.0.0/16, " \
               f"192.0.2.0/24 are refused)"
    return None


# kube-apiserver refuses a service range of more than 20 host bits: an IPv4 one is /12 or narrower
# (kubernetes pkg/controlplane/apiserver/options/validation.go: "for 32-bit addresses, the mask must be >= 12").
MAX_SERVICE_HOST_BITS = 20


def service_cidr(v: Any) -> str | None:
    """A pod-or-service range (`cidr`) that kube-apiserver takes as its service range."""
    allowed = cidr(v)
    if allowed is None and 32 - _network(v).prefixlen > MAX_SERVICE_HOST_BITS:
        return (f"a range of /{32 - MAX_SERVICE_HOST_BITS} or narrower: kube-apiserver refuses an IPv4 service range "
                f"of more than {MAX_SERVICE_HOST_BITS} host bits")
    return allowed


def ipv4_address(v: Any) -> str | None:
    try:
        ipaddress.IPv4Address(v if isinstance(v, str) else "")
        return None
    except ValueError:
        return "an IPv4 address, e.g. 10.0.0.10"


def authorized_ranges(v: Any) -> str | None:
    if not isinstance(v, list) or len(v) > MAX_AUTHORIZED_RANGES:
        return f"a list of at most {MAX_AUTHORIZED_RANGES} IPv4 CIDRs, e.g. [203.0.113.0/24]"
    for item in v:
        net = _network(item)
        if net is None:
            return f"IPv4 CIDRs with their host bits zero, e.g. 203.0.113.7/32 (got {shown(item)})"
        if net.prefixlen == 0:
            return "ranges narrower than 0.0.0.0/0, which authorizes everyone (leave the list empty to say so)"
    return None


def guids(v: Any) -> str | None:
    if isinstance(v, list) and all(isinstance(x, str) and GUID.fullmatch(x) for x in v):
        return None
    return "a list of Entra ID group object ids (GUIDs)"


def _id_check(pattern: re.Pattern[str], shape: str):
    return lambda v: None if isinstance(v, str) and pattern.fullmatch(v) else shape


subnet_id = _id_check(SUBNET_ID, SUBNET_SHAPE)
identity_id = _id_check(IDENTITY_ID, "a user-assigned identity resource id: /subscriptions/<subscription id>/"
                                     "resourceGroups/<group>/providers/Microsoft.ManagedIdentity/"
                                     "userAssignedIdentities/<name>")


def private_dns_zone(v: Any) -> str | None:
    if v in ("system", "none") or (isinstance(v, str) and DNS_ZONE_ID.fullmatch(v)):
        return None
    return ("system (AKS creates the zone), none (you resolve the API server yourself), or the resource id of a "
            "private DNS zone named privatelink.<region>.azmk8s.io or <subzone>.privatelink.<region>.azmk8s.io")


stack_reference = _id_check(STACK_NAME, "a fully qualified stack name <organization>/<project>/<stack> "
                                        "(Pulumi Cloud) or organization/<project>/<stack> (a self-managed backend)")


def vnet_of(subnet: str) -> str:
    """The virtual network part of a subnet id, case-folded (Azure ids are case-insensitive)."""
    return subnet.rsplit("/subnets/", 1)[0].lower()


# --- rules that span keys ---------------------------------------------------------------------
def problems(values: dict[str, Any], prefix: str, reported: list[str] = (),
             pool_subnets: Mapping[str, str | None] | None = None) -> list[str]:
    """The cross-key rules of the platform options; `values` is the schema's read result (None where a
    key's own check failed). A rule is skipped where a key it reads is in `reported` (the problems
    found so far), and a key gets one problem at most: one line per thing to fix. `pool_subnets`: with
    ibPools, each entry's subnetId key (ibPools.<name>.subnetId) and its value (None: unset)."""
    out: list[str] = []
    api, entra = values.get("apiServer") or {}, values.get("entraId") or {}
    ident, net = values.get("identity") or {}, values.get("network") or {}
    named = {line[len(prefix):].split(":", 1)[0].split(" ", 1)[0] for line in reported if line.startswith(prefix)}

    def say(key: str, value: Any, why: str, reads: tuple[str, ...] = ()) -> None:
        if {key, *reads} & named:
            return
        named.add(key)
        # as stack_config shows a value: strings quoted, everything else as JSON (false, not False), cut
        out.append(f"{prefix}{key}: got {shown(value)}; {why}")

    # access
    if not api.get("private"):
        for field in ("privateDnsZone",):
            if api.get(field) is not None:
                say(f"apiServer.{field}", api[field], "only with apiServer.private: true")
    elif api.get("authorizedIpRanges"):
        say("apiServer.authorizedIpRanges", api["authorizedIpRanges"],
            "a private API server takes no authorized ranges (it is reachable only from its network)")
    if api.get("subnetId") is not None and not api.get("vnetIntegration"):
        say("apiServer.subnetId", api["subnetId"], "only with apiServer.vnetIntegration: true")
    zone = api.get("privateDnsZone")
    if api.get("private") and zone not in (None, "system", "none") and not ident.get("controlPlaneIdentityId"):
        say("apiServer.privateDnsZone", zone, "a private DNS zone of your own needs identity.controlPlaneIdentityId "
            "(a user-assigned identity with Private DNS Zone Contributor on the zone)")
    if api.get("private") and not net.get("systemSubnetId") and (values.get("stackPart") or "all") == "all":
        say("apiServer.private", True, "with the network AKS creates (no network.systemSubnetId) nothing outside "
            "the cluster's own VNet reaches a private API server, and a one-stack deploy (stackPart all) applies "
            "the Kubernetes half from where `pulumi up` runs: use your own subnets and run it from inside the "
            "VNet, or split the stack (stackPart: azure, then kubernetes; docs/enterprise-deployment.md)",
            ("network.systemSubnetId", "stackPart", "apiServer.authorizedIpRanges", "apiServer.privateDnsZone",
             "apiServer.subnetId"))
    tags = values.get("tags") or {}
    if values.get("production") and isinstance(tags, dict) and len({**tags, fabric.PRODUCTION_TAG: "true"}) > MAX_TAGS:
        say("tags", f"{len(tags)} tags", f"production: true adds the tag {fabric.PRODUCTION_TAG}, "
            f"{len(tags) + 1} in all, and Azure allows {MAX_TAGS} on a resource: drop one", ("production",))
    # identity
    if not entra.get("enabled"):
        if entra.get("localAccounts") is False:
            say("entraId.localAccounts", False, "local accounts can be disabled only with entraId.enabled: true")
        if entra.get("adminGroupObjectIds"):
            say("entraId.adminGroupObjectIds", entra["adminGroupObjectIds"], "only with entraId.enabled: true")
    if ident.get("kubeletIdentityId") and not ident.get("controlPlaneIdentityId"):
        say("identity.kubeletIdentityId", ident["kubeletIdentityId"],
            "a kubelet identity needs identity.controlPlaneIdentityId too (AKS requires a user-assigned control plane)")
    # network
    system = net.get("systemSubnetId")
    _subnet_problems(net, pool_subnets or {}, say)
    if api.get("subnetId") and system and vnet_of(api["subnetId"]) != vnet_of(system):
        say("apiServer.subnetId", api["subnetId"], "a subnet of the pools' virtual network")
    if api.get("vnetIntegration") and system and api.get("subnetId") is None:
        say("apiServer.vnetIntegration", True, "with your own subnets, set apiServer.subnetId (a subnet delegated "
            "to Microsoft.ContainerService/managedClusters in the same VNet)")
    plugin = net.get("plugin")
    if plugin == "none" and net.get("dataplane") is not None:
        say("network.dataplane", net["dataplane"], "only with network.plugin: azure (plugin none brings its own CNI)",
            ("network.plugin",))
    if net.get("outboundType") in OUTBOUND_NEEDS_OWN_SUBNETS and not system:
        say("network.outboundType", net["outboundType"], "needs your own subnets (network.systemSubnetId, "
            "network.ibSubnetId) whose route table or NAT gateway carries the egress")
    _cidr_problems(net, say, named)
    # the split
    part, ref = values.get("stackPart"), values.get("azureStack")
    if part == "kubernetes" and not ref and not (values.get("existingCluster") or {}).get("enabled"):
        say("stackPart", part, "the Kubernetes part runs on the Azure part's cluster: set azureStack "
            "(<organization>/aks-infiniband/<stack>), or on a cluster that already exists: set existingCluster.enabled",
            ("azureStack",))
    if ref and part != "kubernetes":
        say("azureStack", ref, "only with stackPart: kubernetes", ("stackPart",))
    return out


def _subnet_problems(net: dict[str, Any], pool_subnets: Mapping[str, str | None], say) -> None:
    """Every pool in your network or none (AKS), each pool's subnet its own (ibPools.<name>.subnetId) or
    network.ibSubnetId, all in the system pool's VNet: AKS puts a cluster's pools in one VNet
    (learn.microsoft.com/azure/aks/node-pool-unique-subnet)."""
    system, ibs = net.get("systemSubnetId"), net.get("ibSubnetId")
    own = {key: subnet for key, subnet in pool_subnets.items() if subnet}
    given = {**({"network.ibSubnetId": ibs} if ibs else {}), **own}  # the IB pools' subnets, by key
    bare = [key.rsplit(".", 1)[0] for key, subnet in pool_subnets.items() if not subnet]  # ibPools.<name>
    everywhere = "AKS places all pools in your network or none"
    if not system:
        if given:  # one line, on the first key that was set
            key = next(iter(given))
            say(key, given[key], f"set network.systemSubnetId too: {everywhere}", ("network.systemSubnetId",))
        return
    if not ibs and (bare or not pool_subnets):
        also = f", or subnetId on {', '.join(bare)}" if own else ""
        say("network.systemSubnetId", system, f"set network.ibSubnetId too{also}: {everywhere}",
            ("network.ibSubnetId", *own))
    elif ibs and pool_subnets and not bare:
        say("network.ibSubnetId", ibs, "every ibPools entry sets its own subnetId, so no pool is placed in it: "
            "remove it", tuple(own))
    for key, subnet in given.items():
        if vnet_of(subnet) != vnet_of(system):
            say(key, subnet, "a subnet of the system pool's virtual network (AKS requires one VNet)")


def _cidr_problems(net: dict[str, Any], say, named: set[str]) -> None:
    """Service and pod ranges apart; the DNS service address inside the service range."""
    pod_set, svc_set, dns = net.get("podCidr"), net.get("serviceCidr"), net.get("dnsServiceIp")
    pod = ipaddress.ip_network(pod_set or AKS_DEFAULT_POD_CIDR)
    svc = ipaddress.ip_network(svc_set or AKS_DEFAULT_SERVICE_CIDR)
    ranges = ("network.podCidr", "network.serviceCidr")
    if (pod_set or svc_set) and pod.overlaps(svc):
        key, value = ("serviceCidr", svc_set) if svc_set else ("podCidr", pod_set)
        other = f"network.podCidr ({pod})" if svc_set else f"AKS's default service range {svc}"
        say(f"network.{key}", value, f"a range that does not overlap {other}", ranges)
    if svc_set and not dns:
        say("network.serviceCidr", svc_set, "set network.dnsServiceIp too (an address inside it; AKS's default "
            "10.0.0.10 lies in its default range only)", ("network.dnsServiceIp",))
    if dns and "network.serviceCidr" not in named:
        address = ipaddress.IPv4Address(dns)
        usable = address in svc and address not in (svc.network_address, svc.network_address + 1,
                                                    svc.broadcast_address)
        if not usable:
            say("network.dnsServiceIp", dns, f"an address inside the service range {svc}, other than its first "
                f"(the kubernetes service), network and broadcast addresses")


# --- the typed records ------------------------------------------------------------------------
@dataclass(frozen=True)
class ApiServer:
    private: bool = False
    private_dns_zone: str | None = None  # system | none | a zone id; None: AKS's (system)
    vnet_integration: bool = False
    subnet_id: str | None = None
    authorized_ip_ranges: tuple[str, ...] = ()

    @property
    def restricted(self) -> bool:
        """Reachable only from chosen networks (private, or public with authorized ranges)."""
        return self.private or bool(self.authorized_ip_ranges)


@dataclass(frozen=True)
class EntraId:
    enabled: bool = False
    local_accounts: bool = True
    admin_group_object_ids: tuple[str, ...] = ()
    kubelogin_mode: str = "azurecli"
    grant_deployer_cluster_admin: bool = True
    deployer_principal_type: str = "User"


@dataclass(frozen=True)
class Identity:
    control_plane_identity_id: str | None = None  # None: system-assigned
    kubelet_identity_id: str | None = None  # None: the one AKS creates


@dataclass(frozen=True)
class Network:
    system_subnet_id: str | None = None  # None: AKS creates and owns a VNet
    # network.ibSubnetId is each IB pool's unless it names its own: stack_config's IbPool.subnet_id
    plugin: str = "azure"
    plugin_mode: str | None = "overlay"  # with plugin azure; None with plugin none
    dataplane: str | None = None  # None: AKS's (azure)
    pod_cidr: str | None = None
    # None: the SDK sends AKS's defaults (10.244.0.0/16, 10.0.0.0/16, 10.0.0.10, loadBalancer)
    service_cidr: str | None = None
    dns_service_ip: str | None = None
    outbound_type: str | None = None


def records(values: dict[str, Any]) -> dict[str, Any]:
    """The typed records of a validated read, as StackConfig's keyword arguments."""
    api, entra, ident, net = (values.get(k) or {} for k in ("apiServer", "entraId", "identity", "network"))
    enabled = bool(entra.get("enabled"))
    plugin = net.get("plugin") or "azure"
    return {
        "api_server": ApiServer(private=bool(api.get("private")), private_dns_zone=api.get("privateDnsZone"),
                                vnet_integration=bool(api.get("vnetIntegration")), subnet_id=api.get("subnetId"),
                                authorized_ip_ranges=tuple(api.get("authorizedIpRanges") or ())),
        "entra_id": EntraId(enabled=enabled,
                            local_accounts=(not enabled) if entra.get("localAccounts") is None
                            else bool(entra["localAccounts"]),
                            admin_group_object_ids=tuple(entra.get("adminGroupObjectIds") or ()),
                            kubelogin_mode=entra.get("kubeloginMode") or "azurecli",
                            grant_deployer_cluster_admin=entra.get("grantDeployerClusterAdmin") is not False,
                            deployer_principal_type=principal_type(entra.get("kubeloginMode") or "azurecli",
                                                                   entra.get("deployerPrincipalType"))),
        "identity": Identity(control_plane_identity_id=ident.get("controlPlaneIdentityId"),
                             kubelet_identity_id=ident.get("kubeletIdentityId")),
        "network": Network(system_subnet_id=net.get("systemSubnetId"),
                           plugin=plugin,
                           plugin_mode="overlay" if plugin == "azure" else None,
                           dataplane=net.get("dataplane"), pod_cidr=net.get("podCidr"),
                           service_cidr=net.get("serviceCidr"), dns_service_ip=net.get("dnsServiceIp"),
                           outbound_type=net.get("outboundType")),
        "stack_part": values.get("stackPart") or "all",
        "azure_stack": values.get("azureStack"),
        "production": bool(values.get("production")),
    }
