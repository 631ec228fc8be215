"""What the certifier's ServiceAccount may write, bounded by the API server itself: two
ValidatingAdmissionPolicies that match only requests of that account (docs/fabric-certifier.md).

RBAC alone cannot say it: `create` on Volcano Jobs in the fabric test's namespace (which enforces the
privileged Pod Security level) would let the account start any pod on any node, and `patch` on nodes would
let it change any taint or label. So:
- its Volcano Jobs must be re-tests (the label), at the lowest PriorityClass, with only the fabric test's
  own images, and no privileged container, host namespace or hostPath volume; it deletes re-tests only;
- its node writes may change only the certifier's taints (the hold and the quarantine keys), its state
  label and its own annotations; `spec.unschedulable` (a cordon) never; through nodes/status, only its
  FabricCertified condition (no other condition, capacity, allocatable, address or node info).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from clusterside import certify, certify_recurring
from clusterside.kube import VOLCANO_GROUP
from components.node_bounds import SAME_CORDON, cel_list, map_changes_only, taints_change_only
from core import fabric

adm, meta = k8s.admissionregistration.v1, k8s.meta.v1

JOBS_POLICY = "aks-infiniband-certifier-jobs"
NODES_POLICY = "aks-infiniband-certifier-nodes"
TAINT_KEYS = (fabric.HOLD_TAINT_KEY, fabric.FABRIC_TAINT_KEY)
LABEL_KEYS = (fabric.FABRIC_STATE_LABEL,)
ANNOTATION_KEYS = (certify.CERTIFIED_AT_ANNOTATION, certify.QUARANTINED_BY_ANNOTATION, certify.HELD_ANNOTATION)


def images(template: Mapping[str, Any]) -> list[str]:
    """Every image of the re-test job's tasks: what its re-tests may run."""
    return sorted({c["image"] for task in template["spec"]["tasks"]
                   for c in [*task["template"]["spec"].get("initContainers", []),
                             *task["template"]["spec"]["containers"]]})


def job_validations(allowed_images: Sequence[str]) -> list[dict[str, str]]:
    """What its Jobs may be (CREATE, UPDATE) and which it may delete: its own re-tests (on DELETE `object`
    is null and `oldObject` the Job; each rule is guarded by the operation it is about)."""
    return [{"expression": f"request.operation == 'DELETE' || ({v['expression']})", "message": v["message"]}
            for v in _job_spec_validations(allowed_images)] + [
        {"expression": f"request.operation != 'DELETE' || (has(oldObject.metadata.labels) && "
                       f"'{certify_recurring.RETEST_LABEL}' in oldObject.metadata.labels)",
         "message": f"the certifier deletes its own re-tests only (label {certify_recurring.RETEST_LABEL})"}]


def _job_spec_validations(allowed_images: Sequence[str]) -> list[dict[str, str]]:
    pods = "object.spec.tasks.map(t, t.template.spec)"
    containers = "((has(p.containers) ? p.containers : []) + (has(p.initContainers) ? p.initContainers : []))"
    return [
        {"expression": f"has(object.metadata.labels) && '{certify_recurring.RETEST_LABEL}' in object.metadata.labels",
         "message": f"the certifier creates re-tests only (label {certify_recurring.RETEST_LABEL})"},
        {"expression": f"{pods}.all(p, has(p.priorityClassName) && p.priorityClassName == "
                       f"'{certify_recurring.PRIORITY_CLASS}')",
         "message": f"a re-test's pods run at the lowest priority ({certify_recurring.PRIORITY_CLASS})"},
        {"expression": f"{pods}.all(p, {containers}.all(c, c.image in {cel_list(allowed_images)}))",
         "message": f"a re-test runs the fabric test's own images only: {', '.join(allowed_images)}"},
        {"expression": f"{pods}.all(p, {containers}.all(c, !has(c.securityContext) || "
                       "!has(c.securityContext.privileged) || !c.securityContext.privileged))",
         "message": "a re-test runs no privileged container"},
        {"expression": f"{pods}.all(p, !(has(p.hostNetwork) && p.hostNetwork) && !(has(p.hostPID) && p.hostPID) "
                       "&& !(has(p.hostIPC) && p.hostIPC) && (!has(p.volumes) || p.volumes.all(v, !has(v.hostPath))))",
         "message": "a re-test uses no host namespace and no hostPath volume"},
    ]


# Node status fields a scheduler or a person trusts; the certifier writes none of them (a status update
# cannot change spec: the API server keeps the old spec on nodes/status, pkg/registry/core/node/strategy.go).
STATUS_FIELDS = ("capacity", "allocatable", "addresses", "nodeInfo", "daemonEndpoints")


def _same(field: str) -> str:
    new, old = f"object.status.{field}", f"oldObject.status.{field}"
    return f"has({new}) == has({old}) && (!has({new}) || {new} == {old})"


def node_validations() -> list[dict[str, str]]:
    conditions = "(has({0}.status.conditions) ? {0}.status.conditions : []).filter(c, c.type != '{1}')"
    return [
        {"expression": taints_change_only(TAINT_KEYS),
         "message": f"the certifier changes only its own taints ({', '.join(TAINT_KEYS)})"},
        {"expression": SAME_CORDON, "message": "the certifier never cordons or uncordons a node"},
        {"expression": map_changes_only("labels", LABEL_KEYS),
         "message": f"the certifier changes only its label {', '.join(LABEL_KEYS)}"},
        {"expression": map_changes_only("annotations", ANNOTATION_KEYS),
         "message": f"the certifier changes only its annotations ({', '.join(ANNOTATION_KEYS)})"},
        # nodes/status (its RBAC allows patch there): only its own condition
        {"expression": f"{conditions.format('object', fabric.FABRIC_CONDITION)} == "
                       f"{conditions.format('oldObject', fabric.FABRIC_CONDITION)}",
         "message": f"the certifier changes only its node condition {fabric.FABRIC_CONDITION}"},
        {"expression": " && ".join(f"({_same(f)})" for f in STATUS_FIELDS),
         "message": f"the certifier changes no node status but its condition ({', '.join(STATUS_FIELDS)} stay)"},
    ]


def declare(name: str, service_account: str, allowed_images: Sequence[str], labels: Mapping[str, str],
            opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """`{name}-jobs-policy` and `{name}-nodes-policy`, each with its `-binding`: Deny, matched on the account."""
    only_it = [adm.MatchConditionArgs(name="the-certifier", expression=f"request.userInfo.username == "
                                                                       f"'{service_account}'")]
    rules = {
        JOBS_POLICY: (adm.NamedRuleWithOperationsArgs(api_groups=[VOLCANO_GROUP], api_versions=["*"],
                                                      operations=["CREATE", "UPDATE", "DELETE"],
                                                      resources=["jobs"]),
                      job_validations(allowed_images)),
        NODES_POLICY: (adm.NamedRuleWithOperationsArgs(api_groups=[""], api_versions=["v1"],
                                                       operations=["UPDATE"],
                                                       resources=["nodes", "nodes/status"]),
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
