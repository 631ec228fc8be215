"""`pulumi destroy` removes things in the right order and keeps what others depend on.

Pulumi deletes a resource before everything it depends on (its explicit and input dependencies,
and its provider). So each "A is removed before B" below is asserted as "A waits for B" in the
rendered dependency graph (`Rendering.depends_on`, which also follows dependencies on components),
plus "through the Kubernetes provider" for everything applied to the cluster.
"""

from __future__ import annotations

import pytest

from offline import engine

FEATURE_STEP = "ib-feature-register"  # components/platform/feature_registration.py: the az step, no delete command
RG = "azure-native:resources:ResourceGroup"
CLUSTER = "azure-native:containerservice:ManagedCluster"
POOL = "azure-native:containerservice:AgentPool"
K8S_PROVIDER = "pulumi:providers:kubernetes"
RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigGroup"  # Volcano's checked manifest
NIC_POLICY = "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy"
NODE_FEATURE_RULE = "kubernetes:nfd.k8s-sigs.io/v1alpha1:NodeFeatureRule"
JOB = "kubernetes:batch.volcano.sh/v1alpha1:Job"
NAMESPACE = "kubernetes:core/v1:Namespace"


def provider_of(stack: engine.Rendering, r: engine.Resource) -> engine.Resource | None:
    """The provider resource of `r` (a provider reference is `<urn>::<id>`)."""
    return stack.by_urn(r.provider.rsplit("::", 1)[0]) if r.provider else None


def removed_before(stack: engine.Rendering, first: engine.Resource, then: engine.Resource) -> bool:
    """Whether destroy must remove `first` before `then`: `first` waits for `then`, directly, through
    a chain of dependencies, or through its provider (or a provider anywhere along that chain)."""
    todo, seen = [first], set()
    while todo:
        r = todo.pop()
        if r.urn in seen:
            continue
        seen.add(r.urn)
        if stack.depends_on(r, then):
            return True
        prov = provider_of(stack, r)
        if prov is not None:
            if prov.urn == then.urn:
                return True
            todo.append(prov)
    return False


def kubernetes_resources(stack: engine.Rendering) -> list[engine.Resource]:
    return [r for r in stack.resources if r.type.startswith("kubernetes:")]


# --- what is kept, what is protected -------------------------------------------------------------
def test_feature_registration_is_retained_and_nothing_else(dev):
    """AKSInfinibandSupport stays registered on the subscription (other clusters rely on it); every
    other resource is really deleted, so a destroy leaves no orphans behind."""
    assert dev.one("command:local:Command", FEATURE_STEP).retain_on_delete
    retained = [r.name for r in dev.resources if r.retain_on_delete and r.name != FEATURE_STEP]
    assert retained == []


@pytest.mark.parametrize("protect", [False, True])
def test_protect_covers_resource_group_cluster_and_pool(render_azure, render_kubernetes, protect):
    """Each half of the stack, as the whole declares it (tests/stack/test_stack_parts.py, options included)."""
    azure = render_azure(protect=protect)
    for t in (RG, CLUSTER, POOL):
        assert azure.one(t).protect is protect, t
    # Protection is for the expensive Azure pieces; the in-cluster pieces stay deletable either way,
    # so a protected stack can still be emptied down to its cluster.
    in_cluster = kubernetes_resources(render_kubernetes(protect=protect))
    assert in_cluster and not any(r.protect for r in in_cluster)


def test_protect_defaults_to_off(dev):
    assert not any(r.protect for r in dev.resources)


# --- the order of a destroy -----------------------------------------------------------------------
def test_job_is_removed_before_volcano(dev):
    job, volcano = dev.one(JOB), dev.one(CONFIG_FILE, "volcano-manifest")
    assert removed_before(dev, job, volcano)
    assert not removed_before(dev, volcano, job)


def test_job_is_removed_before_the_fabric_it_uses(dev):
    """The job's pods hold GPUs and the RDMA resource: they go before the device plugins and drivers."""
    job = dev.one(JOB)
    assert removed_before(dev, job, dev.one(NIC_POLICY))
    assert removed_before(dev, job, dev.one(RELEASE, "gpu-operator-release"))
    assert removed_before(dev, job, dev.one(POOL))


def test_nic_cluster_policy_is_removed_before_the_network_operator(dev):
    """Its finalizers are handled by the operator: without it the policy would hang in Terminating."""
    policy, operator = dev.one(NIC_POLICY), dev.one(RELEASE, "network-operator-release")
    assert removed_before(dev, policy, operator)
    assert not removed_before(dev, operator, policy)


def test_node_feature_rule_is_removed_before_nfd(dev):
    assert removed_before(dev, dev.one(NODE_FEATURE_RULE), dev.one(RELEASE, "nfd-release"))


def test_everything_in_the_cluster_goes_before_the_cluster(dev):
    """Operators, manifests, custom resources, the job: all applied through the one Kubernetes provider,
    which waits for the cluster - so all of them are removed while the API server still answers."""
    cluster = dev.one(CLUSTER)
    provider = dev.one(K8S_PROVIDER)
    assert dev.depends_on(provider, cluster)
    in_cluster = kubernetes_resources(dev)
    assert {r.type for r in in_cluster} >= {RELEASE, CONFIG_FILE, NIC_POLICY, JOB, NAMESPACE}
    for r in in_cluster:
        assert provider_of(dev, r) is provider, f"{r.type} {r.name} is not applied through the cluster's provider"
        assert removed_before(dev, r, cluster), f"{r.type} {r.name}"


def test_releases_and_job_are_removed_before_their_namespaces(dev):
    """Deleting a namespace first would kill the operators' pods before Helm uninstalls them."""
    namespaces = {ns.inputs["metadata"]["name"]: ns for ns in dev.of_type(NAMESPACE)}
    checked = 0
    for r in dev.of_type(RELEASE) + dev.of_type(JOB):
        ns = r.inputs.get("namespace") or (r.inputs.get("metadata") or {}).get("namespace")
        if ns in namespaces:
            assert removed_before(dev, r, namespaces[ns]), f"{r.name} before namespace {ns}"
            checked += 1
    assert checked >= 2


def test_the_result_collection_goes_before_the_job(dev):
    certify = dev.one("kubernetes:batch/v1:Job", "fabric-check-certify")  # the in-cluster certifier
    assert removed_before(dev, certify, dev.one(JOB))


def test_nothing_in_the_cluster_waits_for_the_cluster_in_reverse(dev):
    """No cycle: the Azure pieces never wait for anything applied inside the cluster."""
    in_cluster = kubernetes_resources(dev)
    for azure in (dev.one(RG), dev.one(CLUSTER), dev.one(POOL)):
        for r in in_cluster:
            assert not removed_before(dev, azure, r), f"{azure.name} waits for {r.name}"


def test_the_dra_claims_and_the_compute_domain_go_before_the_drivers_that_serve_them():
    """The ComputeDomain carries a finalizer that the DRA driver's controller removes: destroyed after
    the driver's release it would hang its namespace; created before, it leans on the provider's retry
    of a CRD not yet served. Its claim templates name the drivers' DeviceClasses likewise."""
    from conftest import rendered

    gb300 = rendered("gb300")
    domain = gb300.one("kubernetes:resource.nvidia.com/v1beta1:ComputeDomain")
    templates = gb300.of_type("kubernetes:resource.k8s.io/v1:ResourceClaimTemplate")
    for driver in (gb300.one(RELEASE, "dra-driver-release"), gb300.one(RELEASE, "dranet-release")):
        for claimed in (domain, *templates):
            assert removed_before(gb300, claimed, driver), (claimed.name, driver.name)
            assert not removed_before(gb300, driver, claimed)


def test_the_teardown_page_says_what_a_split_stack_and_an_unreachable_cluster_need():
    """docs/teardown.md: the Kubernetes stack goes first (its provider's kubeconfig is the Azure stack's);
    an unreachable API server is handled by the variable the pinned Kubernetes provider reads (its Python SDK
    and the provider's schema name it), and the GPU scale set's absence is checked in the node resource group."""
    import inspect

    import pulumi_kubernetes

    from tests.paths import ROOT

    doc = (ROOT / "docs" / "teardown.md").read_text()
    assert "PULUMI_K8S_DELETE_UNREACHABLE" in inspect.getsource(pulumi_kubernetes.Provider)
    for needed in ("PULUMI_K8S_DELETE_UNREACHABLE=true pulumi destroy", "pulumi destroy --stack private-kubernetes",
                   "pulumi destroy --stack private-azure", "az vmss list --resource-group", "nodeResourceGroup",
                   "pulumi state delete"):
        assert needed in doc, needed
    assert doc.index("--stack private-kubernetes") < doc.index("--stack private-azure")
