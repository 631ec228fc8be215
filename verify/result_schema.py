"""The published JSON Schema of the fabric result (verify/result.py), generated from its classes:
`make golden` runs `python -m verify.result_schema > verify/schema/fabric-result.v1.json`, and
tests/unit/verify/test_fabric_result.py holds the file to it. One result per kind (`figures_of`), and
the error document. Not shipped to the certifier: nothing it runs imports this.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any

from core import kinds
from verify.result import (
    BY_FORMAT,
    COMMON_KEYS,
    JSON_TYPES,
    SCHEMA_ID,
    SCHEMA_VERSION,
    Collected,
    Doctor,
    FabricResult,
    KindFigures,
    field_types,
    figures_of,
)


def _schema_of(hint: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        (inner,) = [a for a in args if a is not type(None)]
        return {"anyOf": [_schema_of(inner, defs), {"type": "null"}]}
    if dataclasses.is_dataclass(hint):
        if hint.__name__ not in defs:
            defs[hint.__name__] = {}  # reserved first: a class may refer to itself through another
            defs[hint.__name__] = _object(hint, defs, closed=True)
        return {"$ref": f"#/$defs/{hint.__name__}"}
    if origin is tuple:
        return {"type": "array", "items": _schema_of(args[0], defs)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _schema_of(args[1], defs)}
    if hint is Any:
        return {}
    return {"type": JSON_TYPES[hint]}


def _property(hint: Any, f: dataclasses.Field, defs: dict[str, Any]) -> dict[str, Any]:
    prop = _schema_of(hint, defs)
    if "enum" in f.metadata:
        allowed = list(f.metadata["enum"])
        prop = ({"enum": [*allowed, None]} if typing.get_origin(hint) in (types.UnionType, typing.Union)
                else {"enum": allowed})
    return {"description": f.metadata["doc"], **prop} if "doc" in f.metadata else prop


def _object(cls: type, defs: dict[str, Any], *, closed: bool) -> dict[str, Any]:
    hints = field_types(cls)
    props = {f.name: _property(hints[f.name], f, defs) for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {"description": (cls.__doc__ or "").strip(), "type": "object", "properties": props}
    if closed:
        out |= {"required": list(props), "additionalProperties": False}
    return out


def json_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of the documents `to_json` writes: SCHEMA_PATH holds its output."""
    defs: dict[str, Any] = {}
    hints = field_types(FabricResult)
    top = {f.name: f for f in dataclasses.fields(FabricResult)}
    common = {name: _property(hints[name], top[name], defs) for name in ("kind", "verdict", "reasons", "sku", "nodes")}
    common["schemaVersion"] = {"description": "this schema's version", "const": SCHEMA_VERSION}
    for cls in (*(f.figures for f in BY_FORMAT.values()), Collected):
        defs[cls.__name__] = _object(cls, defs, closed=False)

    def group(cls: type, marker: str) -> dict[str, Any]:
        # present when its marker key is: then every one of its keys is
        return {"$ref": f"#/$defs/{cls.__name__}",
                "dependentRequired": {marker: [f.name for f in dataclasses.fields(cls) if f.name != marker]}}

    doctor = {"suspects": _property(hints["suspects"], top["suspects"], defs),
              "doctor": _property(Doctor, top["doctor"], defs)}

    def result(kind: str, f: KindFigures) -> dict[str, Any]:
        has_doctor = kinds.kind(kind).has_doctor  # its findings come as a pair: suspects with doctor
        return {
            "type": "object",
            "properties": {**common, "kind": {"const": kind}, **(doctor if has_doctor else {})},
            "required": list(COMMON_KEYS),
            "allOf": [group(f.figures, "max_size_bytes"), group(Collected, "job")],
            "unevaluatedProperties": False,
            "description": f"kind {kind}: a result of {kinds.kind(kind).test}",
        } | ({"dependentRequired": {"suspects": ["doctor"], "doctor": ["suspects"]}} if has_doctor else {})

    defs |= {name: result(name, figures_of(name)) for name in kinds.BY_NAME}
    defs["error"] = {
        "description": "no result: unreadable input, bad arguments, a timeout, a Kubernetes API error",
        "type": "object",
        "properties": {"schemaVersion": common["schemaVersion"], "verdict": {"type": "null"},
                       "error": _property(str, top["error"], defs)},
        "required": ["schemaVersion", "verdict", "error"],
        "additionalProperties": False,
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"aks-infiniband fabric-test result, schema version {SCHEMA_VERSION}",
        "description": "What `python -m verify report|collect --json` prints (docs/fabric-result.md).",
        "oneOf": [{"$ref": f"#/$defs/{name}"} for name in (*kinds.BY_NAME, "error")],
        "$defs": dict(sorted(defs.items())),
    }


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2) + "\n"


if __name__ == "__main__":  # python -m verify.result_schema > verify/schema/fabric-result.v1.json
    print(schema_text(), end="")
