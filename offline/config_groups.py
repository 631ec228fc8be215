"""The objects of a `yaml.v2.ConfigGroup` given its content (`yaml`, `objs`), as the provider would
apply them: the offline render writes each one under `manifests/<group>/` (Volcano's checked release
manifest is such a group, components/platform/volcano.py), so the plan shows every object and a changed
upstream file shows as a diff. A ConfigFile (a path or URL read at deploy time) has no content
here and is left alone."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator
from typing import Any

import yaml

from components.platform.volcano import DOCUMENT_MARKER
from offline.engine import Resource
from offline.objects import normalize, to_yaml

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


def written(resource: Resource) -> list[tuple[dict[str, Any], str]]:
    """Each object of a ConfigGroup as the offline render writes it: (its apiVersion, kind and metadata;
    its YAML with those first), in its order; [] for any other resource. Read only: the parts come from a
    cache shared by every render of the same manifest."""
    if resource.type != CONFIG_GROUP:
        return []
    texts = resource.inputs.get("yaml") or []
    out = [w for text in ([texts] if isinstance(texts, str) else texts) for w in _written_text(text)]
    return out + [_written(obj) for obj in resource.inputs.get("objs") or []]


@functools.lru_cache(maxsize=8)
def _written_text(text: str) -> tuple[tuple[dict[str, Any], str], ...]:
    documents = DOCUMENT_MARKER.split(text)[::2]  # YAML's document marker lines between them
    return tuple(w for document in documents for w in _written_document(document))


# Volcano's manifest (1.2 MB) is in every render of a process, in two variants (with DRA and without)
# that share all but three documents, its CRDs (most of its bytes) among them: each document is parsed
# and written once.
@functools.lru_cache(maxsize=256)
def _written_document(document: str) -> tuple[tuple[dict[str, Any], str], ...]:
    return tuple(_written(obj) for obj in _objects({"yaml": document}))


def _written(obj: dict[str, Any]) -> tuple[dict[str, Any], str]:
    obj = normalize(obj)
    head = {k: obj.pop(k) for k in ("apiVersion", "kind", "metadata") if k in obj}
    return head, to_yaml({**head, **obj})


def as_index(files: dict[str, bytes], group_dirs: list[str]) -> dict[str, bytes]:
    """`files` with each ConfigGroup's folder of objects replaced by one index: the file name and the
    sha256 of each object. For the golden render (tests/golden): upstream's manifest (Volcano's
    release, 1.2 MB) is not copied into the repository, and any change to an object still shows."""
    out = {p: d for p, d in files.items() if not any(p.startswith(g) for g in group_dirs)}
    for g in group_dirs:
        lines = [f"{hashlib.sha256(d).hexdigest()}  {p[len(g):]}" for p, d in sorted(files.items()) if p.startswith(g)]
        out[g.rstrip("/") + ".index.txt"] = ("# the objects of this ConfigGroup as `make synth` writes them, by "
                                             "sha256 (tests/golden keeps no copy of upstream's manifest)\n"
                                             + "\n".join(lines) + "\n").encode()
    return dict(sorted(out.items()))


def group_dirs(files: dict[str, bytes]) -> list[str]:
    """The ConfigGroup folders under manifests/ (manifests/<group>/)."""
    return sorted({p.rsplit("/", 1)[0] + "/" for p in files if p.count("/") == 2 and p.startswith("manifests/")})
