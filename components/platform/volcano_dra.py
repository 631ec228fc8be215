"""Volcano's scheduler with Dynamic Resource Allocation on, for stacks whose fabric test claims devices
(GB sizes, `rdmaMode: dra`: core/dra.py).

The gang scheduler places the test's pods, so it must allocate their ResourceClaims itself. Volcano's
release manifest has the RBAC for it but neither switch (volcano-sh/volcano@0a56ed3, v1.15.1; its
docs/user-guide/how_to_enable_dra.md): the scheduler's `--feature-gates=DynamicResourceAllocation=true`
and the predicates plugin's argument `predicate.DynamicResourceAllocationEnable: true`. Like
components/platform/volcano_topology.py, this rewrites the checked manifest's objects before they are applied.
"""

from __future__ import annotations

from typing import Any

import yaml

SCHEDULER = "volcano-scheduler"
SCHEDULER_CONFIGMAP, SCHEDULER_KEY = "volcano-scheduler-configmap", "volcano-scheduler.conf"
FEATURE_GATE = "--feature-gates=DynamicResourceAllocation=true"
PREDICATE_ARGUMENT = "predicate.DynamicResourceAllocationEnable"


def scheduler_conf(upstream: str) -> str:
    """The scheduler configuration with DRA on in its predicates plugin."""
    conf = yaml.safe_load(upstream)
    found = [p for tier in conf["tiers"] for p in tier["plugins"] if p.get("name") == "predicates"]
    if not found:
        raise ValueError("the scheduler configuration has no predicates plugin to enable DRA in")
    for plugin in found:
        plugin["arguments"] = {**(plugin.get("arguments") or {}), PREDICATE_ARGUMENT: True}
    return yaml.safe_dump(conf, sort_keys=False)


def _with_gate(container: dict[str, Any]) -> dict[str, Any]:
    args = [a for a in container.get("args") or [] if not str(a).startswith("--feature-gates=")]
    # the manifest ends the scheduler's args with a shell redirect ("2>&1"): the gate goes before it
    at = next((i for i, a in enumerate(args) if not str(a).startswith("-")), len(args))
    return {**container, "args": [*args[:at], FEATURE_GATE, *args[at:]]}


def configure(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The manifest's objects with DRA on in the scheduler's ConfigMap and Deployment; the rest as they were."""
    out, seen = [], set()
    for obj in objects:
        name, kind = (obj.get("metadata") or {}).get("name"), obj.get("kind")
        if kind == "ConfigMap" and name == SCHEDULER_CONFIGMAP:
            obj = {**obj, "data": {**obj["data"], SCHEDULER_KEY: scheduler_conf(obj["data"][SCHEDULER_KEY])}}
            seen.add(kind)
        elif kind == "Deployment" and name == SCHEDULER:
            spec = obj["spec"]["template"]["spec"]
            containers = [_with_gate(c) if c.get("name") == SCHEDULER else c for c in spec["containers"]]
            obj = {**obj, "spec": {**obj["spec"], "template": {**obj["spec"]["template"],
                                                               "spec": {**spec, "containers": containers}}}}
            seen.add(kind)
        out.append(obj)
    if seen != {"ConfigMap", "Deployment"}:
        raise ValueError(f"the Volcano manifest lacks the scheduler's {sorted({'ConfigMap', 'Deployment'} - seen)}")
    return out


def missing(configmap: dict[str, Any] | None, deployment: dict[str, Any] | None) -> list[str]:
    """What of the two switches `configure` sets another owner's Volcano lacks (existingCluster.preinstalled:
    stack/preinstalled.py reads its scheduler's ConfigMap and Deployment, None where the cluster has none)."""
    out = []
    try:
        conf = yaml.safe_load(((configmap or {}).get("data") or {}).get(SCHEDULER_KEY) or "") or {}
    except yaml.YAMLError:
        conf = {}
    tiers = conf.get("tiers") if isinstance(conf, dict) else None
    found = [p for tier in tiers or [] for p in tier.get("plugins") or [] if p.get("name") == "predicates"]
    if not any(str((p.get("arguments") or {}).get(PREDICATE_ARGUMENT)).lower() == "true" for p in found):
        out.append(f"ConfigMap {SCHEDULER_CONFIGMAP}: no predicates plugin with {PREDICATE_ARGUMENT}: true"
                   if configmap else f"no ConfigMap {SCHEDULER_CONFIGMAP}")
    spec = (((deployment or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    args = [str(a) for c in spec.get("containers") or [] if c.get("name") == SCHEDULER for a in c.get("args") or []]
    gates = {g.strip() for a in args if a.startswith("--feature-gates=") for g in a.partition("=")[2].split(",")}
    if "DynamicResourceAllocation=true" not in gates:
        out.append(f"Deployment {SCHEDULER}: its {SCHEDULER} container lacks {FEATURE_GATE}"
                   if deployment else f"no Deployment {SCHEDULER}")
    return out
