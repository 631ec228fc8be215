"""What the mock engine answers for each resource type and invoke: the inputs echoed back, plus
the few outputs the program reads (names, ids, the kubeconfig). Nothing here pretends to be a
measurement: command outputs are the placeholder `COMMAND_STDOUT` gives, keyed by resource name;
what only Azure can say (the OIDC issuer URL, the Kubernetes patch AKS chose) is an obvious
placeholder, and resource ids have Azure's shape in the all-zero subscription."""

from __future__ import annotations

import base64
from typing import Any

import pulumi

# A kubeconfig shaped like AKS's, pointing nowhere. The program keeps it secret; the render redacts it.
FAKE_KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: offline
  cluster: {server: "https://offline.invalid:443"}
contexts:
- name: offline
  context: {cluster: offline, user: offline}
current-context: offline
users:
- name: offline
  user: {token: offline-render-not-a-credential}
"""

OFFLINE_ID = "00000000-0000-0000-0000-000000000000"
# Outputs only Azure knows, as the offline render shows them: never mistaken for real values.
PLACEHOLDER_OIDC_ISSUER_URL = "https://offline.invalid/oidc-issuer-placeholder/"
PLACEHOLDER_KUBERNETES_VERSION = "offline-placeholder (AKS reports the version it runs)"
_ARM = ("/subscriptions/" + OFFLINE_ID
        + "/resourceGroups/{rg}/providers/Microsoft.ContainerService/managedClusters/{name}")

# stdout of pulumi-command resources under the mock engine, by the end of the resource name.
# Placeholders, not states: a real run prints Azure's state (Registered / NotRegistered) here.
COMMAND_STDOUT: dict[str, str] = {
    # the AKSInfinibandSupport step (components/feature_registration.py)
    "-register": "pending (offline render: the step prints Registered once Azure has registered the feature)",
    # its read-only form on sizes that must not have the feature
    "-check-unregistered": "pending (offline render: the step prints NotRegistered, or fails if it is registered)",
}

# Which input holds the name Azure will use, per type (the mock returns it as `name`).
_NAME_INPUT = {
    "azure-native:resources:ResourceGroup": "resourceGroupName",
    "azure-native:containerservice:ManagedCluster": "resourceName",
    "azure-native:containerservice:AgentPool": "agentPoolName",
}


class OfflineMocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        state = dict(args.inputs)
        name_key = _NAME_INPUT.get(args.typ)
        if name_key and name_key in args.inputs:
            state["name"] = args.inputs[name_key]
        if args.typ == "azure-native:containerservice:ManagedCluster":
            state["currentKubernetesVersion"] = PLACEHOLDER_KUBERNETES_VERSION
            state["oidcIssuerProfile"] = {**(args.inputs.get("oidcIssuerProfile") or {}),
                                          "issuerURL": PLACEHOLDER_OIDC_ISSUER_URL}
            return _ARM.format(rg=args.inputs["resourceGroupName"], name=args.inputs["resourceName"]), state
        if args.typ == "azure-native:containerservice:AgentPool":
            arm_id = _ARM.format(rg=args.inputs["resourceGroupName"], name=args.inputs["resourceName"])
            return f"{arm_id}/agentPools/{args.inputs['agentPoolName']}", state
        if args.typ == "command:local:Command":
            stdout = next((v for k, v in COMMAND_STDOUT.items() if args.name.endswith(k)), "")
            state.update(stdout=stdout, stderr="")
        if args.typ.startswith("kubernetes:") and "metadata" in state:
            meta = dict(state["metadata"] or {})
            meta.setdefault("name", args.name)
            state["metadata"] = meta
        if args.typ == "kubernetes:helm.sh/v3:Release":
            state.setdefault("status", {"namespace": args.inputs.get("namespace", "default"), "status": "deployed"})
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        if args.token == "azure-native:containerservice:listManagedClusterUserCredentials":
            value = base64.b64encode(FAKE_KUBECONFIG.encode()).decode()
            return {"kubeconfigs": [{"name": "clusterUser", "value": value}]}
        if args.token == "azure-native:authorization:getClientConfig":
            # the identity Pulumi deploys as; all-zero ids, never a real tenant or subscription
            return {key: OFFLINE_ID for key in ("clientId", "objectId", "subscriptionId", "tenantId")}
        return {}
