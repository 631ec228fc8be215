"""Documents generated from the schema: Pulumi.yaml's `config:` block and the key table of
docs/configuration.md (`make golden` writes them: offline/docblocks.py; tests keep them in sync)."""

from __future__ import annotations

import json
from typing import Any

from stack_config.engine import Key
from stack_config.schema import LOCATION_KEY, SCHEMA


def _default_text(key: Key) -> str:
    if key.default_doc:
        return key.default_doc
    if key.fields or key.entries:
        return "see fields"
    if key.required:
        return "required"
    return json.dumps(key.default) if key.default is not None else "-"


PULUMI_YAML_HEAD = """\
# The project. Every key of the `aks-infiniband:` namespace is declared below with its type and a
# description; defaults and checks live in stack_config/schema.py (one place), which generates this file:
#   make golden           (python -m offline docs; a test keeps the two in sync)
# `type: object` needs Pulumi CLI >= 3.187. `azure-native:location` belongs to the provider's
# namespace, so it is set in each stack file and not declared here.
name: aks-infiniband
description: >-
  AKS with InfiniBand RDMA from inside pods (Network Operator, GPU Operator, NFD, Volcano),
  proven by an NCCL all-reduce.
runtime:
  name: python
  options:
    toolchain: pip
    virtualenv: .venv
"""


def pulumi_yaml() -> str:
    import yaml

    return PULUMI_YAML_HEAD + yaml.safe_dump({"config": pulumi_yaml_config()}, sort_keys=False, width=100)


def _pulumi_default(key: Key) -> Any:
    """What Pulumi.yaml declares as a key's default. The CLI refuses a stack that leaves a project
    key without a default unset, so every optional key has one: the value itself for scalars, `{}`
    for objects (their fields fall back one by one here), and "" for names derived from the stack."""
    if key.type == "object":
        return {}
    return "" if key.default is None else key.default


def pulumi_yaml_config() -> dict[str, Any]:
    """The `config:` block of Pulumi.yaml: every key of the project namespace, type, description and
    (for every key but the required ones) a default."""
    block: dict[str, Any] = {}
    for key in SCHEMA:
        desc = key.description
        if key.fields:
            desc += " Fields: " + "; ".join(f"{f.name} ({f.type}, {_default_text(f)})" for f in key.fields) + "."
        if key.entries:
            desc += " Each entry: " + "; ".join(f"{f.name} ({f.type}, {_default_text(f)})" for f in key.entries) + "."
        block[key.name] = {"type": key.type, "description": desc}
        if not key.required:
            block[key.name]["default"] = _pulumi_default(key)
    return block


def markdown_table() -> str:
    rows = ["| key | type | default | what it does |", "|---|---|---|---|",
            f"| `{LOCATION_KEY}` | string | required | Azure region of every resource: its programmatic name "
            f"(eastus), checked against stack_config/regions.py. |"]
    for key in SCHEMA:
        rows.append(f"| `{key.name}` | {key.type} | {_default_text(key)} | {key.description} |")
        for f in key.fields:
            rows.append(f"| `{key.name}.{f.name}` | {f.type} | `{_default_text(f)}` | {f.description} |")
        for f in key.entries:  # a map keyed by name: each entry's fields, and theirs
            rows.append(f"| `{key.name}.<name>.{f.name}` | {f.type} | `{_default_text(f)}` | {f.description} |")
            rows += [f"| `{key.name}.<name>.{f.name}.{g.name}` | {g.type} | `{_default_text(g)}` | {g.description} |"
                     for g in f.fields]
    return "\n".join(rows) + "\n"


TABLE_START, TABLE_END = "<!-- generated:config-table.md start -->\n", "<!-- generated:config-table.md end -->\n"
DOC = "docs/configuration.md"  # where the key table is shown
