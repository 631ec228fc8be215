"""The objects of a `yaml.v2.ConfigGroup` given its content (`yaml`, `objs`), as the provider would
apply them: the offline render writes each one under `manifests/<group>/` (Volcano's checked release
manifest is such a group, components/volcano.py), so the plan shows every object and a changed
upstream file shows as a diff. A ConfigFile (a path or URL read at deploy time) has no content
here and is left alone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

from offline.engine import Resource

CONFIG_GROUP = "kubernetes:yaml/v2:ConfigGroup"
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def objects(resource: Resource) -> list[dict[str, Any]]:
    """Every object of a ConfigGroup, in its order; [] for any other resource."""
    if resource.type != CONFIG_GROUP:
        return []
    return list(_objects(resource.inputs))


def _objects(inputs: dict[str, Any]) -> Iterator[dict[str, Any]]:
    texts = inputs.get("yaml") or []
    for text in [texts] if isinstance(texts, str) else texts:
        for doc in yaml.load_all(text, Loader=_Loader):
            if isinstance(doc, dict) and doc.get("kind", "").endswith("List") and "items" in doc:
                yield from doc["items"]
            elif isinstance(doc, dict):
                yield doc
    yield from inputs.get("objs") or []
