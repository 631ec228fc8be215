"""The platform-team deployment (docs/enterprise-deployment.md): the private example stack, Entra ID with
a kubelogin exec credential, the team's own subnets, scale to zero with its cost, and the two-stack split
whose Kubernetes half reads the Azure half's outputs through a StackReference. Validation of the keys is
tests/bad_configs/ (test_bad_input.py) and the property walk (test_config_property.py)."""

from __future__ import annotations

import pytest
import yaml
from conftest import rendered

from components.platform.cluster import with_kubelogin
from core import enterprise, fabric, prices
from offline import engine, mocks
from stack import handoff
from tests.paths import ROOT

CLUSTER = "azure-native:containerservice:ManagedCluster"
POOL = "azure-native:containerservice:AgentPool"
K8S_PROVIDER = "pulumi:providers:kubernetes"
STACK_REFERENCE = "pulumi:pulumi:StackReference"
ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"


def config(stack: str, key: str) -> dict:
    return engine.stack_file_config(stack)[f"aks-infiniband:{key}"]


def kubeconfig_user(provider: engine.Resource) -> dict:
    value = provider.inputs["kubeconfig"]
    text = value["value"] if isinstance(value, dict) else value  # the wire form of a secret
    (user,) = yaml.safe_load(text)["users"]
    return user["user"]


# --- the private example: `make synth STACK=private` ------------------------------------------------
@pytest.fixture(scope="module")
def private() -> engine.Rendering:
    return rendered("private")


def test_the_private_cluster_has_a_private_api_server_with_vnet_integration(private):
    access = private.one(CLUSTER).inputs["apiServerAccessProfile"]
    api = config("private", "apiServer")
    assert access == {"enablePrivateCluster": True, "privateDNSZone": "system", "enableVnetIntegration": True,
                      "subnetId": api["subnetId"]}


def test_the_private_cluster_signs_in_with_entra_id_and_azure_rbac_only(private):
    cluster = private.one(CLUSTER).inputs
    assert cluster["aadProfile"] == {"managed": True, "enableAzureRBAC": True,
                                     "adminGroupObjectIDs": config("private", "entraId")["adminGroupObjectIds"]}
    assert cluster["disableLocalAccounts"] is True


def test_both_pools_are_in_the_given_subnets(private):
    net = config("private", "network")
    assert private.one(CLUSTER).inputs["agentPoolProfiles"][0]["vnetSubnetID"] == net["systemSubnetId"]
    assert private.one(POOL).inputs["vnetSubnetID"] == net["ibSubnetId"]


def test_the_network_profile_is_the_configured_one(private):
    profile = private.one(CLUSTER).inputs["networkProfile"]
    assert profile == {"networkPlugin": "azure", "networkPluginMode": "overlay", "networkDataplane": "cilium",
                       "networkPolicy": "cilium", "podCidr": "192.168.0.0/16", "serviceCidr": "10.100.0.0/16",
                       "dnsServiceIP": "10.100.0.10", "outboundType": "userDefinedRouting"}


def test_user_assigned_identities_for_control_plane_and_kubelet(private):
    cluster = private.one(CLUSTER).inputs
    ident = config("private", "identity")
    assert cluster["identity"] == {"type": "UserAssigned", "userAssignedIdentities": [ident["controlPlaneIdentityId"]]}
    kubelet = cluster["identityProfile"]["kubeletidentity"]
    # client and object ids come from the identity itself (a lookup), not from configuration
    assert kubelet == {"resourceId": ident["kubeletIdentityId"], "clientId": mocks.OFFLINE_ID,
                       "objectId": mocks.OFFLINE_ID}


def test_the_kubernetes_provider_authenticates_through_kubelogin_not_a_static_token(private):
    provider = private.one(K8S_PROVIDER)
    assert "kubeconfig" in provider.secret_inputs
    user = kubeconfig_user(provider)
    assert set(user) == {"exec"}, "no token, client certificate or password next to the exec plugin"
    assert user["exec"]["command"] == "kubelogin"
    assert user["exec"]["args"] == ["get-token", "--login", "msi", "--server-id",
                                    "6dae42f8-4368-4678-94ff-3960e28e3630", "--environment", "AzurePublicCloud"]
    assert private.outputs["kubernetesAuth"] == "Entra ID: kubelogin exec credential (--login msi)"
    assert "kubeconfig" in private.secret_outputs


def test_the_deployer_becomes_cluster_admin_before_anything_kubernetes(private):
    grant = private.one(ROLE_ASSIGNMENT)
    assert grant.inputs["roleDefinitionId"].endswith("/roleDefinitions/b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b")
    assert grant.inputs["scope"].endswith("/managedClusters/aks-ib-private")
    # kubeloginMode msi: a managed identity, which ARM types ServicePrincipal (User would be refused)
    assert grant.inputs["principalType"] == "ServicePrincipal" and grant.inputs["principalId"] == mocks.OFFLINE_ID
    assert grant.urn in private.one(K8S_PROVIDER).dependencies
    # and the provider waits until the assignment has taken effect (Azure RBAC propagates in minutes)
    wait = private.one("command:local:Command", "cluster-deployer-access")
    assert wait.urn in private.one(K8S_PROVIDER).dependencies and grant.urn in wait.dependencies
    assert wait.inputs["create"].startswith("python3 -S -m verify wait-access")


def test_the_private_cluster_says_it_is_production(private):
    assert private.one(CLUSTER).inputs["tags"][fabric.PRODUCTION_TAG] == "true"


# --- the dev stack keeps working from a laptop ------------------------------------------------------
def test_the_dev_cluster_is_as_before(dev):
    """Public API server, local accounts, AKS's own VNet: none of the new inputs is sent."""
    cluster = dev.one(CLUSTER).inputs
    for absent in ("apiServerAccessProfile", "aadProfile", "disableLocalAccounts", "identityProfile"):
        assert absent not in cluster
    assert cluster["identity"] == {"type": "SystemAssigned"}
    # the SDK fills in AKS's defaults for the ranges and egress (pulumi_azure_native ContainerServiceNetworkProfileArgs)
    assert cluster["networkProfile"] == {"networkPlugin": "azure", "networkPluginMode": "overlay",
                                         "podCidr": enterprise.AKS_DEFAULT_POD_CIDR,
                                         "serviceCidr": enterprise.AKS_DEFAULT_SERVICE_CIDR,
                                         "dnsServiceIP": "10.0.0.10", "outboundType": "loadBalancer"}
    assert "vnetSubnetID" not in cluster["agentPoolProfiles"][0] and "vnetSubnetID" not in dev.one(POOL).inputs
    assert not dev.of_type(ROLE_ASSIGNMENT)
    assert "token" in kubeconfig_user(dev.one(K8S_PROVIDER))
    assert dev.outputs["kubernetesAuth"] == "local account: the clusterUser kubeconfig"


def test_authorized_ranges_on_a_public_api_server(render_azure):
    access = render_azure(apiServer={"authorizedIpRanges": ["203.0.113.0/24", "198.51.100.7/32"]}).one(CLUSTER).inputs[
        "apiServerAccessProfile"]
    assert access == {"authorizedIPRanges": ["203.0.113.0/24", "198.51.100.7/32"]}


@pytest.mark.parametrize("mode", enterprise.KUBELOGIN_MODES)
def test_each_kubelogin_mode_reaches_the_provider(render, mode):
    stack = render(entraId={"enabled": True, "kubeloginMode": mode, "deployerPrincipalType": "ServicePrincipal"})
    assert kubeconfig_user(stack.one(K8S_PROVIDER))["exec"]["args"][:3] == ["get-token", "--login", mode]
    assert stack.one(ROLE_ASSIGNMENT).inputs["principalType"] == "ServicePrincipal"


def test_with_kubelogin_keeps_the_server_id_and_drops_the_devicecode_login():
    out = yaml.safe_load(with_kubelogin(mocks.FAKE_EXEC_KUBECONFIG, "workloadidentity"))
    args = out["users"][0]["user"]["exec"]["args"]
    assert args == ["get-token", "--login", "workloadidentity", "--server-id", "6dae42f8-4368-4678-94ff-3960e28e3630",
                    "--environment", "AzurePublicCloud"]
    assert "devicecode" not in args and "--client-id" not in args  # kubelogin reads the ids from the environment


def test_with_kubelogin_refuses_a_static_credential():
    with pytest.raises(ValueError, match="not a kubelogin exec credential"):
        with_kubelogin(mocks.FAKE_KUBECONFIG, "azurecli")


# --- scale to zero and what an hour costs -------------------------------------------------------------
def test_the_ib_pool_autoscales_down_to_the_one_node_new_ones_are_tested_against(private, render_azure):
    pool = private.one(POOL)
    assert (pool.inputs["enableAutoScaling"], pool.inputs["minCount"], pool.inputs["maxCount"]) == (True, 1, 2)
    assert pool.inputs["count"] == 2, "it starts with every node: the day-0 fabric test needs them"
    assert pool.ignore_changes == ["count"], "pulumi up must not undo the autoscaler"
    # nodes that come back carry the pool's taint; the certifier's hold is put on by its admission loop
    assert pool.inputs["nodeTaints"] == [fabric.IB_TAINT]
    # to zero, only where nothing holds a new node (its first node back would have no peer)
    zero = render_azure(certifier={"mode": "label"}, ibPool={"vmSize": "Standard_ND96isr_H100_v5", "nodeCount": 2,
                                                             "minNodeCount": 0})
    assert zero.one(POOL).inputs["minCount"] == 0


def test_a_fixed_size_pool_is_as_before(dev):
    pool = dev.one(POOL)
    assert pool.inputs["enableAutoScaling"] is False and "minCount" not in pool.inputs
    assert pool.ignore_changes == []


def test_the_cost_output_carries_the_prices_date_and_source(dev, private):
    cost = dev.outputs["estimatedCostPerHour"]
    h100, d4 = prices.PRICES["Standard_ND96isr_H100_v5"], prices.PRICES["Standard_D4s_v5"]
    assert cost["ibPoolUsd"] == round(2 * h100.usd_per_hour, 2)
    assert cost["systemPoolUsd"] == round(2 * d4.usd_per_hour, 2)
    assert cost["totalUsd"] == round(cost["ibPoolUsd"] + cost["systemPoolUsd"], 2)
    assert cost["prices"]["Standard_ND96isr_H100_v5"] == {"usdPerHour": 117.98, "readOn": "2023-12",
                                                          "source": prices.SRC_PRICES_SKYPILOT}
    assert cost["idleTotalUsd"] == cost["totalUsd"], "a fixed-size pool never idles down"
    idle = private.outputs["estimatedCostPerHour"]
    assert idle["idleIbNodes"] == 1 and idle["idleTotalUsd"] == round(cost["systemPoolUsd"] + h100.usd_per_hour, 2)


def test_a_pool_at_zero_costs_nothing_and_an_unpriced_size_says_unknown():
    at_zero = prices.cost_per_hour({"ibPool": ("Standard_ND96isr_H100_v5", 0)})
    assert at_zero["ibPoolUsd"] == 0 and at_zero["totalUsd"] == 0
    unpriced = prices.cost_per_hour({"ibPool": ("Standard_ND96asr_v4", 2), "systemPool": ("Standard_D4s_v5", 2)})
    assert unpriced["ibPoolUsd"] is None and unpriced["totalUsd"] is None
    assert unpriced["prices"]["Standard_ND96asr_v4"] == "no price in the catalog"
    assert prices.cost_per_hour({"ibPool": ("Standard_ND96asr_v4", 0)})["totalUsd"] == 0


def test_every_price_names_its_date_and_source():
    for size, price in prices.PRICES.items():
        assert price.usd_per_hour > 0 and price.source and len(price.read_on) == 7, size


# --- the two-stack split --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def azure_half() -> engine.Rendering:
    return rendered("private-azure")


@pytest.fixture(scope="module")
def kubernetes_half() -> engine.Rendering:
    return rendered("private-kubernetes")


def test_the_azure_half_declares_no_kubernetes_resource_and_exports_the_handoff(azure_half):
    assert not [r for r in azure_half.resources if r.type.startswith(("kubernetes:", "pulumi:providers:kubernetes"))]
    assert set(handoff.OUTPUTS) <= set(azure_half.outputs)
    assert "kubeconfig" in azure_half.secret_outputs
    assert azure_half.one(CLUSTER).inputs["apiServerAccessProfile"]["enablePrivateCluster"] is True


def test_the_kubernetes_half_reads_the_azure_half_through_a_stack_reference(kubernetes_half):
    ref = kubernetes_half.one(STACK_REFERENCE)
    assert ref.inputs["name"] == config("private-kubernetes", "azureStack")
    assert not [r for r in kubernetes_half.resources if r.type.startswith("azure-native:")]
    provider = kubernetes_half.one(K8S_PROVIDER)
    assert ref.urn in provider.dependencies and "kubeconfig" in provider.secret_inputs
    # the reference's kubeconfig, signed in with this half's own mode (the runner's managed identity)
    assert kubeconfig_user(provider)["exec"]["args"][:3] == ["get-token", "--login", "msi"]
    # the certifier judges in the cluster, through that provider: no az call, no cluster name needed
    certify = kubernetes_half.one("kubernetes:batch/v1:Job", "fabric-check-certify")
    assert certify.provider.startswith(provider.urn)


def test_the_mocked_reference_answers_exactly_the_handoff():
    assert set(mocks.STACK_REFERENCE_OUTPUTS) == set(handoff.OUTPUTS)
    assert set(mocks.STACK_REFERENCE_SECRETS) <= set(handoff.OUTPUTS)


class AzureStackOf(mocks.OfflineMocks):
    """A reference to an Azure stack deployed with another pool than this stack's configuration."""

    def __init__(self, **outputs):
        self.outputs = outputs

    def new_resource(self, args):  # type: ignore[no-untyped-def]
        rid, state = super().new_resource(args)
        if args.typ == STACK_REFERENCE:
            state["outputs"] = {**state["outputs"], **self.outputs}
        return rid, state


@pytest.mark.parametrize(("outputs", "key", "shown"), [
    ({"vmSize": "Standard_ND96asr_v4"}, "ibPool.vmSize", "'Standard_ND96isr_H100_v5'"),
    ({"nodeCount": 4}, "ibPool.nodeCount", "2"),
])
def test_the_kubernetes_half_refuses_a_pool_the_azure_stack_did_not_deploy(outputs, key, shown):
    """A job sized for other nodes stays Pending until the certify deadline: the Kubernetes half reads the
    Azure stack's vmSize and nodeCount (handoff.OUTPUTS) and stops in one line before anything is applied
    in the cluster (the provider waits for the check)."""
    monitor = engine.RecordingMonitor(AzureStackOf(**outputs))
    with pytest.raises(Exception) as err:
        engine.render("private-kubernetes", monitor=monitor)
    line = str(err.value)
    assert isinstance(err.value, engine.pulumi.RunError), line
    assert "\n" not in line and line.startswith(f"aks-infiniband:{key}: got {shown}"), line
    assert f"deployed {next(iter(outputs.values()))!r}" in line or f"deployed {outputs.get('nodeCount')}:" in line
    assert "platform-team/aks-infiniband/private-azure" in line
    assert not [r for r in monitor.registrations if r.type.startswith("kubernetes:")]


def test_the_kubernetes_half_takes_the_azure_stacks_size_in_another_case():
    """Azure's names are case-insensitive and the program corrects a size's case: not a mismatch."""
    monitor = engine.RecordingMonitor(AzureStackOf(vmSize="standard_nd96isr_h100_v5", nodeCount=2.0))
    engine.render("private-kubernetes", monitor=monitor)


def test_the_two_halves_declare_what_the_single_stack_declares(private, azure_half, kubernetes_half):
    """Same names and types, so the halves miss nothing; the reference is the only addition, and the
    deployer's cluster-admin grant the only omission (no provider in the Azure half needs it: the runner's
    identity holds its role, docs/enterprise-deployment.md), with the wait for it to take effect."""
    def names(r: engine.Rendering) -> set[tuple[str, str]]:
        return {(x.type, x.name) for x in r.resources if x.type != STACK_REFERENCE}

    halves = names(azure_half) | names(kubernetes_half)
    assert names(private) - halves == {(ROLE_ASSIGNMENT, "cluster-deployer-admin"),
                                       ("command:local:Command", "cluster-deployer-access")}
    assert halves <= names(private)
    assert names(azure_half) & names(kubernetes_half) == set()


@pytest.mark.parametrize("stack", ["private", "private-azure", "private-kubernetes"])
def test_make_synth_renders_each_example_stack(stack, tmp_path, monkeypatch):
    """`make synth STACK=<stack>`: the whole render, pictures and (where Helm and the charts are at hand)
    charts included; the Kubernetes half renders its charts for its own kubernetesVersion. The command's
    engine.render(stack) is the session's render of the stack file (conftest.rendered: the same call,
    memoised), so what is tested here is what synth makes of it."""
    from offline import __main__ as cli
    from offline import charts

    monkeypatch.setattr(engine, "render", lambda name: rendered(name))
    assert cli.main(["synth", "--stack", stack, "--out", str(tmp_path)]) == 0
    assert (tmp_path / "plan.md").is_file() and (tmp_path / "graph.mmd").is_file()
    if stack == "private-kubernetes":
        assert charts.kube_version(rendered(stack)) == "1.35"


IMAGE_REF = r'(?:"image"|"repository"|image:)\s*:?\s*\\?"?([a-z0-9.-]+\.[a-z]{2,}(?::\d+)?/[^"\\\s]+)'


def test_the_egress_list_names_every_registry_the_example_stacks_pull_from():
    """With userDefinedRouting nothing reaches a registry the firewall does not allow: every image host of
    every example stack's render (its objects, the chart values it sets, Volcano's manifest) has its hosts in
    core/egress.py, which the docs' table shows; the charts' own default images are listed there by hand,
    from the packaged charts."""
    import json
    import re

    from conftest import rendered

    from core import egress

    hosts = set()
    for stack in ("dev", "gb300", "gb200", "hb", "private"):
        text = json.dumps([r.inputs for r in rendered(stack).resources])
        for ref in re.findall(IMAGE_REF, text):
            hosts.add(ref.split("/")[0])
    assert hosts >= {"nvcr.io", "ghcr.io", "docker.io", "mcr.microsoft.com", "registry.k8s.io"}, hosts
    assert hosts <= set(egress.REGISTRIES), f"images from {sorted(hosts - set(egress.REGISTRIES))} have no entry"
    doc = (ROOT / "docs" / "enterprise-deployment.md").read_text()
    assert all(f"`{h}`" in doc for r in hosts for h in egress.allowed(r))


def test_the_docs_say_what_each_example_stack_keeps_when_idle():
    """docs/enterprise-deployment.md said Pulumi.private.yaml scales to zero; it keeps one node (the peer new
    ones are tested against, as certifier.mode taint needs). The page's table names each file's minNodeCount."""
    import re

    doc = (ROOT / "docs" / "enterprise-deployment.md").read_text()
    for stack in ("private", "private-azure"):
        row = next(line for line in doc.splitlines() if line.startswith(f"| `Pulumi.{stack}.yaml` |"))
        said = re.findall(r"`minNodeCount: (\d+)`", row)
        assert said == [str(config(stack, "ibPool")["minNodeCount"])], (stack, row)
    assert "costs nothing while idle" not in doc.split("\n\n", 2)[1]  # the opening paragraph
