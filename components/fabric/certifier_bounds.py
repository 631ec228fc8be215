"""What the certifier's ServiceAccount may write, bounded by the API server itself: two
ValidatingAdmissionPolicies that match only requests of that account (docs/fabric-certifier.md).

RBAC alone cannot say it: `create` on Volcano Jobs in the fabric test's namespace (which enforces the
privileged Pod Security level) would let the account start any pod on any node, and `patch` on nodes would
let it change any taint or label. So:
- its Volcano Jobs must be re-tests (the label), at the lowest PriorityClass, with only the fabric test's
  own images, and no privileged container, host namespace or hostPath volume;
- its node writes may change only the certifier's taints (the hold and the quarantine keys), its state
  label and its own annotations; `spec.unschedulable` (a cordon) never.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from clusterside import certify, certify_recurring
from clusterside.kube import VOLCANO_GROUP
from core import fabric

adm, meta = k8s.admissionregistration.v1, k8s.meta.v1

JOBS_POLICY = "aks-infiniband-certifier-jobs"
NODES_POLICY = "aks-infiniband-certifier-nodes"
TAINT_KEYS = (fabric.HOLD_TAINT_KEY, fabric.FABRIC_TAINT_KEY)
LABEL_KEYS = (fabric.FABRIC_STATE_LABEL,)
ANNOTATION_KEYS = (certify.CERTIFIED_AT_ANNOTATION, certify.QUARANTINED_BY_ANNOTATION, certify.HELD_ANNOTATION)


def _list(values: Iterable[str]) -> str:
    return json.dumps(sorted(set(values)))  # a CEL list of strings


def images(template: Mapping[str, Any]) -> list[str]:
    """Every image of the re-test job's tasks: what its re-tests may run."""
    return sorted({c["image"] for task in template["spec"]["tasks"]
                   for c in [*task["template"]["spec"].get("initContainers", []),
                             *task["template"]["spec"]["containers"]]})


def job_validations(allowed_images: Sequence[str]) -> list[dict[str, str]]:
    pods = "object.spec.tasks.map(t, t.template.spec)"
    containers = "((has(p.containers) ? p.containers : []) + (has(p.initContainers) ? p.initContainers : []))"
    return [
        {"expression": f"has(object.metadata.labels) && '{certify_recurring.RETEST_LABEL}' in object.metadata.labels",
         "message": f"the certifier creates re-tests only (label {certify_recurring.RETEST_LABEL})"},
        {"expression": f"{pods}.all(p, has(p.priorityClassName) && p.priorityClassName == "
                       f"'{certify_recurring.PRIORITY_CLASS}')",
         "message": f"a re-test's pods run at the lowest priority ({certify_recurring.PRIORITY_CLASS})"},
        {"expression": f"{pods}.all(p, {containers}.all(c, c.image in {_list(allowed_images)}))",
         "message": f"a re-test runs the fabric test's own images only: {', '.join(allowed_images)}"},
        {"expression": f"{pods}.all(p, {containers}.all(c, !has(c.securityContext) || "
                       "!has(c.securityContext.privileged) || !c.securityContext.privileged))",
         "message": "a re-test runs no privileged container"},
        {"expression": f"{pods}.all(p, !(has(p.hostNetwork) && p.hostNetwork) && !(has(p.hostPID) && p.hostPID) "
                       "&& !(has(p.hostIPC) && p.hostIPC) && (!has(p.volumes) || p.volumes.all(v, !has(v.hostPath))))",
         "message": "a re-test uses no host namespace and no hostPath volume"},
    ]


def _map_changes_only(field: str, keys: Sequence[str]) -> str:
    """CEL: metadata.<field> differs between the old and new object only in `keys`."""
    new, old = f"object.metadata.{field}", f"oldObject.metadata.{field}"
    n, o = f"(has({new}) ? {new} : {{}})", f"(has({old}) ? {old} : {{}})"
    return (f"{n}.all(k, k in {_list(keys)} || (k in {o} && {o}[k] == {n}[k])) && "
            f"{o}.all(k, k in {_list(keys)} || k in {n})")


def _taint_same(a: str, b: str) -> str:
    return (f"{a}.key == {b}.key && {a}.effect == {b}.effect && "
            f"(has({a}.value) ? {a}.value : '') == (has({b}.value) ? {b}.value : '')")


def node_validations() -> list[dict[str, str]]:
    new = "(has(object.spec.taints) ? object.spec.taints : [])"
    old = "(has(oldObject.spec.taints) ? oldObject.spec.taints : [])"
    keys = _list(TAINT_KEYS)
    return [
        {"expression": f"{new}.all(t, t.key in {keys} || {old}.exists(o, {_taint_same('o', 't')})) && "
                       f"{old}.all(o, o.key in {keys} || {new}.exists(t, {_taint_same('t', 'o')}))",
         "message": f"the certifier changes only its own taints ({', '.join(TAINT_KEYS)})"},
        {"expression": "(has(object.spec.unschedulable) && object.spec.unschedulable) == "
                       "(has(oldObject.spec.unschedulable) && oldObject.spec.unschedulable)",
         "message": "the certifier never cordons or uncordons a node"},
        {"expression": _map_changes_only("labels", LABEL_KEYS),
         "message": f"the certifier changes only its label {', '.join(LABEL_KEYS)}"},
        {"expression": _map_changes_only("annotations", ANNOTATION_KEYS),
         "message": f"the certifier changes only its annotations ({', '.join(ANNOTATION_KEYS)})"},
    ]


def declare(name: str, service_account: str, allowed_images: Sequence[str], labels: Mapping[str, str],
            opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """`{name}-jobs-policy` and `{name}-nodes-policy`, each with its `-binding`: Deny, matched on the account."""
    only_it = [adm.MatchConditionArgs(name="the-certifier", expression=f"request.userInfo.username == "
                                                                       f"'{service_account}'")]
    rules = {
        JOBS_POLICY: (adm.NamedRuleWithOperationsArgs(api_groups=[VOLCANO_GROUP], api_versions=["*"],
                                                      operations=["CREATE", "UPDATE"], resources=["jobs"]),
                      job_validations(allowed_images)),
        NODES_POLICY: (adm.NamedRuleWithOperationsArgs(api_groups=[""], api_versions=["v1"],
                                                       operations=["UPDATE"], resources=["nodes"]),
                       node_validations()),
    }
    out: list[pulumi.Resource] = []
    for policy_name, (rule, validations) in rules.items():
        short = policy_name.removeprefix("aks-infiniband-certifier-")
        policy = adm.ValidatingAdmissionPolicy(
            f"{name}-{short}-policy", metadata=meta.ObjectMetaArgs(name=policy_name, labels=dict(labels)),
            spec=adm.ValidatingAdmissionPolicySpecArgs(
                failure_policy="Fail", match_conditions=only_it,
                match_constraints=adm.MatchResourcesArgs(resource_rules=[rule]),
                validations=[adm.ValidationArgs(**v, reason="Forbidden") for v in validations]),
            opts=opts)
        binding = adm.ValidatingAdmissionPolicyBinding(
            f"{name}-{short}-policy-binding", metadata=meta.ObjectMetaArgs(name=policy_name, labels=dict(labels)),
            spec=adm.ValidatingAdmissionPolicyBindingSpecArgs(policy_name=policy.metadata.name,
                                                             validation_actions=["Deny"]),
            opts=opts)
        out += [policy, binding]
    return out
