"""Reading a stack file (`Pulumi.<stack>.yaml`) as strictly as the Pulumi CLI does, with errors a user
can act on: each names the file, the line and the column. The CLI reads the file itself before the
program runs; this reader is the offline render's (`offline.engine.stack_file_config`).

Refused, one line each: YAML that does not parse, a tab in the indentation (YAML allows spaces only),
a key given twice in one mapping (Pulumi's YAML reader refuses duplicates too; PyYAML would keep the
last one silently), a document or `config:` that is not a mapping, a `!!binary` value that is not text.

Scalars are typed as Go's gopkg.in/yaml.v3 (the CLI's YAML library) types them into an untyped value, not
as PyYAML's YAML 1.1 does: `yes`, `no`, `on`, `off` (any case) stay strings (only true/false are
booleans), and a date or timestamp stays the string it was written as (yaml.v3 keeps timestamps as
strings for an interface{} target: decode.go). So `created: 2026-01-01` in a tag is the tag's text, and
`schedule: off` is `off`, as on the CLI. (The real CLI could not be run here: docs/real-control-plane.md.)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

# libyaml when available: the test suite reads the stack files for each of its hundreds of renders.
_BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class StackFileError(ValueError):
    """A stack file that cannot be read; the message is one line: `file:line:column: what and the fix`."""


class _StrictLoader(_BASE):  # type: ignore[misc, valid-type]
    """A safe loader that refuses a key given twice in one mapping, with yaml.v3's scalar types."""


# YAML 1.1's yes/no/on/off booleans and its timestamps are not yaml.v3's: those implicit resolvers go, and
# booleans are true/false only (YAML 1.2's core schema, which yaml.v3 follows for an untyped value).
_DROPPED = ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:bool")
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _DROPPED]
    for first, resolvers in _BASE.yaml_implicit_resolvers.items()}
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                    list("tTfF"))


def _timestamp_text(loader: _StrictLoader, node: yaml.ScalarNode) -> str:
    return loader.construct_scalar(node)  # an explicit !!timestamp: its text, as yaml.v3 keeps it


def _binary_text(loader: _StrictLoader, node: yaml.ScalarNode) -> str:
    raw = loader.construct_yaml_binary(node)
    try:
        return raw.decode("utf-8")  # yaml.v3 decodes !!binary into a string
    except UnicodeDecodeError:
        raise yaml.MarkedYAMLError(problem="a !!binary value that is not UTF-8 text; a config value is text: "
                                           "write it as a plain string", problem_mark=node.start_mark) from None


_StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_text)
_StrictLoader.add_constructor("tag:yaml.org,2002:binary", _binary_text)


def _mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            first = seen[key].start_mark
            raise yaml.MarkedYAMLError(
                problem=f"the key {key!r} is given twice (first on line {first.line + 1}); Pulumi refuses "
                        f"duplicate keys: keep one", problem_mark=key_node.start_mark)
        seen[key] = key_node
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _where(name: str, line: int, column: int) -> str:
    return f"{name}:{line}:{column}"


def parse(text: str, name: str) -> dict[str, Any]:
    """The `config:` map of a stack file's text; `name` is how messages name the file."""
    for number, line in enumerate(text.splitlines(), start=1):
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if "\t" in indent:
            raise StackFileError(f"{_where(name, number, indent.index(chr(9)) + 1)}: a tab in the indentation; "
                                 f"YAML indents with spaces only: replace the tab with spaces")
    try:
        doc = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a safe loader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        what = e.problem or "not valid YAML"
        if e.context:  # e.g. "while parsing a flow mapping": say where that began
            at = e.context_mark
            what = f"{e.context}" + (f" (begun at line {at.line + 1}, column {at.column + 1})" if at else "") + \
                f": {what}"
        if "mapping values are not allowed" in what:  # libyaml's and PyYAML's wording differ after this
            what += " (a line indented deeper than the one before it, or an unquoted ': ' inside a value)"
        where = _where(name, mark.line + 1, mark.column + 1) if mark else name
        raise StackFileError(f"{where}: {what}") from None
    except yaml.YAMLError as e:
        raise StackFileError(f"{name}: not valid YAML: {e}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise StackFileError(f"{_where(name, 1, 1)}: the file holds a {_type(doc)}; a stack file is a mapping "
                             f"with a `config:` key")
    config = doc.get("config")
    if config is None:
        return {}
    if not isinstance(config, dict):
        line = next((n for n, text_line in enumerate(text.splitlines(), start=1)
                     if text_line.startswith("config:")), 1)
        raise StackFileError(f"{_where(name, line, 1)}: config: got a {_type(config)}; expected a mapping of "
                             f"key: value lines, e.g. `config:` then `  azure-native:location: eastus` "
                             f"(no leading `- `)")
    for key in config:
        if not isinstance(key, str):
            line, column = _key_mark(text, key)
            raise StackFileError(f"{_where(name, line, column)}: the key {key!r} is a {_type(key)}; a config key is "
                                 f"a namespace and a name, e.g. aks-infiniband:ibPool or azure-native:location")
    return dict(config)


def _key_mark(text: str, key: Any) -> tuple[int, int]:
    """Line and column (1-based) of `key` among the `config:` mapping's keys."""
    root = yaml.compose(text, Loader=_StrictLoader)
    for k, v in root.value:
        if k.value == "config":
            for key_node, _ in v.value:
                if yaml.load(yaml.serialize(key_node), Loader=_StrictLoader) == key:  # noqa: S506 (a safe loader)
                    return key_node.start_mark.line + 1, key_node.start_mark.column + 1
    return 1, 1


def read(path: Path) -> dict[str, Any]:
    """The `config:` map of the stack file at `path`, as typed YAML values."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise StackFileError(f"{path.name}: not UTF-8 text (byte {e.start}): save it as UTF-8") from None
    return parse(text, path.name)


_TYPE_NAMES = {list: "list", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def _type(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)
