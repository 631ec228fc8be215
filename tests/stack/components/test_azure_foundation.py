"""Rows 1-3 of the design: feature registration and its wait, the cluster, the InfiniBand pool.

What this file reads of a configuration other than dev's is Azure resources and the Azure half's outputs,
so it renders the Azure half (`render_azure`: declared as in the whole stack, tests/stack/test_stack_parts.py)."""

import pytest

from components.platform.cluster import decode_kubeconfig
from core import catalog, fabric, pins
from offline import mocks

COMMAND = "command:local:Command"
CLUSTER = "azure-native:containerservice:ManagedCluster"
POOL = "azure-native:containerservice:AgentPool"
RG = "azure-native:resources:ResourceGroup"
K8S_PROVIDER = "pulumi:providers:kubernetes"


# --- 1. feature registration --------------------------------------------------------------------
GB200 = {
    "ibPool": {"vmSize": "Standard_ND128isr_NDR_GB200_v6"},
    "fabricTest": {"image": "example.io/nccl-tests-arm64:1.0.0"},
}


# Keys of the Azure half set away from dev's, read by separate tests of one render (independent keys).
CONFIGURED = {"featureWaitTimeoutMinutes": 90, "kubernetesVersion": "1.35.5",
              "systemPool": {"vmSize": "Standard_D8s_v5", "nodeCount": 3}}


def feature_step(stack):
    (step,) = [r for r in stack.of_type(COMMAND) if r.parent and stack.by_urn(r.parent).name == "ib-feature"]
    return step


def test_no_azure_native_feature_registration_is_declared(dev):
    """azure-native's SubscriptionFeatureRegistration fails on create on every subscription ("cannot
    create already existing resource": Azure answers GET on a feature with 200 whatever its state,
    and the provider's pre-create check refuses any 200; pulumi/pulumi-azure-native#1722). The
    registration is an `az` step instead."""
    assert not [r for r in dev.resources if r.type.startswith("azure-native:features:")]


def test_one_az_step_registers_the_feature_on_the_deploying_subscription(dev):
    step = feature_step(dev)
    assert step.name == "ib-feature-register"
    assert step.inputs["create"] == "bash scripts/feature-registration.sh"
    env = step.inputs["environment"]
    assert env["FEATURE_MODE"] == "register"
    assert env["FEATURE_NAME"] == "AKSInfinibandSupport"
    assert env["FEATURE_NAMESPACE"] == "Microsoft.ContainerService"
    # the subscription Pulumi deploys to (getClientConfig; all-zero under the mocks), not az's default
    assert env["SUBSCRIPTION_ID"] == mocks.OFFLINE_ID
    assert env["TIMEOUT_SECONDS"] == str(30 * 60)
    # Pulumi's own timeout must not cut the script's bounded wait short
    assert int(step.custom_timeouts["create"].rstrip("m")) > 30


def test_destroy_leaves_the_registration_in_place(dev):
    step = feature_step(dev)
    assert step.retain_on_delete, "other clusters in the subscription rely on the feature"
    assert "delete" not in step.inputs, "no command may unregister the feature"


def test_the_step_reruns_only_for_another_feature_or_subscription(dev, render_azure):
    triggers = feature_step(dev).inputs["triggers"]
    assert "Microsoft.ContainerService/AKSInfinibandSupport" in triggers
    assert mocks.OFFLINE_ID in triggers
    assert feature_step(render_azure()).inputs["triggers"] == triggers  # nothing time-dependent


def test_feature_wait_timeout_comes_from_config(render_azure):
    step = feature_step(render_azure(**CONFIGURED))  # featureWaitTimeoutMinutes: 90
    assert step.inputs["environment"]["TIMEOUT_SECONDS"] == "5400"
    assert int(step.custom_timeouts["create"].rstrip("m")) > 90


@pytest.mark.parametrize("overrides", [{}, GB200], ids=["h100", "gb200"])
def test_pool_waits_for_the_feature_step(render_azure, overrides):
    stack = render_azure(**overrides)
    assert feature_step(stack).urn in stack.one(POOL).dependencies


def test_sizes_that_must_not_have_the_flag_check_it_is_absent(render_azure):
    """GB200: Azure says AKSInfinibandSupport must NOT be registered. Not skipped silently: the step
    only reads the state, and fails (saying how to unregister) if the feature is registered."""
    assert catalog.lookup(GB200["ibPool"]["vmSize"]).ib_feature is catalog.IbFeature.MUST_BE_ABSENT
    stack = render_azure(**GB200)  # featureState: an output of the Azure half
    step = feature_step(stack)
    assert step.name == "ib-feature-check-unregistered"
    assert step.inputs["environment"]["FEATURE_MODE"] == "require-unregistered"
    assert step.inputs["environment"]["SUBSCRIPTION_ID"] == mocks.OFFLINE_ID
    assert stack.outputs["featureState"] == mocks.COMMAND_STDOUT["-check-unregistered"]


def test_feature_state_is_an_output(dev):
    assert dev.outputs["featureState"] == mocks.COMMAND_STDOUT["-register"]


# --- 2. cluster ---------------------------------------------------------------------------------
def test_cluster_identity_rbac_oidc_version_and_tags(dev):
    aks = dev.one(CLUSTER).inputs
    assert aks["identity"] == {"type": "SystemAssigned"}
    assert aks["enableRBAC"] is True
    assert aks["oidcIssuerProfile"] == {"enabled": True}
    assert aks["kubernetesVersion"] == pins.DEFAULT_KUBERNETES
    assert aks["tags"] == {"project": "aks-infiniband", "stack": "dev", "owner": "platform-team"}
    assert dev.one(RG).inputs["tags"] == aks["tags"]


def test_system_pool_is_small_cpu_and_has_no_public_ips(dev):
    (system,) = dev.one(CLUSTER).inputs["agentPoolProfiles"]
    assert system["mode"] == "System"
    assert system["vmSize"] == "Standard_D4s_v5" and system["count"] == 2
    assert system["enableNodePublicIP"] is False
    with pytest.raises(KeyError):
        catalog.lookup(system["vmSize"])  # not an InfiniBand/GPU size


def test_kubernetes_version_and_system_pool_are_configurable(render_azure):
    half = render_azure(**CONFIGURED)
    aks = half.one(CLUSTER)
    assert aks.inputs["kubernetesVersion"] == "1.35.5"
    assert aks.inputs["agentPoolProfiles"][0]["vmSize"] == "Standard_D8s_v5"
    assert aks.inputs["agentPoolProfiles"][0]["count"] == 3


def test_kubeconfig_is_secret_and_feeds_the_one_kubernetes_provider(dev):
    assert "kubeconfig" in dev.secret_outputs
    assert "offline-render-not-a-credential" in dev.outputs["kubeconfig"]  # decoded, not base64
    (provider,) = dev.of_type(K8S_PROVIDER)
    assert provider.secret_inputs == ["kubeconfig"]
    assert dev.one(CLUSTER).urn in provider.dependencies


def test_kubeconfig_never_appears_in_a_plain_input(dev):
    for r in dev.resources:
        for key, value in r.inputs.items():
            if key in r.secret_inputs:
                continue
            assert "offline-render-not-a-credential" not in repr(value), f"{r.name}.{key} leaks the kubeconfig"


def test_decode_kubeconfig_refuses_an_empty_answer():
    class Empty:
        kubeconfigs = []

    with pytest.raises(ValueError, match="no user kubeconfig"):
        decode_kubeconfig(Empty())


# --- 3. InfiniBand pool -------------------------------------------------------------------------
def test_pool_is_the_catalog_size_in_user_mode_on_ubuntu(dev):
    pool = dev.one(POOL).inputs
    assert pool["vmSize"] == "Standard_ND96isr_H100_v5" and pool["count"] == 2
    assert pool["mode"] == "User" and pool["osType"] == "Linux" and pool["osSKU"] == "Ubuntu"
    assert pool["enableNodePublicIP"] is False
    assert pool["osDiskSizeGB"] == 256
    assert pool["orchestratorVersion"] == dev.one(CLUSTER).inputs["kubernetesVersion"]


def test_gpu_pool_leaves_the_driver_to_the_gpu_operator(dev):
    assert dev.one(POOL).inputs["gpuProfile"] == {"driver": "None"}


def test_cpu_only_pool_has_no_gpu_profile(render_azure):
    pool = render_azure(ibPool={"vmSize": "Standard_HB176rs_v4"}).one(POOL)
    assert "gpuProfile" not in pool.inputs


def test_pool_taint_and_labels_are_the_fabric_contract(dev):
    pool = dev.one(POOL).inputs
    # the pool taint only: the certifier's hold is put on through the API (docs/fabric-certifier.md)
    assert pool["nodeTaints"] == [fabric.IB_TAINT]
    assert fabric.IB_TAINT == "aks-infiniband.io/ib-pool=true:NoSchedule"
    assert fabric.HOLD_TAINT == ("startup-taint.cluster-autoscaler.kubernetes.io/aks-infiniband-fabric"
                                 "=uncertified:NoSchedule")
    assert pool["nodeLabels"][fabric.IB_POOL_ROLE_LABEL] == fabric.IB_POOL_ROLE
    assert set(fabric.pool_node_selector().items()) <= set(pool["nodeLabels"].items())


def test_pool_has_a_create_timeout_long_enough_for_gpu_pools(dev):
    assert int(dev.one(POOL).custom_timeouts["create"].rstrip("m")) >= 60


def test_outputs(dev):
    assert dev.outputs["resourceGroupName"] == "aks-infiniband-dev"
    assert dev.outputs["clusterName"] == "aks-ib-dev"
    assert dev.outputs["nodePoolName"] == "ibpool"
    assert dev.outputs["vmSize"] == "Standard_ND96isr_H100_v5"
    assert dev.outputs["nodeCount"] == 2


def test_outputs_that_modules_built_on_the_cluster_expect(dev):
    """The cluster's and the pool's resource ids (Azure Verified Modules' minimum), the OIDC issuer
    URL, and the Kubernetes version AKS runs. Offline they are placeholders, never look-alikes of real
    values: ids in the all-zero subscription, an .invalid issuer, a version that says it is none."""
    cluster_id = (f"/subscriptions/{mocks.OFFLINE_ID}/resourceGroups/aks-infiniband-dev/providers/"
                  f"Microsoft.ContainerService/managedClusters/aks-ib-dev")
    assert dev.outputs["clusterResourceId"] == cluster_id
    assert dev.outputs["nodePoolResourceId"] == f"{cluster_id}/agentPools/ibpool"
    assert dev.outputs["oidcIssuerUrl"] == mocks.PLACEHOLDER_OIDC_ISSUER_URL
    assert dev.outputs["currentKubernetesVersion"] == mocks.PLACEHOLDER_KUBERNETES_VERSION
    # the issuer exists only because the cluster turns it on
    assert dev.one(CLUSTER).inputs["oidcIssuerProfile"] == {"enabled": True}
