"""What AKS enforces on nodes that the Kubernetes API alone does not, as ValidatingAdmissionPolicies that
`cluster-up` creates in the real control plane. The protected keys come from the stack's render (the
AgentPool's `nodeTaints` and `nodeLabels`, e2e/pools.py), never written here by hand.

The rule and its sources:
- learn.microsoft.com/azure/aks/use-node-taints, "Node taint options", note: "Node taints and labels
  applied using the AKS node pool API aren't modifiable from the Kubernetes API and vice versa.
  Modifications to system taints aren't allowed. This doesn't apply to node initialization taints."
- Azure/AKS#2934 (taints set on the pool come back, or the removal is refused), and the denial that
  AKS's `aks-node-validating-webhook.azmk8s.io` answers to a `kubectl taint ... -` of a pool taint
  (quoted in nestybox/sysbox#816: "Taint delete request ... refused. User is attempting to delete a
  taint configured on aks node pool ...").
So: on a node of pool P, a taint that P's `nodeTaints` set must stay as it is, and a label that P's
`nodeLabels` set must keep its value. Taints and labels added through the Kubernetes API (or by node
initialization taints) are free to change.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from e2e.pools import AGENT_POOL_LABEL, ClusterFacts, Pool, Taint

SOURCE = "learn.microsoft.com/azure/aks/use-node-taints (note under 'Node taint options'); Azure/AKS#2934"
POLICY_PREFIX = "aks-pool-set-"


def _str(value: str) -> str:
    return json.dumps(value)  # a CEL string literal


def _has_taint(obj: str, t: Taint) -> str:
    return (f"(has({obj}.spec.taints) && {obj}.spec.taints.exists(t, t.key == {_str(t.key)} && "
            f"(has(t.value) ? t.value : '') == {_str(t.value)} && t.effect == {_str(t.effect)}))")


def _has_label(obj: str, key: str, value: str) -> str:
    return (f"(has({obj}.metadata.labels) && {_str(key)} in {obj}.metadata.labels && "
            f"{obj}.metadata.labels[{_str(key)}] == {_str(value)})")


def taint_text(t: Taint) -> str:
    return f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"


def validations(pool: Pool) -> list[dict[str, str]]:
    out = []
    for t in pool.taints:
        out.append({
            "expression": f"!{_has_taint('oldObject', t)} || {_has_taint('object', t)}",
            "message": f'Taint delete request "{taint_text(t)}" refused: it is configured on AKS node pool '
                       f'"{pool.name}" (nodeTaints), which the Kubernetes API cannot change ({SOURCE})',
            "reason": "Forbidden"})
    for key, value in sorted(pool.labels.items()):
        out.append({
            "expression": f"!{_has_label('oldObject', key, value)} || {_has_label('object', key, value)}",
            "message": f'Label change "{key}={value}" refused: it is configured on AKS node pool "{pool.name}" '
                       f"(nodeLabels), which the Kubernetes API cannot change ({SOURCE})",
            "reason": "Forbidden"})
    return out


def policy(pool: Pool) -> list[dict[str, Any]]:
    """The policy and its binding for one pool's nodes (none when the pool sets no taint or label)."""
    rules = validations(pool)
    if not rules:
        return []
    name = f"{POLICY_PREFIX}{pool.name}"
    return [{
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "annotations": {"aks-infiniband.io/source": SOURCE}},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "operations": ["UPDATE"], "resources": ["nodes"]}]},
            "matchConditions": [{"name": "in-pool",
                                 "expression": _has_label("oldObject", AGENT_POOL_LABEL, pool.name)}],
            "validations": rules}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": name},
         "spec": {"policyName": name, "validationActions": ["Deny"]}}]


def policies(cluster: ClusterFacts) -> list[dict[str, Any]]:
    return [obj for pool in cluster.pools for obj in policy(pool)]


def probes(cluster: ClusterFacts) -> Iterable[tuple[str, Taint]]:
    """(node name, pool taint) pairs whose removal the policies must deny: cluster-up checks one each."""
    from e2e.pools import node_name
    for pool in cluster.pools:
        if pool.taints and pool.count:
            yield node_name(cluster, pool, 0), pool.taints[0]
