"""What the offline render writes of each resource (offline/synth.py, offline/charts.py): values made
deterministic (sorted keys, integral floats as ints), secret inputs redacted, the secret values to
look for in every file written, YAML as `make synth` writes it, a Kubernetes object as the manifest
it would be applied as, and a Helm release's name and chart."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from offline.engine import SECRET, Rendering, Resource

HELM_TYPES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart")


# --- values ---------------------------------------------------------------------------------------
def normalize(value: Any) -> Any:
    """Sorted keys, integral floats as ints (the engine hands every number over as a double)."""
    if isinstance(value, Mapping):
        return {str(k): normalize(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [normalize(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def redacted_inputs(resource: Resource) -> dict[str, Any]:
    return normalize({k: (SECRET if k in resource.secret_inputs else v) for k, v in resource.inputs.items()})


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def secret_needles(rendering: Rendering) -> set[str]:
    """Strings that must not appear in any output: each secret value, and each long token in it
    (so that a fragment of a kubeconfig, e.g. its token, is caught too)."""
    values: list[Any] = [r.inputs.get(k) for r in rendering.resources for k in r.secret_inputs]
    values += [rendering.outputs.get(k) for k in rendering.secret_outputs]
    needles: set[str] = set()
    for s in _strings(values):
        if len(s) >= 8 and s != SECRET:
            needles.add(s)
        needles.update(t for t in re.split(r"[\s{}\[\],\"']+", s) if len(t) >= 24)
    return needles


# libyaml's emitter where PyYAML was built with it: the same output (the golden render and every example
# stack's synth compared byte for byte, 2026-12-01) at a fifth of the pure-Python emitter's time.
class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    pass


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_representer)


def to_yaml(value: Any) -> str:
    return yaml.dump(value, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1000,
                     allow_unicode=True)


# --- Kubernetes objects and Helm releases ---------------------------------------------------------
def k8s_api_kind(resource: Resource) -> tuple[str, str] | None:
    """(apiVersion, kind) when the resource is one Kubernetes object the provider applies as is;
    None for providers, Helm releases, manifests expanded by the provider (yaml/v2, kustomize), and reads
    (a `.get` of an object the certifier writes: nothing the stack applies)."""
    if not resource.type.startswith("kubernetes:") or not resource.custom or resource.read:
        return None
    group_version, kind = resource.type[len("kubernetes:"):].rsplit(":", 1)
    if group_version.startswith(("helm.sh/", "yaml", "kustomize")) or kind.endswith("List"):
        return None
    inputs = resource.inputs
    api = inputs.get("apiVersion") or (group_version[len("core/"):] if group_version.startswith("core/")
                                       else group_version)
    return str(api), str(inputs.get("kind") or kind)


def manifest(resource: Resource) -> dict[str, Any]:
    api, kind = k8s_api_kind(resource)  # type: ignore[misc]
    inputs = redacted_inputs(resource)
    inputs.pop("apiVersion", None)
    inputs.pop("kind", None)
    metadata = inputs.pop("metadata", {}) or {}
    return {"apiVersion": api, "kind": kind, "metadata": metadata, **inputs}


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.-]+", "-", text.lower()).strip("-") or "unnamed"


def manifest_filename(obj: Mapping[str, Any], resource: Resource) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name") or resource.name
    parts = [obj["kind"], meta.get("namespace"), name]
    return ".".join(slug(str(p)) for p in parts if p) + ".yaml"


def release_name(resource: Resource) -> str:
    return str(resource.inputs.get("name") or resource.name)


def helm_chart(resource: Resource) -> str:
    chart = str(resource.inputs.get("chart", ""))
    return chart.rstrip("/").rsplit("/", 1)[-1]
