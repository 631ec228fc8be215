"""Each half of a stack (`stackPart: azure`, `stackPart: kubernetes`) declares exactly what the whole
stack declares of it, input by input. This is what lets a test of the Azure resources render only the
Azure half, and a test of the Kubernetes objects only the Kubernetes half (conftest.PARTS), at a third to
a half of a whole render's cost, and it is the promise of the two-stack deployment
(docs/enterprise-deployment.md): splitting a stack changes where it runs, not what it applies."""

from __future__ import annotations

import pytest
from conftest import rendered

from offline import engine

K8S_PROVIDER = "pulumi:providers:kubernetes"
STACK_REFERENCE = "pulumi:pulumi:StackReference"
# Only in the whole stack: the deployer's cluster-admin grant (the Kubernetes half runs as the runner's
# identity, which holds its role: docs/enterprise-deployment.md).
WHOLE_ONLY = {("azure-native:authorization:RoleAssignment", "cluster-deployer-admin"),
              ("command:local:Command", "cluster-deployer-access")}  # the grant and the wait for it


def _declared(r: engine.Rendering) -> dict[tuple[str, str], engine.Resource]:
    return {(x.type, x.name): x for x in r.resources}


@pytest.mark.parametrize("stack", ["dev", "hb", "gb300", "private"])
def test_each_half_declares_what_the_whole_stack_declares(stack):
    whole = _declared(rendered(stack))
    azure, kubernetes = _declared(rendered(stack, part="azure")), _declared(rendered(stack, part="kubernetes"))
    azure_urns = {whole[key].urn for key in azure}

    assert azure.keys() & kubernetes.keys() == set()
    assert set(whole) - set(azure) - set(kubernetes) <= WHOLE_ONLY
    assert set(azure) <= set(whole)
    assert set(kubernetes) - set(whole) == {(STACK_REFERENCE, "azure-stack")}
    for key, part in azure.items():
        assert part == whole[key], f"{key} differs between the Azure half and the whole stack"
    for key, part in kubernetes.items():
        if key[0] in (STACK_REFERENCE, K8S_PROVIDER):
            continue  # the half's provider reads the kubeconfig from the reference, the whole's from the cluster
        full = whole[key]
        assert part.inputs == full.inputs, f"{key}: inputs differ between the Kubernetes half and the whole stack"
        for field in ("secret_inputs", "protect", "ignore_changes", "custom_timeouts", "retain_on_delete",
                      "additional_secret_outputs"):
            assert getattr(part, field) == getattr(full, field), f"{key}: {field} differs"
        # The same edges, less those to the Azure resources the half cannot see (its provider stands for them).
        providers = {d for d in part.dependencies if "cluster-k8s" in d}
        assert set(part.dependencies) <= set(full.dependencies) | providers
        kept = {d for d in full.dependencies if d not in azure_urns and "cluster-k8s" not in d}
        assert kept <= set(part.dependencies)
