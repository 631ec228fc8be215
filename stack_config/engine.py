"""The schema engine: a declared key (`Key`), how a raw value becomes that key's type, and the
one-line-per-key problems. Knows nothing about this stack's keys (those are `schema.py`)."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.shown import shown as _shown

# A check returns None when the value is fine, else what is allowed ("an integer from 1 to 10").
Check = Callable[[Any], "str | None"]


class ConfigError(ValueError):
    """One or more configuration keys are invalid. `problems` holds one line per key."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass(frozen=True)
class Key:
    name: str
    type: str  # Pulumi config type: string | integer | boolean | object | array (a field's list of strings)
    description: str
    default: Any = None  # None with required=False means "no default: derived or off"
    check: Check | None = None
    required: bool = False
    fields: tuple[Key, ...] = ()  # for objects with a fixed set of fields
    default_doc: str | None = None  # how the default is described when it is derived
    # for a map keyed by name (ibPools): the fields of each entry, and the check of an entry's name
    entries: tuple[Key, ...] = ()
    entry_name: Check | None = None


# --- check combinators ------------------------------------------------------------------------
def int_range(lo: int, hi: int, note: str = "") -> Check:
    """An integer from lo to hi; `note` is added to what is allowed (e.g. when the low end needs another key)."""
    return lambda v: None if isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi else (
        f"an integer from {lo} to {hi}{note}"
    )


def regex(pattern: str, allowed: str) -> Check:
    rx = re.compile(pattern)
    return lambda v: None if isinstance(v, str) and rx.fullmatch(v) else allowed


def one_of(*choices: str) -> Check:
    return lambda v: None if v in choices else f"one of: {', '.join(choices)}"


def optional(check: Check) -> Check:
    return lambda v: None if v is None else check(v)


# --- reading ------------------------------------------------------------------------------------
_INTEGER = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"[0-9]+\.[0-9]+")


def unknown_key(path: str, name: str, known: list[str], takes: str) -> str:
    """The problem line for an unknown key: what it takes, and the closest known key when there is one."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6) or \
        [k for k in known if k.lower() == name.lower()]
    hint = f"did you mean {close[0]}? " if close else ""
    return f"{path}: unknown key; {hint}{takes}: {', '.join(known)}"


def shown(value: Any) -> str:
    """A value as a message shows it: strings quoted, everything else as JSON, a long one cut (core.shown)."""
    return _shown(value)


def coerce(key: Key, raw: Any, path: str, problems: list[str]) -> Any:
    """Turn a raw config value (strings from the CLI, or typed values from YAML) into the key's type."""
    if key.type == "integer":
        if isinstance(raw, bool):
            problems.append(f"{path}: got {shown(raw)}; expected an integer")
            return None
        if isinstance(raw, int):
            return raw
        # ASCII digits only: int() would also take "٢" or "２"
        if isinstance(raw, str) and _INTEGER.fullmatch(raw.strip()):
            return int(raw)
        if isinstance(raw, float) and raw.is_integer():
            return int(raw)
        problems.append(f"{path}: got {shown(raw)}; expected an integer")
        return None
    if key.type == "boolean":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.lower() in ("true", "false"):
            return raw.lower() == "true"
        problems.append(f"{path}: got {shown(raw)}; expected true or false")
        return None
    if key.type == "string":
        if isinstance(raw, str):
            return raw
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            example = f", e.g. {key.default!r}" if isinstance(key.default, str) else ""
            problems.append(f"{path}: got the number {shown(raw)}: YAML reads an unquoted value such as 26.10 or "
                            f"1.30 as a number (and drops trailing zeros); quote it{example}")
            return None
        problems.append(f"{path}: got {shown(raw)}; expected a string")
        return None
    if key.type == "array":
        value = raw
        if isinstance(raw, str):
            try:
                value = json.loads(raw)
            except json.JSONDecodeError:
                value = None
        if isinstance(value, list) and all(isinstance(x, str) for x in value):
            return value
        problems.append(f"{path}: got {shown(raw)}; expected a list of strings (a YAML sequence)")
        return None
    # object
    value = raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            problems.append(f"{path}: got {shown(raw)}; expected an object (a YAML mapping)")
            return None
    if not isinstance(value, dict):
        problems.append(f"{path}: got {shown(value)}; expected an object (a YAML mapping)")
        return None
    return value


def read(key: Key, raw: Any, path: str, problems: list[str]) -> Any:
    """Coerce, fill defaults, recurse into objects, and check. Returns the value (None on error)."""
    if raw == "" and key.default is None and not key.required and key.type == "string":
        raw = None  # Pulumi.yaml's default "" for a derived value (see docs.pulumi_yaml_config)
    if raw is None:
        if key.required:
            allowed = key.check(None) if key.check else None
            hint = f"; {allowed}" if allowed else ""
            problems.append(f"{path}: is required but not set{hint}")
            return None
        raw = key.default
        if raw is None and not key.fields:
            return None
    value = coerce(key, raw, path, problems) if raw is not None else {}
    if value is None:
        return None
    if key.entries:
        return read_entries(key, value, path, problems)
    if key.fields:
        if value:  # (an empty object has no unknown fields)
            known = sorted(f.name for f in key.fields)
            for unknown in sorted(set(value) - set(known)):
                problems.append(unknown_key(f"{path}.{unknown}", unknown, known, f"{key.name} takes"))
        return {f.name: read(f, value.get(f.name), f"{path}.{f.name}", problems) for f in key.fields}
    if key.check is not None:
        allowed = key.check(value)
        if allowed is not None:
            problems.append(f"{path}: got {shown(value)}; expected {allowed}{number_hint(key, value)}")
            return None
    return value


def read_entries(key: Key, value: dict[str, Any], path: str, problems: list[str]) -> dict[str, Any]:
    """A map keyed by name: each name checked, each entry read as an object of `key.entries`, every problem
    under `path.<name>` so that it names the entry. A bad entry reads as None."""
    out: dict[str, Any] = {}
    entry = Key(key.name, "object", key.description, fields=key.entries)
    for name, raw in value.items():
        where = f"{path}.{name}"
        allowed = key.entry_name(name) if key.entry_name else None
        if allowed is not None:
            problems.append(f"{where}: got the name {shown(name)}; expected {allowed}")
            out[name] = None
        elif not isinstance(raw, dict):
            problems.append(f"{where}: got {shown(raw)}; expected an object (a YAML mapping) with "
                            f"{' and '.join(f.name for f in key.entries if f.required)}")
            out[name] = None
        else:
            out[name] = read(entry, raw, where, problems)
    return out


def number_hint(key: Key, value: Any) -> str:
    """For a string key whose value reads like a decimal number: the CLI hands a program every top-level
    value as a string, so an unquoted 1.30 arrives as '1.3'. Say so, and to quote it."""
    if key.type == "string" and isinstance(value, str) and _DECIMAL.fullmatch(value):
        return (f" (if the stack file has it unquoted, YAML read a number: {value}0 becomes {value}; "
                f"quote it, e.g. '{value}0')")
    return ""


def snake(name: str) -> str:
    """camelCase config key -> snake_case field name."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
