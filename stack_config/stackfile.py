"""Reading a stack file (`Pulumi.<stack>.yaml`) as strictly as the Pulumi CLI does, with errors a user
can act on: each names the file, the line and the column. The CLI reads the file itself before the
program runs; this reader is the offline render's (`offline.engine.stack_file_config`).

Refused, one line each: YAML that does not parse, a tab in the indentation (YAML allows spaces only),
a key given twice in one mapping (Pulumi's YAML reader refuses duplicates too; PyYAML would keep the
last one silently), a document or `config:` that is not a mapping, a `!!binary` value that is not text.

Values are typed as the CLI types them (stack_config.goyaml: gopkg.in/yaml.v3's rules, not PyYAML's YAML
1.1): `yes`, `no`, `on`, `off` stay strings, `0x10` is 16, and a date is the text Go's time.Time writes
("2026-01-01 00:00:00 +0000 UTC"). A key without a namespace is the project's (`ibPool:` is
`aks-infiniband:ibPool:`), as the CLI reads it. Refused as the CLI refuses them: `.inf` and `.nan`,
an explicit tag its value does not fit (`!!bool yes`). Refused although the CLI takes them, since it
would drop or pick a setting silently: a second document, a null key, one key in two spellings.
e2e/tests/test_stack_file.py holds this reader to the CLI's own loaders.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from stack_config import goyaml
from stack_config.schema import PROJECT

# libyaml when available: the test suite reads the stack files for each of its hundreds of renders.
_BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class StackFileError(ValueError):
    """A stack file that cannot be read; the message is one line: `file:line:column: what and the fix`."""


class _StrictLoader(_BASE):  # type: ignore[misc, valid-type]
    """A safe loader that refuses a key given twice in one mapping, with yaml.v3's scalar types."""

    def resolve(self, kind, value, implicit):  # noqa: ANN001 (PyYAML's signature)
        if kind is yaml.ScalarNode and implicit[0]:  # a plain scalar: typed by goyaml
            return _MERGE if value == "<<" else _PLAIN
        if kind is yaml.ScalarNode:
            return goyaml.STR  # quoted
        return super().resolve(kind, value, implicit)


_PLAIN = "tag:aks-infiniband,plain"
_MERGE = "tag:yaml.org,2002:merge"


def _scalar(tag: str):
    def construct(loader: _StrictLoader, node: yaml.ScalarNode) -> Any:
        try:
            value = goyaml.resolve("" if tag == _PLAIN else tag, loader.construct_scalar(node))
        except goyaml.CannotDecode as e:
            raise yaml.MarkedYAMLError(problem=f"{e} (as the Pulumi CLI refuses it): drop the tag, or write a "
                                               f"value it fits", problem_mark=node.start_mark) from None
        if isinstance(value, float) and not math.isfinite(value):
            raise yaml.MarkedYAMLError(problem=f"`{node.value}` is not a number JSON can hold, and the Pulumi CLI "
                                               f"refuses it: write a finite number, or quote it for text",
                                       problem_mark=node.start_mark)
        return value
    return construct


for _tag in (_PLAIN, goyaml.STR, goyaml.BOOL, goyaml.INT, goyaml.FLOAT, goyaml.NULL, goyaml.TIMESTAMP):
    _StrictLoader.add_constructor(_tag, _scalar(_tag))


def _binary_text(loader: _StrictLoader, node: yaml.ScalarNode) -> str:
    raw = loader.construct_yaml_binary(node)
    try:
        return raw.decode("utf-8")  # yaml.v3 decodes !!binary into a string
    except UnicodeDecodeError:
        raise yaml.MarkedYAMLError(problem="a !!binary value that is not UTF-8 text; a config value is text: "
                                           "write it as a plain string", problem_mark=node.start_mark) from None


def _other_tag(loader: _StrictLoader, node: yaml.Node) -> Any:
    """A tag yaml.v3 does not know (`!foo x`): it keeps the value as written (a scalar's text)."""
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return _mapping(loader, node)


def _mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[str, yaml.Node] = {}
    for key_node, _ in node.value:  # yaml.v3 compares the keys' text, before any merge (`<<`)
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE:
            continue
        if key_node.value in seen:
            first = seen[key_node.value].start_mark
            raise yaml.MarkedYAMLError(
                problem=f"the key {key_node.value!r} is given twice (first on line {first.line + 1}); Pulumi "
                        f"refuses duplicate keys: keep one", problem_mark=key_node.start_mark)
        seen[key_node.value] = key_node
    loader.flatten_mapping(node)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor("tag:yaml.org,2002:binary", _binary_text)
_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_StrictLoader.add_constructor(None, _other_tag)


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
    out: dict[str, Any] = {}
    for key, value in config.items():
        line, column = _key_mark(text, key) if not _is_key(key) else (0, 0)
        if not isinstance(key, str):
            raise StackFileError(f"{_where(name, line, column)}: the key {key!r} is a {_type(key)}; a config key is "
                                 f"a namespace and a name, e.g. aks-infiniband:ibPool or azure-native:location")
        if not _is_key(key):
            raise StackFileError(f"{_where(name, line, column)}: the key {key!r} is not <namespace>:<name>, and the "
                                 f"Pulumi CLI refuses the file for it: write "
                                 f"{PROJECT}:{key.rsplit(':', 1)[-1]} (or azure-native:location)")
        full = _full_key(key)
        if full in out:
            line, column = _key_mark(text, key)
            raise StackFileError(f"{_where(name, line, column)}: the key {key!r} is {full}, which the file sets "
                                 f"already; the Pulumi CLI would keep one of the two by chance: keep one")
        out[full] = goyaml.go_values(value)
    return out


def _is_key(key: Any) -> bool:
    """What the CLI reads as a key (loaders.go, config.ParseKey): a name alone (the project's key),
    `<namespace>:<name>`, or `<namespace>:config:<name>`. Not a key that is not text or is empty: the
    CLI refuses a number or boolean, and drops a null or keeps "" where nothing reads them."""
    return isinstance(key, str) and key != "" and (
        key.count(":") <= 1 or (key.count(":") == 2 and key.split(":")[1] == "config"))


def _full_key(key: str) -> str:
    if ":" not in key:
        return f"{PROJECT}:{key}"  # the CLI namespaces a bare name with the project's
    namespace, *_, short = key.split(":")  # `ns:config:name` is the CLI's old spelling of `ns:name`
    return f"{namespace}:{short}"


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
