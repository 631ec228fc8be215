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

# What AKS hands an Entra ID cluster for `format=exec`: a kubelogin exec credential (devicecode login,
# which the program rewrites to the stack's kubelogin mode), no static token. 6dae42f8-... is the
# AKS AAD server application id that AKS puts in --server-id.
FAKE_EXEC_KUBECONFIG = """apiVersion: v1
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
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: kubelogin
      args: [get-token, --environment, AzurePublicCloud, --server-id, 6dae42f8-4368-4678-94ff-3960e28e3630,
             --client-id, 80faf920-1908-4b52-b5ef-a8e7bedfc67a, --tenant-id, 00000000-0000-0000-0000-000000000000,
             --login, devicecode]
      installHint: install kubelogin (https://azure.github.io/kubelogin/install.html)
      provideClusterInfo: false
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
    # the AKSInfinibandSupport step (components/platform/feature_registration.py)
    "-register": "pending (offline render: the step prints Registered once Azure has registered the feature)",
    # its read-only form on sizes that must not have the feature
    "-check-unregistered": "pending (offline render: the step prints NotRegistered, or fails if it is registered)",
}

# What a StackReference to the Azure part reads under the mocks: each output of the contract
# (stack/handoff.OUTPUTS) as an obvious placeholder; the kubeconfig in the exec form, secret as there.
# The pool's size and count are those of the Azure half of the configuration being rendered
# (`_deployed_pool`): what that half exports.
STACK_REFERENCE_OUTPUTS: dict[str, object] = {
    "resourceGroupName": "offline-placeholder-rg",
    "clusterName": "offline-placeholder-cluster",
    "kubeconfig": FAKE_EXEC_KUBECONFIG,
    "vmSize": None,
    "nodeCount": None,
}
STACK_REFERENCE_SECRETS = ["kubeconfig"]

# Which input holds the name Azure will use, per type (the mock returns it as `name`).
_NAME_INPUT = {
    "azure-native:resources:ResourceGroup": "resourceGroupName",
    "azure-native:containerservice:ManagedCluster": "resourceName",
    "azure-native:containerservice:AgentPool": "agentPoolName",
}


def _deployed_pool() -> dict[str, object]:
    """vmSize and nodeCount as the Azure half of the configuration being rendered exports them."""
    import stack_config

    cfg = stack_config.load()
    return {"vmSize": cfg.sku.vm_size, "nodeCount": cfg.ib_pool.node_count}


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
            identity = dict(args.inputs.get("identity") or {})
            if isinstance(identity.get("userAssignedIdentities"), list):
                # ARM takes a list of identity ids and answers a map of id -> client and principal ids
                identity["userAssignedIdentities"] = {i: {"clientId": OFFLINE_ID, "principalId": OFFLINE_ID}
                                                      for i in identity["userAssignedIdentities"]}
                state["identity"] = identity
            return _ARM.format(rg=args.inputs["resourceGroupName"], name=args.inputs["resourceName"]), state
        if args.typ == "azure-native:containerservice:AgentPool":
            arm_id = _ARM.format(rg=args.inputs["resourceGroupName"], name=args.inputs["resourceName"])
            return f"{arm_id}/agentPools/{args.inputs['agentPoolName']}", state
        if args.typ == "pulumi:pulumi:StackReference":
            state.update(outputs={**STACK_REFERENCE_OUTPUTS, **_deployed_pool()},
                         secretOutputNames=list(STACK_REFERENCE_SECRETS))
            return args.resource_id or args.name, state
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
            text = FAKE_EXEC_KUBECONFIG if args.args.get("format") == "exec" else FAKE_KUBECONFIG
            value = base64.b64encode(text.encode()).decode()
            return {"kubeconfigs": [{"name": "clusterUser", "value": value}]}
        if args.token == "azure-native:authorization:getClientConfig":
            # the identity Pulumi deploys as; all-zero ids, never a real tenant or subscription
            return {key: OFFLINE_ID for key in ("clientId", "objectId", "subscriptionId", "tenantId")}
        if args.token == "azure-native:managedidentity:getUserAssignedIdentity":
            return {"clientId": OFFLINE_ID, "principalId": OFFLINE_ID, "tenantId": OFFLINE_ID,
                    "name": args.args.get("resourceName"), "location": "offline"}
        return {}
