"""Checks against the upstream facts in ../shared/reference, shared by the fidelity tests (and the
fabric test job's tests: `crd_errors`, `core_errors`).

Mocks accept anything; a cluster does not. These helpers answer, offline, the three questions a
real apply would answer an hour into a deployment:

- `custom_resource_errors`: does a custom resource pass its CRD's openAPIV3Schema? Strict: a field
  the schema does not declare is an error (the API server would silently prune it).
- `helm_key_errors` (tests/chart_value_checks.py): does every Helm value key path we set exist in the
  pinned chart's values.yaml? (Helm silently ignores a key that does not exist.)
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
# (b) core Kubernetes objects against the Kubernetes schema of the cluster's version
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
