"""CEL for ValidatingAdmissionPolicies that bound an account's writes to Nodes, which RBAC cannot bound by
field: `patch` on nodes lets an account change any taint, label or annotation. Shared by the certifier's
bounds (components/fabric/certifier_bounds.py) and the topology labeler's
(components/platform/topology_labeler.py). The expressions follow the Kubernetes CEL rules for
admission policies: `object` is the node after the write, `oldObject` before it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence


def cel_list(values: Iterable[str]) -> str:
    return json.dumps(sorted(set(values)))  # a CEL list of strings


def map_changes_only(field: str, keys: Sequence[str]) -> str:
    """CEL: metadata.<field> differs between the old and new object only in `keys`."""
    new, old = f"object.metadata.{field}", f"oldObject.metadata.{field}"
    n, o = f"(has({new}) ? {new} : {{}})", f"(has({old}) ? {old} : {{}})"
    return (f"{n}.all(k, k in {cel_list(keys)} || (k in {o} && {o}[k] == {n}[k])) && "
            f"{o}.all(k, k in {cel_list(keys)} || k in {n})")


def taint_same(a: str, b: str) -> str:
    return (f"{a}.key == {b}.key && {a}.effect == {b}.effect && "
            f"(has({a}.value) ? {a}.value : '') == (has({b}.value) ? {b}.value : '')")


TAINTS_NEW = "(has(object.spec.taints) ? object.spec.taints : [])"
TAINTS_OLD = "(has(oldObject.spec.taints) ? oldObject.spec.taints : [])"
SAME_CORDON = ("(has(object.spec.unschedulable) && object.spec.unschedulable) == "
               "(has(oldObject.spec.unschedulable) && oldObject.spec.unschedulable)")


def taints_change_only(keys: Sequence[str]) -> str:
    """CEL: spec.taints differs only in taints whose key is one of `keys` (none: no taint changes)."""
    k = cel_list(keys)
    return (f"{TAINTS_NEW}.all(t, t.key in {k} || {TAINTS_OLD}.exists(o, {taint_same('o', 't')})) && "
            f"{TAINTS_OLD}.all(o, o.key in {k} || {TAINTS_NEW}.exists(t, {taint_same('t', 'o')}))")
