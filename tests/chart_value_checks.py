"""Helm value key paths against the pinned chart's values.yaml (../shared/reference/chart-values), for the
fidelity tests: `helm_key_errors` says which keys we set that the chart does not have (Helm silently
ignores them; no operator chart ships a values schema), `chart_values` reads a chart's defaults with its
subcharts' and the blocks its values.yaml documents in comments."""

from __future__ import annotations

import copy
import functools
import pickle
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from core import pins
from tests.schema_checks import load_yaml

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
