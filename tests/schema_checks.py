"""Checks against the upstream facts in ../shared/reference, shared by the fidelity tests (and the
fabric test job's tests: `crd_errors`, `core_errors`).

Mocks accept anything; a cluster does not. These helpers answer, offline, the three questions a
real apply would answer an hour into a deployment:

- `custom_resource_errors`: does a custom resource pass its CRD's openAPIV3Schema? Strict: a field
  the schema does not declare is an error (the API server would silently prune it).
- `helm_key_errors`: does every Helm value key path we set exist in the pinned chart's values.yaml?
  (Helm silently ignores a key that does not exist; no operator chart ships a values schema.)
- `kubernetes_errors`: does a core object pass the Kubernetes schema of the cluster's version?

Each returns a list of human-readable problems (empty: fine), so a test can both assert "no
problems" and prove that a deliberate mistake is caught.
"""

from __future__ import annotations

import copy
import functools
import json
import pickle
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate.utils as kv_utils
import referencing
import yaml

import stack_config
from core import pins

KUBERNETES_VERSION = stack_config.DEFAULT_KUBERNETES_VERSION
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available: the CRDs are large


def load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 (a safe loader)


def load_yaml_all(text: str) -> Iterator[Any]:
    """The documents of `text`, each caller getting its own copy: a text is parsed once per session
    (several tests read Volcano's 1 MB manifest; a copy costs a tenth of a parse)."""
    return iter(pickle.loads(_parsed_all(text)))


@functools.lru_cache(maxsize=128)
def _parsed_all(text: str) -> bytes:
    return pickle.dumps(list(yaml.load_all(text, Loader=_LOADER)))  # noqa: S506 (a safe loader)


def as_api(value: Any) -> Any:
    """Rendered inputs travel as protobuf Structs, where every number is a double: 3 -> 3.0.
    Turn whole floats back into the integers the program wrote."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: as_api(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_api(v) for v in value]
    return value


# --------------------------------------------------------------------------------------------
# (a) custom resources against their CRD's openAPIV3Schema
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Crd:
    group: str
    version: str
    kind: str
    scope: str  # "Cluster" | "Namespaced"
    served: bool
    schema: dict[str, Any]  # the openAPIV3Schema, as published
    source: str  # file name in reference/crds

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


def _crds_in(path: Path) -> dict[tuple[str, str], Crd]:
    """The CRDs of one file, read once per session (the checks only read them)."""
    return _crds_of_file(str(path))


@functools.cache
def _crds_of_file(path: str) -> dict[tuple[str, str], Crd]:
    return crds_from(load_yaml_all(Path(path).read_text()), Path(path).name)


def crds_from(documents: Iterator[Any] | list[Any], source: str) -> dict[tuple[str, str], Crd]:
    """Every CRD version among `documents` (e.g. the CRDs a chart installs), keyed by (apiVersion, kind)."""
    found: dict[tuple[str, str], Crd] = {}
    for doc in documents:
        if not doc or doc.get("kind") != "CustomResourceDefinition":
            continue
        spec = doc["spec"]
        for v in spec["versions"]:
            crd = Crd(
                group=spec["group"],
                version=v["name"],
                kind=spec["names"]["kind"],
                scope=spec["scope"],
                served=bool(v.get("served")),
                schema=v["schema"]["openAPIV3Schema"],
                source=source,
            )
            found[(crd.api_version, crd.kind)] = crd
    return found


def load_crds(reference: Path) -> dict[tuple[str, str], Crd]:
    """A copy of every CRD version in reference/crds (read once per session: `_load_crds`)"""
    return dict(_load_crds(reference))


@functools.cache
def _load_crds(reference: Path) -> dict[tuple[str, str], Crd]:
    """Every CRD version in reference/crds, keyed by (apiVersion, kind). Where the folder holds one
    CRD file at several releases (`<name>.v<version>.yaml`), the one of the release the pin table
    renders (pins.Component.reference_version) is read, never whichever sorts last."""
    pinned = {f"v{c.reference_version.removeprefix('v')}" for c in pins.COMPONENTS}
    by_name: dict[str, list[Path]] = {}
    for path in sorted((reference / "crds").glob("*.yaml")):
        by_name.setdefault(re.sub(r"\.v[0-9][^/]*\.yaml$", "", path.name), []).append(path)
    crds: dict[tuple[str, str], Crd] = {}
    for name, paths in by_name.items():
        chosen = paths if len(paths) == 1 else [p for p in paths if p.name.removeprefix(name + ".")[:-5] in pinned]
        if len(chosen) != 1:
            raise LookupError(f"reference/crds has {', '.join(p.name for p in paths)}: none or several of the "
                              f"pinned releases ({', '.join(sorted(pinned))})")
        crds.update(_crds_in(chosen[0]))
    return crds


def openapi_to_jsonschema(node: Any, strict: bool = True) -> Any:
    """A Kubernetes structural schema as a JSON Schema that `jsonschema` evaluates like the API server:

    - `x-kubernetes-int-or-string: true` accepts an integer or a string;
    - `nullable: true` also accepts null;
    - `x-kubernetes-preserve-unknown-fields: true` keeps the subtree open;
    - with `strict`, an object that declares `properties` rejects any other field (the API server
      would prune it silently, so the field would never reach the operator);
    - `x-kubernetes-validations` (CEL) cannot be evaluated here and are dropped. The pinned CRDs
      use them only as transition rules (`self == oldSelf`, immutability after creation), which
      mean nothing on a first apply; `cel_rules` lists them so a test keeps that true.
    """
    if isinstance(node, list):
        return [openapi_to_jsonschema(n, strict) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key == "nullable":
            continue
        if key in ("properties", "patternProperties", "definitions", "$defs"):
            out[key] = {k: openapi_to_jsonschema(v, strict) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not", "allOf", "anyOf", "oneOf"):
            out[key] = openapi_to_jsonschema(value, strict)
        else:
            out[key] = copy.deepcopy(value)
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out = {"anyOf": [{"type": "integer"}, {"type": "string"}], **out}
    if node.get("nullable") and "type" in out:
        types = out["type"] if isinstance(out["type"], list) else [out["type"]]
        out["type"] = [*types, "null"]
    preserve = node.get("x-kubernetes-preserve-unknown-fields")
    if strict and "properties" in node and "additionalProperties" not in node and not preserve:
        out["additionalProperties"] = False
    return out


def cel_rules(node: Any, path: str = "") -> list[tuple[str, str]]:
    """(path, rule) of every x-kubernetes-validations rule in a schema."""
    found: list[tuple[str, str]] = []
    if isinstance(node, dict):
        for rule in node.get("x-kubernetes-validations", []) or []:
            found.append((path or "/", rule.get("rule", "")))
        for key, value in node.items():
            if key != "x-kubernetes-validations":
                found.extend(cel_rules(value, f"{path}/{key}"))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found.extend(cel_rules(value, f"{path}/{i}"))
    return found


_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def json_schema_errors(instance: Any, schema: Mapping[str, Any]) -> list[str]:
    """Every violation of `schema` by `instance`, one line each with its JSON path."""
    return _violations(_validator(schema), instance)


def _validator(schema: Mapping[str, Any]) -> jsonschema.protocols.Validator:
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)


def _violations(validator: jsonschema.protocols.Validator, instance: Any) -> list[str]:
    return sorted(f"{e.json_path}: {e.message}" for e in validator.iter_errors(instance))


def custom_resource_errors(obj: Mapping[str, Any], crds: Mapping[tuple[str, str], Crd]) -> list[str]:
    """Problems of one custom resource (apiVersion, kind, metadata, spec) against its CRD."""
    obj = as_api(obj)
    key = (obj.get("apiVersion"), obj.get("kind"))
    crd = crds.get(key)  # type: ignore[arg-type]
    if crd is None:
        known = sorted(f"{a} {k}" for a, k in crds)
        return [f"no CRD for {key[0]} {key[1]} in reference/crds (known: {', '.join(known)})"]
    problems: list[str] = []
    if not crd.served:
        problems.append(f"{crd.api_version} {crd.kind} is not served by {crd.source}")
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not isinstance(name, str) or len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name):
        problems.append(f"metadata.name: {name!r} is not a DNS-1123 subdomain")
    if crd.scope == "Cluster" and meta.get("namespace"):
        problems.append(f"metadata.namespace: {crd.kind} is cluster-scoped; got namespace {meta['namespace']!r}")
    if crd.scope == "Namespaced" and not meta.get("namespace"):
        problems.append(f"metadata.namespace: {crd.kind} is namespaced; none set (it would land in `default`)")
    problems.extend(_violations(_crd_validator(crd), obj))
    return problems


# The strict JSON Schema validator of each CRD checked, built once per session (by the Crd's identity; the
# Crd is kept beside it, so its id is not reused).
_CRD_VALIDATORS: dict[int, tuple[Crd, jsonschema.protocols.Validator]] = {}


def _crd_validator(crd: Crd) -> jsonschema.protocols.Validator:
    if id(crd) not in _CRD_VALIDATORS:
        schema = openapi_to_jsonschema(crd.schema)
        schema.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
        _CRD_VALIDATORS[id(crd)] = (crd, _validator(schema))
    return _CRD_VALIDATORS[id(crd)][1]


# --------------------------------------------------------------------------------------------
# (b) Helm value key paths against the pinned chart's values.yaml
# --------------------------------------------------------------------------------------------

# Subcharts whose values a parent chart passes through under the subchart's name:
# chart -> {key: values file in reference/chart-values ({version}: the parent's tag)}.
SUBCHARTS: dict[str, dict[str, str]] = {
    "network-operator": {"node-feature-discovery": "network-operator.nfd-subchart.values.{version}.yaml"},
    # gpu-operator's Chart.yaml depends on node-feature-discovery 0.19.0.
    "gpu-operator": {"node-feature-discovery": "node-feature-discovery.values.v0.19.0.yaml"},
}

_START = re.compile(r"###\s*<([A-Z-]+)-CONF-START-DO-NOT-REMOVE>")
_KEY_LINE = re.compile(r"^(\s*)([A-Za-z0-9_.-]+):")


def _tag(version: str) -> str:
    return version if version.startswith("v") else f"v{version}"


def values_file(reference: Path, chart: str, version: str) -> Path:
    """reference/chart-values/<chart>.values.v<version>.yaml of the package rendered for `version`
    (pins.reference_version: the closest packaged release where the final's is not obtainable);
    a clear error when absent."""
    version = pins.reference_version(chart, version)
    path = reference / "chart-values" / f"{chart}.values.{_tag(version)}.yaml"
    if not path.exists():
        have = sorted(p.name for p in (reference / "chart-values").glob(f"{chart}.values.*.yaml"))
        raise FileNotFoundError(
            f"no values.yaml for {chart} {version} in {path.parent} (have: {', '.join(have) or 'none'}); "
            f"add the pinned chart's values.yaml to the reference material"
        )
    return path


def documented_blocks(text: str) -> dict[str, Any]:
    """Free-form values whose keys the chart documents in a commented-out block, e.g. NFD's
    `worker.config: ### <NFD-WORKER-CONF-START-DO-NOT-REMOVE>` ... `### <...-END-...>`:
    key path -> the block, uncommented and parsed. A block that does not parse is left out (its
    subtree stays free-form)."""
    lines = text.splitlines()
    blocks: dict[str, Any] = {}
    stack: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        m = _KEY_LINE.match(line)
        if m and not line.lstrip().startswith("#"):
            indent = len(m.group(1))
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, m.group(2)))
        start = _START.search(line)
        if not (m and start):
            continue
        end_marker = f"<{start.group(1)}-CONF-END-DO-NOT-REMOVE>"
        body = []
        for later in lines[i + 1:]:
            if end_marker in later:
                break
            body.append(later)
        indents = [len(b) - len(b.lstrip()) for b in body if b.strip()]
        cut = min(indents) if indents else 0
        uncommented = [b[cut:][1:] if b[cut:].startswith("#") else b[cut:] for b in body]
        try:
            blocks[".".join(k for _, k in stack)] = load_yaml("\n".join(uncommented)) or {}
        except yaml.YAMLError:
            continue  # an example that is not YAML (NFD's topologyUpdater block): stays free-form
    return blocks


@dataclass(frozen=True)
class ChartValues:
    chart: str
    version: str
    defaults: dict[str, Any]  # values.yaml, with subcharts' values.yaml under their keys
    documented: dict[str, Any]  # key path -> documented block of a free-form value (documented_blocks)
    sources: tuple[str, ...]


def chart_values(reference: Path, chart: str, version: str) -> ChartValues:
    """The pinned chart's default values (and its subcharts'), read from reference/chart-values; each
    call gets its own copy of what is read once per session."""
    return pickle.loads(_chart_values(reference, chart, version))


@functools.cache
def _chart_values(reference: Path, chart: str, version: str) -> bytes:
    return pickle.dumps(_read_chart_values(reference, chart, version))


def _read_chart_values(reference: Path, chart: str, version: str) -> ChartValues:
    path = values_file(reference, chart, version)
    text = path.read_text()
    defaults = load_yaml(text) or {}
    documented = documented_blocks(text)
    sources = [path.name]
    for key, pattern in SUBCHARTS.get(chart, {}).items():
        sub_path = reference / "chart-values" / pattern.format(version=_tag(pins.reference_version(chart, version)))
        if not sub_path.exists():
            # stricter, not looser: the subchart's keys are then checked against the parent's
            # overrides alone (the 24.7.1 legacy file, kept only to show removed keys, has none)
            continue
        sub_text = sub_path.read_text()
        # the parent's overrides of the subchart's defaults win, as in Helm
        defaults[key] = _merge(load_yaml(sub_text) or {}, defaults.get(key) or {})
        documented.update({f"{key}.{p}": block for p, block in documented_blocks(sub_text).items()})
        sources.append(sub_path.name)
    return ChartValues(chart, version, defaults, documented, tuple(sources))


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(out.get(k), dict) and isinstance(v, Mapping) else copy.deepcopy(v)
    return out


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, list):
        return "list"
    return "null"


def helm_key_errors(values: Mapping[str, Any], chart: ChartValues) -> list[str]:
    """Every key path of `values` that the pinned chart does not have, or whose kind differs.

    The rule, walking the values we set alongside the chart's values.yaml:
    - a default that is a non-empty mapping: every key we set must exist in it (recurse);
    - a default that is an empty mapping `{}` or null: free-form (the chart passes the subtree
      through, e.g. `nodeSelector: {}`, `resources: {}`) - unless the chart documents the keys of
      that subtree in a commented-out block (NFD's `worker.config`): then keys are checked
      against that block the same way;
    - a default that is a list: ours must be a list; it replaces the default wholesale (Helm does
      not merge lists), and its items are checked by schemas, not here;
    - a default scalar: ours must be a scalar of the same kind (a string "false" where the chart
      has a boolean is truthy in a template). A null default takes anything.
    """
    problems: list[str] = []
    where = " + ".join(chart.sources)

    def walk(ours: Any, theirs: Any, path: str, documented: bool) -> None:
        if (theirs is None or (isinstance(theirs, Mapping) and not theirs)) and not documented:
            if path in chart.documented:
                walk(ours, chart.documented[path], path, True)
            return  # free-form
        if theirs is None or (isinstance(theirs, Mapping) and not theirs):
            return  # free-form inside a documented block
        if isinstance(theirs, Mapping):
            if not isinstance(ours, Mapping):
                problems.append(f"{path}: the chart has a mapping here; got {_kind(ours)} {ours!r} ({where})")
                return
            for key, value in ours.items():
                sub = f"{path}.{key}" if path else str(key)
                if key not in theirs:
                    known = ", ".join(sorted(map(str, theirs)))
                    problems.append(
                        f"{sub}: no such key in {chart.chart} {chart.version} ({where}); "
                        f"{path or 'the top level'} has: {known}"
                    )
                    continue
                walk(value, theirs[key], sub, documented)
            return
        if isinstance(theirs, list):
            if not isinstance(ours, list):
                problems.append(f"{path}: the chart has a list here; got {_kind(ours)} {ours!r} ({where})")
            return
        if _kind(ours) != _kind(theirs):
            problems.append(f"{path}: the chart has a {_kind(theirs)} here ({theirs!r}); got {_kind(ours)} {ours!r}")

    walk(values, chart.defaults, "", False)
    return problems


def key_paths(values: Any, prefix: str = "") -> list[str]:
    """Every leaf key path of a nested mapping (lists and scalars are leaves)."""
    if isinstance(values, Mapping) and values:
        out: list[str] = []
        for k, v in values.items():
            out.extend(key_paths(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return [prefix]


# --------------------------------------------------------------------------------------------
# (c) core Kubernetes objects against the Kubernetes schema of the cluster's version
# --------------------------------------------------------------------------------------------


@functools.cache  # kubernetes-validate lists its versions from its package files on every call
def schema_version_for(kubernetes_version: str) -> str:
    """The kubernetes-validate schema version for a cluster version: the same minor when shipped,
    else the nearest shipped minor (kubernetes-validate 1.37.0 ships 1.32 to 1.37)."""
    wanted = tuple(int(x) for x in kubernetes_version.split(".")[:2])
    shipped = {tuple(int(x) for x in v.split(".")[:2]): v for v in kv_utils.all_versions()}
    best = min(shipped, key=lambda v: (abs(v[1] - wanted[1]) if v[0] == wanted[0] else 1000, v))
    return shipped[best]


@functools.cache
def _definitions(schema_dir: str) -> referencing.Registry:
    defs = kv_utils.schema_contents(f"kubernetes-json-schema/{schema_dir}/_definitions.json", schema_dir)
    return referencing.Resource.from_contents(defs) @ referencing.Registry()


@functools.cache
def _kubernetes_validator(schema_dir: str, kind: str, api_version: str) -> jsonschema.protocols.Validator | None:
    """kubernetes-validate's schema for one kind (what `kubernetes_validate.validate` loads on every
    call), built once. None when Kubernetes has no such kind (a custom resource)."""
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = kv_utils.schema_contents(
            f"kubernetes-json-schema/{schema_dir}/{kind.lower()}-{group_version}.json", schema_dir
        )
    except FileNotFoundError:
        return None
    registry = referencing.Resource.from_contents(schema) @ _definitions(schema_dir)
    return jsonschema.Draft202012Validator(schema, registry=registry)


def has_kubernetes_schema(api_version: str, kind: str, kubernetes_version: str = KUBERNETES_VERSION) -> bool:
    """Whether Kubernetes itself serves this kind at that version (else it is a custom resource)."""
    schema_dir = f"v{schema_version_for(kubernetes_version)}-local"
    return _kubernetes_validator(schema_dir, kind, api_version) is not None


def kubernetes_errors(obj: Mapping[str, Any], kubernetes_version: str = KUBERNETES_VERSION,
                      strict: bool = True) -> list[str]:
    """Problems of one core object against the Kubernetes OpenAPI schema of that version (the
    schemas kubernetes-validate ships); strict rejects fields the schema does not declare."""
    schema_dir = f"v{schema_version_for(kubernetes_version)}-local" + ("-strict" if strict else "")
    obj = as_api(json.loads(json.dumps(obj)))
    validator = _kubernetes_validator(schema_dir, str(obj.get("kind")), str(obj.get("apiVersion")))
    if validator is None:
        return [f"no Kubernetes {kubernetes_version} schema for {obj.get('apiVersion')} {obj.get('kind')}"]
    return sorted(f"{e.json_path}: {e.message}" for e in validator.iter_errors(obj))


# --------------------------------------------------------------------------------------------
# Short forms for one CRD file and the default version (used by the fabric test job's tests)
# --------------------------------------------------------------------------------------------


def crd_schema(crd_path: Path, kind: str, version: str) -> dict[str, Any]:
    """The strict JSON Schema of `kind` at `version` from one CRD file (which may hold several)."""
    for (_, k), crd in _crds_in(crd_path).items():
        if k == kind and crd.version == version:
            return openapi_to_jsonschema(crd.schema)
    raise LookupError(f"no CRD for {kind} {version} in {crd_path}")


def crd_errors(obj: Mapping[str, Any], crd_path: Path) -> list[str]:
    """Every problem of a custom resource against the CRD in one file, one line each."""
    crds = _crds_in(crd_path)
    if (obj.get("apiVersion"), obj.get("kind")) not in crds:
        raise LookupError(f"no CRD for {obj.get('kind')} {obj.get('apiVersion')} in {crd_path}")
    return custom_resource_errors(obj, crds)


def core_errors(obj: Mapping[str, Any]) -> list[str]:
    """Schema violations of a core object at the stack's default Kubernetes version (strict)."""
    return kubernetes_errors(obj, KUBERNETES_VERSION)


def pinned_name(stem: str, key: str, ext: str = "yaml") -> str:
    """`<stem>.v<version>.<ext>`: a reference file of the pinned component `key` at the version the
    offline checks read (pins.Component.reference_version), so no test names a pinned version."""
    return f"{stem}.v{pins.component(key).reference_version.removeprefix('v')}.{ext}"
